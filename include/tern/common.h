/* SPDX-License-Identifier: MIT */
/**
 * @file tern/common.h
 * Errors, versions and logging shared by every tern API.
 *
 * Every tern call returns 0 (or a non-negative count) on success and a
 * negative error code on failure: a negative errno value (-EINVAL, -ENOMEM,
 * -ETIMEDOUT, ...) or one of the tern codes below, which start at 256.
 * tern_strerror() takes exactly what a call returned.
 */
#ifndef TERN_COMMON_H
#define TERN_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TERN_VERSION_MAJOR  0
#define TERN_VERSION_MINOR  1
#define TERN_VERSION_PATCH  0
#define TERN_VERSION_STRING "0.1.0"

/*
 * TERN_API marks what libtern exports. The library is built with hidden
 * visibility and a version script (src/libtern.map); every function
 * declared in include/tern/ carries this mark and is listed in
 * tests/abi/symbols.txt (docs/api.md, "ABI: what libtern exports").
 */
#if defined(__GNUC__) || defined(__clang__)
#define TERN_API __attribute__((visibility("default")))
#else
#define TERN_API
#endif

/** tern's own error codes; returned negated, like errno values. */
enum tern_errno {
	TERN_EBASE = 256,
	TERN_ENOPROV = 256,  /**< no usable libfabric provider / device */
	TERN_EPROV = 257,    /**< the provider failed; see the log/request */
	TERN_EPROTO = 258,   /**< malformed or unexpected message from a peer */
	TERN_EVERSION = 259, /**< peer speaks an unsupported version */
	TERN_ECARD = 260,    /**< malformed peer card */
	TERN_EDESC = 261,    /**< malformed or mismatched MR descriptor */
	TERN_EACCESS = 262,  /**< operation outside a region's rights */
	TERN_EBOUNDS = 263,  /**< operation outside a region's bounds */
	TERN_EREFUSED = 264, /**< the peer refused the request */
	TERN_EVERIFY = 265,  /**< data verification failed */
	TERN_ETRUNC = 266,  /**< message truncated (receive buffer too small) */
	TERN_ENOTSUP = 267, /**< the provider does not offer this operation */
	TERN_ECLOSED = 268, /**< a callback closed the ctx being run */
	TERN_EPEERGONE = 269, /**< the peer went away (liveness lost) */
	TERN_ENOCUDA = 270,   /**< CUDA memory used, CUDA absent (tern info) */
	TERN_EHMEM = 271,     /**< a GPU memory copy or CUDA call failed */
	TERN_EABORTED = 272,  /**< the sender aborted what was expected */
	TERN_ELAST
};

/**
 * Describe an error code.
 * @param ret  a value returned by a tern call (negative), or 0.
 * @return a static string; never NULL. Thread-safe with glibc, whose
 * strerror() returns static texts for every errno value.
 */
TERN_API const char *tern_strerror(int ret);

/** Log levels, as in libfabric's FI_LOG_LEVEL. */
enum tern_log_level {
	TERN_LOG_NONE = 0,
	TERN_LOG_WARN = 1,
	TERN_LOG_INFO = 2,
	TERN_LOG_DEBUG = 3,
};

/**
 * Set the process-wide log threshold. The initial threshold comes from the
 * environment variable TERN_LOG (none|warn|info|debug; default warn).
 * Log lines go to stderr; the library never writes to stdout.
 */
TERN_API void tern_log_set_level(enum tern_log_level level);

/** Current log threshold. */
TERN_API enum tern_log_level tern_log_get_level(void);

/** Parse "none", "warn", "info", "debug" (or 0..3). @return level or -EINVAL */
TERN_API int tern_log_parse_level(const char *s);

/** tern's version string, e.g. "0.1.0". */
TERN_API const char *tern_version(void);

/**
 * The version of the libfabric library tern is running on, as
 * "MAJOR.MINOR" (from fi_version()), and the version tern was built with.
 */
TERN_API const char *tern_fabric_version(void);
TERN_API const char *tern_fabric_build_version(void);
/**
 * The libfabric API version tern asks providers for, as "MAJOR.MINOR": the
 * highest that both the running library and tern know (tern is validated
 * up to 2.6), whatever the headers tern was built with, or $TERN_FI_API.
 * Providers change defaults by it: efa on libfabric 2.x turns device RDMA
 * off below 1.18 (docs/efa.md).
 */
TERN_API const char *tern_fabric_api_version(void);

#ifdef __cplusplus
}
#endif

#endif /* TERN_COMMON_H */
