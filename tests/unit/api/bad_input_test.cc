// Every exported function answers bad input with the right error code and a
// ncclGetLastError text that names the problem; nothing crashes or hangs.
// Links the real library; runs without a GPU (and with one: then the
// "valid arguments" init succeeds and its comm serves the null-pointer checks).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "calls_taking_comm.h"
#include "nccl_device.h"
#include "rccl/rccl.h"   // uniccl.h plus RCCL's names (ncclAllToAll, ncclAllToAllv)

namespace {

// A WARN from a call we do not test, so that each check sees a message its
// own call wrote, not one left over from an earlier check.
constexpr const char* kMarker = "ncclGetVersion: version is a null pointer";
void resetLastError() { ncclGetVersion(nullptr); }

// `res` is `want`, and the thread's last error is new, not empty, and
// mentions `needle` ("": any text).
void expectError(ncclResult_t res, ncclResult_t want, const char* needle, const std::string& what) {
  EXPECT_EQ(res, want) << what << ": got " << ncclGetErrorString(res);
  const char* last = ncclGetLastError(nullptr);
  ASSERT_NE(last, nullptr) << what;
  EXPECT_STRNE(last, "") << what;
  EXPECT_EQ(std::string(last).find(kMarker), std::string::npos) << what << ": no new error text";
  EXPECT_NE(std::string(last).find(needle), std::string::npos) << what << ": last error '" << last << "'";
}

// Not a communicator: as big as any real one, all zero; refused without
// being read (nothing may be written into it either).
alignas(64) unsigned char gBogus[1 << 16];
ncclComm_t bogusComm() { return reinterpret_cast<ncclComm_t>(gBogus); }

TEST(BadInput, NullAndBogusComm) {
  for (const CommCall& call : callsTakingComm()) {
    resetLastError();
    expectError(call.fn(nullptr), ncclInvalidArgument, call.name, std::string(call.name) + "(NULL comm)");
    resetLastError();
    expectError(call.fn(bogusComm()), ncclInvalidArgument, call.name, std::string(call.name) + "(bogus comm)");
  }
  for (size_t i = 0; i < sizeof(gBogus); i++) ASSERT_EQ(gBogus[i], 0) << "a call wrote into the bogus comm";
  // As NCCL: destroying or aborting NULL is a no-op; a bogus handle is refused.
  EXPECT_EQ(ncclCommDestroy(nullptr), ncclSuccess);
  EXPECT_EQ(ncclCommAbort(nullptr), ncclSuccess);
  resetLastError();
  expectError(ncclCommDestroy(bogusComm()), ncclInvalidArgument, "ncclCommDestroy", "ncclCommDestroy(bogus)");
  resetLastError();
  expectError(ncclCommAbort(bogusComm()), ncclInvalidArgument, "ncclCommAbort", "ncclCommAbort(bogus)");
}

// The Device API's team functions return a team or a rank, not a result:
// a bad comm gets the empty team / -1 and a WARN naming the function.
TEST(BadInput, DeviceApiTeams) {
  for (ncclComm_t c : {(ncclComm_t) nullptr, bogusComm()}) {
    const std::string which = c ? "bogus comm" : "NULL comm";
    using TeamFn = ncclTeam_t (*)(ncclComm_t);
    const std::pair<const char*, TeamFn> teams[] = {
        {"ncclTeamWorld", ncclTeamWorld}, {"ncclTeamLsa", ncclTeamLsa}, {"ncclTeamRail", ncclTeamRail}};
    for (auto [name, fn] : teams) {
      resetLastError();
      ncclTeam_t t = fn(c);
      EXPECT_EQ(t.nRanks, 0) << name << "(" << which << ")";
      expectError(ncclInvalidArgument, ncclInvalidArgument, name, std::string(name) + "(" + which + ")");
    }
    resetLastError();
    EXPECT_EQ(ncclTeamRankToWorld(c, ncclTeam_t{1, 0, 1}, 0), -1);
    expectError(ncclInvalidArgument, ncclInvalidArgument, "ncclTeamRankToWorld", "ncclTeamRankToWorld(" + which + ")");
    resetLastError();
    EXPECT_EQ(ncclTeamRankToLsa(c, ncclTeam_t{1, 0, 1}, 0), -1);
    expectError(ncclInvalidArgument, ncclInvalidArgument, "ncclTeamRankToLsa", "ncclTeamRankToLsa(" + which + ")");
  }
  for (size_t i = 0; i < sizeof(gBogus); i++) ASSERT_EQ(gBogus[i], 0) << "a call wrote into the bogus comm";
}

TEST(BadInput, NullOutPointers) {
  ncclGetUniqueId(nullptr);  // some other text first
  EXPECT_EQ(ncclGetVersion(nullptr), ncclInvalidArgument);
  EXPECT_STREQ(ncclGetLastError(nullptr), "ncclGetVersion: version is a null pointer; pass the address of an int");
  int version = 0;
  EXPECT_EQ(ncclGetVersion(&version), ncclSuccess);
  EXPECT_EQ(version, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH));
  resetLastError();
  expectError(ncclGetUniqueId(nullptr), ncclInvalidArgument, "ncclGetUniqueId", "ncclGetUniqueId(NULL)");
  resetLastError();
  expectError(ncclMemAlloc(nullptr, 64), ncclInvalidArgument, "ncclMemAlloc", "ncclMemAlloc(NULL)");
  resetLastError();
  expectError(ncclCommCount(bogusComm(), nullptr), ncclInvalidArgument, "ncclCommCount", "ncclCommCount(.., NULL)");
}

