// The real verbs seam's run-time loading of libibverbs (verbs_real.cc): the
// installed library is found and used, and a missing library, or one without
// the verbs entry points, leaves the IB net with zero devices, logged at INFO
// (never a WARN: Socket is used instead), and never crashes. Built only where
// libibverbs' headers are (like verbs_real.cc).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../scoped_env.h"
#include "fake_verbs.h"
#include "common/util/debug.h"
#include "net/ib/gid_select.h"
#include "net/ib/ib_devices.h"
#include "net/ib/ib_transport.h"
#include "net/ib/verbs_real.h"

namespace uniccl {
namespace ib {
namespace {

constexpr const char* kNoSuchLibrary = "libuniccl-test-no-such-ibverbs.so.1";

// Whether libibverbs can be loaded here, asked of the dynamic loader directly.
bool systemHasIbverbs(bool* hasDmabuf) {
  void* lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) lib = dlopen("libibverbs.so", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return false;
  *hasDmabuf = dlvsym(lib, "ibv_reg_dmabuf_mr", "IBVERBS_1.12") != nullptr;
  dlclose(lib);
  return true;
}

// The IB table's device count over `verbs`, expecting init and devices to succeed.
int tableDevices(Verbs* verbs) {
  resetForTesting();
  installVerbs(verbs);
  clearLastError();
  EXPECT_EQ(ibNetTable()->init(nullptr), ncclSuccess) << lastErrorMessage();
  int n = -1;
  EXPECT_EQ(ibNetTable()->devices(&n), ncclSuccess) << lastErrorMessage();
  EXPECT_STREQ(lastErrorMessage(), "") << "no WARN expected";
  resetForTesting();
  return n;
}

// The net devices the IB table should list over `verbs`, counted here from
// the verbs calls themselves: every active port of an IB or Ethernet link
// layer that NCCL_IB_HCA lets through and that has a GID the GID choice
// accepts, at most kMaxIbDevices.
int usablePorts(Verbs* verbs) {
  DiscoveryOptions opts;
  EXPECT_EQ(discoveryOptionsFromEnv(&opts), ncclSuccess);
  DeviceList* list = nullptr;
  int count = 0;
  if (verbs->getDeviceList(&list, &count) != 0) return 0;
  int n = 0;
  for (int d = 0; d < count; d++) {
    const std::string name = verbs->deviceName(list, d);
    Context* ctx = nullptr;
    if (verbs->openDevice(list, d, &ctx) != 0) continue;
    DeviceAttr attr;
    for (int port = 1; verbs->queryDevice(ctx, &attr) == 0 && port <= attr.physPortCnt; port++) {
      PortAttr pa;
      if (!hcaMatches(opts.hca, name, port) || verbs->queryPort(ctx, port, &pa) != 0) continue;
      if (pa.state != kPortActive) continue;
      if (pa.linkLayer != LinkLayer::kInfiniBand && pa.linkLayer != LinkLayer::kEthernet) continue;
      std::vector<GidEntry> table(pa.gidTblLen);
      for (int g = 0; g < pa.gidTblLen; g++) {
        if (verbs->queryGid(ctx, port, g, &table[g].gid) != 0) table[g].gid = Gid{};
        if (verbs->queryGidType(ctx, port, g, &table[g].type) != 0) table[g].type = GidType::kUnknown;
      }
      if (chooseGidIndex(table, pa.linkLayer, opts.gidIndex, opts.family, opts.roceVersion) >= 0) n++;
    }
    verbs->closeDevice(ctx);
  }
  verbs->freeDeviceList(list);
  return std::min(n, kMaxIbDevices);
}

// Captures INFO lines of INIT/NET (and any WARN) in a file while it lives.
class LogCapture {
 public:
  LogCapture() : path_("/tmp/uniccl_verbs_loader_test_" + std::to_string(getpid()) + ".log") {
    env_.emplace_back(new ScopedEnv("NCCL_DEBUG", "INFO"));
    env_.emplace_back(new ScopedEnv("NCCL_DEBUG_SUBSYS", "INIT,NET"));
    env_.emplace_back(new ScopedEnv("NCCL_DEBUG_FILE", path_.c_str()));
    resetLoggingForTesting();
  }
  ~LogCapture() {
    env_.clear();
    resetLoggingForTesting();  // back to the outer configuration, file closed
    unlink(path_.c_str());
  }
  std::string read() const {
    std::ifstream f(path_);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }

