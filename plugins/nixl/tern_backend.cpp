// SPDX-License-Identifier: MIT
// tern as a NIXL backend: the engine (docs/nixl.md has the design): its
// construction, its thread, and its connections to other agents.
// tern_xfer.cpp has memory and transfers, tern_msg.cpp the messages.
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
#include "tern_backend_int.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

using namespace ternNixl;

namespace {

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

extern "C" {
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
