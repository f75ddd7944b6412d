// readConfig: configs from the current and older NCCL headers, rejection of
// bad configs with a message that names the field, and NCCL_* overrides.
#include "common/core/config.h"

#include <gtest/gtest.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "common/util/debug.h"

namespace uniccl {
namespace {

// Every knob readConfig looks at; cleared before each test so the machine's
// environment cannot leak in (meson also points NCCL_CONF_FILE at /dev/null).
const char* const kEnvKnobs[] = {
    "NCCL_COMM_BLOCKING", "NCCL_CGA_CLUSTER_SIZE", "NCCL_MIN_CTAS", "NCCL_MAX_CTAS",
    "NCCL_NCHANNELS_PER_NET_PEER", "NCCL_NVLINK_UTIL_CENTRIC_SCHED_ENABLE", "NCCL_NET",
    "NCCL_COMM_SPLIT_SHARE_RESOURCES", "NCCL_COMM_SHRINK_SHARE_RESOURCES", "NCCL_COLLNET_ENABLE",
    "NCCL_CTA_POLICY", "NCCL_NVLS_NCHANNELS",
};

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* k : kEnvKnobs) unsetenv(k);
    clearLastError();
    std::random_device rd;
    seed_ = rd();
    rng_.seed(seed_);
  }
  void TearDown() override {
    for (const char* k : kEnvKnobs) unsetenv(k);
  }
  int randInt(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  // A buffer holding an older (or newer) header's struct: `size` bytes of
  // real fields, followed by random garbage the reader must never use.
  std::vector<unsigned char> oldStruct(size_t size, unsigned version, size_t capacity = 256) {
    std::vector<unsigned char> buf(capacity);
    for (auto& b : buf) b = static_cast<unsigned char>(randInt(1, 255));
    unsigned magic = 0xcafebeef;
    std::memcpy(buf.data() + 0, &size, sizeof(size));
    std::memcpy(buf.data() + 8, &magic, sizeof(magic));
    std::memcpy(buf.data() + 12, &version, sizeof(version));
    return buf;
  }
  template <typename T>
  static void put(std::vector<unsigned char>& buf, size_t offset, T v) {
    std::memcpy(buf.data() + offset, &v, sizeof(v));
  }
  static const ncclConfig_t* asConfig(const std::vector<unsigned char>& buf) {
    return reinterpret_cast<const ncclConfig_t*>(buf.data());
  }

  unsigned seed_ = 0;
  std::mt19937 rng_;
};

void expectDefaults(const CommConfig& c, bool exceptBlocking = false) {
  if (!exceptBlocking) {
    EXPECT_EQ(c.blocking, true);
  }
  EXPECT_EQ(c.cgaClusterSize, 4);
  EXPECT_EQ(c.minCTAs, 1);
  EXPECT_EQ(c.maxCTAs, kMaxCTAs);
  EXPECT_EQ(c.netName, "");
  EXPECT_EQ(c.splitShare, false);
  EXPECT_EQ(c.trafficClass, kConfigAuto);
  EXPECT_EQ(c.commName, "");
  EXPECT_EQ(c.collnetEnable, false);
  EXPECT_EQ(c.ctaPolicy, NCCL_CTA_POLICY_DEFAULT);
  EXPECT_EQ(c.shrinkShare, false);
  EXPECT_EQ(c.nvlsCTAs, kConfigAuto);
  EXPECT_EQ(c.nChannelsPerNetPeer, kConfigAuto);
  EXPECT_EQ(c.nvlinkCentricSched, false);
}

TEST_F(ConfigTest, NullConfigMeansDefaults) {
  CommConfig c;
  c.minCTAs = 17;  // must be overwritten
  ASSERT_EQ(readConfig(nullptr, &c), ncclSuccess);
  expectDefaults(c);
  EXPECT_EQ(c.userVersion, 0u);
}

TEST_F(ConfigTest, InitializerOnlyMeansDefaults) {
  ncclConfig_t user = NCCL_CONFIG_INITIALIZER;
  CommConfig c;
  ASSERT_EQ(readConfig(&user, &c), ncclSuccess);
  expectDefaults(c);
  EXPECT_EQ(c.userVersion, 22809u);
}