 private:
  std::string path_;
  std::vector<std::unique_ptr<ScopedEnv>> env_;
};

TEST(IbVerbsLoader, InstalledLibraryLoadsAndListsWhatIsThere) {
  bool sysDmabuf = false;
  if (!systemHasIbverbs(&sysDmabuf)) {
    // No libibverbs at all: the process-wide instance must say so, not crash.
    DeviceList* list = nullptr;
    int count = -1;
    EXPECT_EQ(realVerbs()->getDeviceList(&list, &count), kVerbsUnavailable);
    EXPECT_FALSE(realVerbs()->hasDmabuf());
    EXPECT_EQ(tableDevices(realVerbs()), 0);
    return;
  }
  Verbs* v = realVerbs();
  DeviceList* list = nullptr;
  int count = -1;
  int err = v->getDeviceList(&list, &count);
  // Loaded: whatever ibv_get_device_list says (ENOSYS without RDMA kernel
  // support, as on CI machines), never "library unavailable".
  EXPECT_NE(err, kVerbsUnavailable);
  // dma-buf support follows the library found at run time.
  EXPECT_EQ(v->hasDmabuf(), sysDmabuf);
  EXPECT_STRNE(v->wcStatusString(0), "unknown completion status");  // libibverbs' own text
  int listed = 0;
  if (err == 0) {
    EXPECT_GE(count, 0);
    listed = count;
    for (int i = 0; i < count; i++) EXPECT_FALSE(v->deviceName(list, i).empty());
    v->freeDeviceList(list);
  }
  int n = tableDevices(v);
  if (listed == 0) {
    EXPECT_EQ(n, 0);
  }
  EXPECT_EQ(n, usablePorts(v));  // a machine with RDMA devices: exactly its usable ports
}

// The count the test above expects, on a fabric whose answer is known: the
// table lists every usable port and nothing else (two-port devices, an
// inactive port, InfiniBand and RoCE).
TEST(IbVerbsLoader, TableListsExactlyTheUsablePorts) {
  fake::FakeVerbs fv;
  fake::FakeDevice roce = fake::FakeVerbs::roceDevice("mlx5_0", 2);
  fake::FakeDevice ib = fake::FakeVerbs::ibDevice("mlx5_1", 7, 3);
  ib.ports[1].state = kPortActive + 1;   // port 2 down
  fv.addDevice(roce);
  fv.addDevice(ib);
  EXPECT_EQ(usablePorts(&fv), 4);
  EXPECT_EQ(tableDevices(&fv), 4);
  EXPECT_TRUE(fv.violations().empty());
}

TEST(IbVerbsLoader, MissingLibraryMeansZeroDevicesAtInfo) {
  LogCapture log;
  auto v = newRealVerbsForTesting(kNoSuchLibrary);
  DeviceList* list = nullptr;
  int count = -1;
  EXPECT_EQ(v->getDeviceList(&list, &count), kVerbsUnavailable);
  EXPECT_EQ(list, nullptr);
  EXPECT_FALSE(v->hasDmabuf());
  EXPECT_NE(v->wcStatusString(0), nullptr);
  EXPECT_EQ(tableDevices(v.get()), 0);
  std::string text = log.read();
  EXPECT_NE(text.find("NCCL INFO NET/IB: libibverbs not loaded"), std::string::npos) << text;
  EXPECT_NE(text.find(kNoSuchLibrary), std::string::npos) << text;
  EXPECT_EQ(text.find("NCCL WARN"), std::string::npos) << text;
  // getDeviceList ran twice (above and in init); the load was tried once.
  EXPECT_EQ(text.find("libibverbs not loaded"), text.rfind("libibverbs not loaded")) << text;
}

// A library that loads but is not libibverbs (or one too old for IBVERBS_1.1).
TEST(IbVerbsLoader, LibraryWithoutVerbsMeansZeroDevicesAtInfo) {
  LogCapture log;
  auto v = newRealVerbsForTesting("libc.so.6");
  DeviceList* list = nullptr;
  int count = -1;
  EXPECT_EQ(v->getDeviceList(&list, &count), kVerbsUnavailable);
  EXPECT_FALSE(v->hasDmabuf());
  EXPECT_EQ(tableDevices(v.get()), 0);
  std::string text = log.read();
  EXPECT_NE(text.find("NCCL INFO NET/IB: libc.so.6 lacks ibv_get_device_list@IBVERBS_1.1"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("NCCL WARN"), std::string::npos) << text;
}

// The first use may come from several threads at once: one load, one answer.
TEST(IbVerbsLoader, ConcurrentFirstUseLoadsOnce) {
  for (const char* lib : {kNoSuchLibrary, "libibverbs.so.1"}) {
    auto v = newRealVerbsForTesting(lib);
    constexpr int kThreads = 8;
    std::vector<int> errs(kThreads, -1);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; t++) {
      threads.emplace_back([&, t] {
        DeviceList* list = nullptr;
        int count = 0;
        errs[t] = v->getDeviceList(&list, &count);
        if (errs[t] == 0) v->freeDeviceList(list);
      });
    }
    for (auto& th : threads) th.join();
    for (int t = 1; t < kThreads; t++) EXPECT_EQ(errs[t], errs[0]) << lib;
    if (strcmp(lib, kNoSuchLibrary) == 0) {
      EXPECT_EQ(errs[0], kVerbsUnavailable);
    }
  }
}

}  // namespace
}  // namespace ib
}  // namespace uniccl
