// test_check.h's own test: every check fails when its condition does not
// hold, prints FAIL with its file and line, counts the failure, and then does
// what its name says (goes on, returns false, exits, aborts). The programs
// that use the header rely on exactly that to fail, so it is checked here
// without the header's own machinery: each case writes "WRONG" and the exit
// status is 1 when anything differs.
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>

#include "common/util/debug.h"
#include "test_check.h"

namespace {

int gWrong = 0;

void expect(bool ok, const char* what, const std::string& detail = {}) {
  if (ok) return;
  printf("WRONG: %s%s%s\n", what, detail.empty() ? "" : "; stderr was: ", detail.c_str());
  gWrong++;
}

// What `fn` writes to stderr.
template <typename Fn>
std::string stderrOf(Fn fn) {
  fflush(stderr);
  FILE* capture = tmpfile();
  const int saved = dup(2);
  dup2(fileno(capture), 2);
  fn();
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::string text;
  rewind(capture);
  char buf[512];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), capture)) > 0) text.append(buf, n);
  fclose(capture);
  return text;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The exit status of a child that runs `fn`, or -signal when a signal ended it.
template <typename Fn>
int statusOf(Fn fn) {
  fflush(stdout);
  fflush(stderr);
  const pid_t pid = fork();
  if (pid == 0) {
    if (freopen("/dev/null", "w", stderr) == nullptr) _exit(2);
    fn();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? -WTERMSIG(status) : 1000;
}

ncclResult_t failWithLastError(const char* text) {
  uniccl::setLastErrorMessage(text);
  return ncclInvalidUsage;
}

const char* runtimeFailure() { return "device on fire"; }

bool requireFalse(bool* reachedEnd) {
  REQUIRE(2 + 2 == 5, "arithmetic %d", 4);
  *reachedEnd = true;
  return true;
}

const char* const kRefusal = "the root refused rank 3";

bool ncclOkFails(bool* reachedEnd) {
  NCCL_OK(failWithLastError(kRefusal));
  *reachedEnd = true;
  return true;
}

bool rtOkFails(bool* reachedEnd) {
  RT_OK(runtimeFailure());
  *reachedEnd = true;
  return true;
}

bool passingChecks() {
  CHECK(1 + 1 == 2, "never printed");
  CHECK_EQ(7, 7, "never printed");
  REQUIRE(true, "never printed");
  NCCL_OK(ncclSuccess);
  RT_OK(static_cast<const char*>(nullptr));
  CHECK_ERR(failWithLastError("window 2 is not registered"), ncclInvalidUsage, "not registered");
  return true;
}

}  // namespace

int main() {
  const std::string here = __FILE__;

  std::string out = stderrOf([] { expect(passingChecks(), "checks that hold return true"); });
  expect(out.empty() && testcheck::failures() == 0, "checks that hold print and count nothing", out);

  bool wentOn = false;
  out = stderrOf([&] {
    CHECK(1 + 1 == 3, "sum %d", 2);
    wentOn = true;
  });
  expect(wentOn, "CHECK goes on after a failure");
  expect(testcheck::failures() == 1, "CHECK counts its failure");
  expect(contains(out, "FAIL " + here + ":") && contains(out, "1 + 1 == 3: sum 2"),
         "CHECK prints FAIL, file, line, condition and message", out);

  out = stderrOf([] { CHECK_EQ(6 * 7, 41, "answer"); });
  expect(testcheck::failures() == 2 && contains(out, "6 * 7 = 42, want 41: answer"), "CHECK_EQ prints both values",
         out);

  testcheck::setFailPrefix("rank 1: ");
  out = stderrOf([] { ADD_FAILURE("lost %d bytes", 12); });
  testcheck::setFailPrefix("");
  expect(testcheck::failures() == 3 && contains(out, "FAIL " + here + ":") && contains(out, ": rank 1: lost 12 bytes"),
         "ADD_FAILURE counts and prints the prefix", out);

  bool reachedEnd = false;
  bool returned = true;
  out = stderrOf([&] { returned = requireFalse(&reachedEnd); });
  expect(!returned && !reachedEnd && testcheck::failures() == 4 && contains(out, "2 + 2 == 5: arithmetic 4"),
         "REQUIRE returns false at once", out);

  out = stderrOf([&] { returned = ncclOkFails(&reachedEnd); });
  expect(!returned && !reachedEnd && testcheck::failures() == 5, "NCCL_OK returns false at once", out);
  expect(contains(out, "failWithLastError(kRefusal) -> ") && contains(out, ncclGetErrorString(ncclInvalidUsage)) &&
             contains(out, kRefusal),
         "NCCL_OK prints the call, the error's name and the last error", out);

  out = stderrOf([&] { returned = rtOkFails(&reachedEnd); });
  expect(!returned && !reachedEnd && testcheck::failures() == 6 && contains(out, "runtimeFailure(): device on fire"),
         "RT_OK returns false at once and prints the runtime's error", out);

  out = stderrOf([] { CHECK_ERR(failWithLastError("bad count"), ncclInvalidArgument, "bad count"); });
  expect(testcheck::failures() == 7, "CHECK_ERR fails on another error code", out);
  out = stderrOf([] { CHECK_ERR(failWithLastError("bad count"), ncclInvalidUsage, "bad root"); });
  expect(testcheck::failures() == 8 && contains(out, "does not mention 'bad root'"),
         "CHECK_ERR fails on a last error without the text", out);

  expect(statusOf([] { NCCL_OK_OR_EXIT(failWithLastError("gone")); }) == 1, "NCCL_OK_OR_EXIT exits with 1");
  expect(statusOf([] { NCCL_OK_OR_EXIT(ncclSuccess); }) == 0, "NCCL_OK_OR_EXIT lets success through");
  expect(statusOf([] { RT_OK_OR_EXIT(runtimeFailure()); }) == 1, "RT_OK_OR_EXIT exits with 1");
  expect(statusOf([] { CHECK_OR_ABORT(1 > 2); }) == -SIGABRT, "CHECK_OR_ABORT aborts");
  expect(statusOf([] { CHECK_OR_ABORT(2 > 1); }) == 0, "CHECK_OR_ABORT lets a true condition through");

  printf("test_check_test: %s\n", gWrong == 0 ? "PASS" : "FAIL");
  return gWrong == 0 ? 0 : 1;
}
