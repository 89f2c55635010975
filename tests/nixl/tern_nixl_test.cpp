// SPDX-License-Identifier: MIT
// The TERN NIXL backend's own tests, through NIXL's agent API, between two
// processes (a fork; metadata over a socketpair): what NIXL's TestTransfer
// does not try. Usage: tern_nixl_test CASE (tests/nixl/README.md)
//   notif    a WRITE's notification arrives only after all its bytes: the
//            target checks every byte when the notification comes, 200
//            rounds of 16 descriptors whose pattern changes each round
//   read     READ with a notification, data checked
//   repost   posting a transfer in flight is refused; reposting a done one
//            works, data checked
//   cancel   releasing a transfer in flight returns at once; the engine
//            then serves the next transfer
//   dereg    deregistering a source a transfer in flight uses: no crash,
//            the transfer ends, the next one works
//   kill     the target is killed mid-transfer: the transfer fails with
//            NIXL_ERR_REMOTE_DISCONNECT within KILL_LIMIT_S
//   threads  8 threads post WRITEs with notifications into one engine
#include <nixl.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

constexpr int KILL_LIMIT_S = 15;
const char *self_case;

[[noreturn]] void
die(const std::string &what) {
    fprintf(stderr, "FAIL (%s, pid %d): %s\n", self_case, getpid(), what.c_str());
    fflush(stderr);
    _exit(1);
}

void
check(nixl_status_t st, const std::string &what) {
    if (st != NIXL_SUCCESS)
        die(what + ": " + nixlEnumStrings::statusStr(st));
}

// Length-prefixed strings over the socketpair.
void
sendStr(int fd, const std::string &s) {
    uint64_t n = s.size();
    if (write(fd, &n, sizeof(n)) != sizeof(n) || (n != 0 && write(fd, s.data(), n) != ssize_t(n)))
        die("pipe write");
}

std::string
recvStr(int fd) {
    uint64_t n;
    if (read(fd, &n, sizeof(n)) != sizeof(n))
        die("pipe read (the other side is gone)");
    std::string s(n, '\0');
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, &s[got], n - got);
        if (r <= 0)
            die("pipe read");
        got += size_t(r);
    }
    return s;
}

struct Side {
    std::unique_ptr<nixlAgent> agent;
    nixlBackendH *backend = nullptr;
    std::vector<uint8_t> buf;
    std::string name;
};

Side
makeSide(const std::string &name, size_t len) {
    Side s;
    s.name = name;
    nixlAgentConfig cfg(true);
    s.agent = std::make_unique<nixlAgent>(name, cfg);
    nixl_b_params_t params;
    check(s.agent->createBackend("TERN", params, s.backend), "createBackend(TERN)");
    s.buf.assign(len, 0);
    nixl_reg_dlist_t reg(DRAM_SEG);
    reg.addDesc(nixlBlobDesc(uintptr_t(s.buf.data()), len, 0));
    check(s.agent->registerMem(reg), "registerMem");
    return s;
}

// Exchange metadata over the socketpair: both load the other's.
std::string
exchange(Side &s, int fd) {
    std::string md;
    check(s.agent->getLocalMD(md), "getLocalMD");
    sendStr(fd, md);
    std::string other;
    check(s.agent->loadRemoteMD(recvStr(fd), other), "loadRemoteMD");
    sendStr(fd, std::to_string(uintptr_t(s.buf.data())));
    return other;
}

uint8_t
pattern(size_t round, size_t i) {
    return uint8_t((i * 131 + round * 7 + (i >> 12)) & 0xff);
}

nixl_status_t
waitXfer(nixlAgent &a, nixlXferReqH *req, int limit_ms, int *ms = nullptr) {
    auto t0 = std::chrono::steady_clock::now();
    for (;;) {
        nixl_status_t st = a.getXferStatus(req);
        int el = int(std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::steady_clock::now() - t0)
                         .count());
        if (ms)
            *ms = el;
        if (st != NIXL_IN_PROG || el > limit_ms)
            return st;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
}

