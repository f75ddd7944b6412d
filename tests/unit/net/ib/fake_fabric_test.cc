// The fake fabric across processes (FakeVerbs::joinFabric): two forked
// processes, each with its own device, exchange RDMA writes with immediate
// data, sends and reads; a sender's completion waits for the target to poll;
// a killed peer ends sends in retry-exceeded. The test process forks before
// any thread exists and only referees through pipes (clean under TSan).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstring>
#include <string>
#include <vector>

#include "../../../common/pipe_io.h"
#include "fake_verbs.h"

namespace uniccl {
namespace ib {
namespace {

using fake::FakeVerbs;
using testpipe::readUntil;
using testpipe::writeAll;
using Clock = std::chrono::steady_clock;

// A child's failure: printed, and its exit status says so.
[[noreturn]] void die(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "child %d: ", (int)getpid());
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  _exit(1);
}

#define OK(call) do { int e_ = (call); if (e_ != 0) die("%s -> %d", #call, e_); } while (0)

constexpr size_t kRegion = 16384;  // [0, 8 KiB): written by the peer; [8 KiB, 16 KiB): read by it
constexpr uint32_t kWriteBytes = 4096, kSendBytes = 1024, kReadBytes = 256;

// What one side tells the other (through the parent).
struct Peer {
  uint32_t qpn = 0;
  Gid gid{};
  uint16_t lid = 0;
  uint64_t addr = 0;
  uint32_t rkey = 0;
};

// One process's end: a device, a QP connected to the peer's, a registered region.
struct Host {
  FakeVerbs fv;
  bool roce = true;
  DeviceList* list = nullptr;
  Context* ctx = nullptr;
  Pd* pd = nullptr;
  Cq* cq = nullptr;
  Qp* qp = nullptr;
  Mr* mr = nullptr;
  MrKeys keys;
  std::vector<uint8_t> region = std::vector<uint8_t>(kRegion);
  std::vector<uint8_t> recvBuf = std::vector<uint8_t>(kSendBytes);
  Mr* recvMr = nullptr;
  MrKeys recvKeys;
  Peer me, peer;
  int fromParent = -1, toParent = -1;

  void setUp(int side, bool useRoce, const std::string& token) {
    roce = useRoce;
    fv.addDevice(roce ? FakeVerbs::roceHost("mlx5_0", (uint8_t)(side + 1))
                      : FakeVerbs::ibDevice("mlx5_0", (uint16_t)(side + 1)));
    std::string err;
    if (!fv.joinFabric(token, &err)) die("joinFabric: %s", err.c_str());
    int n = 0;
    OK(fv.getDeviceList(&list, &n));
    OK(fv.openDevice(list, 0, &ctx));
    OK(fv.allocPd(ctx, &pd));
    OK(fv.createCq(ctx, 64, &cq));
    QpInitAttr ia;
    ia.sendCq = ia.recvCq = cq;
    ia.maxSendWr = ia.maxRecvWr = 8;
    OK(fv.createQp(pd, ia, &qp, &me.qpn));
    QpAttr a;
    a.state = QpState::kInit;
    a.portNum = 1;
    a.accessFlags = kAccessRemoteWrite | kAccessRemoteRead;
    OK(fv.modifyQp(qp, a, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags));
    for (size_t i = 0; i < kRegion; i++) region[i] = (uint8_t)(i * 7 + side * 101);
    OK(fv.regMr(pd, region.data(), kRegion, kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead, &mr, &keys));
    OK(fv.regMr(pd, recvBuf.data(), kSendBytes, kAccessLocalWrite, &recvMr, &recvKeys));
    OK(fv.queryGid(ctx, 1, roce ? 3 : 0, &me.gid));  // roceHost: index 3 is ::ffff:10.0.0.host, RoCE v2
    PortAttr pa;
    OK(fv.queryPort(ctx, 1, &pa));
    me.lid = pa.lid;
    me.addr = (uint64_t)(uintptr_t)region.data();
    me.rkey = keys.rkey;
    if (!writeAll(toParent, &me, sizeof(me))) die("cannot write to the parent");
    if (readUntil(fromParent, &peer, sizeof(peer), Clock::now() + std::chrono::seconds(10)) != sizeof(peer))
      die("no peer info from the parent");
    QpAttr r;
    r.state = QpState::kRtr;
    r.pathMtu = 5;
    r.destQpn = peer.qpn;
    r.maxDestRdAtomic = 1;
    r.minRnrTimer = 12;
    r.ah.portNum = 1;
    if (roce) {
      r.ah.isGlobal = true;
      r.ah.dgid = peer.gid;
      r.ah.sgidIndex = 3;
      r.ah.hopLimit = 64;
    } else {
      r.ah.dlid = peer.lid;
    }
    OK(fv.modifyQp(qp, r, kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic |
                              kQpMinRnrTimer));
    QpAttr t;
    t.state = QpState::kRts;
    t.timeout = 14;
    t.retryCnt = 7;
    t.rnrRetry = 7;
    OK(fv.modifyQp(qp, t, kQpState | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpSqPsn | kQpMaxQpRdAtomic));
  }

