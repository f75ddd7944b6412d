// Test harness for the proxy: one side of a network connection (conn FIFO,
// staging slots, registration, net comm) and the CPU threads that play the
// GPU kernel on each side (producer on the send side, consumer on the recv
// side). Data is a deterministic pseudo-random function of (seed, step), so
// both processes of the fork test can check it without sharing memory.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "common/proxy/proxy.h"

namespace uniccl::test {

// Blocks (spin, yield, then short sleeps) until `op` is finished; returns
// op->result. The library never waits on an op (its completion callback
// reports it); the tests do. The caller must have a way out: an abort flag
// on the op's connection.
inline ncclResult_t proxyOpWait(const ProxyOp* op) {
  if (op == nullptr || op->status.load(std::memory_order_acquire) == kProxyOpIdle) return ncclInvalidUsage;
  for (int i = 0; !op->finished(); i++) {
    if (i < 2000) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return op->result;
}

inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
inline int64_t stepBytesOf(uint64_t seed, uint64_t step, int64_t maxBytes) {
  return 1 + static_cast<int64_t>(mix(seed * 7919 + step) % static_cast<uint64_t>(maxBytes));
}
inline uint8_t byteOf(uint64_t seed, uint64_t step, int64_t i) {
  return static_cast<uint8_t>(mix((seed << 40) ^ (step << 20) ^ static_cast<uint64_t>(i / 8)) >> (8 * (i % 8)));
}

// One side of a network connection as the transport setup would build it.
struct Endpoint {
  const ncclNet_v8_t* net = nullptr;
  bool isSend = false;
  void* comm = nullptr;
  void* mh = nullptr;
  ConnFifoBuffer fifo;
  std::vector<char> staging;
  uint32_t abortFlag = 0;
  ProxyConnection conn;

  ncclResult_t setup(const ncclNet_v8_t* n, void* netComm, bool send, int64_t stepBytes) {
    net = n;
    comm = netComm;
    isSend = send;
    if (ncclResult_t r = fifo.allocateHost(); r != ncclSuccess) return r;
    staging.assign(static_cast<size_t>(stepBytes) * kConnSteps, 0);
    if (ncclResult_t r = net->regMr(comm, staging.data(), staging.size(), NCCL_PTR_HOST, &mh); r != ncclSuccess)
      return r;
    conn = ProxyConnection{};
    conn.net = net;
    conn.netComm = comm;
    conn.mhandle = mh;
    conn.fifo = fifo.host();
    conn.staging = staging.data();
    conn.stepBytes = stepBytes;
    conn.abortFlag = &abortFlag;
    return ncclSuccess;
  }
  void close() {
    if (comm == nullptr) return;
    if (mh != nullptr) net->deregMr(comm, mh);
    if (isSend) net->closeSend(comm); else net->closeRecv(comm);
    comm = nullptr;
    mh = nullptr;
  }
  ~Endpoint() { close(); }
};

// Loops the non-blocking connect/accept until both sides have their comm.
inline ncclResult_t connectLoop(const ncclNet_v8_t* net, void* handle, void** sendComm) {
  ncclNetDeviceHandle_v8_t* dev = nullptr;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  *sendComm = nullptr;
  while (*sendComm == nullptr) {
    if (ncclResult_t r = net->connect(0, handle, sendComm, &dev); r != ncclSuccess) return r;
    if (std::chrono::steady_clock::now() > deadline) return ncclSystemError;
    if (*sendComm == nullptr) std::this_thread::yield();
  }
  return ncclSuccess;
}
inline ncclResult_t acceptLoop(const ncclNet_v8_t* net, void* listenComm, void** recvComm) {
  ncclNetDeviceHandle_v8_t* dev = nullptr;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  *recvComm = nullptr;
  while (*recvComm == nullptr) {
    if (ncclResult_t r = net->accept(listenComm, recvComm, &dev); r != ncclSuccess) return r;
    if (std::chrono::steady_clock::now() > deadline) return ncclSystemError;
    if (*recvComm == nullptr) std::this_thread::yield();
  }
  return ncclSuccess;
}

struct ProducerResult {
  uint64_t produced = 0;
  uint64_t waits = 0;          // times the FIFO was full
  uint64_t overwrites = 0;     // slots found not free when allowed to fill (must stay 0)
  uint64_t maxInFlight = 0;    // max tail - head seen (must stay <= kConnSteps)
  bool timedOut = false;
};

// The GPU's send side: fill a slot with (seed, step) data, publish it.
inline ProducerResult produce(Endpoint& e, uint64_t seed, uint64_t nsteps, const volatile uint32_t* stop) {
  ProducerResult res;
  ConnFifo* f = e.fifo.host();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  for (uint64_t step = 0; step < nsteps; step++) {
    bool waited = false;
    while (!connFifoCanFill(f, step)) {
      bool stopped = __atomic_load_n(stop, __ATOMIC_ACQUIRE) != 0;
      if (stopped || std::chrono::steady_clock::now() > deadline) {
        res.timedOut = !stopped;
        return res;
      }
      waited = true;
      std::this_thread::yield();
    }
    res.waits += waited;
    int slot = static_cast<int>(step % kConnSteps);
    if (connLoadSize(f->slots[slot]) != -1) res.overwrites++;
    int64_t n = stepBytesOf(seed, step, e.conn.stepBytes);
    char* p = e.staging.data() + slot * e.conn.stepBytes;
    for (int64_t i = 0; i < n; i++) p[i] = static_cast<char>(byteOf(seed, step, i));
    connFifoPublish(f, step, n);
    uint64_t inFlight = step + 1 - connLoadAcquire(&f->head);
    if (inFlight > res.maxInFlight) res.maxInFlight = inFlight;
    res.produced++;
  }
  return res;
}

struct ConsumerResult {
  uint64_t consumed = 0;
  uint64_t badSteps = 0;  // wrong size or wrong bytes
  bool timedOut = false;
};

// The GPU's receive side: wait for a published slot, check it, free it.
inline ConsumerResult consume(Endpoint& e, uint64_t seed, uint64_t nsteps, int delayUs,
                              const volatile uint32_t* stop) {
  ConsumerResult res;
  ConnFifo* f = e.fifo.host();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  for (uint64_t step = 0; step < nsteps; step++) {
    while (!connFifoReady(f, step)) {
      bool stopped = __atomic_load_n(stop, __ATOMIC_ACQUIRE) != 0;
      if (stopped || std::chrono::steady_clock::now() > deadline) {
        res.timedOut = !stopped;
        return res;
      }
      std::this_thread::yield();
    }
    int slot = static_cast<int>(step % kConnSteps);
    int64_t n = connLoadSize(f->slots[slot]);
    const char* p = e.staging.data() + slot * e.conn.stepBytes;
    bool ok = n == stepBytesOf(seed, step, e.conn.stepBytes);
    for (int64_t i = 0; ok && i < n; i++) ok = static_cast<uint8_t>(p[i]) == byteOf(seed, step, i);
    res.badSteps += !ok;
    if (delayUs > 0) std::this_thread::sleep_for(std::chrono::microseconds(delayUs));
    connFifoFree(f, step);
    res.consumed++;
  }
  return res;
}

}  // namespace uniccl::test