TEST_F(ConfigTest, FullCurrentConfig) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  ncclConfig_t user = NCCL_CONFIG_INITIALIZER;
  const std::string net = "net-" + std::to_string(randInt(1, 1 << 20));
  const std::string name = "comm-" + std::to_string(randInt(1, 1 << 20));
  user.blocking = 0;
  user.cgaClusterSize = randInt(0, kMaxCgaClusterSize);
  user.minCTAs = randInt(1, 32);
  user.maxCTAs = randInt(user.minCTAs, kMaxCTAs);
  user.netName = net.c_str();
  user.splitShare = 1;
  user.trafficClass = randInt(0, 255);
  user.commName = name.c_str();
  user.collnetEnable = 1;
  user.CTAPolicy = randInt(NCCL_CTA_POLICY_EFFICIENCY, NCCL_CTA_POLICY_ZERO);
  user.shrinkShare = 1;
  user.nvlsCTAs = randInt(1, 32);
  user.nChannelsPerNetPeer = randInt(1, kMaxCTAs);
  user.nvlinkCentricSched = 1;

  CommConfig c;
  ASSERT_EQ(readConfig(&user, &c), ncclSuccess) << lastErrorMessage();
  EXPECT_EQ(c.blocking, false);
  EXPECT_EQ(c.cgaClusterSize, user.cgaClusterSize);
  EXPECT_EQ(c.minCTAs, user.minCTAs);
  EXPECT_EQ(c.maxCTAs, user.maxCTAs);
  EXPECT_EQ(c.netName, net);
  EXPECT_EQ(c.splitShare, true);
  EXPECT_EQ(c.trafficClass, user.trafficClass);
  EXPECT_EQ(c.commName, name);
  EXPECT_EQ(c.collnetEnable, true);
  EXPECT_EQ(c.ctaPolicy, user.CTAPolicy);
  EXPECT_EQ(c.shrinkShare, true);
  EXPECT_EQ(c.nvlsCTAs, user.nvlsCTAs);
  EXPECT_EQ(c.nChannelsPerNetPeer, user.nChannelsPerNetPeer);
  EXPECT_EQ(c.nvlinkCentricSched, true);
  EXPECT_EQ(c.userVersion, 22809u);
  // The strings are copied: the program may free its own right after init.
  EXPECT_NE(c.netName.c_str(), user.netName);
}

// NCCL 2.14's struct: size, magic, version, blocking (24 bytes, the last 4
// being padding that a 2.17+ reader would take for cgaClusterSize).
TEST_F(ConfigTest, Nccl214ConfigIgnoresEverythingPastBlocking) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  for (int trial = 0; trial < 16; ++trial) {
    auto buf = oldStruct(24, 21400);
    put<int>(buf, 16, 0);  // blocking
    CommConfig c;
    ASSERT_EQ(readConfig(asConfig(buf), &c), ncclSuccess) << lastErrorMessage();
    EXPECT_EQ(c.blocking, false);
    expectDefaults(c, /*exceptBlocking=*/true);
    EXPECT_EQ(c.userVersion, 21400u);
  }
}

// An old struct allocated to its exact size: reading a byte past it would be
// a heap overflow (caught when the tests run under AddressSanitizer).
TEST_F(ConfigTest, ExactSizedOldStructIsNotOverread) {
  const struct {
    size_t size;
    unsigned version;
  } olds[] = {{24, 21400}, {40, 21700}, {48, 21800}, {56, 21900}};
  for (auto [size, version] : olds) {
    auto buf = oldStruct(size, version, /*capacity=*/size);
    put<int>(buf, 16, 0);
    if (size >= 40) {
      put<int>(buf, 20, 1);
      put<int>(buf, 24, 1);
      put<int>(buf, 28, 2);
      put<const char*>(buf, 32, nullptr);
    }
    if (size >= 48) put<int>(buf, 40, 0), put<int>(buf, 44, 5);
    if (size >= 56) put<const char*>(buf, 48, "exact");
    CommConfig c;
    ASSERT_EQ(readConfig(asConfig(buf), &c), ncclSuccess) << "size " << size << ": " << lastErrorMessage();
    EXPECT_EQ(c.blocking, false);
    EXPECT_EQ(c.commName, size >= 56 ? "exact" : "");
  }
}

// NCCL 2.17's struct adds cgaClusterSize, min/maxCTAs and netName (40 bytes).
TEST_F(ConfigTest, Nccl217ConfigReadsItsFieldsOnly) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  const char* net = "Socket";
  auto buf = oldStruct(40, 21700);
  put<int>(buf, 16, 1);
  put<int>(buf, 20, 2);   // cgaClusterSize
  put<int>(buf, 24, 3);   // minCTAs
  put<int>(buf, 28, 9);   // maxCTAs
  put<const char*>(buf, 32, net);
  CommConfig c;
  ASSERT_EQ(readConfig(asConfig(buf), &c), ncclSuccess) << lastErrorMessage();
  EXPECT_EQ(c.blocking, true);
  EXPECT_EQ(c.cgaClusterSize, 2);
  EXPECT_EQ(c.minCTAs, 3);
  EXPECT_EQ(c.maxCTAs, 9);
  EXPECT_EQ(c.netName, "Socket");
  EXPECT_EQ(c.splitShare, false);
  EXPECT_EQ(c.commName, "");
  EXPECT_EQ(c.trafficClass, kConfigAuto);
  EXPECT_EQ(c.nvlsCTAs, kConfigAuto);
  EXPECT_EQ(c.nChannelsPerNetPeer, kConfigAuto);
}