// Wait for a notification from @p from; returns it.
std::string
waitNotif(nixlAgent &a, const std::string &from, int limit_ms) {
    auto t0 = std::chrono::steady_clock::now();
    static nixl_notifs_t pending;
    for (;;) {
        nixl_notifs_t m;
        check(a.getNotifs(m), "getNotifs");
        for (auto &[k, v] : m)
            for (auto &x : v)
                pending[k].push_back(x);
        auto &l = pending[from];
        if (!l.empty()) {
            std::string n = l.front();
            l.erase(l.begin());
            return n;
        }
        if (std::chrono::steady_clock::now() - t0 > std::chrono::milliseconds(limit_ms))
            die("no notification from " + from + " within " + std::to_string(limit_ms) + " ms");
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
}

nixl_xfer_dlist_t
slices(const uint8_t *base, size_t n, size_t each, size_t stride) {
    nixl_xfer_dlist_t l(DRAM_SEG);
    for (size_t i = 0; i < n; i++)
        l.addDesc(nixlBasicDesc(uintptr_t(base + i * stride), each, 0));
    return l;
}

// ---- the target (child) ---------------------------------------------

int
target(const std::string &kase, int fd) {
    size_t len = kase == "kill" || kase == "cancel" || kase == "dereg" || kase == "repost"
                     ? (256u << 20)
                     : (4u << 20);
    Side s = makeSide("target", len);
    std::string init = exchange(s, fd);
    (void)recvStr(fd); // the initiator's buffer address: unused here
    for (;;) {
        std::string cmd = recvStr(fd);
        if (cmd == "exit")
            return 0;
        if (cmd.rfind("fill ", 0) == 0) { // fill ROUND: a pattern to be read
            size_t r = std::stoul(cmd.substr(5));
            for (size_t i = 0; i < s.buf.size(); i++)
                s.buf[i] = pattern(r, i);
            sendStr(fd, "ok");
        } else if (cmd.rfind("notif ", 0) == 0) {
            // notif ROUND N EACH STRIDE [OFF]: wait for the notification,
            // then every byte of the N slices from OFF must be the
            // round's pattern.
            size_t r, n, each, stride, off = 0;
            if (sscanf(cmd.c_str(), "notif %zu %zu %zu %zu %zu", &r, &n, &each, &stride, &off) < 4)
                die("bad command " + cmd);
            std::string got = waitNotif(*s.agent, init, 20000);
            if (got != "round " + std::to_string(r))
                die("notification \"" + got + "\" where round " + std::to_string(r) + " was due");
            for (size_t k = 0; k < n; k++)
                for (size_t i = 0; i < each; i++) {
                    size_t at = off + k * stride + i;
                    if (s.buf[at] != pattern(r, at))
                        die("round " + std::to_string(r) + ": byte " + std::to_string(at) + " is " +
                            std::to_string(s.buf[at]) + ", not " + std::to_string(pattern(r, at)) +
                            " when the notification came");
                }
            sendStr(fd, "ok");
        } else if (cmd == "wait-notif") {
            sendStr(fd, waitNotif(*s.agent, init, 20000));
        } else {
            die("unknown command " + cmd);
        }
    }
}

// ---- the initiator (parent) -----------------------------------------

struct Run {
    Side s;
    std::string peer;
    uintptr_t rbase = 0;
    int fd = -1;
    pid_t child = -1;
};

nixlXferReqH *
makeReq(Run &r,
        nixl_xfer_op_t op,
        size_t n,
        size_t each,
        size_t stride,
        const std::string &notif,
        size_t loff = 0) {
    nixl_opt_args_t extra;
    if (!notif.empty())
        extra.notif = notif;
    nixlXferReqH *req = nullptr;
    check(r.s.agent->createXferReq(
              op,
              slices(r.s.buf.data() + loff, n, each, stride),
              slices(reinterpret_cast<const uint8_t *>(r.rbase) + loff, n, each, stride),
              r.peer,
              req,
              &extra),
          "createXferReq");
    return req;
}

void
command(Run &r, const std::string &cmd) {
    sendStr(r.fd, cmd);
}

void
expectOk(Run &r) {
    std::string a = recvStr(r.fd);
    if (a != "ok")
        die("target answered " + a);
}

int
caseNotif(Run &r) {
    const size_t n = 16, each = 60000, stride = 65536;
    for (size_t round = 1; round <= 200; round++) {
        for (size_t i = 0; i < r.s.buf.size(); i++)
            r.s.buf[i] = pattern(round, i);
        std::string note = "round " + std::to_string(round);
        nixlXferReqH *req = makeReq(r, NIXL_WRITE, n, each, stride, note);
        // The target starts waiting before the post: the notification
        // must not come before the bytes, whenever it is looked for.
        command(r,
                "notif " + std::to_string(round) + " " + std::to_string(n) + " " +
                    std::to_string(each) + " " + std::to_string(stride));
        nixl_status_t st = r.s.agent->postXferReq(req);
        if (st != NIXL_SUCCESS && st != NIXL_IN_PROG)
            die("postXferReq: " + std::string(nixlEnumStrings::statusStr(st)));
        check(waitXfer(*r.s.agent, req, 20000), "WRITE round " + std::to_string(round));
        expectOk(r);
        check(r.s.agent->releaseXferReq(req), "releaseXferReq");
    }
    printf(
        "notif: 200 rounds of 16 x 60000 bytes: every byte was there when the notification came\n");
    return 0;
}

int
caseRead(Run &r) {
    const size_t n = 8, each = 100000, stride = 131072;
    for (size_t round = 1; round <= 20; round++) {
        command(r, "fill " + std::to_string(round));
        expectOk(r);
        std::memset(r.s.buf.data(), 0, r.s.buf.size());
        nixlXferReqH *req = makeReq(r, NIXL_READ, n, each, stride, "read " + std::to_string(round));
        nixl_status_t st = r.s.agent->postXferReq(req);
        if (st != NIXL_SUCCESS && st != NIXL_IN_PROG)
            die("postXferReq(READ)");
        check(waitXfer(*r.s.agent, req, 20000), "READ");
        for (size_t k = 0; k < n; k++)
            for (size_t i = 0; i < each; i++)
                if (r.s.buf[k * stride + i] != pattern(round, k * stride + i))
                    die("READ: byte " + std::to_string(k * stride + i) + " wrong");
        command(r, "wait-notif");
        std::string got = recvStr(r.fd);
        if (got != "read " + std::to_string(round))
            die("the target got notification \"" + got + "\"");
        check(r.s.agent->releaseXferReq(req), "releaseXferReq");
    }
    printf("read: 20 READs of 8 x 100000 bytes checked, each notification delivered\n");
    return 0;
}

int
caseRepost(Run &r) {
    // 128 MiB a transfer: in flight for milliseconds even on the
    // same-host path (one cross-memory-attach call of 32 x 4 MiB), so
    // that the repost right after the post meets it in flight. At 4 MiB
    // a transfer (32 x 128 KiB), on an idle machine, it had often ended
    // already: 10 of 20 runs over tcp met no transfer in flight.
    const size_t n = 32, each = 4u << 20, stride = 4u << 20;
    int refused = 0;
    for (size_t round = 1; round <= 3; round++) {
        for (size_t i = 0; i < r.s.buf.size(); i++)
            r.s.buf[i] = pattern(round, i);
        static nixlXferReqH *req = makeReq(r, NIXL_WRITE, n, each, stride, "");
        nixl_status_t st = r.s.agent->postXferReq(req);
        if (st != NIXL_SUCCESS && st != NIXL_IN_PROG)
            die("postXferReq");
        if (st == NIXL_IN_PROG) {
            // Refused while in flight; accepted only if it had ended
            // (then it is a repost of a done transfer, in flight again).
            nixl_status_t again = r.s.agent->postXferReq(req);
            if (again == NIXL_ERR_REPOST_ACTIVE)
                refused++;
            else if (again != NIXL_IN_PROG && again != NIXL_SUCCESS)
                die(std::string("reposting a transfer in flight returned ") +
                    nixlEnumStrings::statusStr(again));
        }
        check(waitXfer(*r.s.agent, req, 20000), "WRITE");
        // The target checks the bytes: a WRITE with a notification after.
        nixlXferReqH *mark = makeReq(r, NIXL_WRITE, 1, 8, 8, "round " + std::to_string(round));
        command(r,
                "notif " + std::to_string(round) + " " + std::to_string(n) + " " +
                    std::to_string(each) + " " + std::to_string(stride));
        st = r.s.agent->postXferReq(mark);
        check(waitXfer(*r.s.agent, mark, 20000), "marker WRITE");
        expectOk(r);
        r.s.agent->releaseXferReq(mark);
        if (round == 3)
            check(r.s.agent->releaseXferReq(req), "releaseXferReq");
    }
    if (refused == 0)
        die("no repost of a transfer in flight was refused (NIXL_ERR_REPOST_ACTIVE)");
    printf("repost: %d of 3 reposts in flight refused; 3 reposts of a done one checked\n", refused);
    return 0;
}

int
caseCancel(Run &r) {
    int worst = 0;
    for (int k = 0; k < 10; k++) {
        // The first 128 MiB: what these still write after their release
        // never meets the checked WRITE below (at 192 MiB).
        nixlXferReqH *req = makeReq(r, NIXL_WRITE, 32, 4 << 20, 4 << 20, "");
        nixl_status_t st = r.s.agent->postXferReq(req);
        if (st != NIXL_SUCCESS && st != NIXL_IN_PROG)
            die("postXferReq");
        auto t0 = std::chrono::steady_clock::now();
        check(r.s.agent->releaseXferReq(req), "releaseXferReq of a transfer in flight");
        int ms = int(std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::steady_clock::now() - t0)
                         .count());
        worst = std::max(worst, ms);
    }
    if (worst > 100)
        die("releasing a transfer in flight took " + std::to_string(worst) + " ms");
    // The engine still serves: a checked WRITE.
    const size_t off = 192u << 20;
    for (size_t i = off; i < off + (1u << 20); i++)
        r.s.buf[i] = pattern(9, i);
    nixlXferReqH *req = makeReq(r, NIXL_WRITE, 1, 1 << 20, 1 << 20, "round 9", off);
    command(r, "notif 9 1 1048576 1048576 " + std::to_string(off));
    nixl_status_t st = r.s.agent->postXferReq(req);
    if (st != NIXL_SUCCESS && st != NIXL_IN_PROG)
        die("postXferReq after cancels");
    check(waitXfer(*r.s.agent, req, 30000), "WRITE after cancels");
    expectOk(r);
    r.s.agent->releaseXferReq(req);
    printf("cancel: 10 releases of 128 MiB WRITEs in flight, the slowest %d ms; the next WRITE "
           "checked\n",
           worst);
    return 0;
}

