// Logging: level and subsystem parsing, the log file, the line format, and the
// per-thread last error behind ncclGetLastError.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "common/util/debug.h"

using namespace uniccl;

namespace {

std::string readFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Restores logging to "off" after each test that turns it on.
struct LoggingEnv : ::testing::Test {
  void TearDown() override {
    unsetenv("NCCL_DEBUG");
    unsetenv("NCCL_DEBUG_SUBSYS");
    unsetenv("NCCL_DEBUG_FILE");
    resetLoggingForTesting();
    setLogDevice(-1);
  }
};

}  // namespace

TEST(DebugParse, Levels) {
  EXPECT_EQ(parseLogLevel(nullptr), kLogNone);
  EXPECT_EQ(parseLogLevel("VERSION"), kLogVersion);
  EXPECT_EQ(parseLogLevel("warn"), kLogWarn);
  EXPECT_EQ(parseLogLevel("Info"), kLogInfo);
  EXPECT_EQ(parseLogLevel("ABORT"), kLogAbort);
  EXPECT_EQ(parseLogLevel("trace"), kLogTrace);
  EXPECT_EQ(parseLogLevel("verbose"), kLogNone);
  EXPECT_EQ(parseLogLevel(""), kLogNone);
}

TEST(DebugParse, Subsystems) {
  EXPECT_EQ(parseLogSubsys(nullptr), kSubsysInit | kSubsysBootstrap | kSubsysEnv);
  EXPECT_EQ(parseLogSubsys("INIT"), kSubsysInit);
  EXPECT_EQ(parseLogSubsys("coll,p2p, NET "), kSubsysColl | kSubsysP2p | kSubsysNet);
  EXPECT_EQ(parseLogSubsys("TUNING,GRAPH,SHM,ENV,ALLOC,CALL,PROXY,NVLS,BOOTSTRAP,REG,PROFILE"),
            kSubsysTune | kSubsysGraph | kSubsysShm | kSubsysEnv | kSubsysAlloc | kSubsysCall | kSubsysProxy |
                kSubsysNvls | kSubsysBootstrap | kSubsysReg | kSubsysProfile);
  EXPECT_EQ(parseLogSubsys("ALL"), kSubsysAll);
  EXPECT_EQ(parseLogSubsys("^COLL,P2P"), ~(kSubsysColl | kSubsysP2p));
  EXPECT_EQ(parseLogSubsys("BOGUS"), 0u);
  EXPECT_EQ(parseLogSubsys(""), 0u);
}

TEST(DebugParse, FileNameExpansion) {
  char host[64];
  ASSERT_EQ(gethostname(host, sizeof(host)), 0);
  host[63] = 0;
  if (char* dot = strchr(host, '.')) *dot = 0;
  char out[256];
  expandLogFileName("/tmp/log.%h.%p.txt", out, sizeof(out));
  EXPECT_EQ(std::string(out), "/tmp/log." + std::string(host) + "." + std::to_string(getpid()) + ".txt");
  expandLogFileName("plain%%name", out, sizeof(out));
  EXPECT_STREQ(out, "plain%name");
  char tiny[5];
  expandLogFileName("abcdefgh", tiny, sizeof(tiny));
  EXPECT_STREQ(tiny, "abcd");
}

// NCCL exports these without declaring them in nccl.h (PyTorch links the
// first): the logging configuration is read again from the environment.
extern "C" void ncclResetDebugInitInternal();
extern "C" void ncclResetDebugInit();

TEST_F(LoggingEnv, ResetDebugInitRereadsTheEnvironment) {
  std::string pid = std::to_string(getpid());
  std::string first = "/tmp/uniccl_reset_debug_a." + pid + ".log";
  std::string second = "/tmp/uniccl_reset_debug_b." + pid + ".log";
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "INIT", 1);
  setenv("NCCL_DEBUG_FILE", first.c_str(), 1);
  ncclResetDebugInitInternal();
  INFO(kSubsysInit, "line one");
  INFO(kSubsysNet, "net line one");   // NET not selected yet

  // New file, new subsystems: the next lines follow them.
  setenv("NCCL_DEBUG_SUBSYS", "NET", 1);
  setenv("NCCL_DEBUG_FILE", second.c_str(), 1);
  ncclResetDebugInitInternal();
  INFO(kSubsysInit, "init line two");  // INIT no longer selected
  INFO(kSubsysNet, "net line two");

  // Logging off: nothing more is written anywhere.
  unsetenv("NCCL_DEBUG");
  // The deprecated name does the same; calling it is the point here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  ncclResetDebugInit();
#pragma GCC diagnostic pop
  INFO(kSubsysNet, "net line three");
  EXPECT_EQ(logLevel(), kLogNone);

  std::string a = readFile(first), b = readFile(second);
  unlink(first.c_str());
  unlink(second.c_str());
  EXPECT_NE(a.find("NCCL INFO line one\n"), std::string::npos) << a;
  EXPECT_EQ(a.find("net line one"), std::string::npos) << a;
  EXPECT_EQ(a.find("line two"), std::string::npos) << a;
  EXPECT_NE(b.find("NCCL INFO net line two\n"), std::string::npos) << b;
  EXPECT_EQ(b.find("init line two"), std::string::npos) << b;
  EXPECT_EQ(b.find("line three"), std::string::npos) << b;
}