// NCCL 2.18 adds splitShare; its 48-byte struct ends in the padding where
// 2.25 later put trafficClass: that garbage must not become a traffic class.
TEST_F(ConfigTest, Nccl218PaddingIsNotTrafficClass) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  auto buf = oldStruct(48, 21803);
  put<int>(buf, 16, NCCL_CONFIG_UNDEF_INT);
  put<int>(buf, 20, NCCL_CONFIG_UNDEF_INT);
  put<int>(buf, 24, NCCL_CONFIG_UNDEF_INT);
  put<int>(buf, 28, NCCL_CONFIG_UNDEF_INT);
  put<const char*>(buf, 32, nullptr);
  put<int>(buf, 40, 1);                 // splitShare
  put<int>(buf, 44, randInt(0, 255));   // padding in 2.18: garbage
  CommConfig c;
  ASSERT_EQ(readConfig(asConfig(buf), &c), ncclSuccess) << lastErrorMessage();
  EXPECT_EQ(c.splitShare, true);
  EXPECT_EQ(c.trafficClass, kConfigAuto);
  EXPECT_EQ(c.commName, "");
}

// `size` is the authority on how much memory the program owns: a struct whose
// version claims 2.28 but whose size stops at 2.17's end is read to 40 bytes.
TEST_F(ConfigTest, SizeLimitsReadsEvenWithNewVersion) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  auto buf = oldStruct(40, 22809);
  put<int>(buf, 16, 0);
  put<int>(buf, 20, 1);
  put<int>(buf, 24, 2);
  put<int>(buf, 28, 4);
  put<const char*>(buf, 32, nullptr);
  CommConfig c;
  ASSERT_EQ(readConfig(asConfig(buf), &c), ncclSuccess) << lastErrorMessage();
  EXPECT_EQ(c.blocking, false);
  EXPECT_EQ(c.maxCTAs, 4);
  EXPECT_EQ(c.splitShare, false);
  EXPECT_EQ(c.trafficClass, kConfigAuto);
  EXPECT_EQ(c.commName, "");
  EXPECT_EQ(c.collnetEnable, false);
  EXPECT_EQ(c.nvlsCTAs, kConfigAuto);
  EXPECT_EQ(c.nvlinkCentricSched, false);
}

// A program built against a newer NCCL passes a bigger struct: the fields we
// know are read, the unknown tail is ignored.
TEST_F(ConfigTest, NewerLargerConfigReadsKnownFields) {
  ncclConfig_t known = NCCL_CONFIG_INITIALIZER;
  known.nvlinkCentricSched = 1;
  known.minCTAs = 2;
  auto buf = oldStruct(160, 23100);
  std::memcpy(buf.data() + 16, reinterpret_cast<unsigned char*>(&known) + 16, sizeof(known) - 16);
  CommConfig c;
  ASSERT_EQ(readConfig(asConfig(buf), &c), ncclSuccess) << lastErrorMessage();
  EXPECT_EQ(c.nvlinkCentricSched, true);
  EXPECT_EQ(c.minCTAs, 2);
  EXPECT_EQ(c.userVersion, 23100u);
}

TEST_F(ConfigTest, BadMagicIsRejected) {
  ncclConfig_t user = NCCL_CONFIG_INITIALIZER;
  user.magic = 0xdeadbeef;
  CommConfig c;
  c.minCTAs = 17;
  EXPECT_EQ(readConfig(&user, &c), ncclInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("magic"), std::string::npos) << lastErrorMessage();
  EXPECT_NE(std::string(lastErrorMessage()).find("NCCL_CONFIG_INITIALIZER"), std::string::npos);
  EXPECT_EQ(c.minCTAs, 17) << "output must stay untouched on error";
}

TEST_F(ConfigTest, TooSmallSizeIsRejected) {
  for (size_t size : {size_t(0), size_t(8), size_t(16), size_t(23)}) {
    auto buf = oldStruct(size, 22809);
    CommConfig c;
    clearLastError();
    EXPECT_EQ(readConfig(asConfig(buf), &c), ncclInvalidArgument) << "size " << size;
    EXPECT_NE(std::string(lastErrorMessage()).find("size"), std::string::npos) << lastErrorMessage();
  }
}