int
caseDereg(Run &r) {
    // A second source region, deregistered while a WRITE from it runs.
    std::vector<uint8_t> src(64u << 20, 0x5a);
    nixl_reg_dlist_t reg(DRAM_SEG);
    reg.addDesc(nixlBlobDesc(uintptr_t(src.data()), src.size(), 0));
    check(r.s.agent->registerMem(reg), "registerMem");
    nixl_xfer_dlist_t l(DRAM_SEG), rm(DRAM_SEG);
    for (size_t i = 0; i < 16; i++) {
        l.addDesc(nixlBasicDesc(uintptr_t(src.data() + i * (4u << 20)), 4u << 20, 0));
        rm.addDesc(nixlBasicDesc(r.rbase + i * (4u << 20), 4u << 20, 0));
    }
    nixlXferReqH *req = nullptr;
    check(r.s.agent->createXferReq(NIXL_WRITE, l, rm, r.peer, req), "createXferReq");
    nixl_status_t st = r.s.agent->postXferReq(req);
    if (st != NIXL_SUCCESS && st != NIXL_IN_PROG)
        die("postXferReq");
    check(r.s.agent->deregisterMem(reg), "deregisterMem while in use");
    int ms = 0;
    st = waitXfer(*r.s.agent, req, 30000, &ms);
    nixl_status_t ended = st;
    if (st == NIXL_IN_PROG)
        die("the WRITE never ended after its source was deregistered");
    r.s.agent->releaseXferReq(req);
    // The engine still serves.
    for (size_t i = 0; i < (1u << 20); i++)
        r.s.buf[i] = pattern(4, i);
    req = makeReq(r, NIXL_WRITE, 1, 1 << 20, 1 << 20, "round 4");
    command(r, "notif 4 1 1048576 1048576");
    st = r.s.agent->postXferReq(req);
    check(waitXfer(*r.s.agent, req, 30000), "WRITE after deregistration");
    expectOk(r);
    r.s.agent->releaseXferReq(req);
    printf("dereg: the WRITE whose source was deregistered ended (%s, %d ms); the next WRITE "
           "checked\n",
           nixlEnumStrings::statusStr(ended).c_str(),
           ms);
    return 0;
}

