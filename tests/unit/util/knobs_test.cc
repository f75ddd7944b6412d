// The knob registry (util/knobs.h): one spec per knob, and its readers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include "common/util/debug.h"
#include "common/util/knobs.h"
#include "common/util/param.h"

using namespace uniccl;

TEST(Knobs, OneSpecPerNameNamedAsTheEnumerator) {
  std::set<std::string> names;
  for (int i = 0; i < kNumKnobs; i++) {
    const KnobSpec& k = allKnobs()[i];
    EXPECT_TRUE(names.insert(k.name).second) << k.name << " declared twice";
    EXPECT_NE(k.doc, nullptr);
    EXPECT_NE(k.doc[0], '\0') << k.name;
  }
  EXPECT_STREQ(knobSpec(Knob::NCCL_BUFFSIZE).name, "NCCL_BUFFSIZE");
  EXPECT_STREQ(knobSpec(Knob::NCCL_PROFILER_PLUGIN).name, "NCCL_PROFILER_PLUGIN");
  EXPECT_EQ(&knobSpec(Knob::NCCL_DEBUG), &allKnobs()[(int)Knob::NCCL_DEBUG]);
}

TEST(Knobs, DefaultText) {
  char buf[32];
  EXPECT_STREQ(knobDefaultText(knobSpec(Knob::UNICCL_TIMEOUT), buf, sizeof(buf)), "600");
  EXPECT_STREQ(knobDefaultText(knobSpec(Knob::NCCL_IB_GID_INDEX), buf, sizeof(buf)), "-1");
  EXPECT_STREQ(knobDefaultText(knobSpec(Knob::NCCL_DEBUG_SUBSYS), buf, sizeof(buf)), "INIT,BOOTSTRAP,ENV");
}

TEST(Knobs, IntReader) {
  const KnobSpec& k = knobSpec(Knob::UNICCL_PROXY_SPIN_US);
  unsetenv(k.name);
  EXPECT_FALSE(knobIsSet(k));
  EXPECT_EQ(knobInt(Knob::UNICCL_PROXY_SPIN_US), k.intDefault);
  EXPECT_EQ(knobInt(Knob::UNICCL_PROXY_SPIN_US, 77), 77);  // a default the caller computes
  setenv(k.name, "0x10", 1);
  EXPECT_TRUE(knobIsSet(Knob::UNICCL_PROXY_SPIN_US));
  EXPECT_STREQ(knobValue(Knob::UNICCL_PROXY_SPIN_US), "0x10");
  EXPECT_EQ(knobInt(Knob::UNICCL_PROXY_SPIN_US), 16);
  EXPECT_EQ(knobInt(Knob::UNICCL_PROXY_SPIN_US, 77), 16);
  setenv(k.name, "soon", 1);
  clearLastError();
  EXPECT_EQ(knobInt(Knob::UNICCL_PROXY_SPIN_US), k.intDefault);
  EXPECT_NE(std::string(lastErrorMessage()).find(k.name), std::string::npos);
  unsetenv(k.name);
}

// Conf knobs see the configuration files; Env knobs (the file's own name,
// the vendor runtime's variables, UNICCL_HOSTID) only the environment.
TEST(Knobs, SourcesOfValues) {
  std::string path = "/tmp/uniccl_knobs_test." + std::to_string(getpid()) + ".conf";
  FILE* f = fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fprintf(f, "UNICCL_PROXY_YIELD_US=5\nUNICCL_HOSTID=from-file\n");
  fclose(f);
  unsetenv("UNICCL_PROXY_YIELD_US");
  unsetenv("UNICCL_HOSTID");
  setenv("NCCL_CONF_FILE", path.c_str(), 1);
  reloadConfigFilesForTesting();
  EXPECT_EQ(knobInt(Knob::UNICCL_PROXY_YIELD_US), 5);
  EXPECT_EQ(knobValue(Knob::UNICCL_HOSTID), nullptr);
  EXPECT_STREQ(knobValue(Knob::NCCL_CONF_FILE), path.c_str());
  setenv("UNICCL_HOSTID", "from-env", 1);
  EXPECT_STREQ(knobValue(Knob::UNICCL_HOSTID), "from-env");
  unsetenv("UNICCL_HOSTID");
  unsetenv("NCCL_CONF_FILE");
  unlink(path.c_str());
  reloadConfigFilesForTesting();
  EXPECT_EQ(knobInt(Knob::UNICCL_PROXY_YIELD_US), knobSpec(Knob::UNICCL_PROXY_YIELD_US).intDefault);
}
