// SPDX-License-Identifier: MIT
// What the TERN engine's files share (tern_backend.cpp: construction and
// connections; tern_xfer.cpp: memory and transfers; tern_msg.cpp:
// messages and notifications): the message format's constants and
// codecs, tern's errors as NIXL's, and a connection to an agent.
#ifndef TERN_NIXL_BACKEND_INT_H
#define TERN_NIXL_BACKEND_INT_H

#include <cerrno>
#include <cstdio>
#include <ctime>

#include "tern_backend.h"

namespace ternNixl {

inline constexpr uint32_t kMagic = 0x31584e54; // "TNX1"
inline constexpr uint8_t kVersion = 1;
inline constexpr uint8_t kHello = 1, kAck = 2, kNotif = 3, kBye = 4, kPing = 5, kPong = 6;
inline constexpr size_t kHdr = 8;
inline constexpr size_t kMsgMax = 16384; // one receive buffer
inline constexpr unsigned int kRecvs = 64, kSends = 32;
inline constexpr unsigned int kSeqBits = 20;
inline constexpr uint32_t kSeqMask = (1u << kSeqBits) - 1;
inline constexpr unsigned int kSlots = 1u << (32 - kSeqBits);
inline constexpr uint32_t kNoSlot = 0xffffffffu;
// A completed piece this long proves its peer alive (liveness()): above
// every provider's inject size.
inline constexpr size_t kProofBytes = 64 * 1024;
inline constexpr uint64_t kAccess =
    TERN_ACCESS_LOCAL | TERN_ACCESS_REMOTE_READ | TERN_ACCESS_REMOTE_WRITE;

inline void
put16(std::string &s, uint16_t v) {
    s.push_back(char(v & 0xff));
    s.push_back(char(v >> 8));
}

inline void
put32(std::string &s, uint32_t v) {
    for (int i = 0; i < 4; i++)
        s.push_back(char((v >> (8 * i)) & 0xff));
}

inline uint16_t
get16(const uint8_t *p) {
    return uint16_t(p[0] | (p[1] << 8));
}

inline uint32_t
get32(const uint8_t *p) {
    return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}

inline std::string
header(uint8_t type, const std::string &name) {
    std::string s;
    put32(s, kMagic);
    s.push_back(char(type));
    s.push_back(char(kVersion));
    put16(s, uint16_t(name.size()));
    s += name;
    return s;
}

inline std::string
notifMsg(const std::string &name, uint32_t imm, uint32_t count, const std::string &payload) {
    std::string s = header(kNotif, name);
    put32(s, imm);
    put32(s, count);
    put32(s, uint32_t(payload.size()));
    s += payload;
    return s;
}

// The largest notification payload a message carries for this agent.
inline size_t
payloadMax(const std::string &name) {
    size_t fixed = kHdr + name.size() + 12;
    return fixed < kMsgMax ? kMsgMax - fixed : 0;
}

inline nixl_status_t
toNixl(int err) {
    switch (err) {
    case 0:
        return NIXL_SUCCESS;
    case -EINVAL:
    case -TERN_EBOUNDS:
    case -TERN_EDESC:
    case -TERN_EACCESS:
        return NIXL_ERR_INVALID_PARAM;
    case -TERN_ENOTSUP:
    case -TERN_ENOCUDA:
        return NIXL_ERR_NOT_SUPPORTED;
    case -ECANCELED:
        return NIXL_ERR_CANCELED;
    case -TERN_EPEERGONE:
    case -ECONNRESET:
    case -ECONNREFUSED:
    case -ECONNABORTED:
    case -ENOTCONN:
    case -EPIPE:
    case -EHOSTUNREACH:
    case -ENETUNREACH:
    case -ETIMEDOUT:
    case -EIO:
    case -TERN_EABORTED:
        return NIXL_ERR_REMOTE_DISCONNECT;
    default:
        return NIXL_ERR_BACKEND;
    }
}

inline std::string
hexAddr(uintptr_t a) {
    char b[24];
    snprintf(b, sizeof(b), "0x%jx", uintmax_t(a));
    return b;
}

inline uint64_t
nowNs() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

} // namespace ternNixl

// One remote agent (or this agent itself), as the engine thread sees it.
struct nixlTernConn {
    std::string name, card;
    struct tern_peer *peer = nullptr;
    int64_t slot = -1; // the slot the agent gave us, for our immediates
    bool helloSent = false;
    bool gone = false;   // it said BYE; a new card brings it back
    bool loaded = false; // its card came from NIXL's metadata, not a message
    uint32_t seq = 0;
    std::deque<nixlTernReqH *> waiting; // WRITEs with notification, for a slot
    std::set<nixlTernReqH *> inflight;  // posted to tern, not yet let go
    uint64_t heardNs = 0;               // when it last sent us anything
    uint64_t pingNs = 0;                // when we last asked
    struct tern_timer timer = {};
    nixlTernEngine *eng = nullptr;
};

struct nixlTernEngine::Msg {
    nixlTernConn *conn;
    std::string bytes;
    std::function<void(int)> done;
};

#endif