TEST_F(ConfigTest, OutOfRangeValuesAreRejectedNamingTheField) {
  struct Case {
    const char* field;
    std::function<void(ncclConfig_t&)> set;
  };
  const Case cases[] = {
      {"blocking", [](ncclConfig_t& u) { u.blocking = 2; }},
      {"blocking", [](ncclConfig_t& u) { u.blocking = -1; }},
      {"cgaClusterSize", [](ncclConfig_t& u) { u.cgaClusterSize = -3; }},
      {"minCTAs", [](ncclConfig_t& u) { u.minCTAs = 0; }},
      {"maxCTAs", [](ncclConfig_t& u) { u.maxCTAs = -5; }},
      {"minCTAs", [](ncclConfig_t& u) { u.minCTAs = 8; u.maxCTAs = 4; }},
      {"splitShare", [](ncclConfig_t& u) { u.splitShare = 3; }},
      {"trafficClass", [](ncclConfig_t& u) { u.trafficClass = -2; }},
      {"collnetEnable", [](ncclConfig_t& u) { u.collnetEnable = 2; }},
      {"CTAPolicy", [](ncclConfig_t& u) { u.CTAPolicy = 3; }},
      {"CTAPolicy", [](ncclConfig_t& u) { u.CTAPolicy = -1; }},
      {"shrinkShare", [](ncclConfig_t& u) { u.shrinkShare = -1; }},
      {"nvlsCTAs", [](ncclConfig_t& u) { u.nvlsCTAs = 0; }},
      {"nChannelsPerNetPeer", [](ncclConfig_t& u) { u.nChannelsPerNetPeer = kMaxCTAs + 1; }},
      {"nChannelsPerNetPeer", [](ncclConfig_t& u) { u.nChannelsPerNetPeer = -7; }},
      {"nvlinkCentricSched", [](ncclConfig_t& u) { u.nvlinkCentricSched = 7; }},
  };
  for (const Case& k : cases) {
    ncclConfig_t user = NCCL_CONFIG_INITIALIZER;
    k.set(user);
    CommConfig c;
    clearLastError();
    EXPECT_EQ(readConfig(&user, &c), ncclInvalidArgument) << k.field;
    EXPECT_NE(std::string(lastErrorMessage()).find(k.field), std::string::npos)
        << "message should name " << k.field << ": " << lastErrorMessage();
  }
}

// A field an older header never had is not validated either: the garbage in
// a 2.14 struct's padding (here INT_MAX-ish, invalid as cgaClusterSize) is fine.
TEST_F(ConfigTest, AbsentFieldsAreNotValidated) {
  auto buf = oldStruct(24, 21400);
  put<int>(buf, 16, 1);
  put<int>(buf, 20, -12345);
  CommConfig c;
  EXPECT_EQ(readConfig(asConfig(buf), &c), ncclSuccess) << lastErrorMessage();
  EXPECT_EQ(c.cgaClusterSize, 4);
}

TEST_F(ConfigTest, LargeChannelCountsAreCapped) {
  ncclConfig_t user = NCCL_CONFIG_INITIALIZER;
  user.minCTAs = kMaxCTAs + 36;
  CommConfig c;
  ASSERT_EQ(readConfig(&user, &c), ncclSuccess) << lastErrorMessage();
  EXPECT_EQ(c.minCTAs, kMaxCTAs);
  EXPECT_EQ(c.maxCTAs, kMaxCTAs);
  user.minCTAs = 2;
  user.maxCTAs = 1000;
  user.cgaClusterSize = 50;
  ASSERT_EQ(readConfig(&user, &c), ncclSuccess) << lastErrorMessage();
  EXPECT_EQ(c.minCTAs, 2);
  EXPECT_EQ(c.maxCTAs, kMaxCTAs);
  EXPECT_EQ(c.cgaClusterSize, kMaxCgaClusterSize);
}

