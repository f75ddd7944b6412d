// Direct receives (core/direct_recv.h, dev_types.h p2pExchanges) on the CPU
// emulator.
//
//   --case=ranks      ncclCommInitAll over 2 and 3 emulated GPUs (P2P, one
//                     process): each rank sends to every other rank in one
//                     group, rounds of messages around the threshold meson
//                     sets (UNICCL_P2P_DIRECT_MIN_BYTES), odd sizes and
//                     unaligned offsets, into ncclCommRegister'ed
//                     ncclMemAlloc buffers (direct) and unregistered ones
//                     (slots) by turns on the same connections, on fresh
//                     random data checked against the host. Every registered
//                     receive at or above the threshold must be planned
//                     direct (DirectRecvs::p2pPlanned counts them exactly),
//                     none below it or unregistered. On 2 ranks also: sends
//                     in one group and their receives in the next (the
//                     senders must not wait for the offers), and a late
//                     receiver (the sender starts through the slots and
//                     takes the offer on the way).
//   --case=collectives  AllGather, Broadcast and AllReduce into registered outputs on 2
//                     and 3 ranks (runCopyCollectives).
//   --case=service    the import service across processes: a forked child
//                     serves (core/import_service.h); the parent has it map
//                     a VMM allocation (checked by the child reading it
//                     through its mapping), asks twice (one shared mapping),
//                     releases twice (none left); ordinary device memory,
//                     whose IPC handle the emulator cannot open in another
//                     process, is refused without harm; once the child is
//                     gone a request fails within seconds. The planner's
//                     imports: a first receive goes through the slots and
//                     queues the child's mapping, a later plan gets its
//                     address (waiting for the importer, not for time).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/core/comm.h"
#include "common/core/direct_recv.h"
#include "common/core/import_service.h"
#include "common/gpu.h"
#include "common/memory/mem_alloc.h"
#include "emu_gpu.h"
#ifndef UNICCL_SERVICE_ONLY
#include "emu_runtime.h"
#endif
#include "nccl.h"
#include "pipe_io.h"
#include "test_check.h"

using namespace uniccl;

