// SPDX-License-Identifier: MIT
// tern as a NIXL backend: the engine (docs/nixl.md has the design).
//
// Threads. The engine owns one tern ctx and one thread that runs its
// loop (tern_run). Whatever touches the ctx runs on that thread: NIXL's
// threads hand it tern_tasks (tern_task_submit(), the one thread-safe
// tern call) and learn the outcome from an atomic in the request handle
// (transfers) or by waiting (registration, connection info).
//
// Notifications. A WRITE's notification must reach the target only after
// every byte of the transfer has landed there. Write completions at the
// initiator do not prove that (on EFA and over several rails, nothing
// orders a later message after an earlier write), so every piece of a
// WRITE that carries a notification is a write with immediate, and the
// notification message names the immediate and how many pieces carry
// it: the target delivers it when tern_imm_expect() has counted them all.
// The immediate must be unique at the target: its high 12 bits are a
// slot the target hands each sender in a first-contact exchange (HELLO,
// ACK), its low 20 bits the sender's sequence number.
//
// Messages (tern_send/tern_recv, little-endian, checked before use):
//   header  u32 magic "TNX1", u8 type, u8 version (1), u16 name length,
//           then the sender's agent name
//   HELLO   u16 card length, card (the sender's tern card)
//   ACK     u32 slot (or 0xffffffff: no slot free)
//   NOTIF   u32 immediate, u32 count (0: deliver at once), u32 length,
//           payload
//   PING    u16 card length, card: "are you there?" (sent while
//           transfers to an agent are in flight and it has been silent)
//   PONG    nothing: the answer
//   BYE     u16 card length, card: the sender's engine is closing (its peers fail what
//           they have in flight to it with NIXL_ERR_REMOTE_DISCONNECT
//           at once, instead of when the provider notices)
#include "tern_backend.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <ctime>
#include <cstring>
#include <stdexcept>

namespace {

constexpr uint32_t kMagic = 0x31584e54; // "TNX1"
constexpr uint8_t kVersion = 1;
constexpr uint8_t kHello = 1, kAck = 2, kNotif = 3, kBye = 4, kPing = 5, kPong = 6;
constexpr size_t kHdr = 8;
constexpr size_t kMsgMax = 16384; // one receive buffer
constexpr unsigned int kRecvs = 64, kSends = 32;
constexpr unsigned int kSeqBits = 20;
constexpr uint32_t kSeqMask = (1u << kSeqBits) - 1;
constexpr unsigned int kSlots = 1u << (32 - kSeqBits);
constexpr uint32_t kNoSlot = 0xffffffffu;
// A completed piece this long proves its peer alive (liveness()): above
// every provider's inject size.
constexpr size_t kProofBytes = 64 * 1024;
constexpr uint64_t kAccess = TERN_ACCESS_LOCAL | TERN_ACCESS_REMOTE_READ | TERN_ACCESS_REMOTE_WRITE;

void
put16(std::string &s, uint16_t v) {
    s.push_back(char(v & 0xff));
    s.push_back(char(v >> 8));
}

void
put32(std::string &s, uint32_t v) {
    for (int i = 0; i < 4; i++)
        s.push_back(char((v >> (8 * i)) & 0xff));
}

uint16_t
get16(const uint8_t *p) {
    return uint16_t(p[0] | (p[1] << 8));
}

uint32_t
get32(const uint8_t *p) {
    return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}

std::string
header(uint8_t type, const std::string &name) {
    std::string s;
    put32(s, kMagic);
    s.push_back(char(type));
    s.push_back(char(kVersion));
    put16(s, uint16_t(name.size()));
    s += name;
    return s;
}

std::string
notifMsg(const std::string &name, uint32_t imm, uint32_t count, const std::string &payload) {
    std::string s = header(kNotif, name);
    put32(s, imm);
    put32(s, count);
    put32(s, uint32_t(payload.size()));
    s += payload;
    return s;
}

// The largest notification payload a message carries for this agent.
size_t
payloadMax(const std::string &name) {
    size_t fixed = kHdr + name.size() + 12;
    return fixed < kMsgMax ? kMsgMax - fixed : 0;
}

nixl_status_t
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

struct FnTask {
    struct tern_task task = {}; // zeroed before its first submit
    std::function<void()> fn;
};

void
fnTaskCb(struct tern_task *t, int status) {
    auto *f = static_cast<FnTask *>(t->data);
    if (status == 0)
        f->fn();
    delete f;
}

struct SyncTask {
    struct tern_task task = {};
    const std::function<int()> *fn = nullptr;
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    int rc = 0;
};

void
syncTaskCb(struct tern_task *t, int status) {
    auto *s = static_cast<SyncTask *>(t->data);
    int rc = status == 0 ? (*s->fn)() : status;
    std::lock_guard<std::mutex> lk(s->mu);
    s->rc = rc;
    s->done = true;
    s->cv.notify_one();
}

// A notification waiting for its transfer's immediates.
struct Expect {
    struct tern_req req = {};
    nixlTernEngine *eng = nullptr;
    std::string from, msg;
};

std::string
hexAddr(uintptr_t a) {
    char b[24];
    snprintf(b, sizeof(b), "0x%jx", uintmax_t(a));
    return b;
}

uint64_t
nowNs() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

bool
parseInt(const std::string &s, long lo, long hi, long &out) {
    try {
        size_t used = 0;
        long v = std::stol(s, &used, 10);
        if (used != s.size() || v < lo || v > hi)
            return false;
        out = v;
        return true;
    } catch (const std::exception &) {
        return false;
    }
}

} // namespace

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

extern "C" {
static void
ternGroupCb(struct tern_req *req) {
    auto *g = static_cast<nixlTernGroup *>(req->data);
    g->owner->eng->groupDone(g);
}

static void
ternSendCb(struct tern_req *req) {
    static_cast<nixlTernEngine *>(req->data)->sendDone(req);
}

static void
ternRecvCb(struct tern_req *req) {
    static_cast<nixlTernEngine *>(req->data)->recvDone(req);
}

static void
ternHelloTimerCb(struct tern_timer *t) {
    auto *c = static_cast<nixlTernConn *>(t->data);
    c->eng->helloTimeout(c);
}
}

// ---- construction ---------------------------------------------------

