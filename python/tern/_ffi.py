# SPDX-License-Identifier: MIT
"""cffi (ABI mode) declarations of libtern's public API, and the loader.

struct tern_req is declared with its public fields and a private area of
TERN_REQ_PRIV_SIZE bytes, read from tern/req.h where the header is found
(_PRIV_SIZE_DEFAULT otherwise): no private field is spelled out here.
"""
import os
import re
import sys

try:
    import cffi
except ImportError as e:  # say which interpreter and which package
    raise ImportError(
        "tern needs cffi: Debian's python3-cffi, used with Debian's "
        "/usr/bin/python3 (this interpreter is %s; a pyenv or other python "
        "first on PATH does not see Debian's packages): %s"
        % (sys.executable, e)) from e

# The value of TERN_REQ_PRIV_SIZE in include/tern/req.h, used only when the
# header cannot be found at import time.
_PRIV_SIZE_DEFAULT = 192

_HERE = os.path.dirname(os.path.abspath(__file__))
_SRC = os.path.normpath(os.path.join(_HERE, "..", ".."))


def _header_dirs():
    dirs = []
    if os.environ.get("TERN_INCLUDE"):
        dirs.append(os.environ["TERN_INCLUDE"])
    dirs += [os.path.join(_SRC, "include"), "/usr/local/include", "/usr/include"]
    return dirs


def _define(header, name, default):
    for d in _header_dirs():
        path = os.path.join(d, "tern", header)
        try:
            with open(path) as f:
                text = f.read()
        except OSError:
            continue
        m = re.search(r"#define\s+%s\s+\(?(\d+)" % name, text)
        if m:
            return int(m.group(1))
    return default


PRIV_SIZE = _define("req.h", "TERN_REQ_PRIV_SIZE", _PRIV_SIZE_DEFAULT)