  void postReceives() {
    RecvWr forImm;
    forImm.wrId = 100;
    OK(fv.postRecv(qp, forImm));
    RecvWr forSend;
    forSend.wrId = 101;
    forSend.addr = (uint64_t)(uintptr_t)recvBuf.data();
    forSend.length = kSendBytes;
    forSend.lkey = recvKeys.lkey;
    forSend.numSge = 1;
    OK(fv.postRecv(qp, forSend));
  }

  void post(uint64_t id, WrOpcode op, size_t localOff, uint32_t len, uint64_t remoteOff, uint32_t imm = 0) {
    SendWr wr;
    wr.wrId = id;
    wr.opcode = op;
    wr.localAddr = (uint64_t)(uintptr_t)(region.data() + localOff);
    wr.length = len;
    wr.lkey = keys.lkey;
    wr.numSge = 1;
    wr.remoteAddr = peer.addr + remoteOff;
    wr.rkey = peer.rkey;
    wr.immData = imm;
    OK(fv.postSend(qp, wr));
  }

  // Polls until `n` completions (or the deadline); returns them.
  std::vector<Wc> poll(size_t n, double seconds) {
    std::vector<Wc> got;
    auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    while (got.size() < n && Clock::now() < deadline) {
      Wc wc[8];
      int k = fv.pollCq(cq, 8, wc);
      if (k < 0) die("pollCq failed");
      got.insert(got.end(), wc, wc + k);
      if (k == 0) usleep(200);
    }
    return got;
  }

  // Keeps polling (landing what the peer sends) until the parent says `c`.
  void pollUntilParent(char c) {
    auto deadline = Clock::now() + std::chrono::seconds(10);
    for (;;) {
      Wc wc[8];
      if (fv.pollCq(cq, 8, wc) != 0) die("an unexpected completion while landing the peer's operations");
      char got = 0;
      if (readUntil(fromParent, &got, 1, Clock::now() + std::chrono::milliseconds(1)) == 1) {
        if (got != c) die("expected '%c' from the parent, got '%c'", c, got);
        return;
      }
      if (Clock::now() > deadline) die("no '%c' from the parent", c);
    }
  }

  void tearDown() {
    OK(fv.destroyQp(qp));
    OK(fv.destroyCq(cq));
    OK(fv.deregMr(mr));
    OK(fv.deregMr(recvMr));
    OK(fv.deallocPd(pd));
    OK(fv.closeDevice(ctx));
    fv.freeDeviceList(list);
    if (fv.liveObjects() != 0) die("%d verbs objects left", fv.liveObjects());
    for (const std::string& v : fv.violations()) die("verbs misuse: %s", v.c_str());
  }
};

const Wc* find(const std::vector<Wc>& wcs, uint64_t id) {
  for (const Wc& w : wcs)
    if (w.wrId == id) return &w;
  return nullptr;
}

void expectPattern(const uint8_t* p, size_t n, size_t from, int side, const char* what) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != (uint8_t)((from + i) * 7 + side * 101)) die("%s: byte %zu differs", what, i);
}

// Forks one process per side; relays each side's Peer to the other and then
// single bytes both ways (the sides' pacing). Returns the children's status.
struct Pair {
  pid_t pid[2] = {-1, -1};
  int from[2] = {-1, -1}, to[2] = {-1, -1};
  template <typename Body>
  void start(Body body) {
    fflush(stdout);
    fflush(stderr);
    for (int side = 0; side < 2; side++) {
      int up[2], down[2];
      ASSERT_EQ(pipe(up), 0);
      ASSERT_EQ(pipe(down), 0);
      pid[side] = fork();
      ASSERT_GE(pid[side], 0);
      if (pid[side] == 0) {
        close(up[0]);
        close(down[1]);
        alarm(30);  // a stuck child fails instead of hanging the test
        body(side, down[0], up[1]);
        _exit(0);
      }
      close(up[1]);
      close(down[0]);
      from[side] = up[0];
      to[side] = down[1];
    }
    Peer p[2];
    for (int side = 0; side < 2; side++)
      ASSERT_EQ(readUntil(from[side], &p[side], sizeof(Peer), Clock::now() + std::chrono::seconds(10)),
                sizeof(Peer));
    for (int side = 0; side < 2; side++) ASSERT_TRUE(writeAll(to[side], &p[1 - side], sizeof(Peer)));
  }
  // Waits for byte `c` from `side`.
  bool hear(int side, char c) {
    char got = 0;
    return readUntil(from[side], &got, 1, Clock::now() + std::chrono::seconds(10)) == 1 && got == c;
  }
  bool tell(int side, char c) { return writeAll(to[side], &c, 1); }
  int wait(int side) {
    int status = 0;
    waitpid(pid[side], &status, 0);
    pid[side] = -1;
    return status;
  }
  ~Pair() {
    for (int side = 0; side < 2; side++) {
      if (pid[side] > 0) {
        kill(pid[side], SIGKILL);
        waitpid(pid[side], nullptr, 0);
      }
      if (from[side] >= 0) close(from[side]);
      if (to[side] >= 0) close(to[side]);
    }
  }
};

