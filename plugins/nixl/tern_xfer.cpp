// SPDX-License-Identifier: MIT
// tern as a NIXL backend: memory (registerMem, the descriptors NIXL
// passes between agents) and transfers (prepXfer, postXfer: one pieces
// call per local region; their completion, checkXfer, releaseReqH).
#include "tern_backend_int.h"

#include <cstring>

using namespace ternNixl;

extern "C" {
static void
ternGroupCb(struct tern_req *req) {
    auto *g = static_cast<nixlTernGroup *>(req->data);
    g->owner->eng->groupDone(g);
}
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
