// ProxyOp and ProxyStep events from the real proxy thread: a send op and a
// receive op over the in-memory loopback net (tests/unit/proxy), CPU threads
// playing the kernels, the test plugin recording every call.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>
#include <thread>

#include "../proxy/loopback_net.h"
#include "../proxy/proxy_harness.h"
#include "common/profiler/profiler.h"
#include "test_sink.h"

using namespace uniccl;
using namespace uniccl::test;

std::vector<ProfTestCall> profilerTestCalls();   // profiler_test.cc
void profilerTestClearCalls();

namespace {

bool waitDone(const ProxyOp& op) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!op.finished())
    if (std::chrono::steady_clock::now() > deadline) return false;
    else std::this_thread::sleep_for(std::chrono::microseconds(100));
  return true;
}

}  // namespace

TEST(ProfilerProxyEvents, OpsAndStepsNestUnderTheirParentsAndAllStop) {
  setenv("NCCL_PROFILER_PLUGIN", "testprof", 1);
  unsetenv("UNICCL_TEST_PROFILER_MASK");   // the test plugin then asks for every event
  profilerTestClearCalls();
  ProfilerCommInfo info;
  info.commId = 42;
  info.commName = "proxy";
  info.nNodes = 2;
  info.nRanks = 2;
  info.rank = 0;
  auto ctx = profilerInit(info);
  ASSERT_NE(ctx, nullptr);
  int parentTag = 0;   // a stand-in for the Coll event the op belongs to
  void* parent = profilerStartCollApi(ctx.get(), nullptr, "AllReduce", 1, ncclFloat, 0, &parentTag, false);

  const ncclNet_v8_t* net = loopbackNet();
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* listen = nullptr;
  ASSERT_EQ(net->listen(0, handle, &listen), ncclSuccess);
  void* sc = nullptr;
  void* rc = nullptr;
  ASSERT_EQ(connectLoop(net, handle, &sc), ncclSuccess);
  ASSERT_EQ(acceptLoop(net, listen, &rc), ncclSuccess);
  constexpr int64_t kStep = 1024;
  constexpr uint64_t kSteps = 40;   // five wraps of the slots
  {
    Endpoint tx, rx;
    ASSERT_EQ(tx.setup(net, sc, true, kStep), ncclSuccess);
    ASSERT_EQ(rx.setup(net, rc, false, kStep), ncclSuccess);
    ProxyRef proxy;
    ASSERT_EQ(ProxyRef::acquire(&proxy), ncclSuccess);
    ProxyOp send, recv;
    for (ProxyOp* op : {&send, &recv}) {
      Endpoint& e = op == &send ? tx : rx;
      op->conn = &e.conn;
      op->kind = op == &send ? ProxyOpKind::kSend : ProxyOpKind::kRecv;
      op->tag = 1;
      op->nsteps = kSteps;
      op->prof = ctx.get();
      op->profParent = parent;
      op->profChannel = 3;
      op->profPeer = op == &send ? 1 : 0;
      ASSERT_EQ(proxy.post(op), ncclSuccess);
    }
    uint32_t stop = 0;
    ProducerResult p;
    ConsumerResult c;
    std::thread producer([&] { p = produce(tx, 9, kSteps, &stop); });
    std::thread consumer([&] { c = consume(rx, 9, kSteps, 0, &stop); });
    producer.join();
    consumer.join();
    ASSERT_TRUE(waitDone(send));
    ASSERT_TRUE(waitDone(recv));
    EXPECT_EQ(c.badSteps, 0u);
    EXPECT_EQ(send.result, ncclSuccess);
    EXPECT_EQ(recv.result, ncclSuccess);
  }
  net->closeListen(listen);
  profilerStop(ctx.get(), parent);

  // Every ProxyOp has the given parent and describes its channel and peer;
  // every ProxyStep's parent is one of the ops; every started event stopped.
  std::map<void*, ProfTestCall> started;
  std::set<void*> stopped;
  std::map<void*, std::set<int>> stepStates;
  for (const ProfTestCall& call : profilerTestCalls()) {
    if (call.op == kOpStart) started[call.handle] = call;
    if (call.op == kOpStop) stopped.insert(call.handle);
    if (call.op == kOpRecord) stepStates[call.handle].insert(call.state);
  }
  std::set<void*> ops;
  int sendOps = 0, recvOps = 0, steps = 0;
  for (auto& [h, call] : started) {
    if (call.descr.type != (uint64_t)ncclProfileProxyOp) continue;
    ops.insert(h);
    EXPECT_EQ(call.descr.parentObj, parent);
    EXPECT_EQ(call.descr.proxyOp.channelId, 3);
    EXPECT_EQ(call.descr.proxyOp.nSteps, (int)kSteps);
    (call.descr.proxyOp.isSend ? sendOps : recvOps)++;
  }
  EXPECT_EQ(sendOps, 1);
  EXPECT_EQ(recvOps, 1);
  for (auto& [h, call] : started) {
    if (call.descr.type != (uint64_t)ncclProfileProxyStep) continue;
    steps++;
    EXPECT_TRUE(ops.count(call.descr.parentObj)) << "a step's parent is a ProxyOp";
    EXPECT_FALSE(stepStates[h].empty()) << "every step records a state";
  }
  EXPECT_EQ(steps, 2 * (int)kSteps);
  for (auto& [h, call] : started) EXPECT_TRUE(stopped.count(h)) << "event of type " << call.descr.type << " never stopped";
  unsetenv("NCCL_PROFILER_PLUGIN");
}
