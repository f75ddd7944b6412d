// Network selection under NCCL_NET_PLUGIN / NCCL_NET with the test plugins
// built next to this test (libnccl-net-testnet.so: v8 "TestNet";
// libnccl-net-testnet7.so: v7 "TestNet7"); meson passes their paths.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "common/util/debug.h"
#include "scoped_env.h"
#include "net/net.h"

namespace uniccl {
namespace {

const char* pluginPath(const char* var) {
  const char* p = getenv(var);
  return p ? p : "";
}

// Reads a call counter of the loaded test plugin (-1 when it is not loaded).
int pluginCounter(const char* path, const char* symbol) {
  void* dl = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (dl == nullptr) return -1;
  int* counter = static_cast<int*>(dlsym(dl, symbol));
  int value = counter ? *counter : -2;
  dlclose(dl);
  return value;
}

class NetLoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_STRNE(pluginPath("UNICCL_TEST_NET_PLUGIN"), "") << "run through meson test";
    netUnloadForTesting();
  }
  void TearDown() override { netUnloadForTesting(); }
};

TEST_F(NetLoaderTest, UnsetSelectsSocket) {
  ScopedEnv plugin("NCCL_NET_PLUGIN", nullptr);
  ScopedEnv net("NCCL_NET", nullptr);
  const NetApi* api = nullptr;
  ASSERT_EQ(netSelect(&api), ncclSuccess);
  ASSERT_NE(api, nullptr);
  EXPECT_STREQ(api->name, "Socket");
  const NetApi* again = nullptr;
  ASSERT_EQ(netSelect(&again), ncclSuccess);
  EXPECT_EQ(api, again);
}

TEST_F(NetLoaderTest, PluginByPathIsPreferredAndInitializedOnce) {
  const char* path = pluginPath("UNICCL_TEST_NET_PLUGIN");
  ScopedEnv plugin("NCCL_NET_PLUGIN", path);
  ScopedEnv net("NCCL_NET", nullptr);
  std::vector<const NetApi*> seen(4, nullptr);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; t++)
    threads.emplace_back([&seen, t] { EXPECT_EQ(netSelect(&seen[t]), ncclSuccess); });
  for (auto& t : threads) t.join();
  ASSERT_NE(seen[0], nullptr);
  EXPECT_STREQ(seen[0]->name, "TestNet");
  for (int t = 1; t < 4; t++) EXPECT_EQ(seen[t], seen[0]);
  EXPECT_EQ(pluginCounter(path, "testNetInitCalls"), 1);
  EXPECT_GE(pluginCounter(path, "testNetDevicesCalls"), 1);
  ncclNetProperties_v8_t props;
  ASSERT_EQ(seen[0]->getProperties(0, &props), ncclSuccess);
  EXPECT_EQ(props.speed, 4242);
  EXPECT_EQ(pluginCounter(path, "testNetGetPropertiesCalls"), 1);
}

TEST_F(NetLoaderTest, ShortNameFindsLibncclNetName) {
  ScopedEnv plugin("NCCL_NET_PLUGIN", "testnet");  // -> libnccl-net-testnet.so on LD_LIBRARY_PATH
  ScopedEnv net("NCCL_NET", "TestNet");
  const NetApi* api = nullptr;
  ASSERT_EQ(netSelect(&api), ncclSuccess);
  EXPECT_STREQ(api->name, "TestNet");
}

TEST_F(NetLoaderTest, NcclNetPicksSocketOverLoadedPlugin) {
  ScopedEnv plugin("NCCL_NET_PLUGIN", pluginPath("UNICCL_TEST_NET_PLUGIN"));
  ScopedEnv net("NCCL_NET", "socket");  // case-insensitive, like NCCL
  const NetApi* api = nullptr;
  ASSERT_EQ(netSelect(&api), ncclSuccess);
  EXPECT_STREQ(api->name, "Socket");
}