CDEF = """
typedef long ssize_t;
const char *tern_strerror(int ret);
const char *tern_version(void);
void tern_log_set_level(int level);

struct tern_ctx;
struct tern_peer;
struct tern_mr;
struct tern_ctx_attr {
	uint64_t field_mask;
	const char *provider;
	const char *node;
	const char *domain;
	unsigned int rails;
	int log_level;
	unsigned int post_batch;
	uint64_t flags;
	uint64_t stripe_chunk;
	const char *domains;
	const char *fabric;
};
struct tern_ctx_info {
	const char *provider;
	const char *fabric;
	const char *domain;
	unsigned int rails;
	uint64_t mr_mode;
	size_t tx_size;
	size_t rx_size;
	size_t cq_data_size;
	size_t inject_size;
	uint64_t max_msg_size;
	size_t mr_key_size;
	int rx_cq_data;
	uint64_t link_speed;
	int atomic_fadd;
	int atomic_cswap;
	int wait_fd;
	const char *pinned;
	int hmem;
	uint64_t stage_copies;
	uint64_t stage_bytes;
	uint64_t max_rma_size;
	int tagged;
};
#define TERN_CTX_ATTR_FIELDS_ALL 0x3ff
int tern_ctx_attr_defaults(struct tern_ctx_attr *attr, uint64_t fields);
int tern_ctx_open(const struct tern_ctx_attr *attr, struct tern_ctx **ctx_p);
int tern_ctx_close(struct tern_ctx *ctx);
int tern_ctx_query(const struct tern_ctx *ctx, struct tern_ctx_info *info);
ssize_t tern_ctx_card(const struct tern_ctx *ctx, void *buf, size_t len);
int tern_peer_add(struct tern_ctx *ctx, const void *card, size_t len,
		  struct tern_peer **peer_p);
int tern_peer_remove(struct tern_peer *peer);
int tern_peer_path(const struct tern_peer *peer);
struct tern_peer_rail {
	int up;
	uint32_t cooldown_ms;
	uint64_t down_ms;
	uint64_t downs;
	uint64_t rerouted;
	uint64_t probes;
};
int tern_peer_rails(const struct tern_peer *peer,
		    struct tern_peer_rail *rails, unsigned int n);

struct tern_mr_desc {
	uint64_t base;
	uint64_t len;
	uint32_t flags;
	uint32_t nkeys;
	uint64_t keys[32];
};
int tern_mr_reg(struct tern_ctx *ctx, void *buf, size_t len, uint64_t access,
		struct tern_mr **mr_p);
int tern_mr_close(struct tern_mr *mr);
int tern_mr_desc(const struct tern_mr *mr, struct tern_mr_desc *desc);
void *tern_mr_addr(const struct tern_mr *mr);
size_t tern_mr_len(const struct tern_mr *mr);
ssize_t tern_mr_desc_pack(const struct tern_mr_desc *desc, void *buf,
			  size_t len);
ssize_t tern_mr_desc_unpack(const void *buf, size_t len,
			    struct tern_mr_desc *desc);

struct tern_req {
	void *cb;
	void *data;
	int done;
	int status;
	size_t len;
	uint64_t imm;
	uint64_t value;
	unsigned int flags;
	int prov_errno;
	char errmsg[96];
	uint64_t _priv[%d];
};
struct tern_piece {
	uint64_t loff;
	uint64_t roff;
	uint64_t len;
	uint32_t region;
	uint32_t pad;
};
void tern_req_init(struct tern_req *req, void *cb, void *data);
int tern_send(struct tern_peer *peer, struct tern_mr *mr, const void *buf,
	      size_t len, struct tern_req *req);
int tern_recv(struct tern_ctx *ctx, struct tern_mr *mr, void *buf, size_t len,
	      struct tern_req *req);
int tern_send_imm(struct tern_peer *peer, struct tern_mr *mr, const void *buf,
		  size_t len, uint32_t imm, struct tern_req *req);
int tern_read(struct tern_peer *peer, struct tern_mr *mr, void *buf,
	      size_t len, const struct tern_mr_desc *rdesc, uint64_t roff,
	      struct tern_req *req);
int tern_write(struct tern_peer *peer, struct tern_mr *mr, const void *buf,
	       size_t len, const struct tern_mr_desc *rdesc, uint64_t roff,
	       struct tern_req *req);
int tern_write_imm(struct tern_peer *peer, struct tern_mr *mr,
		   const void *buf, size_t len,
		   const struct tern_mr_desc *rdesc, uint64_t roff,
		   uint32_t imm, struct tern_req *req);
int tern_write_pieces(struct tern_peer *peer, struct tern_mr *mr,
		      const struct tern_piece *pieces, size_t n,
		      const struct tern_mr_desc *regions,
		      unsigned int nregions, uint64_t flags, uint32_t imm,
		      struct tern_req *req);
int tern_read_pieces(struct tern_peer *peer, struct tern_mr *mr,
		     const struct tern_piece *pieces, size_t n,
		     const struct tern_mr_desc *regions,
		     unsigned int nregions, struct tern_req *req);
int tern_write_pieces_arrays(struct tern_peer *peer, struct tern_mr *mr,
			     const uint64_t *loffs, const uint64_t *roffs,
			     const uint64_t *lens, size_t n,
			     const struct tern_mr_desc *rdesc, uint64_t flags,
			     uint32_t imm, struct tern_req *req);
int tern_read_pieces_arrays(struct tern_peer *peer, struct tern_mr *mr,
			    const uint64_t *loffs, const uint64_t *roffs,
			    const uint64_t *lens, size_t n,
			    const struct tern_mr_desc *rdesc,
			    struct tern_req *req);
int tern_atomic_fetch_add(struct tern_peer *peer,
			  const struct tern_mr_desc *rdesc, uint64_t roff,
			  uint64_t add, struct tern_req *req);
int tern_atomic_cswap(struct tern_peer *peer, const struct tern_mr_desc *rdesc,
		      uint64_t roff, uint64_t compare, uint64_t swap,
		      struct tern_req *req);
int tern_write_nbi(struct tern_peer *peer, struct tern_mr *mr,
		   const void *buf, size_t len,
		   const struct tern_mr_desc *rdesc, uint64_t roff);
int tern_write_imm_nbi(struct tern_peer *peer, struct tern_mr *mr,
		       const void *buf, size_t len,
		       const struct tern_mr_desc *rdesc, uint64_t roff,
		       uint32_t imm);
int tern_read_nbi(struct tern_peer *peer, struct tern_mr *mr, void *buf,
		  size_t len, const struct tern_mr_desc *rdesc, uint64_t roff);
int tern_atomic_add_nbi(struct tern_peer *peer,
			const struct tern_mr_desc *rdesc, uint64_t roff,
			uint64_t add);
int tern_quiet(struct tern_ctx *ctx, struct tern_peer *peer,
	       struct tern_req *req);
int tern_imm_expect(struct tern_ctx *ctx, uint32_t imm, uint64_t count,
		    struct tern_req *req);
int tern_imm_expect_from(struct tern_ctx *ctx, struct tern_peer *peer,
			 uint32_t imm, uint64_t count, int timeout_ms,
			 struct tern_req *req);
uint64_t tern_imm_count(const struct tern_ctx *ctx, uint32_t imm);
int tern_req_cancel(struct tern_ctx *ctx, struct tern_req *req);
int tern_progress(struct tern_ctx *ctx);
int tern_flush(struct tern_ctx *ctx);
int tern_wait(struct tern_ctx *ctx, struct tern_req *req, int timeout_ms);

struct tern_boot_info {
	uint8_t card[2060];
	size_t card_len;
	struct tern_mr_desc descs[8];
	unsigned int ndesc;
	uint8_t ticket[16];
	size_t ticket_len;
};
struct tern_boot_server;
typedef void (*tern_boot_cb)(struct tern_boot_server *srv,
			     const struct tern_boot_info *info,
			     const char *text, void *data);
struct tern_boot_server_attr {
	uint64_t field_mask;
	const char *listen;
	const char *token;
	int handshake_ms;
	int max_conns;
	tern_boot_cb on_hello;
	tern_boot_cb on_gone;
	tern_boot_cb on_refused;
	void *data;
	int claim_ms;
};
int tern_boot_dial(const char *addr, int timeout_ms, int *fd_p, char *why,
		   size_t whylen);
int tern_boot_hello(int fd, const char *token,
		    const struct tern_boot_info *mine,
		    struct tern_boot_info *theirs, int timeout_ms, char *why,
		    size_t whylen);
#define TERN_BOOT_SERVER_ATTR_FIELDS_ALL 0x1ff
int tern_boot_server_attr_defaults(struct tern_boot_server_attr *attr,
				   uint64_t fields);
int tern_boot_server_open(struct tern_ctx *ctx,
			  const struct tern_boot_server_attr *attr,
			  const struct tern_boot_info *mine,
			  struct tern_boot_server **srv_p, char *why,
			  size_t whylen);
int tern_boot_server_addr(const struct tern_boot_server *srv, char *buf,
			  size_t len);
void tern_boot_server_close(struct tern_boot_server *srv);

struct tern_mr_attr {
	uint64_t field_mask;
	void *buf;
	size_t len;
	uint64_t access;
	int kind;
	int device;
	uint64_t flags;
};
#define TERN_MR_ATTR_FIELDS_ALL 0x3f
int tern_mr_attr_defaults(struct tern_mr_attr *attr, uint64_t fields);
int tern_mr_regattr(struct tern_ctx *ctx, const struct tern_mr_attr *attr,
		    struct tern_mr **mr_p);
int tern_mr_path(const struct tern_mr *mr);
const char *tern_mr_path_str(int path);
int tern_mr_sync(struct tern_mr *mr, uint64_t off, uint64_t len,
		 unsigned int dir, struct tern_req *req);

struct tern_world;
struct tern_world_attr {
	uint64_t field_mask;
	int rank;
	int size;
	int timeout_ms;
	int lease_s;
	void *on_member;
	void *arg;
};
struct tern_world_store {
	int (*set)(void *arg, const char *key, const void *val, size_t len);
	ssize_t (*get)(void *arg, const char *key, void *buf, size_t len,
		       int timeout_ms);
	void *arg;
	const char *prefix;
};
#define TERN_WORLD_ATTR_FIELDS_ALL 0x3f
int tern_world_attr_defaults(struct tern_world_attr *attr, uint64_t fields);
int tern_world_open_store(struct tern_ctx *ctx,
			  const struct tern_world_store *store,
			  const struct tern_world_attr *attr,
			  struct tern_world **world_p);
void tern_world_close(struct tern_world *world);
const char *tern_world_kind(const struct tern_world *world);
int tern_world_peer(struct tern_world *world, int rank,
		    struct tern_peer **peer_p);
int tern_world_put(struct tern_world *world, const char *name,
		   const void *val, size_t len);
ssize_t tern_world_get(struct tern_world *world, int rank, const char *name,
		       void *buf, size_t len);
int tern_world_publish(struct tern_world *world, const char *name,
		       const struct tern_mr_desc *desc);
int tern_world_lookup(struct tern_world *world, int rank, const char *name,
		      struct tern_mr_desc *desc);
int tern_world_fence(struct tern_world *world);

int tern_run(struct tern_ctx *ctx, int mode);
int tern_ctx_fd(const struct tern_ctx *ctx);
int tern_ctx_arm(struct tern_ctx *ctx);
int tern_ctx_timeout(const struct tern_ctx *ctx);
""" % (PRIV_SIZE // 8)

ffi = cffi.FFI()
ffi.cdef(CDEF)


def _candidates():
    env = os.environ.get("TERN_LIB")
    if env:
        yield env
    for b in ("build", "build-release", "build-asan"):
        yield os.path.join(_SRC, b, "libtern.so")
    yield "libtern.so.0"
    yield "libtern.so"


def _load():
    errors = []
    for path in _candidates():
        if os.path.sep in path and not os.path.exists(path):
            continue
        try:
            return ffi.dlopen(path), path
        except OSError as e:
            errors.append("%s: %s" % (path, e))
    raise ImportError("tern: cannot load libtern.so (set TERN_LIB): " +
                      "; ".join(errors))


lib, LIB_PATH = _load()

# Every function is bound now, once: cffi resolves a symbol on first use
# under a lock that is not re-entrant, and a finalizer run by the garbage
# collector in the middle of that would deadlock. After this, lib.tern_x
# is a plain attribute.
FUNCS = tuple(sorted(set(re.findall(r"\b(tern_\w+)\s*\(", CDEF))))
for _name in FUNCS:
    getattr(lib, _name)
del _name


class _Types:
    """The C types the package uses, parsed once at import (a type named
    by a string is parsed under the same lock on its first use)."""


T = _Types()
for _attr, _decl in (
        ("req_p", "struct tern_req *"), ("mr_pp", "struct tern_mr **"),
        ("peer_pp", "struct tern_peer **"), ("ctx_pp", "struct tern_ctx **"),
        ("desc_p", "struct tern_mr_desc *"),
        ("mr_attr_p", "struct tern_mr_attr *"),
        ("ctx_attr_p", "struct tern_ctx_attr *"),
        ("ctx_info_p", "struct tern_ctx_info *"),
        ("boot_info_p", "struct tern_boot_info *"),
        ("boot_attr_p", "struct tern_boot_server_attr *"),
        ("boot_srv_pp", "struct tern_boot_server **"),
        ("boot_cb", "tern_boot_cb"), ("char_a", "char[]"),
        ("char_p", "char *"), ("void_p", "void *"), ("int_p", "int *"),
        ("uintptr", "uintptr_t"), ("u64_a", "uint64_t[]"),
        ("piece_a", "struct tern_piece[]"), ("uint8_a", "uint8_t[]"),
        ("peer_rail_a", "struct tern_peer_rail[]"),
        ("world_pp", "struct tern_world **"),
        ("world_attr_p", "struct tern_world_attr *"),
        ("world_store_p", "struct tern_world_store *"),
        ("store_set", "int (*)(void *, const char *, const void *, size_t)"),
        ("store_get", "ssize_t (*)(void *, const char *, void *, size_t, "
                      "int)")):
    setattr(T, _attr, ffi.typeof(_decl))
del _attr, _decl

# The attr structs' field_mask (docs/api.md, "Attribute structs"): the
# headers' tern_*_attr_init() is inline, so the package calls what it
# calls, tern_*_attr_defaults() with every field cffi declares above.
_ATTR_DEFAULTS = {
    "ctx_attr_p": (lambda a: lib.tern_ctx_attr_defaults(
        a, lib.TERN_CTX_ATTR_FIELDS_ALL)),
    "mr_attr_p": (lambda a: lib.tern_mr_attr_defaults(
        a, lib.TERN_MR_ATTR_FIELDS_ALL)),
    "boot_attr_p": (lambda a: lib.tern_boot_server_attr_defaults(
        a, lib.TERN_BOOT_SERVER_ATTR_FIELDS_ALL)),
    "world_attr_p": (lambda a: lib.tern_world_attr_defaults(
        a, lib.TERN_WORLD_ATTR_FIELDS_ALL)),
}


def new_attr(kind):
    """A new attr struct (kind: "ctx_attr_p", "mr_attr_p", "boot_attr_p"
    or "world_attr_p"), every field at its default and its field_mask naming
    them all, as tern_*_attr_init() leaves it."""
    a = ffi.new(getattr(T, kind))
    ret = _ATTR_DEFAULTS[kind](a)
    if ret != 0:
        raise RuntimeError("tern: libtern refuses the fields of %s that "
                           "this package declares (%d): a libtern older "
                           "than tern/_ffi.py" % (kind, ret))
    return a
