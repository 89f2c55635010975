# SPDX-License-Identifier: MIT
# Included from the top-level CMakeLists.txt, after the targets.
#
# examples/ (verbs_write_imm on raw libibverbs), and the CTest label `vm`:
# tern over libfabric's verbs provider on a real kernel RDMA stack, in a
# qemu guest with Soft-RoCE (tests/vm/run-vm.sh, docs/vm.md). One boot
# (vm_boot, a fixture) runs the guest suite; each vm_* test then reports its
# own result. `make check` leaves the label out (`make vm-check` runs it);
# without qemu it skips with the reason, except under TERN_VM_REQUIRED=1.
if(NOT TARGET verbs_write_imm)
	add_subdirectory(${CMAKE_CURRENT_LIST_DIR}/../../examples
		${CMAKE_BINARY_DIR}/examples)
endif()

if(NOT TERN_BUILD_TESTS)
	return()
endif()
if(TERN_SANITIZE)
	# the guest has no sanitizer runtimes; the suite runs on the dev build
	message(STATUS "vm tests: not registered in a sanitizer build")
	return()
endif()

# the test names come from the guest suite itself
execute_process(COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/guest-suite.sh --list
	OUTPUT_VARIABLE TERN_VM_TESTS OUTPUT_STRIP_TRAILING_WHITESPACE
	COMMAND_ERROR_IS_FATAL ANY)
separate_arguments(TERN_VM_TESTS UNIX_COMMAND "${TERN_VM_TESTS}")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
	${CMAKE_CURRENT_LIST_DIR}/guest-suite.sh)
set(TERN_VM_RESULTS ${CMAKE_BINARY_DIR}/vm-results)
set(TERN_VM_SH ${CMAKE_CURRENT_LIST_DIR}/ctest-vm.sh)

add_test(NAME vm_boot COMMAND sh ${TERN_VM_SH} boot ${CMAKE_BINARY_DIR}
	${TERN_VM_RESULTS} ${TERN_VM_TESTS})
set_tests_properties(vm_boot PROPERTIES LABELS vm TIMEOUT 900
	FIXTURES_SETUP tern_vm SKIP_RETURN_CODE 77 RUN_SERIAL ON)
foreach(t ${TERN_VM_TESTS})
	add_test(NAME vm_${t} COMMAND sh ${TERN_VM_SH} result ${TERN_VM_RESULTS}
		${t})
	set_tests_properties(vm_${t} PROPERTIES LABELS vm TIMEOUT 30
		FIXTURES_REQUIRED tern_vm SKIP_RETURN_CODE 77)
endforeach()
