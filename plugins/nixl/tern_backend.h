// SPDX-License-Identifier: MIT
// tern as a NIXL backend ("TERN"): docs/nixl.md.
//
// One tern ctx per engine, driven by a thread of the engine's own. NIXL
// calls from any thread; every call that touches tern is handed to that
// thread with tern_task_submit() (tern/loop.h), and its result comes back
// through atomics (transfers) or a wait (registration, connections).
#ifndef TERN_NIXL_BACKEND_H
#define TERN_NIXL_BACKEND_H

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend_engine.h"

#include <tern/tern.h>

class nixlTernEngine;
struct nixlTernConn;

// A region registered here: what registerMem() returns.
class nixlTernLocalMD : public nixlBackendMD {
public:
    nixlTernLocalMD() : nixlBackendMD(true) {}

    struct tern_mr *mr = nullptr;
    uintptr_t base = 0;
    size_t len = 0;
    std::string packed;     // the packed descriptor: the public data
    unsigned int users = 0; // groups in flight (engine thread only)
    bool closing = false;   // deregistered while in use (engine thread only)
};

// A peer's region (loadRemoteMD), or one of ours addressed as a peer's
// (loadLocalMD: transfers to this agent itself).
class nixlTernRemoteMD : public nixlBackendMD {
public:
    nixlTernRemoteMD() : nixlBackendMD(false) {}

    struct tern_mr_desc desc = {};
    std::string agent;
};

// The part of a transfer that uses one local region: one pieces call.
struct nixlTernGroup {
    nixlTernLocalMD *lmd = nullptr;
    std::vector<struct tern_piece> pieces;
    std::vector<struct tern_mr_desc> regions;
    struct tern_req req;
    class nixlTernReqH *owner = nullptr;
    // Its completion proves the peer alive (nixlTernEngine::liveness()):
    // a READ, or a piece no provider completes without the peer's
    // process (shm: cross-memory attach or the peer's own progress).
    bool proves = false;
};

class nixlTernReqH : public nixlBackendReqH {
public:
    enum { IDLE, POSTED, DONE, FAILED };

    nixlTernEngine *eng = nullptr;
    nixl_xfer_op_t op = NIXL_WRITE;
    std::string agent;
    std::vector<nixlTernGroup> groups; // never resized once prepared
    size_t npieces = 0;
    bool hasNotif = false;
    std::string notif;

    // Shared with NIXL's threads. state is what checkXfer() says; busy
    // whether tern still holds the handle (a transfer failed because its
    // peer went silent is FAILED while the provider still holds writes).
    std::atomic<int> state{IDLE};
    std::atomic<int> status{NIXL_SUCCESS};
    std::atomic<bool> busy{false};

    // The engine thread's alone.
    struct tern_task postTask = {};
    struct tern_task relTask = {};
    size_t pending = 0;
    int firstErr = 0;
    uint32_t imm = 0;
    bool released = false;
    bool published = false; // state set for this post
    bool local = false;     // posted on the same-host path
    bool waiting = false;   // on its connection's list, for a slot
};

class nixlTernEngine : public nixlBackendEngine {
public:
    explicit nixlTernEngine(const nixlBackendInitParams *init_params);
    ~nixlTernEngine() override;

    bool
    supportsRemote() const override {
        return true;
    }

    bool
    supportsLocal() const override {
        return true;
    }

    bool
    supportsNotif() const override {
        return true;
    }

    nixl_mem_list_t
    getSupportedMems() const override {
        return {DRAM_SEG, VRAM_SEG};
    }

    nixl_status_t
    registerMem(const nixlBlobDesc &mem, const nixl_mem_t &nixl_mem, nixlBackendMD *&out) override;
    nixl_status_t
    deregisterMem(nixlBackendMD *meta) override;

    nixl_status_t
    connect(const std::string &remote_agent) override;
    nixl_status_t
    disconnect(const std::string &remote_agent) override;
    nixl_status_t
    unloadMD(nixlBackendMD *input) override;

    nixl_status_t
    prepXfer(const nixl_xfer_op_t &operation,
             const nixl_meta_dlist_t &local,
             const nixl_meta_dlist_t &remote,
             const std::string &remote_agent,
             nixlBackendReqH *&handle,
             const nixl_opt_b_args_t *opt_args = nullptr) const override;
    nixl_status_t
    postXfer(const nixl_xfer_op_t &operation,
             const nixl_meta_dlist_t &local,
             const nixl_meta_dlist_t &remote,
             const std::string &remote_agent,
             nixlBackendReqH *&handle,
             const nixl_opt_b_args_t *opt_args = nullptr) const override;
    nixl_status_t
    checkXfer(nixlBackendReqH *handle) const override;
    nixl_status_t
    releaseReqH(nixlBackendReqH *handle) const override;

