// SPDX-License-Identifier: MIT
// tern as a NIXL backend: messages between engines (first contact,
// notifications, liveness, goodbye) and the notifications NIXL reads.
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
#include "tern_backend_int.h"

#include <cstring>

using namespace ternNixl;

namespace {

// A notification waiting for its transfer's immediates.
struct Expect {
    struct tern_req req = {};
    nixlTernEngine *eng = nullptr;
    std::string from, msg;
};

// The card a HELLO or a PING carries (u16 length, card), or false.
bool
cardIn(const uint8_t *q, size_t left, std::string &card) {
    if (left < 2 || get16(q) == 0 || get16(q) > left - 2)
        return false;
    card.assign(reinterpret_cast<const char *>(q + 2), get16(q));
    return true;
}

} // namespace

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

// A message from another engine (or this one): its header checked, then
// handed to the step for its type.
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
        handleHello(from, q, left);
    } else if (type == kAck) {
        handleAck(from, q, left);
    } else if (type == kNotif) {
        handleNotif(std::move(from), q, left);
    } else if (type == kPing) {
        handlePing(from, q, left);
    } else if (type == kPong) {
        // heard: that is all
    } else if (type == kBye) {
        handleBye(from, q, left);
    } else {
        NIXL_ERROR << "TERN: dropped a message of unknown type " << unsigned(type) << " from "
                   << from;
    }
}

// HELLO: the sender's card, and the slot its immediates carry (the one
// it had, else a free one) in our ACK.
void
nixlTernEngine::handleHello(const std::string &from, const uint8_t *q, size_t left) {
    std::string card;
    if (!cardIn(q, left, card)) {
        NIXL_ERROR << "TERN: dropped a HELLO from " << from << ": bad card length";
        return;
    }
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
}

// ACK: our slot at the sender; the transfers that waited for it start
// (or fail, when it had none free).
void
nixlTernEngine::handleAck(const std::string &from, const uint8_t *q, size_t left) {
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
}

// NOTIF: delivered now (count 0), or once tern has counted the
// transfer's immediates, which must be of the slot we gave the sender.
void
nixlTernEngine::handleNotif(std::string &&from, const uint8_t *q, size_t left) {
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
        NIXL_ERROR << "TERN: notification from " << e->from << " dropped: " << tern_strerror(rc);
        delete e;
    }
}

// PING: answered with a PONG (its card makes us a peer of it first).
void
nixlTernEngine::handlePing(const std::string &from, const uint8_t *q, size_t left) {
    std::string card;
    if (!cardIn(q, left, card)) {
        NIXL_ERROR << "TERN: dropped a PING from " << from << ": bad card length";
        return;
    }
    if (connSet(from, card, false) == 0)
        send(conn(from), header(kPong, localAgent), nullptr);
}

// BYE: the sender's engine is closing. Only the card we know for that
// name ends it: a BYE naming an agent is not enough.
void
nixlTernEngine::handleBye(const std::string &from, const uint8_t *q, size_t left) {
    nixlTernConn *c = conn(from);
    bool same = left >= 2 && get16(q) == left - 2 && c != nullptr && c->card.size() == left - 2 &&
                std::memcmp(c->card.data(), q + 2, left - 2) == 0;
    if (c != nullptr && !same)
        NIXL_ERROR << "TERN: dropped a BYE naming agent " << from << " with another card";
    if (same && from != localAgent) {
        NIXL_DEBUG << "TERN: agent " << from << " closed its engine";
        c->gone = true;
        connDrop(c, -ECONNRESET);
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
