# SPDX-License-Identifier: MIT
# Two commands do everything on a fresh Debian/Ubuntu machine (run.sh
# installs make first where it is missing, then runs these):
#   make demo    install what is missing, build, run the random-fill demo
#   make check   install what is missing, build (warnings are errors), test
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
PROVIDER ?= shm
# LIBFABRIC=PREFIX: build against the libfabric installed under PREFIX
# (PREFIX/lib/pkgconfig/libfabric.pc) instead of the system's; the
# programs built and installed run with it (RPATH). Debian's libfabric-dev
# is then not installed. Without it, pkg-config's (the system's, or
# PKG_CONFIG_PATH's). Switching rebuilds; `make clean` first is the sure
# way. docs/testing.md, "Another libfabric".
LIBFABRIC ?=
ifneq ($(LIBFABRIC),)
export TERN_LIBFABRIC := $(LIBFABRIC)
endif
CMAKE_FABRIC = -DTERN_LIBFABRIC="$(LIBFABRIC)"

.PHONY: all demo check build build-release asan-check tsan-check format \
	format-check clean deps-demo deps-check deps-install install vm-check \
	fuzz-check

all: build

deps-demo:
	@sh scripts/deps.sh demo
deps-check:
	@sh scripts/deps.sh check
deps-install:
	@sh scripts/deps.sh install

build-release: deps-demo
	cmake --preset release $(CMAKE_FABRIC) >/dev/null
	cmake --build --preset release -j $(JOBS)

demo: build-release
	./build-release/tern demo --provider $(PROVIDER)

# The CLI, libtern.so (soname libtern.so.0), the headers, tern.pc, the CMake
# package (find_package(tern): tern::tern) and the man pages, from the
# release build, under PREFIX; DESTDIR stages them elsewhere (packaging).
# Installing into the system's library path refreshes ld.so's cache.
PREFIX ?= /usr/local
install: deps-install
	cmake --preset release -DCMAKE_INSTALL_PREFIX="$(PREFIX)" \
		$(CMAKE_FABRIC) >/dev/null
	cmake --build --preset release -j $(JOBS)
	DESTDIR="$(DESTDIR)" cmake --install build-release
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" -eq 0 ] && \
	    command -v ldconfig >/dev/null; then ldconfig; fi

build: deps-check
	cmake --preset dev $(CMAKE_FABRIC) >/dev/null
	cmake --build --preset dev -j $(JOBS)

# Label vm boots a qemu guest (2-3 minutes, downloads on first use): vm-check.
check: build
	@ctest --preset dev -j $(JOBS) -LE vm; rc=$$?; \
	sh scripts/skip-reasons.sh build; exit $$rc

# tern over libfabric's verbs provider on Soft-RoCE in a qemu guest
# (docs/vm.md); needs qemu-system-x86, cpio, kmod (scripts/deps.sh ci).
vm-check: build
	ctest --preset dev -L vm

# AddressSanitizer + UBSan build of everything, and every test under it.
# The Python tests run against the ASan libtern with libasan preloaded into
# Debian's python3 (not built with ASan; leak checks off for it:
# tests/python/CMakeLists.txt). The soak is left out: its RSS and CPU
# bounds mean nothing under ASan, and 32 clients under ASan would overload
# two cores (its hostile client runs here too). So is label loop
# (ping_shm_write_200: a race looked for 200 times, 160 s): make check
# runs it; under ASan it would take minutes more and find no memory error
# the single ping runs do not. (The asan test preset leaves both out.)
asan-check: deps-check
	cmake --preset asan $(CMAKE_FABRIC) >/dev/null
	cmake --build --preset asan -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	ctest --preset asan -j $(JOBS)

# ThreadSanitizer build of everything (build-tsan), and the tests of label
# threads under it: tern_task_submit() and tern_stop() from other threads
# (evloop_threads, threads_shm, threads_tcp, threads_local). tests/tsan.supp
# may silence races inside libfabric only (each entry says why); tern's own
# code is never suppressed. The test preset sets TSAN_OPTIONS
# (halt_on_error=1).
tsan-check: deps-check
	cmake --preset tsan $(CMAKE_FABRIC) >/dev/null
	cmake --build --preset tsan -j $(JOBS)
	ctest --preset tsan -j $(JOBS)

# libFuzzer on every parser a peer reaches, FUZZ_SECONDS each, in
# build-fuzz with clang (tests/fuzz/README.md: crashes, longer runs).
FUZZ_SECONDS ?= 20
fuzz-check:
	@sh scripts/deps.sh fuzz
	cmake --preset fuzz >/dev/null
	cmake --build --preset fuzz -j $(JOBS)
	ctest --preset fuzz -j $(JOBS)
	sh tests/fuzz/run.sh build-fuzz $(FUZZ_SECONDS)

FORMAT_FILES = $(shell git ls-files '*.c' '*.h' '*.cpp')
format:
	clang-format -i $(FORMAT_FILES)
format-check:
	clang-format --dry-run --Werror $(FORMAT_FILES)

clean:
	rm -rf build build-release build-asan build-tsan build-fuzz