int
caseKill(Run &r) {
    // Keep WRITEs of 256 MiB going; kill the target during one.
    nixlXferReqH *req = makeReq(r, NIXL_WRITE, 64, 4 << 20, 4 << 20, "");
    nixl_status_t st = r.s.agent->postXferReq(req);
    check(waitXfer(*r.s.agent, req, 60000), "the first WRITE");
    st = r.s.agent->postXferReq(req);
    if (st != NIXL_IN_PROG && st != NIXL_SUCCESS)
        die("postXferReq");
    kill(r.child, SIGKILL);
    waitpid(r.child, nullptr, 0);
    r.child = -1;
    auto t0 = std::chrono::steady_clock::now();
    // Keep posting until one fails: the one in flight may have finished.
    for (;;) {
        int ms = 0;
        st = waitXfer(*r.s.agent, req, KILL_LIMIT_S * 1000, &ms);
        int total = int(std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now() - t0)
                            .count());
        if (st == NIXL_IN_PROG || total > KILL_LIMIT_S * 1000)
            die("no failure " + std::to_string(total) + " ms after the target was killed");
        if (st != NIXL_SUCCESS) {
            if (st != NIXL_ERR_REMOTE_DISCONNECT)
                die(std::string("the failure was ") + nixlEnumStrings::statusStr(st) +
                    ", not NIXL_ERR_REMOTE_DISCONNECT");
            printf("kill: the transfer failed %s %d ms after the target was killed (limit %d s)\n",
                   nixlEnumStrings::statusStr(st).c_str(),
                   total,
                   KILL_LIMIT_S);
            break;
        }
        st = r.s.agent->postXferReq(req);
        if (st < 0 && st != NIXL_ERR_REMOTE_DISCONNECT)
            die(std::string("repost after the kill: ") + nixlEnumStrings::statusStr(st));
        if (st == NIXL_ERR_REMOTE_DISCONNECT) {
            printf(
                "kill: the post failed NIXL_ERR_REMOTE_DISCONNECT after the target was killed\n");
            break;
        }
    }
    r.s.agent->releaseXferReq(req);
    return 0;
}