TEST_F(ConfigTest, EnvironmentOverridesDefaultsAndConfig) {
  setenv("NCCL_COMM_BLOCKING", "0", 1);
  setenv("NCCL_CGA_CLUSTER_SIZE", "2", 1);
  setenv("NCCL_MIN_CTAS", "4", 1);
  setenv("NCCL_MAX_CTAS", "0x10", 1);  // NCCL accepts hex
  setenv("NCCL_NET", "IB", 1);
  setenv("NCCL_COMM_SPLIT_SHARE_RESOURCES", "1", 1);
  setenv("NCCL_COMM_SHRINK_SHARE_RESOURCES", "1", 1);
  setenv("NCCL_COLLNET_ENABLE", "1", 1);
  setenv("NCCL_CTA_POLICY", "1", 1);
  setenv("NCCL_NVLS_NCHANNELS", "24", 1);
  setenv("NCCL_NCHANNELS_PER_NET_PEER", "3", 1);
  setenv("NCCL_NVLINK_UTIL_CENTRIC_SCHED_ENABLE", "1", 1);

  CommConfig c;
  ASSERT_EQ(readConfig(nullptr, &c), ncclSuccess);
  EXPECT_EQ(c.blocking, false);
  EXPECT_EQ(c.cgaClusterSize, 2);
  EXPECT_EQ(c.minCTAs, 4);
  EXPECT_EQ(c.maxCTAs, 16);
  EXPECT_EQ(c.netName, "IB");
  EXPECT_EQ(c.splitShare, true);
  EXPECT_EQ(c.shrinkShare, true);
  EXPECT_EQ(c.collnetEnable, true);
  EXPECT_EQ(c.ctaPolicy, NCCL_CTA_POLICY_EFFICIENCY);
  EXPECT_EQ(c.nvlsCTAs, 24);
  EXPECT_EQ(c.nChannelsPerNetPeer, 3);
  EXPECT_EQ(c.nvlinkCentricSched, true);

  // As in NCCL, a valid environment value also wins over the program's config.
  ncclConfig_t user = NCCL_CONFIG_INITIALIZER;
  user.blocking = 1;
  user.minCTAs = 2;
  user.maxCTAs = 8;
  user.netName = "Socket";
  ASSERT_EQ(readConfig(&user, &c), ncclSuccess) << lastErrorMessage();
  EXPECT_EQ(c.blocking, false);
  EXPECT_EQ(c.minCTAs, 4);
  EXPECT_EQ(c.maxCTAs, 16);
  EXPECT_EQ(c.netName, "IB");
}

TEST_F(ConfigTest, InvalidEnvironmentValuesAreIgnored) {
  setenv("NCCL_COMM_BLOCKING", "2", 1);
  setenv("NCCL_MIN_CTAS", "0", 1);
  setenv("NCCL_CGA_CLUSTER_SIZE", "-1", 1);
  setenv("NCCL_CTA_POLICY", "9", 1);
  setenv("NCCL_NVLS_NCHANNELS", "-4", 1);
  CommConfig c;
  ASSERT_EQ(readConfig(nullptr, &c), ncclSuccess);
  expectDefaults(c);

  // Not a number at all: ignored, and said so (a typo must not go unnoticed).
  setenv("NCCL_MAX_CTAS", "lots", 1);
  clearLastError();
  ASSERT_EQ(readConfig(nullptr, &c), ncclSuccess);
  EXPECT_EQ(c.maxCTAs, kMaxCTAs);
  EXPECT_NE(std::string(lastErrorMessage()).find("NCCL_MAX_CTAS"), std::string::npos)
      << lastErrorMessage();
}

TEST_F(ConfigTest, EnvironmentIsCappedAndOrdered) {
  setenv("NCCL_CGA_CLUSTER_SIZE", "100", 1);
  setenv("NCCL_MIN_CTAS", "32", 1);
  setenv("NCCL_MAX_CTAS", "8", 1);
  setenv("NCCL_NCHANNELS_PER_NET_PEER", "500", 1);
  CommConfig c;
  ASSERT_EQ(readConfig(nullptr, &c), ncclSuccess);
  EXPECT_EQ(c.cgaClusterSize, kMaxCgaClusterSize);
  EXPECT_EQ(c.maxCTAs, 8);
  EXPECT_EQ(c.minCTAs, 8);
  EXPECT_EQ(c.nChannelsPerNetPeer, kMaxCTAs);
}

// Split/Shrink without a config inherit the parent's options and re-read the
// environment, as NCCL does.
TEST_F(ConfigTest, ApplyConfigEnvOnInheritedConfig) {
  CommConfig parent;
  parent.blocking = false;
  parent.maxCTAs = 12;
  parent.commName = "parent";
  CommConfig child = parent;
  setenv("NCCL_MAX_CTAS", "6", 1);
  applyConfigEnv(&child);
  EXPECT_EQ(child.blocking, false);
  EXPECT_EQ(child.maxCTAs, 6);
  EXPECT_EQ(child.commName, "parent");
}

}  // namespace
}  // namespace uniccl

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