TEST(BadInput, Groups) {
  expectError(ncclGroupEnd(), ncclInvalidUsage, "ncclGroupEnd", "ncclGroupEnd without start");
  resetLastError();
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  expectError(ncclGroupSimulateEnd(&sim), ncclInvalidUsage, "ncclGroupSimulateEnd", "simulate without start");
  // Nested groups: only the outermost end closes; a bad call inside does not
  // unbalance them, and the outermost end returns its error (NCCL's group
  // rule), once.
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  resetLastError();
  expectError(ncclAllReduce(gBogus, gBogus, 1, ncclFloat32, ncclSum, nullptr, nullptr), ncclInvalidArgument,
              "ncclAllReduce", "ncclAllReduce(NULL) in a group");
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidArgument);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
  resetLastError();
  expectError(ncclGroupEnd(), ncclInvalidUsage, "ncclGroupEnd", "one end too many");
  // A bad simInfo is refused and leaves the group open; a good one closes it.
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  resetLastError();
  expectError(ncclGroupSimulateEnd(nullptr), ncclInvalidArgument, "simInfo", "simulate(NULL)");
  ncclSimInfo_t bad = NCCL_SIM_INFO_INITIALIZER;
  bad.magic ^= 1;
  resetLastError();
  expectError(ncclGroupSimulateEnd(&bad), ncclInvalidArgument, "simInfo", "simulate(bad magic)");
  bad = sim;
  bad.size = 3;
  resetLastError();
  expectError(ncclGroupSimulateEnd(&bad), ncclInvalidArgument, "simInfo", "simulate(size 3)");
  EXPECT_EQ(ncclGroupSimulateEnd(&sim), ncclSuccess);
  resetLastError();
  expectError(ncclGroupEnd(), ncclInvalidUsage, "ncclGroupEnd", "group closed by simulate");
}