    nixl_status_t
    getPublicData(const nixlBackendMD *meta, std::string &str) const override;
    nixl_status_t
    getConnInfo(std::string &str) const override;
    nixl_status_t
    loadRemoteConnInfo(const std::string &remote_agent,
                       const std::string &remote_conn_info) override;
    nixl_status_t
    loadRemoteMD(const nixlBlobDesc &input,
                 const nixl_mem_t &nixl_mem,
                 const std::string &remote_agent,
                 nixlBackendMD *&output) override;
    nixl_status_t
    loadLocalMD(nixlBackendMD *input, nixlBackendMD *&output) override;

    nixl_status_t
    getNotifs(notif_list_t &notif_list) override;
    nixl_status_t
    genNotif(const std::string &remote_agent, const std::string &msg) const override;

    // The engine thread's side; public for the C callbacks.
    void
    groupDone(nixlTernGroup *g);
    void
    sendDone(struct tern_req *req);
    void
    recvDone(struct tern_req *req);
    void
    helloTimeout(nixlTernConn *c);
    void
    liveness();
    void
    pushNotif(const std::string &from, std::string &&msg);

private:
    struct Msg;

    // Run fn on the engine thread and wait for its result.
    int
    call(const std::function<int()> &fn) const;
    // Run fn on the engine thread, not waiting.
    int
    post(std::function<void()> fn) const;

    void
    loop();
    nixlTernConn *
    conn(const std::string &agent);
    int
    connSet(const std::string &agent, const std::string &card, bool loaded);
    void
    connDrop(nixlTernConn *c, int err);
    void
    start(nixlTernReqH *h);
    void
    finish(nixlTernReqH *h, int err);
    void
    publish(nixlTernReqH *h, int err);
    void
    sendPing(nixlTernConn *c);
    void
    groupsDone(nixlTernReqH *h);
    void
    cancel(nixlTernReqH *h);
    void
    sendHello(nixlTernConn *c);
    int
    send(nixlTernConn *c, std::string &&bytes, std::function<void(int)> done);
    void
    sendNext();
    void
    handle(const uint8_t *p, size_t len);
    void
    handleHello(const std::string &from, const uint8_t *q, size_t left);
    void
    handleAck(const std::string &from, const uint8_t *q, size_t left);
    void
    handleNotif(std::string &&from, const uint8_t *q, size_t left);
    void
    handlePing(const std::string &from, const uint8_t *q, size_t left);
    void
    handleBye(const std::string &from, const uint8_t *q, size_t left);
    void
    mrRelease(nixlTernLocalMD *md);

    // Options (backend parameters), kept alive for tern_ctx_open().
    std::string provider_, fabric_, domains_, node_;
    int helloMs_ = 10000;
    int livenessMs_ = 5000;
    struct tern_timer liveTimer_ = {};
    static constexpr uint64_t kLiveTickNs = 250000000; // the liveness timer's period
    uint64_t liveTickNs_ = 0;                          // when it last ran

    struct tern_ctx *ctx_ = nullptr;
    std::string card_;
    std::thread thread_;
    std::atomic<bool> stop_{false};
    std::thread::id loopId_;

    // Agents whose connection info is loaded, for NIXL's threads.
    mutable std::mutex agentsMu_;
    std::set<std::string> agents_;

    // The engine thread's alone.
    std::map<std::string, std::unique_ptr<nixlTernConn>> conns_;
    std::map<std::string, uint32_t> inSlots_; // sender -> slot it writes with
    std::vector<bool> slotUsed_;
    bool closing_ = false;

    // Messages: receive and send buffers in one registered region.
    std::vector<uint8_t> msgMem_;
    struct tern_mr *msgMr_ = nullptr;
    std::vector<struct tern_req> recvReqs_;
    std::vector<struct tern_req> sendReqs_;
    std::vector<std::function<void(int)>> sendCbs_;
    std::vector<unsigned int> sendFree_;
    std::deque<std::unique_ptr<Msg>> sendQ_;

    std::mutex notifMu_;
    notif_list_t notifs_;
};

#endif
