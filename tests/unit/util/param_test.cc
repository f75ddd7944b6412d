// Knobs: environment over config file, integer parsing, garbage values.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/util/debug.h"
#include "common/util/param.h"

using namespace uniccl;

namespace {

struct ConfFile : ::testing::Test {
  std::string path = "/tmp/uniccl_param_test." + std::to_string(getpid()) + ".conf";
  void SetUp() override {
    FILE* f = fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    fprintf(f,
            "# a comment line\n"
            "  UNICCL_TEST_FROM_FILE = 77   # trailing comment\n"
            "UNICCL_TEST_BOTH=1\n"
            "UNICCL_TEST_HEX=0x40\n"
            "not a setting\n"
            "UNICCL_TEST_STRING=  eth0,ib0  \n");
    fclose(f);
    setenv("NCCL_CONF_FILE", path.c_str(), 1);
    reloadConfigFilesForTesting();
  }
  void TearDown() override {
    unlink(path.c_str());
    unsetenv("NCCL_CONF_FILE");
    unsetenv("UNICCL_TEST_BOTH");
    reloadConfigFilesForTesting();
  }
};

}  // namespace

TEST_F(ConfFile, FileValuesAreSeen) {
  EXPECT_STREQ(getEnv("UNICCL_TEST_FROM_FILE"), "77");
  EXPECT_EQ(paramInt("UNICCL_TEST_FROM_FILE", 5), 77);
  EXPECT_EQ(paramInt("UNICCL_TEST_HEX", 5), 64);
  EXPECT_STREQ(getEnv("UNICCL_TEST_STRING"), "eth0,ib0");
  EXPECT_EQ(getEnv("not a setting"), nullptr);
  EXPECT_EQ(getEnv("UNICCL_TEST_NOWHERE"), nullptr);
}

TEST_F(ConfFile, EnvironmentWinsOverFile) {
  EXPECT_EQ(paramInt("UNICCL_TEST_BOTH", 5), 1);
  setenv("UNICCL_TEST_BOTH", "2", 1);
  EXPECT_EQ(paramInt("UNICCL_TEST_BOTH", 5), 2);
  EXPECT_STREQ(getEnv("UNICCL_TEST_BOTH"), "2");
}

TEST_F(ConfFile, PointersSurviveReload) {
  const char* v = getEnv("UNICCL_TEST_FROM_FILE");
  reloadConfigFilesForTesting();
  EXPECT_STREQ(v, "77");
}

TEST(Param, DefaultsAndParsing) {
  unsetenv("UNICCL_TEST_P");
  EXPECT_EQ(paramInt("UNICCL_TEST_P", -3), -3);
  setenv("UNICCL_TEST_P", "123456789012", 1);
  EXPECT_EQ(paramInt("UNICCL_TEST_P", 0), 123456789012ll);
  setenv("UNICCL_TEST_P", "0x7f", 1);
  EXPECT_EQ(paramInt("UNICCL_TEST_P", 0), 127);
  setenv("UNICCL_TEST_P", " -9 ", 1);
  EXPECT_EQ(paramInt("UNICCL_TEST_P", 0), -9);
  unsetenv("UNICCL_TEST_P");
}

TEST(Param, GarbageWarnsAndGivesDefault) {
  for (const char* bad : {"abc", "12abc", "", "0x", "99999999999999999999999", "1.5"}) {
    setenv("UNICCL_TEST_BAD", bad, 1);
    clearLastError();
    EXPECT_EQ(paramInt("UNICCL_TEST_BAD", 42), 42) << bad;
    EXPECT_NE(std::string(lastErrorMessage()).find("UNICCL_TEST_BAD"), std::string::npos) << bad;
  }
  unsetenv("UNICCL_TEST_BAD");
}