TEST(BadInput, Init) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = nullptr;
  const char* fn = "ncclCommInitRankConfig";
  struct { int nranks, rank; } bad[] = {{0, 0}, {-3, 0}, {2, 2}, {2, -1}, {1, 1}};
  for (auto b : bad) {
    resetLastError();
    expectError(ncclCommInitRank(&comm, b.nranks, id, b.rank), ncclInvalidArgument, fn,
                "nranks " + std::to_string(b.nranks) + " rank " + std::to_string(b.rank));
    EXPECT_EQ(comm, nullptr);
  }
  resetLastError();
  expectError(ncclCommInitRank(nullptr, 1, id, 0), ncclInvalidArgument, fn, "ncclCommInitRank(NULL comm)");
  resetLastError();
  expectError(ncclCommInitRankScalable(&comm, 1, 0, 0, &id, nullptr), ncclInvalidArgument,
              "ncclCommInitRankScalable", "scalable with 0 ids");

  // Valid arguments: with no GPU a clean error (the vendor runtime's reason);
  // with one, a usable comm.
  resetLastError();
  ncclResult_t res = ncclCommInitRank(&comm, 1, id, 0);
  bool haveGpu = res == ncclSuccess;
  if (!haveGpu) {
    expectError(res, ncclUnhandledCudaError, "", "init without a GPU");
    EXPECT_EQ(comm, nullptr);
  }

  // A config not made by NCCL_CONFIG_INITIALIZER: the config is checked
  // before any GPU is asked for, so the error is the same with or without one.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.magic = 0x12345678;
  ncclComm_t other = nullptr;
  resetLastError();
  ncclResult_t cfgRes = ncclCommInitRankConfig(&other, 1, id, 0, &config);
  expectError(cfgRes, ncclInvalidArgument, "magic", "config with a bad magic");
  EXPECT_EQ(other, nullptr);

  if (haveGpu) {  // null out-pointers and args on a real communicator
    resetLastError();
    expectError(ncclCommCount(comm, nullptr), ncclInvalidArgument, "ncclCommCount", "ncclCommCount(comm, NULL)");
    ncclRedOp_t op;
    float scalar = 1.5f;
    resetLastError();
    expectError(ncclRedOpCreatePreMulSum(nullptr, &scalar, ncclFloat32, ncclScalarHostImmediate, comm),
                ncclInvalidArgument, "ncclRedOpCreatePreMulSum", "premulsum(NULL op)");
    resetLastError();
    expectError(ncclRedOpCreatePreMulSum(&op, nullptr, ncclFloat32, ncclScalarHostImmediate, comm),
                ncclInvalidArgument, "ncclRedOpCreatePreMulSum", "premulsum(NULL scalar)");
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  }

  int devs[2] = {0, -1};
  ncclComm_t comms[2] = {nullptr, nullptr};
  resetLastError();
  expectError(ncclCommInitAll(nullptr, 1, nullptr), ncclInvalidArgument, "ncclCommInitAll", "InitAll(NULL)");
  resetLastError();
  expectError(ncclCommInitAll(comms, 0, nullptr), ncclInvalidArgument, "ncclCommInitAll", "InitAll(ndev 0)");
  resetLastError();
  res = ncclCommInitAll(comms, 2, devs);  // device -1: refused (no GPU: the query fails)
  EXPECT_TRUE(res == ncclInvalidArgument || (!haveGpu && res != ncclSuccess)) << ncclGetErrorString(res);
  EXPECT_STRNE(ncclGetLastError(nullptr), "");
  EXPECT_EQ(std::string(ncclGetLastError(nullptr)).find(kMarker), std::string::npos);
  EXPECT_TRUE(comms[0] == nullptr && comms[1] == nullptr);
}

TEST(BadInput, Memory) {
  std::mt19937 rng(std::random_device{}());
  std::vector<uint32_t> host(16);
  for (uint32_t& v : host) v = rng();
  resetLastError();
  expectError(ncclMemFree(host.data()), ncclInvalidArgument, "ncclMemFree", "ncclMemFree(host pointer)");
  EXPECT_EQ(ncclMemFree(nullptr), ncclSuccess);
  void* p = gBogus;
  resetLastError();
  ncclResult_t res = ncclMemAlloc(&p, 1 << 20);
  if (res == ncclSuccess) {
    EXPECT_NE(p, nullptr);
    EXPECT_EQ(ncclMemFree(p), ncclSuccess);
  } else {
    EXPECT_STRNE(ncclGetLastError(nullptr), "") << "failed ncclMemAlloc without a reason";
    EXPECT_EQ(std::string(ncclGetLastError(nullptr)).find(kMarker), std::string::npos);
  }
}

TEST(BadInput, ErrorStrings) {
  std::vector<std::string> seen;
  for (int r = ncclSuccess; r < ncclNumResults; r++) {
    const char* s = ncclGetErrorString(static_cast<ncclResult_t>(r));
    ASSERT_NE(s, nullptr) << r;
    EXPECT_STRNE(s, "") << r;
    EXPECT_EQ(std::string(s).find("unknown"), std::string::npos) << r << ": " << s;
    for (const std::string& o : seen) EXPECT_NE(o, s) << r;
    seen.push_back(s);
  }
  for (int r : {-1, (int)ncclNumResults, 1000, INT32_MIN}) {
    const char* s = ncclGetErrorString(static_cast<ncclResult_t>(r));
    ASSERT_NE(s, nullptr) << r;
    EXPECT_NE(std::string(s).find("unknown"), std::string::npos) << r << ": " << s;
  }
}

}  // namespace