nixlTernEngine::nixlTernEngine(const nixlBackendInitParams *init_params)
    : nixlBackendEngine(init_params) {
    long rails = 0, busy = 0, hmem = 0, hello = helloMs_, live = livenessMs_;
    std::string v;

    for (const auto &[key, value] : getCustomParams()) {
        if (key == "provider")
            provider_ = value;
        else if (key == "fabric")
            fabric_ = value;
        else if (key == "domains")
            domains_ = value;
        else if (key == "node")
            node_ = value;
        else if (key == "rails" && !value.empty() && !parseInt(value, 0, TERN_MAX_RAILS, rails)) {
            NIXL_ERROR << "TERN: backend parameter rails=\"" << value
                       << "\" is not a number from 0 to " << TERN_MAX_RAILS;
            initErr = true;
        } else if (key == "busy_poll" && !value.empty() && !parseInt(value, 0, 1, busy)) {
            NIXL_ERROR << "TERN: backend parameter busy_poll=\"" << value << "\" is not 0 or 1";
            initErr = true;
        } else if (key == "hmem" && !value.empty() && !parseInt(value, 0, 1, hmem)) {
            NIXL_ERROR << "TERN: backend parameter hmem=\"" << value << "\" is not 0 or 1";
            initErr = true;
        } else if (key == "hello_timeout_ms" && !value.empty() &&
                   !parseInt(value, 1, 3600 * 1000, hello)) {
            NIXL_ERROR << "TERN: backend parameter hello_timeout_ms=\"" << value
                       << "\" is not a number of milliseconds from 1 to 3600000";
            initErr = true;
        } else if (key == "liveness_timeout_ms" && !value.empty() &&
                   !parseInt(value, 100, 3600 * 1000, live)) {
            NIXL_ERROR << "TERN: backend parameter liveness_timeout_ms=\"" << value
                       << "\" is not a number of milliseconds from 100 to 3600000";
            initErr = true;
        } else if (key != "rails" && key != "busy_poll" && key != "hmem" &&
                   key != "hello_timeout_ms" && key != "liveness_timeout_ms" &&
                   key != "engine_config") {
            // NIXL passes every backend the same parameters (UCX's
            // num_workers, ...): not ours, not an error.
            NIXL_INFO << "TERN: backend parameter \"" << key << "\" is not TERN's: ignored";
        }
    }
    if (initErr)
        return;
    helloMs_ = int(hello);
    livenessMs_ = int(live);

    struct tern_ctx_attr attr;
    tern_ctx_attr_init(&attr);
    attr.provider = provider_.empty() ? nullptr : provider_.c_str();
    attr.fabric = fabric_.empty() ? nullptr : fabric_.c_str();
    attr.domains = domains_.empty() ? nullptr : domains_.c_str();
    attr.node = node_.empty() ? nullptr : node_.c_str();
    attr.rails = unsigned(rails);
    attr.flags = (busy ? TERN_CTX_BUSY_POLL : 0) | (hmem ? TERN_CTX_HMEM : 0);
    int rc = tern_ctx_open(&attr, &ctx_);
    if (rc < 0) {
        NIXL_ERROR << "TERN: tern_ctx_open(provider "
                   << (attr.provider ? attr.provider : "automatic") << "): " << tern_strerror(rc);
        ctx_ = nullptr;
        initErr = true;
        return;
    }

    char card[TERN_CARD_MAX];
    ssize_t n = tern_ctx_card(ctx_, card, sizeof(card));
    if (n < 0) {
        NIXL_ERROR << "TERN: tern_ctx_card: " << tern_strerror(int(n));
        initErr = true;
        return;
    }
    card_.assign(card, size_t(n));

    msgMem_.assign(size_t(kRecvs + kSends) * kMsgMax, 0);
    rc = tern_mr_reg(ctx_, msgMem_.data(), msgMem_.size(), TERN_ACCESS_LOCAL, &msgMr_);
    if (rc < 0) {
        NIXL_ERROR << "TERN: registering the message buffers: " << tern_strerror(rc);
        initErr = true;
        return;
    }
    recvReqs_.resize(kRecvs);
    for (unsigned int i = 0; i < kRecvs; i++) {
        tern_req_init(&recvReqs_[i], ternRecvCb, this);
        rc = tern_recv(ctx_, msgMr_, &msgMem_[size_t(i) * kMsgMax], kMsgMax, &recvReqs_[i]);
        if (rc < 0) {
            NIXL_ERROR << "TERN: posting a receive: " << tern_strerror(rc);
            initErr = true;
            return;
        }
    }
    sendReqs_.resize(kSends);
    sendCbs_.resize(kSends);
    for (unsigned int i = 0; i < kSends; i++) {
        tern_req_init(&sendReqs_[i], ternSendCb, this);
        sendFree_.push_back(kSends - 1 - i);
    }
    slotUsed_.assign(kSlots, false);

    // This agent itself: transfers and notifications to it go through a
    // peer made from our own card, as to anyone else.
    rc = connSet(localAgent, card_, true);
    if (rc < 0) {
        NIXL_ERROR << "TERN: adding this agent as its own peer: " << tern_strerror(rc);
        initErr = true;
        return;
    }
    {
        std::lock_guard<std::mutex> lk(agentsMu_);
        agents_.insert(localAgent);
    }
    tern_timer_init(
        &liveTimer_,
        [](struct tern_timer *t) { static_cast<nixlTernEngine *>(t->data)->liveness(); },
        this);
    tern_timer_start(ctx_, &liveTimer_, kLiveTickNs / 1000000, kLiveTickNs / 1000000);
    thread_ = std::thread([this] { loop(); });
}