namespace {

#ifndef UNICCL_SERVICE_ONLY
uint64_t minDirectBytes() {
  const char* v = getenv("UNICCL_P2P_DIRECT_MIN_BYTES");
  return v ? strtoull(v, nullptr, 0) : (1u << 20);
}

struct RankBufs {
  void* send = nullptr;   // [peer] slices of maxBytes
  void* regRecv = nullptr;     // registered
  void* plainRecv = nullptr;   // not registered (ordinary device memory)
  void* regHandle = nullptr;
};

bool runRanks(int n) {
  const uint64_t minBytes = minDirectBytes();
  const size_t sizes[] = {minBytes, minBytes - 1, minBytes + 13, 3 * minBytes + 5, 1, 100000};
  size_t maxBytes = 0;
  for (size_t s : sizes) maxBytes = std::max(maxBytes, s);
  const size_t stride = maxBytes + 64;   // per-peer slice (room for the unaligned offset)
  std::vector<ncclComm_t> comms(n);
  std::vector<int> devs(n);
  for (int i = 0; i < n; i++) devs[i] = i;
  NCCL_OK(ncclCommInitAll(comms.data(), n, devs.data()));
  std::vector<RankBufs> b(n);
  for (int r = 0; r < n; r++) {
    NCCL_OK(gpu::setDevice(r));
    NCCL_OK(ncclMemAlloc(&b[r].send, stride * n));
    NCCL_OK(ncclMemAlloc(&b[r].regRecv, stride * n));
    NCCL_OK(gpu::deviceAlloc(&b[r].plainRecv, stride * n));
    NCCL_OK(ncclCommRegister(comms[r], b[r].regRecv, stride * n, &b[r].regHandle));
  }
  std::mt19937_64 rng(0x5eed0000u + n);
  uint64_t expectDirect[8] = {};
  int rounds = 0;
  for (int it = 0; it < 2; it++) {
    for (size_t bytes : sizes) {
      for (int reg = 1; reg >= 0; reg--) {
        const size_t off = (it == 1) ? 3 : 0;   // unaligned destinations and sources in the second pass
        std::vector<std::vector<uint8_t>> host(n, std::vector<uint8_t>(stride * n));
        for (int r = 0; r < n; r++) {
          for (auto& x : host[r]) x = (uint8_t)rng();
          NCCL_OK(gpu::memcpy(b[r].send, host[r].data(), stride * n));
          NCCL_OK(gpu::memset(reg ? b[r].regRecv : b[r].plainRecv, 0, stride * n));
        }
        NCCL_OK(ncclGroupStart());
        for (int r = 0; r < n; r++) {
          uint8_t* rb = static_cast<uint8_t*>(reg ? b[r].regRecv : b[r].plainRecv);
          for (int p = 0; p < n; p++) {
            if (p == r) continue;
            NCCL_OK(ncclSend(static_cast<uint8_t*>(b[r].send) + p * stride + off, bytes, ncclUint8, p, comms[r],
                             nullptr));
            NCCL_OK(ncclRecv(rb + p * stride + off, bytes, ncclUint8, p, comms[r], nullptr));
            if (reg && bytes >= minBytes) expectDirect[r]++;
          }
        }
        NCCL_OK(ncclGroupEnd());
        rounds++;
        for (int r = 0; r < n; r++) {
          NCCL_OK(gpu::setDevice(r));
          NCCL_OK(emu::deviceSynchronize());
          std::vector<uint8_t> got(stride * n);
          NCCL_OK(gpu::memcpy(got.data(), reg ? b[r].regRecv : b[r].plainRecv, stride * n));
          for (int p = 0; p < n; p++) {
            if (p == r) continue;
            const uint8_t* want = host[p].data() + r * stride + off;
            const uint8_t* g = got.data() + p * stride + off;
            size_t bad = 0;
            for (size_t i = 0; i < bytes; i++) bad += g[i] != want[i];
            CHECK(bad == 0, "%d ranks, %zu bytes (%s, offset %zu): rank %d got %zu wrong bytes from rank %d", n,
                  bytes, reg ? "registered" : "plain", off, r, bad, p);
            // Nothing outside the message was written.
            size_t stray = 0;
            for (size_t i = 0; i < off; i++) stray += got[p * stride + i] != 0;
            for (size_t i = off + bytes; i < stride; i++) stray += got[p * stride + i] != 0;
            CHECK(stray == 0, "%d ranks, %zu bytes: %zu bytes written outside the message", n, bytes, stray);
          }
        }
      }
    }
  }
  // Rank 0 sends to rank 1 in one group and receives from it in the next,
  // rank 1 the same: the sends of the first group end without their
  // receivers (the message fits the slots), so a sender never waits for an
  // offer. Then a late receiver: rank 1's stream sleeps before a message
  // larger than the slots, so rank 0 starts through the slots and meets the
  // offer on the way (the rest in place).
  if (n == 2) {
    const size_t fits = 16 * 1024, big = 150000;   // meson: 2 channels of 8 x 8 KiB slots (64 KiB each)
    for (size_t bytes : {fits, big}) {
      std::vector<std::vector<uint8_t>> host(n, std::vector<uint8_t>(bytes));
      for (int r = 0; r < n; r++) {
        for (auto& x : host[r]) x = (uint8_t)rng();
        NCCL_OK(gpu::setDevice(r));
        NCCL_OK(gpu::memcpy(b[r].send, host[r].data(), bytes));
        NCCL_OK(gpu::memset(b[r].regRecv, 0, bytes));
      }
      if (bytes == big) {
        NCCL_OK(gpu::setDevice(1));
        NCCL_OK(emu::launchHostFunc(nullptr, [](void*) { usleep(100 * 1000); }, nullptr));
      }
      NCCL_OK(ncclGroupStart());
      for (int r = 0; r < n; r++) NCCL_OK(ncclSend(b[r].send, bytes, ncclUint8, 1 - r, comms[r], nullptr));
      if (bytes == big)
        for (int r = 0; r < n; r++) NCCL_OK(ncclRecv(b[r].regRecv, bytes, ncclUint8, 1 - r, comms[r], nullptr));
      NCCL_OK(ncclGroupEnd());
      if (bytes == fits) {
        NCCL_OK(ncclGroupStart());
        for (int r = 0; r < n; r++) NCCL_OK(ncclRecv(b[r].regRecv, bytes, ncclUint8, 1 - r, comms[r], nullptr));
        NCCL_OK(ncclGroupEnd());
      }
      for (int r = 0; r < n; r++) {
        expectDirect[r]++;
        NCCL_OK(gpu::setDevice(r));
        NCCL_OK(emu::deviceSynchronize());
        std::vector<uint8_t> got(bytes);
        NCCL_OK(gpu::memcpy(got.data(), b[r].regRecv, bytes));
        CHECK(got == host[1 - r], "%zu bytes (%s): rank %d received wrong data", bytes,
              bytes == fits ? "sends and receives in separate groups" : "late receiver", r);
      }
    }
  }
  for (int r = 0; r < n; r++) {
    CHECK(comms[r]->direct.p2pPlanned == expectDirect[r], "%d ranks: rank %d planned %llu direct receives, want %llu", n,
          r, (unsigned long long)comms[r]->direct.p2pPlanned, (unsigned long long)expectDirect[r]);
    CHECK(expectDirect[r] > 0, "the sizes include direct ones");
  }
  for (int r = 0; r < n; r++) {
    NCCL_OK(gpu::setDevice(r));
    NCCL_OK(ncclCommDeregister(comms[r], b[r].regHandle));
    ncclMemFree(b[r].send);
    ncclMemFree(b[r].regRecv);
    (void)gpu::deviceFree(b[r].plainRecv);
    NCCL_OK(ncclCommDestroy(comms[r]));
  }
  printf("%d ranks: %d groups checked, %llu direct receives on rank 0\n", n, rounds,
         (unsigned long long)expectDirect[0]);
  return true;
}

// AllGather, Broadcast and AllReduce with registered outputs
// (device/coll_ring.h, startDirect): every rank but a Broadcast's root
// offers its output to its ring predecessor, which stores each verbatim
// step there (AllReduce: its all-gather half); odd counts, in and out of
// place, sizes around the threshold; checked against the host, and every
// offer counted (DirectRecvs::collPlanned).
bool runCopyCollectives(int n) {
  const uint64_t minBytes = minDirectBytes();
  // floats per rank (the kernel filter always has f32): outputs around the threshold
  const size_t counts[] = {minBytes / 4 / n, minBytes / 4 / n - 1, 3 * minBytes / 4 / n + 7, 7, 12501};
  size_t maxCount = 0;
  for (size_t c : counts) maxCount = std::max(maxCount, c);
  std::vector<ncclComm_t> comms(n);
  std::vector<int> devs(n);
  for (int i = 0; i < n; i++) devs[i] = i;
  NCCL_OK(ncclCommInitAll(comms.data(), n, devs.data()));
  std::vector<void*> in(n), out(n), handle(n);
  for (int r = 0; r < n; r++) {
    NCCL_OK(gpu::setDevice(r));
    NCCL_OK(ncclMemAlloc(&in[r], maxCount * n * 4));
    NCCL_OK(ncclMemAlloc(&out[r], maxCount * n * 4));
    NCCL_OK(ncclCommRegister(comms[r], out[r], maxCount * n * 4, &handle[r]));
  }
  std::mt19937_64 rng(0xa11ca7u + n);
  std::vector<uint64_t> expect(n, 0);
  int checked = 0;
  for (size_t count : counts) {
    for (int inPlace = 0; inPlace < 2; inPlace++) {
      for (int coll = 0; coll < 3; coll++) {   // 0 AllGather, 1 Broadcast, 2 AllReduce (sum)
        const int root = (int)(count % n);
        // AllReduce: the same count as AllGather's output (its all-gather half is what is offered).
        const size_t inCount = coll == 2 ? count * n : count;
        const size_t outCount = coll == 1 ? count : count * n, outBytes = outCount * 4;
        std::vector<std::vector<float>> host(n, std::vector<float>(inCount));
        for (int r = 0; r < n; r++) {
          for (auto& x : host[r]) x = (float)(rng() % 1000003);
          NCCL_OK(gpu::setDevice(r));
          NCCL_OK(gpu::memset(out[r], 0, maxCount * n * 4));
          void* src = inPlace ? (coll == 0 ? static_cast<float*>(out[r]) + r * count : out[r]) : in[r];
          NCCL_OK(gpu::memcpy(src, host[r].data(), inCount * 4));
        }
        NCCL_OK(ncclGroupStart());
        for (int r = 0; r < n; r++) {
          void* src = inPlace ? (coll == 0 ? static_cast<float*>(out[r]) + r * count : out[r]) : in[r];
          if (coll == 0) NCCL_OK(ncclAllGather(src, out[r], count, ncclFloat, comms[r], nullptr));
          else if (coll == 1) NCCL_OK(ncclBroadcast(src, out[r], count, ncclFloat, root, comms[r], nullptr));
          else NCCL_OK(ncclAllReduce(src, out[r], inCount, ncclFloat, ncclSum, comms[r], nullptr));
          if (outBytes >= minBytes && !(coll == 1 && r == root)) expect[r]++;
        }
        NCCL_OK(ncclGroupEnd());
        for (int r = 0; r < n; r++) {
          NCCL_OK(gpu::setDevice(r));
          NCCL_OK(emu::deviceSynchronize());
          std::vector<float> got(outCount);
          NCCL_OK(gpu::memcpy(got.data(), out[r], outBytes));
          size_t bad = 0;
          for (size_t i = 0; i < outCount; i++) {
            float want = 0;
            if (coll == 0) want = host[i / count][i % count];
            else if (coll == 1) want = host[root][i];
            else for (int q = 0; q < n; q++) want += host[q][i];   // integers below 2^24: exact in any order
            bad += got[i] != want;
          }
          CHECK(bad == 0, "%d ranks, %s of %zu floats per rank (%s): rank %d has %zu wrong values", n,
                coll == 0 ? "AllGather" : coll == 1 ? "Broadcast" : "AllReduce", count, inPlace ? "in place" : "out of place", r, bad);
        }
        checked++;
      }
    }
  }
  for (int r = 0; r < n; r++) {
    CHECK(comms[r]->direct.collPlanned == expect[r], "%d ranks: rank %d offered %llu outputs, want %llu", n, r,
          (unsigned long long)comms[r]->direct.collPlanned, (unsigned long long)expect[r]);
    CHECK(expect[r] > 0, "the sizes include offered ones");
  }
  for (int r = 0; r < n; r++) {
    NCCL_OK(gpu::setDevice(r));
    NCCL_OK(ncclCommDeregister(comms[r], handle[r]));
    ncclMemFree(in[r]);
    ncclMemFree(out[r]);
    NCCL_OK(ncclCommDestroy(comms[r]));
  }
  printf("%d ranks: %d AllGather/Broadcast/AllReduce checked, %llu outputs offered by rank 1\n", n, checked,
         (unsigned long long)expect[1]);
  return true;
}

#endif  // UNICCL_SERVICE_ONLY

// ---- the import service across processes
constexpr uint64_t kHash = 0x1234abcd5678ef00ull;

struct Cmd {
  char op;         // 'r' read (checksum), 'c' count, 'q' quit
  uint64_t addr;
  uint64_t bytes;
};

[[noreturn]] void serviceChild(const AuthSecret& secret, int cmdFd, int ansFd) {
  if (gpu::setDevice(1) != ncclSuccess) _exit(3);
  ImportService svc;
  uint64_t ok = svc.start(secret, kHash, 1, 1) == ncclSuccess ? 1 : 0;
  testpipe::writeAll(ansFd, &ok, sizeof(ok));
  for (;;) {
    Cmd c{};
    if (testpipe::readUntil(cmdFd, &c, sizeof(c), testpipe::Clock::now() + std::chrono::seconds(60)) != sizeof(c))
      break;
    uint64_t ans = 0;
    if (c.op == 'r') {
      std::vector<uint8_t> h(c.bytes);
      // Through the service's mapping; a failed copy leaves zeros, which the parent's sum check catches.
      (void)gpu::memcpy(h.data(), reinterpret_cast<void*>(c.addr), c.bytes);
      for (uint8_t x : h) ans = ans * 131 + x;
    } else if (c.op == 'c') {
      ans = svc.imports();
    } else {
      break;
    }
    testpipe::writeAll(ansFd, &ans, sizeof(ans));
  }
  svc.stop();
  _exit(0);
}

uint64_t ask(int cmdFd, int ansFd, Cmd c) {
  uint64_t ans = ~0ull;
  testpipe::writeAll(cmdFd, &c, sizeof(c));
  testpipe::readUntil(ansFd, &ans, sizeof(ans), testpipe::Clock::now() + std::chrono::seconds(30));
  return ans;
}

// The planner's side (core/direct_recv.h, core/direct_importer.h) on a
// hand-built rank 0 whose peer, rank 1, is the forked child: the first
// receive into a registered allocation goes through the slots and queues
// the child's mapping without waiting for it; once the importer answered
// (waitDirectImports: no sleep), the next plan gets the child's address,
// through which the child reads the parent's bytes. Deregistering has the
// child unmap it, also when it comes before the importer's answer.
bool runPlannerImports(const ImportEndpoint& self, int cmdFd, int ansFd, void* vmm, size_t bytes, uint64_t sum) {
  ncclComm comm;
  comm.rank = 0;
  comm.nRanks = 2;
  comm.gpuDev = 0;
  comm.commHash = kHash;
  comm.peers.resize(2);
  for (int r = 0; r < 2; r++) {
    comm.peers[r].hostHash = 0x5a5a;
    comm.peers[r].processHash = 100 + r;   // two processes of one host
  }
  comm.transports.setReachForTesting(2, std::vector<uint8_t>(4, 1));
  comm.direct.importer = std::make_unique<DirectImporter>(self, &comm.registry);
  void* handle = nullptr;
  NCCL_OK(comm.registry.add(vmm, bytes, 0, &handle));
  CHECK(directRecvTarget(&comm, 1, vmm, bytes) == 0, "the first receive goes through the slots");
  waitDirectImports(&comm);
  CHECK(comm.direct.importer->answered() == 1, "one request, answered");
  const uintptr_t view = directRecvTarget(&comm, 1, vmm, bytes);
  CHECK(view != 0, "a later plan gets the child's address");
  CHECK(ask(cmdFd, ansFd, Cmd{'r', view, bytes}) == sum, "the child reads the parent's bytes at that address");
  CHECK(ask(cmdFd, ansFd, Cmd{'c', 0, 0}) == 1, "one mapping");
  CHECK(directRecvTarget(&comm, 1, vmm, bytes) == view && comm.direct.importer->answered() == 1,
        "asked once per allocation");
  std::vector<PeerView> views;
  NCCL_OK(comm.registry.remove(handle, &views));
  releaseDirectViews(&comm, views);
  CHECK(ask(cmdFd, ansFd, Cmd{'c', 0, 0}) == 0, "no mapping after the deregistration");

  NCCL_OK(comm.registry.add(vmm, bytes, 0, &handle));
  CHECK(directRecvTarget(&comm, 1, vmm, bytes) == 0, "a new registration: the slots again");
  views.clear();
  NCCL_OK(comm.registry.remove(handle, &views));   // before or after the answer: either way nothing stays mapped
  releaseDirectViews(&comm, views);
  waitDirectImports(&comm);
  CHECK(comm.direct.importer->answered() == 2, "the second request answered");
  CHECK(ask(cmdFd, ansFd, Cmd{'c', 0, 0}) == 0, "no mapping left by a registration that went first");
  comm.direct.importer->stop();
  return true;
}

bool runService() {
  int cmd[2], ans[2];
  REQUIRE(pipe(cmd) == 0 && pipe(ans) == 0, "%s", strerror(errno));
  AuthSecret secret{};   // the communicator's, which both processes know
  NCCL_OK(randomSecret(&secret));
  pid_t pid = fork();
  if (pid == 0) serviceChild(secret, cmd[0], ans[1]);
  uint64_t started = 0;
  testpipe::readUntil(ans[0], &started, sizeof(started), testpipe::Clock::now() + std::chrono::seconds(30));
  CHECK(started == 1, "the child's service started");

  NCCL_OK(gpu::setDevice(0));
  std::atomic<uint32_t> abortFlag{0};
  ImportEndpoint self;   // what the client side reads: secret, hash, rank, abort flag
  self.secret = secret;
  self.commHash = kHash;
  self.rank = 0;
  self.abortFlag = &abortFlag;
  const size_t bytes = 3 << 20;
  void* vmm = nullptr;
  NCCL_OK(memAlloc(&vmm, bytes));
  MemAllocInfo mi;
  CHECK(memAllocFind(vmm, &mi) && mi.vmm, "ncclMemAlloc gives VMM memory on the emulator");
  std::vector<uint8_t> h(bytes);
  std::mt19937_64 rng(7);
  uint64_t sum = 0;
  for (auto& x : h) x = (uint8_t)rng(), sum = sum * 131 + x;
  NCCL_OK(gpu::memcpy(vmm, h.data(), bytes));
  uintptr_t peerBase = 0, again = 0;
  NCCL_OK(importAtPeer(self, 1, (uintptr_t)mi.base, mi.bytes, true, &peerBase));
  CHECK(peerBase != 0, "mapped");
  CHECK(ask(cmd[1], ans[0], Cmd{'r', peerBase + ((uintptr_t)vmm - (uintptr_t)mi.base), bytes}) == sum,
        "the child reads the parent's bytes through its mapping");
  NCCL_OK(importAtPeer(self, 1, (uintptr_t)mi.base, mi.bytes, true, &again));
  CHECK(again == peerBase, "a second request shares the mapping (%#lx vs %#lx)", (unsigned long)again,
        (unsigned long)peerBase);
  CHECK(ask(cmd[1], ans[0], Cmd{'c', 0, 0}) == 1, "one mapping");
  NCCL_OK(releaseAtPeer(self, 1, (uintptr_t)mi.base));
  CHECK(ask(cmd[1], ans[0], Cmd{'c', 0, 0}) == 1, "still one mapping after the first release");
  NCCL_OK(releaseAtPeer(self, 1, (uintptr_t)mi.base));
  CHECK(ask(cmd[1], ans[0], Cmd{'c', 0, 0}) == 0, "no mapping after the second release");
  CHECK(releaseAtPeer(self, 1, (uintptr_t)mi.base) == ncclInvalidArgument, "a third release is refused");

  // Ordinary device memory travels as an IPC handle, which the emulator opens
  // only in the process that made it: the service answers an error.
  void* plain = nullptr;
  NCCL_OK(gpu::deviceAlloc(&plain, 1 << 16));
  CHECK(importAtPeer(self, 1, (uintptr_t)plain, 1 << 16, false, &again) != ncclSuccess,
        "an allocation the peer cannot map is refused");
  CHECK(ask(cmd[1], ans[0], Cmd{'c', 0, 0}) == 0, "nothing mapped by a refused request");
  if (!runPlannerImports(self, cmd[1], ans[0], vmm, bytes, sum)) return false;
  {
    // A second service under the child's name cannot listen: start fails
    // (startImportService then warns and the communicator goes on without one).
    ImportService dup;
    CHECK(dup.start(secret, kHash, 1, 0) != ncclSuccess, "a second service with the same name");
    dup.stop();
  }

  const Cmd quit{'q', 0, 0};
  testpipe::writeAll(cmd[1], &quit, sizeof(quit));
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child exit status %d", status);
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(importAtPeer(self, 1, (uintptr_t)mi.base, mi.bytes, true, &again) != ncclSuccess,
        "a request to a service that is gone fails");
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(sec < 5.0, "and does so quickly (%.2f s)", sec);
  (void)gpu::deviceFree(plain);
  NCCL_OK(memFree(vmm));
  printf("service: map, share, release, refuse, peer gone (%.2f s)\n", sec);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string which = argc > 1 ? argv[1] : "--case=ranks";
#ifndef UNICCL_SERVICE_ONLY
  if (which == "--case=ranks") {
    emu::installCpuKernelRunner();
    runRanks(2);
    runRanks(3);
  } else if (which == "--case=collectives") {
    emu::installCpuKernelRunner();
    runCopyCollectives(2);
    runCopyCollectives(3);
  } else
#endif
  if (which == "--case=service") {
    runService();
  } else {
    fprintf(stderr, "usage: emu_direct_recv_test --case=ranks|service\n");
    return 2;
  }
  printf("%s\n", testcheck::failures() ? "FAILED" : "ok");
  return testcheck::failures() ? 1 : 0;
}