TEST_F(NetLoaderTest, PluginWhoseInitFailsIsSkipped) {
  const char* path = pluginPath("UNICCL_TEST_NET_PLUGIN");
  ScopedEnv plugin("NCCL_NET_PLUGIN", path);
  ScopedEnv fail("TESTNET_INIT_FAIL", "1");
  {
    ScopedEnv net("NCCL_NET", nullptr);
    const NetApi* api = nullptr;
    ASSERT_EQ(netSelect(&api), ncclSuccess);
    EXPECT_STREQ(api->name, "Socket");
    EXPECT_EQ(pluginCounter(path, "testNetInitCalls"), -1) << "a failed plugin must be unloaded";
  }
  netUnloadForTesting();
  {
    ScopedEnv net("NCCL_NET", "TestNet");
    const NetApi* api = nullptr;
    EXPECT_EQ(netSelect(&api), ncclInvalidArgument);
    EXPECT_EQ(api, nullptr);
  }
}

TEST_F(NetLoaderTest, UnknownNetIsAClearError) {
  ScopedEnv plugin("NCCL_NET_PLUGIN", pluginPath("UNICCL_TEST_NET_PLUGIN"));
  ScopedEnv net("NCCL_NET", "Nope");
  const NetApi* api = nullptr;
  EXPECT_EQ(netSelect(&api), ncclInvalidArgument);
  std::string msg = lastErrorMessage();
  EXPECT_NE(msg.find("NCCL_NET=Nope"), std::string::npos) << msg;
  EXPECT_NE(msg.find("TestNet"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Socket"), std::string::npos) << msg;
  EXPECT_EQ(netSelect(&api), ncclInvalidArgument) << "the failed choice is remembered";
}

TEST_F(NetLoaderTest, MissingPluginFallsBackToBuiltins) {
  ScopedEnv plugin("NCCL_NET_PLUGIN", "does-not-exist");
  ScopedEnv net("NCCL_NET", nullptr);
  const NetApi* api = nullptr;
  ASSERT_EQ(netSelect(&api), ncclSuccess);
  EXPECT_STREQ(api->name, "Socket");
}

TEST_F(NetLoaderTest, NoneDisablesPlugins) {
  ScopedEnv plugin("NCCL_NET_PLUGIN", "none");
  ScopedEnv net("NCCL_NET", "TestNet");
  const NetApi* api = nullptr;
  EXPECT_EQ(netSelect(&api), ncclInvalidArgument);
}

TEST_F(NetLoaderTest, V7PluginIsAdaptedToV8) {
  ScopedEnv plugin("NCCL_NET_PLUGIN", pluginPath("UNICCL_TEST_NET_PLUGIN_V7"));
  ScopedEnv net("NCCL_NET", "TestNet7");
  const NetApi* api = nullptr;
  ASSERT_EQ(netSelect(&api), ncclSuccess);
  EXPECT_STREQ(api->name, "TestNet7");
  ncclNetProperties_v8_t props;
  memset(&props, 0x5a, sizeof(props));
  ASSERT_EQ(api->getProperties(0, &props), ncclSuccess);
  EXPECT_STREQ(props.name, "testnet0");
  EXPECT_EQ(props.speed, 4242);
  EXPECT_EQ(props.guid, 0x1234u);
  EXPECT_EQ(props.regIsGlobal, 0);
  EXPECT_EQ(props.maxComms, 1);
  void* mh = nullptr;
  EXPECT_EQ(api->regMr(nullptr, nullptr, (size_t)1 << 33, NCCL_PTR_HOST, &mh), ncclInvalidArgument);
}

TEST_F(NetLoaderTest, SelectByNameForCommunicatorConfig) {
  ScopedEnv plugin("NCCL_NET_PLUGIN", pluginPath("UNICCL_TEST_NET_PLUGIN"));
  ScopedEnv net("NCCL_NET", nullptr);
  const NetApi* api = nullptr;
  ASSERT_EQ(netSelectByName("Socket", &api), ncclSuccess);
  EXPECT_STREQ(api->name, "Socket");
  ASSERT_EQ(netSelectByName("testnet", &api), ncclSuccess);
  EXPECT_STREQ(api->name, "TestNet");
  ASSERT_EQ(netSelectByName(nullptr, &api), ncclSuccess);
  EXPECT_STREQ(api->name, "TestNet");
  api = nullptr;
  EXPECT_EQ(netSelectByName("Nope", &api), ncclInvalidArgument);
  EXPECT_EQ(api, nullptr);
  EXPECT_EQ(pluginCounter(pluginPath("UNICCL_TEST_NET_PLUGIN"), "testNetInitCalls"), 1);
}

}  // namespace
}  // namespace uniccl