nixlTernEngine::~nixlTernEngine() {
    if (ctx_ == nullptr)
        return;
    if (thread_.joinable()) {
        // Tell every peer we are going, and give the messages a moment.
        // Agents NIXL disconnected too (invalidateRemoteMD): they may
        // still hold our metadata and write to us.
        call([this] {
            for (auto &[name, c] : conns_) {
                if (name == localAgent || c->gone || c->card.empty())
                    continue;
                if (c->peer == nullptr &&
                    tern_peer_add_flags(
                        ctx_, c->card.data(), c->card.size(), TERN_PEER_FABRIC_ONLY, &c->peer) <
                        0) {
                    c->peer = nullptr;
                    continue;
                }
                std::string bye = header(kBye, localAgent);
                put16(bye, uint16_t(card_.size()));
                bye += card_;
                send(c.get(), std::move(bye), nullptr);
            }
            return 0;
        });
        for (int i = 0; i < 100; i++) {
            bool idle = call([this] { return int(sendFree_.size() == kSends && sendQ_.empty()); });
            if (idle)
                break;
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
        stop_.store(true, std::memory_order_release);
        tern_stop(ctx_);
        thread_.join();
    }
    // The loop has stopped: this thread is the ctx's now. Closing it
    // completes every request (callbacks run inside) and frees tern's
    // objects; ours go after.
    closing_ = true;
    tern_ctx_close(ctx_);
    ctx_ = nullptr;
    for (auto &[name, c] : conns_)
        for (auto *h : c->waiting)
            delete h;
}

void
nixlTernEngine::loop() {
    while (!stop_.load(std::memory_order_acquire)) {
        int rc = tern_run(ctx_, TERN_RUN_ONCE);
        if (rc < 0 && rc != -EINTR) {
            NIXL_ERROR << "TERN: progress failed: " << tern_strerror(rc);
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    }
}

int
nixlTernEngine::call(const std::function<int()> &fn) const {
    if (std::this_thread::get_id() == thread_.get_id())
        return fn();
    SyncTask s;
    s.fn = &fn;
    int rc = tern_task_submit(ctx_, &s.task, syncTaskCb, &s);
    if (rc < 0)
        return rc;
    std::unique_lock<std::mutex> lk(s.mu);
    s.cv.wait(lk, [&] { return s.done; });
    return s.rc;
}

int
nixlTernEngine::post(std::function<void()> fn) const {
    auto *f = new FnTask;
    f->fn = std::move(fn);
    int rc = tern_task_submit(ctx_, &f->task, fnTaskCb, f);
    if (rc < 0)
        delete f;
    return rc;
}

// ---- connections ----------------------------------------------------

nixlTernConn *
nixlTernEngine::conn(const std::string &agent) {
    auto it = conns_.find(agent);
    return it == conns_.end() ? nullptr : it->second.get();
}

int
nixlTernEngine::connSet(const std::string &agent, const std::string &card, bool loaded) {
    auto &slot = conns_[agent];
    if (!slot) {
        slot = std::make_unique<nixlTernConn>();
        slot->name = agent;
        slot->eng = this;
        tern_timer_init(&slot->timer, ternHelloTimerCb, slot.get());
    }
    nixlTernConn *c = slot.get();
    if (!loaded && c->loaded && c->card != card) {
        // A message's name is a claim: it never replaces what NIXL's own
        // metadata said that agent is (a sender could else take over
        // another agent's transfers by naming it).
        NIXL_ERROR << "TERN: refused a message naming agent " << agent
                   << " with a card other than the one its metadata gave";
        return -EPERM;
    }
    if (loaded)
        c->loaded = true;
    if (c->peer != nullptr && c->card == card)
        return 0;
    if (c->peer != nullptr || c->card != card) {
        // Another process under that name now: what we knew of the old
        // one (its slot for us) is void.
        connDrop(c, -ECONNRESET);
        c->slot = -1;
    }
    // This agent itself: over the fabric (the same-host path is for
    // other processes, and says so once when it sees our own card).
    uint64_t flags = agent == localAgent ? TERN_PEER_FABRIC_ONLY : 0;
    int rc = tern_peer_add_flags(ctx_, card.data(), card.size(), flags, &c->peer);
    if (rc < 0) {
        c->peer = nullptr;
        NIXL_ERROR << "TERN: agent " << agent
                   << ": its connection info is not a tern card: " << tern_strerror(rc);
        return rc;
    }
    c->card = card;
    c->gone = false;
    return 0;
}

void
nixlTernEngine::connDrop(nixlTernConn *c, int err) {
    tern_timer_stop(&c->timer);
    // What the provider already holds may never complete (a write to a
    // dead process over shm): NIXL learns the outcome now; the handles
    // stay tern's until it lets go.
    for (nixlTernReqH *h : std::set<nixlTernReqH *>(c->inflight))
        if (!h->published && !h->released)
            publish(h, err);
    while (!c->waiting.empty()) {
        nixlTernReqH *h = c->waiting.front();
        c->waiting.pop_front();
        h->waiting = false;
        finish(h, err);
    }
    if (c->peer != nullptr) {
        tern_peer_remove(c->peer); // its requests complete -ECANCELED
        c->peer = nullptr;
    }
    c->helloSent = false;
}

void
nixlTernEngine::sendHello(nixlTernConn *c) {
    std::string s = header(kHello, localAgent);
    put16(s, uint16_t(card_.size()));
    s += card_;
    c->helloSent = true;
    tern_timer_start(ctx_, &c->timer, uint64_t(helloMs_), 0);
    int rc = send(c, std::move(s), [this, c](int status) {
        if (status == -ECANCELED) {
            // The peer was removed (disconnect, BYE, a new card): what
            // waited has been failed with that reason already.
            c->helloSent = false;
        } else if (status < 0 && c->slot < 0) {
            NIXL_ERROR << "TERN: agent " << c->name
                       << ": first contact failed: " << tern_strerror(status);
            helloTimeout(c);
        }
    });
    if (rc < 0) {
        NIXL_ERROR << "TERN: agent " << c->name << ": first contact failed: " << tern_strerror(rc);
        helloTimeout(c);
    }
}

void
nixlTernEngine::helloTimeout(nixlTernConn *c) {
    tern_timer_stop(&c->timer);
    if (c->slot >= 0)
        return;
    if (!c->waiting.empty())
        NIXL_ERROR << "TERN: agent " << c->name << " did not answer our first contact within "
                   << helloMs_ << " ms: failing " << c->waiting.size() << " transfer(s)";
    c->helloSent = false; // the next transfer tries again
    while (!c->waiting.empty()) {
        nixlTernReqH *h = c->waiting.front();
        c->waiting.pop_front();
        h->waiting = false;
        finish(h, -ETIMEDOUT);
    }
}

void
nixlTernEngine::sendPing(nixlTernConn *c) {
    std::string s = header(kPing, localAgent);
    put16(s, uint16_t(card_.size()));
    s += card_;
    c->pingNs = nowNs();
    send(c, std::move(s), nullptr);
}

// Every 250 ms: an agent we have transfers in flight to, silent for a
// second, is asked; silent for liveness_timeout_ms, it is gone. Its
// transfers fail NIXL_ERR_REMOTE_DISCONNECT now, whatever the provider
// still holds (libfabric's shm never fails a write to a dead process).
// A message proves the peer alive, and so does a READ or a write of a
// piece of kProofBytes or more that completed: our PING may wait behind
// such writes in the provider's queue, and no provider completes them
// without the peer's process (shm: cross-memory attach into it, or its
// own progress). A small write does not: libfabric's shm completes one
// into a dead process's queue. Time this thread did not run (the host
// was loaded: the timer came late) is not counted as the peer's silence.
void
nixlTernEngine::liveness() {
    uint64_t now = nowNs();
    uint64_t late = 0;
    if (liveTickNs_ != 0 && now - liveTickNs_ > kLiveTickNs)
        late = now - liveTickNs_ - kLiveTickNs;
    liveTickNs_ = now;
    for (auto &[name, cp] : conns_) {
        nixlTernConn *c = cp.get();
        if (c->inflight.empty() || c->peer == nullptr || name == localAgent)
            continue;
        c->heardNs = std::min(now, c->heardNs + late);
        uint64_t silent = now - c->heardNs;
        if (silent > uint64_t(livenessMs_) * 1000000) {
            NIXL_ERROR << "TERN: agent " << name << " silent for " << silent / 1000000
                       << " ms with " << c->inflight.size()
                       << " transfer(s) in flight: they fail (remote disconnect)";
            c->gone = true;
            connDrop(c, -TERN_EPEERGONE);
        } else if (silent > 1000000000ull && now - c->pingNs > 1000000000ull) {
            sendPing(c);
        }
    }
}

nixl_status_t
nixlTernEngine::getConnInfo(std::string &str) const {
    str = card_;
    return NIXL_SUCCESS;
}

nixl_status_t
nixlTernEngine::loadRemoteConnInfo(const std::string &remote_agent,
                                   const std::string &remote_conn_info) {
    if (remote_conn_info.empty() || remote_conn_info.size() > TERN_CARD_MAX) {
        NIXL_ERROR << "TERN: agent " << remote_agent << ": connection info of "
                   << remote_conn_info.size() << " bytes is not a tern card (at most "
                   << TERN_CARD_MAX << ")";
        return NIXL_ERR_INVALID_PARAM;
    }
    int rc = call([&] { return connSet(remote_agent, remote_conn_info, true); });
    if (rc < 0)
        return rc == -TERN_ECARD || rc == -EINVAL ? NIXL_ERR_INVALID_PARAM : toNixl(rc);
    std::lock_guard<std::mutex> lk(agentsMu_);
    agents_.insert(remote_agent);
    return NIXL_SUCCESS;
}

nixl_status_t
nixlTernEngine::connect(const std::string &remote_agent) {
    {
        std::lock_guard<std::mutex> lk(agentsMu_);
        if (agents_.count(remote_agent) == 0)
            return NIXL_ERR_NOT_FOUND;
    }
    // Make first contact now, so the first transfer does not wait for it.
    post([this, remote_agent] {
        nixlTernConn *c = conn(remote_agent);
        if (c != nullptr && c->peer != nullptr && c->slot < 0 && !c->helloSent)
            sendHello(c);
    });
    return NIXL_SUCCESS;
}

nixl_status_t
nixlTernEngine::disconnect(const std::string &remote_agent) {
    if (remote_agent == localAgent)
        return NIXL_SUCCESS;
    {
        std::lock_guard<std::mutex> lk(agentsMu_);
        if (agents_.erase(remote_agent) == 0)
            return NIXL_ERR_NOT_FOUND;
    }
    call([&] {
        nixlTernConn *c = conn(remote_agent);
        if (c != nullptr) {
            connDrop(c, -ECANCELED);
            c->loaded = false; // NIXL forgot it: a new process may take the name
        }
        return 0;
    });
    return NIXL_SUCCESS;
}

// ---- memory ---------------------------------------------------------

nixl_status_t
nixlTernEngine::registerMem(const nixlBlobDesc &mem,
                            const nixl_mem_t &nixl_mem,
                            nixlBackendMD *&out) {
    struct tern_mr_attr attr;
    tern_mr_attr_init(&attr);
    attr.buf = reinterpret_cast<void *>(mem.addr);
    attr.len = mem.len;
    attr.access = kAccess;
    if (nixl_mem == DRAM_SEG) {
        attr.kind = TERN_MEM_HOST;
    } else if (nixl_mem == VRAM_SEG) {
        attr.kind = TERN_MEM_CUDA;
        attr.device = int(mem.devId);
    } else {
        return NIXL_ERR_NOT_SUPPORTED;
    }
    if (mem.len == 0 || mem.addr == 0) {
        NIXL_ERROR << "TERN: cannot register " << mem.len << " bytes at " << hexAddr(mem.addr);
        return NIXL_ERR_INVALID_PARAM;
    }
    auto md = std::make_unique<nixlTernLocalMD>();
    int rc = call([&] {
        int r = tern_mr_regattr(ctx_, &attr, &md->mr);
        if (r < 0)
            return r;
        struct tern_mr_desc d;
        char buf[TERN_MR_DESC_MAX];
        tern_mr_desc(md->mr, &d);
        ssize_t n = tern_mr_desc_pack(&d, buf, sizeof(buf));
        if (n < 0) {
            tern_mr_close(md->mr);
            return int(n);
        }
        md->packed.assign(buf, size_t(n));
        return 0;
    });
    if (rc < 0) {
        NIXL_ERROR << "TERN: registering " << mem.len << " bytes at " << hexAddr(mem.addr)
                   << (nixl_mem == VRAM_SEG ? " (VRAM)" : "") << ": " << tern_strerror(rc);
        return toNixl(rc);
    }
    md->base = mem.addr;
    md->len = mem.len;
    out = md.release();
    return NIXL_SUCCESS;
}

void
nixlTernEngine::mrRelease(nixlTernLocalMD *md) {
    int rc = tern_mr_close(md->mr);
    if (rc == -EBUSY) {
        md->closing = true; // tern still uses it: closed with the ctx
        return;
    }
    delete md;
}

nixl_status_t
nixlTernEngine::deregisterMem(nixlBackendMD *meta) {
    auto *md = dynamic_cast<nixlTernLocalMD *>(meta);
    if (md == nullptr)
        return NIXL_ERR_INVALID_PARAM;
    call([&] {
        if (md->users > 0) {
            // In use by transfers in flight: released when the last ends.
            // Safe (nothing is freed under tern), and what a failed
            // transfer whose writes the provider still holds leads to.
            NIXL_INFO << "TERN: region at " << hexAddr(md->base)
                      << " deregistered while transfers use it; released when they end";
            md->closing = true;
        } else {
            mrRelease(md);
        }
        return 0;
    });
    return NIXL_SUCCESS;
}

nixl_status_t
nixlTernEngine::getPublicData(const nixlBackendMD *meta, std::string &str) const {
    auto *md = dynamic_cast<const nixlTernLocalMD *>(meta);
    if (md == nullptr)
        return NIXL_ERR_INVALID_PARAM;
    str = md->packed;
    return NIXL_SUCCESS;
}

nixl_status_t
nixlTernEngine::loadRemoteMD(const nixlBlobDesc &input,
                             const nixl_mem_t &nixl_mem,
                             const std::string &remote_agent,
                             nixlBackendMD *&output) {
    auto md = std::make_unique<nixlTernRemoteMD>();
    ssize_t n = tern_mr_desc_unpack(input.metaInfo.data(), input.metaInfo.size(), &md->desc);
    if (n < 0) {
        NIXL_ERROR << "TERN: agent " << remote_agent << ": region metadata of "
                   << input.metaInfo.size()
                   << " bytes is not a tern descriptor: " << tern_strerror(int(n));
        return NIXL_ERR_INVALID_PARAM;
    }
    if (input.addr < md->desc.base || input.len > md->desc.len ||
        input.addr - md->desc.base > md->desc.len - input.len) {
        NIXL_ERROR << "TERN: agent " << remote_agent << ": region " << hexAddr(input.addr) << "+"
                   << std::dec << input.len << " is not inside its descriptor";
        return NIXL_ERR_INVALID_PARAM;
    }
    (void)nixl_mem;
    md->agent = remote_agent;
    output = md.release();
    return NIXL_SUCCESS;
}

nixl_status_t
nixlTernEngine::loadLocalMD(nixlBackendMD *input, nixlBackendMD *&output) {
    auto *lmd = dynamic_cast<nixlTernLocalMD *>(input);
    if (lmd == nullptr)
        return NIXL_ERR_INVALID_PARAM;
    auto md = std::make_unique<nixlTernRemoteMD>();
    if (tern_mr_desc_unpack(lmd->packed.data(), lmd->packed.size(), &md->desc) < 0)
        return NIXL_ERR_BACKEND;
    md->agent = localAgent;
    output = md.release();
    return NIXL_SUCCESS;
}

nixl_status_t
nixlTernEngine::unloadMD(nixlBackendMD *input) {
    delete dynamic_cast<nixlTernRemoteMD *>(input);
    return NIXL_SUCCESS;
}

// ---- transfers ------------------------------------------------------

nixl_status_t
nixlTernEngine::prepXfer(const nixl_xfer_op_t &operation,
                         const nixl_meta_dlist_t &local,
                         const nixl_meta_dlist_t &remote,
                         const std::string &remote_agent,
                         nixlBackendReqH *&handle,
                         const nixl_opt_b_args_t *opt_args) const {
    if (operation != NIXL_WRITE && operation != NIXL_READ)
        return NIXL_ERR_INVALID_PARAM;
    int n = local.descCount();
    if (n != remote.descCount()) {
        NIXL_ERROR << "TERN: " << n << " local descriptors against " << remote.descCount()
                   << " remote ones";
        return NIXL_ERR_INVALID_PARAM;
    }
    auto h = std::make_unique<nixlTernReqH>();
    h->eng = const_cast<nixlTernEngine *>(this);
    h->op = operation;
    h->agent = remote_agent;
    std::map<nixlTernLocalMD *, size_t> groupOf;
    std::vector<std::map<const nixlTernRemoteMD *, uint32_t>> regionOf;
    for (int i = 0; i < n; i++) {
        const nixlMetaDesc &l = local[i];
        const nixlMetaDesc &r = remote[i];
        auto *lmd = dynamic_cast<nixlTernLocalMD *>(l.metadataP);
        auto *rmd = dynamic_cast<const nixlTernRemoteMD *>(r.metadataP);
        if (lmd == nullptr || rmd == nullptr) {
            NIXL_ERROR << "TERN: descriptor " << i << " has no TERN registration";
            return NIXL_ERR_INVALID_PARAM;
        }
        if (l.len != r.len) {
            NIXL_ERROR << "TERN: descriptor " << i << ": local length " << l.len
                       << " against remote length " << r.len;
            return NIXL_ERR_INVALID_PARAM;
        }
        if (rmd->agent != remote_agent) {
            NIXL_ERROR << "TERN: descriptor " << i << " names a region of agent " << rmd->agent
                       << ", not of " << remote_agent;
            return NIXL_ERR_INVALID_PARAM;
        }
        if (l.addr < lmd->base || l.len > lmd->len || l.addr - lmd->base > lmd->len - l.len) {
            NIXL_ERROR << "TERN: descriptor " << i << ": local " << hexAddr(l.addr) << "+"
                       << std::dec << l.len << " is outside its registration";
            return NIXL_ERR_INVALID_PARAM;
        }
        const struct tern_mr_desc &d = rmd->desc;
        if (r.addr < d.base || r.len > d.len || r.addr - d.base > d.len - r.len) {
            NIXL_ERROR << "TERN: descriptor " << i << ": remote " << hexAddr(r.addr) << "+"
                       << std::dec << r.len << " is outside its registration";
            return NIXL_ERR_INVALID_PARAM;
        }
        if (l.len == 0)
            continue;
        auto [git, gnew] = groupOf.emplace(lmd, h->groups.size());
        if (gnew) {
            h->groups.emplace_back();
            h->groups.back().lmd = lmd;
            regionOf.emplace_back();
        }
        nixlTernGroup &g = h->groups[git->second];
        auto [rit, rnew] = regionOf[git->second].emplace(rmd, uint32_t(g.regions.size()));
        if (rnew)
            g.regions.push_back(d);
        struct tern_piece p = {};
        p.loff = l.addr - lmd->base;
        p.roff = r.addr - d.base;
        p.len = l.len;
        p.region = rit->second;
        g.pieces.push_back(p);
        if (operation == NIXL_READ || p.len >= kProofBytes)
            g.proves = true;
        h->npieces++;
    }
    for (auto &g : h->groups) {
        g.owner = h.get();
        tern_req_init(&g.req, ternGroupCb, &g);
    }
    if (opt_args != nullptr && opt_args->hasNotif) {
        h->hasNotif = true;
        h->notif = opt_args->notifMsg;
    }
    handle = h.release();
    return NIXL_SUCCESS;
}

nixl_status_t
nixlTernEngine::postXfer(const nixl_xfer_op_t &operation,
                         const nixl_meta_dlist_t &local,
                         const nixl_meta_dlist_t &remote,
                         const std::string &remote_agent,
                         nixlBackendReqH *&handle,
                         const nixl_opt_b_args_t *opt_args) const {
    auto *h = dynamic_cast<nixlTernReqH *>(handle);
    if (h == nullptr || h->op != operation || h->agent != remote_agent)
        return NIXL_ERR_INVALID_PARAM;
    (void)local;
    (void)remote;
    if (h->busy.load(std::memory_order_acquire))
        return NIXL_ERR_REPOST_ACTIVE;
    h->hasNotif = opt_args != nullptr && opt_args->hasNotif;
    h->notif = h->hasNotif ? opt_args->notifMsg : std::string();
    if (h->hasNotif && h->notif.size() > payloadMax(localAgent)) {
        NIXL_ERROR << "TERN: a notification of " << h->notif.size() << " bytes is longer than "
                   << payloadMax(localAgent) << " (docs/nixl.md, limits)";
        return NIXL_ERR_INVALID_PARAM;
    }
    {
        std::lock_guard<std::mutex> lk(agentsMu_);
        if (agents_.count(remote_agent) == 0)
            return NIXL_ERR_NOT_FOUND;
    }
    h->status.store(NIXL_SUCCESS, std::memory_order_relaxed);
    h->published = false;
    h->busy.store(true, std::memory_order_relaxed);
    h->state.store(nixlTernReqH::POSTED, std::memory_order_release);
    int rc = tern_task_submit(
        ctx_,
        &h->postTask,
        [](struct tern_task *t, int status) {
            auto *hh = static_cast<nixlTernReqH *>(t->data);
            if (status < 0)
                hh->eng->finish(hh, status);
            else
                hh->eng->start(hh);
        },
        h);
    if (rc < 0) {
        h->state.store(nixlTernReqH::FAILED, std::memory_order_release);
        h->busy.store(false, std::memory_order_release);
        return NIXL_ERR_BACKEND;
    }
    return NIXL_IN_PROG;
}

void
nixlTernEngine::start(nixlTernReqH *h) {
    nixlTernConn *c = conn(h->agent);
    if (c == nullptr || c->peer == nullptr) {
        finish(h, -ENOTCONN); // NIXL_ERR_REMOTE_DISCONNECT
        return;
    }
    h->imm = 0;
    if (h->op == NIXL_WRITE && h->hasNotif && h->npieces > 0) {
        if (c->slot < 0) {
            c->waiting.push_back(h);
            h->waiting = true;
            if (!c->helloSent)
                sendHello(c);
            return;
        }
        // Sequence numbers run 1..2^20-1: no immediate is 0.
        h->imm = (uint32_t(c->slot) << kSeqBits) | (c->seq % kSeqMask + 1);
        c->seq++;
    }
    h->pending = 0;
    h->firstErr = 0;
    h->local = tern_peer_path(c->peer) == TERN_PATH_LOCAL;
    for (auto &g : h->groups) {
        int rc;
        if (h->op == NIXL_WRITE)
            rc = tern_write_pieces(c->peer,
                                   g.lmd->mr,
                                   g.pieces.data(),
                                   g.pieces.size(),
                                   g.regions.data(),
                                   unsigned(g.regions.size()),
                                   h->imm != 0 ? TERN_PIECES_IMM : 0,
                                   h->imm,
                                   &g.req);
        else
            rc = tern_read_pieces(c->peer,
                                  g.lmd->mr,
                                  g.pieces.data(),
                                  g.pieces.size(),
                                  g.regions.data(),
                                  unsigned(g.regions.size()),
                                  &g.req);
        if (rc < 0) {
            NIXL_ERROR << "TERN: posting a " << (h->op == NIXL_WRITE ? "WRITE" : "READ") << " to "
                       << h->agent << ": " << tern_strerror(rc);
            h->firstErr = rc;
            break; // what was posted completes; then the transfer fails
        }
        g.lmd->users++;
        h->pending++;
    }
    if (h->pending == 0) {
        groupsDone(h);
        return;
    }
    if (c->inflight.empty())
        c->heardNs = nowNs(); // silence counts from now
    c->inflight.insert(h);
}

void
nixlTernEngine::groupDone(nixlTernGroup *g) {
    nixlTernReqH *h = g->owner;
    if (--g->lmd->users == 0 && g->lmd->closing)
        mrRelease(g->lmd);
    if (g->req.status < 0 && h->firstErr == 0) {
        int err = g->req.status;
        // We cancel only what NIXL released (or disconnect() ended, which
        // has told NIXL already): a cancellation we did not ask for is the
        // provider giving up on the peer (tcp: the connection reset).
        if (err == -ECANCELED && !h->released)
            err = -ECONNRESET;
        // Ranges were checked against both registrations in prepXfer: on
        // the same-host path a refusal means the owner revoked us (its
        // engine closed, or it removed us), not a bad descriptor.
        if (err == -TERN_EACCESS && h->local)
            err = -TERN_EPEERGONE;
        h->firstErr = err;
    } else if (g->proves) {
        if (nixlTernConn *c = conn(h->agent))
            c->heardNs = nowNs();
    }
    if (--h->pending == 0)
        groupsDone(h);
}

void
nixlTernEngine::groupsDone(nixlTernReqH *h) {
    if (h->firstErr != 0 || h->released || h->published || !h->hasNotif) {
        finish(h, h->firstErr != 0 ? h->firstErr : (h->released ? -ECANCELED : 0));
        return;
    }
    // Every piece has completed here; the target counts their
    // immediates before it delivers the notification.
    nixlTernConn *c = conn(h->agent);
    if (c == nullptr || c->peer == nullptr) {
        finish(h, -ENOTCONN);
        return;
    }
    uint32_t count = h->op == NIXL_WRITE ? uint32_t(h->npieces) : 0;
    int rc = send(c, notifMsg(localAgent, h->imm, count, h->notif), [this, h](int status) {
        finish(h, status);
    });
    if (rc < 0)
        finish(h, rc);
}

void
nixlTernEngine::finish(nixlTernReqH *h, int err) {
    // tern lets go of the handle here.
    nixlTernConn *c = conn(h->agent);
    if (c != nullptr)
        c->inflight.erase(h);
    if (h->released) {
        delete h;
        return;
    }
    if (!h->published)
        publish(h, err);
    // The last touch: NIXL's threads may free the handle from here on.
    h->busy.store(false, std::memory_order_release);
}

// What checkXfer() says from now on; the handle may still be tern's.
void
nixlTernEngine::publish(nixlTernReqH *h, int err) {
    if (err != 0)
        NIXL_DEBUG << "TERN: transfer to " << h->agent << " failed: " << tern_strerror(err);
    h->published = true;
    h->status.store(toNixl(err), std::memory_order_relaxed);
    h->state.store(err != 0 ? nixlTernReqH::FAILED : nixlTernReqH::DONE, std::memory_order_release);
}

void
nixlTernEngine::cancel(nixlTernReqH *h) {
    if (h->waiting) {
        nixlTernConn *c = conn(h->agent);
        if (c != nullptr)
            for (auto it = c->waiting.begin(); it != c->waiting.end(); ++it)
                if (*it == h) {
                    c->waiting.erase(it);
                    break;
                }
        h->waiting = false;
        finish(h, -ECANCELED);
        return;
    }
    // Groups the provider already holds complete on their own (-EBUSY);
    // the rest complete -ECANCELED from the next progress pass.
    for (auto &g : h->groups)
        if (!g.req.done)
            tern_req_cancel(ctx_, &g.req);
}

nixl_status_t
nixlTernEngine::checkXfer(nixlBackendReqH *handle) const {
    auto *h = dynamic_cast<nixlTernReqH *>(handle);
    if (h == nullptr)
        return NIXL_ERR_INVALID_PARAM;
    switch (h->state.load(std::memory_order_acquire)) {
    case nixlTernReqH::DONE:
        return NIXL_SUCCESS;
    case nixlTernReqH::FAILED:
        return nixl_status_t(h->status.load(std::memory_order_relaxed));
    case nixlTernReqH::POSTED:
        // Callers poll this in a loop, and the work is the engine
        // thread's: where cores are few, a spinning caller would take the
        // core it needs (docs/nixl.md, "What limits TERN's figures").
        std::this_thread::yield();
        return NIXL_IN_PROG;
    default:
        return NIXL_ERR_NOT_POSTED;
    }
}

nixl_status_t
nixlTernEngine::releaseReqH(nixlBackendReqH *handle) const {
    auto *h = dynamic_cast<nixlTernReqH *>(handle);
    if (h == nullptr)
        return NIXL_ERR_INVALID_PARAM;
    if (!h->busy.load(std::memory_order_acquire)) {
        delete h;
        return NIXL_SUCCESS;
    }
    // In flight: the engine thread cancels it and frees it when tern lets
    // go of it. Never waits here.
    int rc = tern_task_submit(
        ctx_,
        &h->relTask,
        [](struct tern_task *t, int status) {
            auto *hh = static_cast<nixlTernReqH *>(t->data);
            if (!hh->busy.load(std::memory_order_acquire)) {
                delete hh; // ended meanwhile
                return;
            }
            hh->released = true;
            if (status == 0)
                hh->eng->cancel(hh);
        },
        h);
    return rc < 0 ? NIXL_ERR_BACKEND : NIXL_SUCCESS;
}

// ---- messages -------------------------------------------------------

int
nixlTernEngine::send(nixlTernConn *c, std::string &&bytes, std::function<void(int)> done) {
    if (c->peer == nullptr)
        return -ENOTCONN;
    if (bytes.size() > kMsgMax)
        return -EMSGSIZE;
    if (sendFree_.empty()) {
        sendQ_.push_back(std::make_unique<Msg>(Msg{c, std::move(bytes), std::move(done)}));
        return 0;
    }
    unsigned int i = sendFree_.back();
    uint8_t *buf = &msgMem_[size_t(kRecvs + i) * kMsgMax];
    std::memcpy(buf, bytes.data(), bytes.size());
    int rc = tern_send(c->peer, msgMr_, buf, bytes.size(), &sendReqs_[i]);
    if (rc < 0)
        return rc;
    sendFree_.pop_back();
    sendCbs_[i] = std::move(done);
    return 0;
}

void
nixlTernEngine::sendNext() {
    while (!sendFree_.empty() && !sendQ_.empty()) {
        std::unique_ptr<Msg> m = std::move(sendQ_.front());
        sendQ_.pop_front();
        int rc = send(m->conn, std::move(m->bytes), m->done);
        if (rc < 0 && m->done)
            m->done(rc);
    }
}

void
nixlTernEngine::sendDone(struct tern_req *req) {
    unsigned int i = unsigned(req - sendReqs_.data());
    std::function<void(int)> done = std::move(sendCbs_[i]);
    sendCbs_[i] = nullptr;
    sendFree_.push_back(i);
    if (done)
        done(req->status);
    if (!closing_)
        sendNext();
    else
        while (!sendQ_.empty()) {
            std::unique_ptr<Msg> m = std::move(sendQ_.front());
            sendQ_.pop_front();
            if (m->done)
                m->done(-ECANCELED);
        }
}

void
nixlTernEngine::recvDone(struct tern_req *req) {
    if (closing_ || req->status == -ECANCELED)
        return;
    unsigned int i = unsigned(req - recvReqs_.data());
    uint8_t *buf = &msgMem_[size_t(i) * kMsgMax];
    if (req->status == 0)
        handle(buf, req->len);
    else
        NIXL_ERROR << "TERN: a message was lost: " << tern_strerror(req->status);
    int rc = tern_recv(ctx_, msgMr_, buf, kMsgMax, req);
    if (rc < 0)
        NIXL_ERROR << "TERN: posting a receive again: " << tern_strerror(rc)
                   << " (one buffer fewer)";
}

static void
expectDone(struct tern_req *req) {
    auto *e = static_cast<Expect *>(req->data);
    if (req->status == 0)
        e->eng->pushNotif(e->from, std::move(e->msg));
    else if (req->status != -ECANCELED)
        NIXL_ERROR << "TERN: notification from " << e->from
                   << " lost: " << tern_strerror(req->status);
    delete e;
}

void
nixlTernEngine::handle(const uint8_t *p, size_t len) {
    if (len < kHdr || get32(p) != kMagic || p[5] != kVersion) {
        NIXL_ERROR << "TERN: dropped a message of " << len
                   << " bytes that is not ours (magic or version)";
        return;
    }
    uint8_t type = p[4];
    size_t nlen = get16(p + 6);
    if (nlen == 0 || nlen > len - kHdr) {
        NIXL_ERROR << "TERN: dropped a message whose name length " << nlen << " exceeds its size "
                   << len;
        return;
    }
    std::string from(reinterpret_cast<const char *>(p + kHdr), nlen);
    const uint8_t *q = p + kHdr + nlen;
    size_t left = len - kHdr - nlen;
    if (nixlTernConn *hc = conn(from))
        hc->heardNs = nowNs();

    if (type == kHello) {
        if (left < 2 || get16(q) == 0 || get16(q) > left - 2) {
            NIXL_ERROR << "TERN: dropped a HELLO from " << from << ": bad card length";
            return;
        }
        std::string card(reinterpret_cast<const char *>(q + 2), get16(q));
        if (connSet(from, card, false) < 0)
            return;
        auto it = inSlots_.find(from);
        uint32_t slot = kNoSlot;
        if (it != inSlots_.end()) {
            slot = it->second;
        } else {
            for (uint32_t s = 0; s < kSlots; s++)
                if (!slotUsed_[s]) {
                    slotUsed_[s] = true;
                    inSlots_[from] = slot = s;
                    break;
                }
            if (slot == kNoSlot)
                NIXL_ERROR << "TERN: agent " << from << ": all " << kSlots
                           << " sender slots are taken; its WRITEs with notification fail";
        }
        std::string s = header(kAck, localAgent);
        put32(s, slot);
        int rc = send(conn(from), std::move(s), nullptr);
        if (rc < 0)
            NIXL_ERROR << "TERN: answering " << from << ": " << tern_strerror(rc);
    } else if (type == kAck) {
        if (left < 4) {
            NIXL_ERROR << "TERN: dropped a short ACK from " << from;
            return;
        }
        nixlTernConn *c = conn(from);
        if (c == nullptr)
            return;
        uint32_t slot = get32(q);
        tern_timer_stop(&c->timer);
        if (slot == kNoSlot) {
            while (!c->waiting.empty()) {
                nixlTernReqH *h = c->waiting.front();
                c->waiting.pop_front();
                h->waiting = false;
                finish(h, -ENOSPC);
            }
            c->helloSent = false;
            return;
        }
        if (slot >= kSlots) {
            NIXL_ERROR << "TERN: dropped an ACK from " << from << " with slot " << slot;
            return;
        }
        c->slot = slot;
        std::deque<nixlTernReqH *> w;
        w.swap(c->waiting);
        for (auto *h : w) {
            h->waiting = false;
            start(h);
        }
    } else if (type == kNotif) {
        if (left < 12 || get32(q + 8) != left - 12) {
            NIXL_ERROR << "TERN: dropped a notification from " << from << ": bad length";
            return;
        }
        uint32_t imm = get32(q), count = get32(q + 4);
        std::string msg(reinterpret_cast<const char *>(q + 12), left - 12);
        if (count == 0) {
            pushNotif(from, std::move(msg));
            return;
        }
        auto it = inSlots_.find(from);
        if (it == inSlots_.end() || it->second != imm >> kSeqBits) {
            NIXL_ERROR << "TERN: dropped a notification from " << from
                       << ": its immediate is not of the slot we gave it";
            return;
        }
        auto *e = new Expect;
        e->eng = this;
        e->from = std::move(from);
        e->msg = std::move(msg);
        tern_req_init(&e->req, expectDone, e);
        int rc = tern_imm_expect(ctx_, imm, count, &e->req);
        if (rc < 0) {
            NIXL_ERROR << "TERN: notification from " << e->from
                       << " dropped: " << tern_strerror(rc);
            delete e;
        }
    } else if (type == kPing) {
        if (left < 2 || get16(q) == 0 || get16(q) > left - 2) {
            NIXL_ERROR << "TERN: dropped a PING from " << from << ": bad card length";
            return;
        }
        std::string card(reinterpret_cast<const char *>(q + 2), get16(q));
        if (connSet(from, card, false) == 0)
            send(conn(from), header(kPong, localAgent), nullptr);
    } else if (type == kPong) {
        // heard: that is all
    } else if (type == kBye) {
        // Only the card we know for that name ends it: a BYE naming an
        // agent is not enough.
        nixlTernConn *c = conn(from);
        bool same = left >= 2 && get16(q) == left - 2 && c != nullptr &&
                    c->card.size() == left - 2 && std::memcmp(c->card.data(), q + 2, left - 2) == 0;
        if (c != nullptr && !same)
            NIXL_ERROR << "TERN: dropped a BYE naming agent " << from << " with another card";
        if (same && from != localAgent) {
            NIXL_DEBUG << "TERN: agent " << from << " closed its engine";
            c->gone = true;
            connDrop(c, -ECONNRESET);
        }
    } else {
        NIXL_ERROR << "TERN: dropped a message of unknown type " << unsigned(type) << " from "
                   << from;
    }
}

void
nixlTernEngine::pushNotif(const std::string &from, std::string &&msg) {
    std::lock_guard<std::mutex> lk(notifMu_);
    notifs_.emplace_back(from, std::move(msg));
}

nixl_status_t
nixlTernEngine::getNotifs(notif_list_t &notif_list) {
    if (!notif_list.empty())
        return NIXL_ERR_INVALID_PARAM;
    {
        std::lock_guard<std::mutex> lk(notifMu_);
        notif_list.swap(notifs_);
    }
    if (notif_list.empty())
        std::this_thread::yield(); // as checkXfer(): pollers leave the core
    return NIXL_SUCCESS;
}

nixl_status_t
nixlTernEngine::genNotif(const std::string &remote_agent, const std::string &msg) const {
    if (msg.size() > payloadMax(localAgent)) {
        NIXL_ERROR << "TERN: a notification of " << msg.size() << " bytes is longer than "
                   << payloadMax(localAgent) << " (docs/nixl.md, limits)";
        return NIXL_ERR_INVALID_PARAM;
    }
    {
        std::lock_guard<std::mutex> lk(agentsMu_);
        if (agents_.count(remote_agent) == 0)
            return NIXL_ERR_NOT_FOUND;
    }
    auto *self = const_cast<nixlTernEngine *>(this);
    int rc = post([self, remote_agent, msg] {
        nixlTernConn *c = self->conn(remote_agent);
        int r = c == nullptr ? -ENOTCONN
                             : self->send(c, notifMsg(self->localAgent, 0, 0, msg), nullptr);
        if (r < 0)
            NIXL_ERROR << "TERN: notification to " << remote_agent << " lost: " << tern_strerror(r);
    });
    return rc < 0 ? NIXL_ERR_BACKEND : NIXL_SUCCESS;
}