TEST_F(LoggingEnv, InfoLinesGoToTheFileInNcclFormat) {
  std::string pattern = "/tmp/uniccl_debug_test.%p.log";
  std::string path = "/tmp/uniccl_debug_test." + std::to_string(getpid()) + ".log";
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "INIT,NET", 1);
  setenv("NCCL_DEBUG_FILE", pattern.c_str(), 1);
  resetLoggingForTesting();
  setLogDevice(3);
  INFO(kSubsysInit, "hello %d", 12345);
  INFO(kSubsysColl, "must not appear %d", 777);  // COLL not selected
  TRACE(kSubsysInit, "trace must not appear");
  WARN("something broke: %s", "disk on fire");
  std::string text = readFile(path);
  unlink(path.c_str());
  std::string pid = std::to_string(getpid());
  EXPECT_NE(text.find(":" + pid + ":"), std::string::npos) << text;
  EXPECT_NE(text.find(" [3] NCCL INFO hello 12345\n"), std::string::npos) << text;
  EXPECT_NE(text.find(" [3] NCCL WARN something broke: disk on fire\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("must not appear"), std::string::npos) << text;
  EXPECT_EQ(text.find("trace must not appear"), std::string::npos) << text;
}

// The banner prints once per process: check it in a fresh child.
TEST(DebugVersion, BannerOncePerProcess) {
  std::string path = "/tmp/uniccl_debug_version." + std::to_string(getpid()) + ".log";
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setenv("NCCL_DEBUG", "VERSION", 1);
    setenv("NCCL_DEBUG_FILE", path.c_str(), 1);
    resetLoggingForTesting();
    logVersionOnce();
    logVersionOnce();
    INFO(kSubsysInit, "not at VERSION level");
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::string text = readFile(path);
  unlink(path.c_str());
  size_t first = text.find("NCCL INFO NCCL version 2.28.9+uniccl-");
  EXPECT_NE(first, std::string::npos) << text;
  EXPECT_EQ(text.find("NCCL version", first + 20), std::string::npos) << text;
  EXPECT_EQ(text.find("not at VERSION level"), std::string::npos) << text;
}

TEST_F(LoggingEnv, ExcludedSubsystemsAndTrace) {
  std::string path = "/tmp/uniccl_debug_trace." + std::to_string(getpid()) + ".log";
  setenv("NCCL_DEBUG", "TRACE", 1);
  setenv("NCCL_DEBUG_SUBSYS", "^NET", 1);
  setenv("NCCL_DEBUG_FILE", path.c_str(), 1);
  resetLoggingForTesting();
  INFO(kSubsysNet, "net line");
  INFO(kSubsysColl, "coll line");
  TRACE(kSubsysColl, "coll trace");
  std::string text = readFile(path);
  unlink(path.c_str());
  EXPECT_EQ(text.find("net line"), std::string::npos) << text;
  EXPECT_NE(text.find("NCCL INFO coll line"), std::string::npos) << text;
  EXPECT_NE(text.find("NCCL TRACE coll trace"), std::string::npos) << text;
}

TEST_F(LoggingEnv, UnopenableFileFallsBackToStderr) {
  setenv("NCCL_DEBUG", "WARN", 1);
  setenv("NCCL_DEBUG_FILE", "/nonexistent-dir-uniccl/x.log", 1);
  testing::internal::CaptureStderr();
  resetLoggingForTesting();
  WARN("fallback works %d", 42);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("cannot open NCCL_DEBUG_FILE"), std::string::npos) << err;
  EXPECT_NE(err.find("NCCL WARN fallback works 42"), std::string::npos) << err;
}

TEST_F(LoggingEnv, DisabledLoggingPrintsNothingButKeepsLastError) {
  unsetenv("NCCL_DEBUG");
  resetLoggingForTesting();
  EXPECT_EQ(detail::gInfoMask.load(), 0u);
  EXPECT_EQ(detail::gTraceMask.load(), 0u);
  testing::internal::CaptureStderr();
  INFO(kSubsysAll, "quiet");
  WARN("recorded %s", "silently");
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "");
  EXPECT_STREQ(lastErrorMessage(), "recorded silently");
  clearLastError();
  EXPECT_STREQ(lastErrorMessage(), "");
}

TEST(LastError, IsPerThread) {
  WARN("main thread error %d", 1);
  std::string seenByOther = "unset";
  std::thread t([&] {
    seenByOther = lastErrorMessage();
    WARN("other thread error %d", 2);
    EXPECT_STREQ(lastErrorMessage(), "other thread error 2");
  });
  t.join();
  EXPECT_EQ(seenByOther, "");
  EXPECT_STREQ(lastErrorMessage(), "main thread error 1");
}

TEST(LastError, LongMessagesAreTruncatedNotOverflowed) {
  std::string big(5000, 'x');
  WARN("%s", big.c_str());
  EXPECT_EQ(strlen(lastErrorMessage()), 1023u);
}