void childSay(int toParent, char c) {
  if (!writeAll(toParent, &c, 1)) die("cannot write to the parent");
}
void childHear(int fromParent, char c) {
  char got = 0;
  if (readUntil(fromParent, &got, 1, Clock::now() + std::chrono::seconds(10)) != 1 || got != c)
    die("expected '%c' from the parent", c);
}

std::string jobToken(const char* test) { return std::to_string(getpid()) + "-" + test; }

// Side 0 writes (with immediate data), sends and reads towards side 1, then
// side 1 does the same towards side 0. A sender's completions come only once
// the target process has polled: side 0 first polls 0.2 s while side 1 waits.
TEST(FakeFabricAcrossProcesses, WritesWithImmediateSendsAndReads) {
  const std::string token = jobToken("data");
  Pair pair;
  pair.start([&](int side, int fromParent, int toParent) {
    Host h;
    h.fromParent = fromParent;
    h.toParent = toParent;
    h.setUp(side, true, token);
    h.postReceives();
    childSay(toParent, 'r');      // receives posted
    for (int turn = 0; turn < 2; turn++) {
      if (turn == side) {
        childHear(fromParent, 'g');
        // From [4 KiB, 8 KiB): the peer writes only [0, 4 KiB) of ours.
        h.post(1, WrOpcode::kRdmaWriteWithImm, 4096, kWriteBytes, 0, 0xabc0u + (uint32_t)side);
        h.post(2, WrOpcode::kSend, 4096, kSendBytes, 0);
        h.post(3, WrOpcode::kRdmaRead, 0, kReadBytes, 8192);  // into our [0, 256): the peer's bytes from 8 KiB
        std::vector<Wc> early = h.poll(1, 0.2);
        if (!early.empty()) die("a completion (wr %llu) before the target polled", (unsigned long long)early[0].wrId);
        childSay(toParent, 'p');  // posted: the target may poll now
        std::vector<Wc> done = h.poll(3, 10);
        for (uint64_t id : {1, 2, 3}) {
          const Wc* w = find(done, id);
          if (w == nullptr || w->status != kWcSuccess) die("send WR %llu: %s", (unsigned long long)id,
                                                           w ? h.fv.wcStatusString(w->status) : "no completion");
        }
        expectPattern(h.region.data(), kReadBytes, 8192, 1 - side, "RDMA read");
        childSay(toParent, 'd');
      } else {
        childHear(fromParent, 'p');
        std::vector<Wc> got = h.poll(2, 10);
        const Wc* imm = find(got, 100);
        const Wc* recv = find(got, 101);
        if (imm == nullptr || imm->status != kWcSuccess || imm->opcode != WcOpcode::kRecvRdmaWithImm ||
            !imm->hasImm || imm->immData != 0xabc0u + (uint32_t)(1 - side) || imm->byteLen != kWriteBytes)
          die("no RDMA write with immediate 0x%x of %u bytes", 0xabc0u + (1 - side), kWriteBytes);
        if (recv == nullptr || recv->status != kWcSuccess || recv->opcode != WcOpcode::kRecv ||
            recv->byteLen != kSendBytes)
          die("no send of %u bytes", kSendBytes);
        expectPattern(h.region.data(), kWriteBytes, 4096, 1 - side, "RDMA write");
        expectPattern(h.recvBuf.data(), kSendBytes, 4096, 1 - side, "send");
        childSay(toParent, 'l');
        h.pollUntilParent('D');  // lands the peer's read, whenever it comes
      }
    }
    // A write outside the target's registration fails at the target's check.
    if (side == 1) {
      SendWr wr;
      wr.wrId = 9;
      wr.opcode = WrOpcode::kRdmaWrite;
      wr.localAddr = (uint64_t)(uintptr_t)h.region.data();
      wr.length = 64;
      wr.lkey = h.keys.lkey;
      wr.numSge = 1;
      wr.remoteAddr = h.peer.addr + kRegion - 32;
      wr.rkey = h.peer.rkey;
      OK(h.fv.postSend(h.qp, wr));
      childSay(toParent, 'b');
      std::vector<Wc> got = h.poll(1, 10);
      if (got.size() != 1 || got[0].status != kWcRemAccessErr) die("a write past the region did not fail");
      childSay(toParent, 'B');
    } else {
      childHear(fromParent, 'b');
      h.pollUntilParent('B');  // lands it: the failure is the sender's, no completion here
    }
    h.tearDown();
  });
  if (HasFatalFailure()) return;
  ASSERT_TRUE(pair.hear(0, 'r') && pair.hear(1, 'r'));
  for (int turn = 0; turn < 2; turn++) {
    ASSERT_TRUE(pair.tell(turn, 'g'));
    ASSERT_TRUE(pair.hear(turn, 'p')) << "side " << turn << " did not post";
    ASSERT_TRUE(pair.tell(1 - turn, 'p'));
    ASSERT_TRUE(pair.hear(1 - turn, 'l')) << "side " << 1 - turn << " did not receive";
    ASSERT_TRUE(pair.hear(turn, 'd')) << "side " << turn << " did not complete";
    ASSERT_TRUE(pair.tell(1 - turn, 'D'));
  }
  ASSERT_TRUE(pair.hear(1, 'b'));
  ASSERT_TRUE(pair.tell(0, 'b'));
  ASSERT_TRUE(pair.hear(1, 'B')) << "side 1's bad write did not fail";
  ASSERT_TRUE(pair.tell(0, 'B'));
  for (int side = 0; side < 2; side++) {
    int status = pair.wait(side);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "side " << side << " status 0x" << std::hex << status;
  }
}