int
caseThreads(Run &r) {
    const size_t nthreads = 8, each = 65536, per = 4; // 4 slices per thread
    std::atomic<int> failed{0};
    for (size_t round = 1; round <= 20; round++) {
        for (size_t i = 0; i < r.s.buf.size(); i++)
            r.s.buf[i] = pattern(round, i);
        std::vector<std::thread> ts;
        for (size_t t = 0; t < nthreads; t++)
            ts.emplace_back([&, t] {
                nixlXferReqH *req = makeReq(r, NIXL_WRITE, per, each, each, "", t * per * each);
                nixl_status_t st = r.s.agent->postXferReq(req);
                if ((st != NIXL_SUCCESS && st != NIXL_IN_PROG) ||
                    waitXfer(*r.s.agent, req, 20000) != NIXL_SUCCESS)
                    failed++;
                r.s.agent->releaseXferReq(req);
            });
        for (auto &t : ts)
            t.join();
        if (failed)
            die("a thread's WRITE failed");
        nixlXferReqH *mark = makeReq(r, NIXL_WRITE, 1, 8, 8, "round " + std::to_string(round));
        command(r,
                "notif " + std::to_string(round) + " 1 " + std::to_string(nthreads * per * each) +
                    " 0");
        r.s.agent->postXferReq(mark);
        check(waitXfer(*r.s.agent, mark, 20000), "marker");
        expectOk(r);
        r.s.agent->releaseXferReq(mark);
    }
    printf("threads: 20 rounds of 8 threads x 4 x 64 KiB WRITEs into one engine, checked\n");
    return 0;
}

} // namespace

int
main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr,
                "usage: %s notif|read|repost|cancel|dereg|kill|threads\n"
                "(NIXL_PLUGIN_DIR names where libplugin_TERN.so is; TERN_* pass to tern)\n",
                argv[0]);
        return 2;
    }
    std::string kase = argv[1];
    self_case = argv[1];
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        die("socketpair");
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        close(sv[0]);
        _exit(target(kase, sv[1]));
    }
    close(sv[1]);
    Run r;
    r.fd = sv[0];
    r.child = pid;
    size_t len = kase == "kill" || kase == "cancel" || kase == "dereg" || kase == "repost"
                     ? (256u << 20)
                     : (4u << 20);
    r.s = makeSide("initiator", len);
    r.peer = exchange(r.s, r.fd);
    r.rbase = uintptr_t(std::stoull(recvStr(r.fd)));
    int rc;
    if (kase == "notif")
        rc = caseNotif(r);
    else if (kase == "read")
        rc = caseRead(r);
    else if (kase == "repost")
        rc = caseRepost(r);
    else if (kase == "cancel")
        rc = caseCancel(r);
    else if (kase == "dereg")
        rc = caseDereg(r);
    else if (kase == "kill")
        rc = caseKill(r);
    else if (kase == "threads")
        rc = caseThreads(r);
    else
        die("unknown case " + kase);
    if (r.child > 0) {
        command(r, "exit");
        int status = 0;
        waitpid(r.child, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            die("the target failed (status " + std::to_string(status) + ")");
    }
    return rc;
}