// InfiniBand LIDs this time. Side 1 is killed with a write of side 0's in
// flight (side 1 never polled it): that write completes with retry-exceeded
// once the QP's retry timer ran out, a later send at once, and the QP is in
// error; side 0's posted receives stay until it moves the QP to the error
// state (flushed).
TEST(FakeFabricAcrossProcesses, KilledPeerEndsSendsWithRetryExceeded) {
  const std::string token = jobToken("kill");
  Pair pair;
  pair.start([&](int side, int fromParent, int toParent) {
    Host h;
    h.fromParent = fromParent;
    h.toParent = toParent;
    h.setUp(side, false, token);
    h.postReceives();
    childSay(toParent, 'r');
    if (side == 1) {
      for (;;) pause();  // never polls: the write stays unanswered until the kill
    }
    childHear(fromParent, 'g');
    h.post(1, WrOpcode::kRdmaWriteWithImm, 0, kWriteBytes, 0, 7);
    if (!h.poll(1, 0.1).empty()) die("a completion before the target polled");
    childSay(toParent, 'p');
    childHear(fromParent, 'k');  // side 1 is dead
    const auto killed = Clock::now();
    std::vector<Wc> got = h.poll(1, 5);
    if (got.size() != 1 || got[0].wrId != 1 || got[0].status != kWcRetryExcErr)
      die("the write in flight to the dead peer did not end in retry-exceeded");
    // Not before the retry timer: RTS timeout 14 (67 ms per attempt) x 8 attempts = 0.54 s.
    const double waited = std::chrono::duration<double>(Clock::now() - killed).count();
    if (waited < 0.5) die("retry-exceeded %.3f s after the kill, before the QP's retry timer ran out", waited);
    h.post(2, WrOpcode::kSend, 0, 16, 0);
    got = h.poll(1, 5);
    if (got.size() != 1 || got[0].wrId != 2 || got[0].status != kWcRetryExcErr)
      die("a send posted after the peer died did not end in retry-exceeded");
    if (!h.poll(1, 0.1).empty()) die("the receives completed before the QP was moved to the error state");
    QpAttr e;
    e.state = QpState::kErr;
    OK(h.fv.modifyQp(h.qp, e, kQpState));
    got = h.poll(2, 5);
    if (got.size() != 2 || !find(got, 100) || !find(got, 101) || got[0].status != kWcWrFlushErr ||
        got[1].status != kWcWrFlushErr)
      die("the posted receives were not flushed when the QP entered the error state");
    childSay(toParent, 'e');
    h.tearDown();
  });
  if (HasFatalFailure()) return;
  ASSERT_TRUE(pair.hear(0, 'r') && pair.hear(1, 'r'));
  ASSERT_TRUE(pair.tell(0, 'g'));
  ASSERT_TRUE(pair.hear(0, 'p'));
  ASSERT_EQ(kill(pair.pid[1], SIGKILL), 0);
  int status = pair.wait(1);
  ASSERT_TRUE(WIFSIGNALED(status));
  ASSERT_TRUE(pair.tell(0, 'k'));
  EXPECT_TRUE(pair.hear(0, 'e'));
  status = pair.wait(0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "side 0 status 0x" << std::hex << status;
}

}  // namespace
}  // namespace ib
}  // namespace uniccl
