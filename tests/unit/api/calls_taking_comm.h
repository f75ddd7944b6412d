// Every exported function that takes a communicator and returns an
// ncclResult_t (but ncclCommDestroy and ncclCommAbort, which accept NULL),
// each called with harmless other arguments: the tests hand them a handle
// that must be refused before anything else is looked at (NULL, not a
// communicator, destroyed).
#pragma once

#include <functional>
#include <vector>

#include "nccl_device.h"
#include "rccl/rccl.h"   // uniccl.h plus RCCL's names (ncclAllToAll, ncclAllToAllv)

struct CommCall {
  const char* name;
  std::function<ncclResult_t(ncclComm_t)> fn;
};

inline std::vector<CommCall> callsTakingComm() {
  static std::vector<float> host(64);
  float* s = host.data();
  float* r = host.data() + 32;
  static ncclComm_t child;
  static int value;
  static void* handle;
  static char registered[8];
  static ncclWindow_t win;
  static ncclRedOp_t op;
  static ncclResult_t async;
  static int exclude[1] = {0};
  static float scalar = 2.0f;
  static const size_t counts[1] = {8}, displs[1] = {0};
  static ncclDevCommRequirements devReqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  static ncclDevComm devComm;
  static ncclGinBarrierHandle_t ginBar;
  static ncclDevResourceRequirements_t resReq;
  return {
      {"ncclAllReduce", [=](ncclComm_t c) { return ncclAllReduce(s, r, 8, ncclFloat32, ncclSum, c, nullptr); }},
      {"ncclBroadcast", [=](ncclComm_t c) { return ncclBroadcast(s, r, 8, ncclFloat32, 0, c, nullptr); }},
      {"ncclBcast", [=](ncclComm_t c) { return ncclBcast(r, 8, ncclFloat32, 0, c, nullptr); }},
      {"ncclReduce", [=](ncclComm_t c) { return ncclReduce(s, r, 8, ncclFloat32, ncclSum, 0, c, nullptr); }},
      {"ncclAllGather", [=](ncclComm_t c) { return ncclAllGather(s, r, 8, ncclFloat32, c, nullptr); }},
      {"ncclReduceScatter", [=](ncclComm_t c) { return ncclReduceScatter(s, r, 8, ncclFloat32, ncclSum, c, nullptr); }},
      {"ncclSend", [=](ncclComm_t c) { return ncclSend(s, 8, ncclFloat32, 0, c, nullptr); }},
      {"ncclRecv", [=](ncclComm_t c) { return ncclRecv(r, 8, ncclFloat32, 0, c, nullptr); }},
      {"ncclAlltoAll", [=](ncclComm_t c) { return ncclAlltoAll(s, r, 8, ncclFloat32, c, nullptr); }},
      {"ncclAllToAll", [=](ncclComm_t c) { return ncclAllToAll(s, r, 8, ncclFloat32, c, nullptr); }},
      {"ncclAllToAllv",
       [=](ncclComm_t c) { return ncclAllToAllv(s, counts, displs, r, counts, displs, ncclFloat32, c, nullptr); }},
      {"ncclGather", [=](ncclComm_t c) { return ncclGather(s, r, 8, ncclFloat32, 0, c, nullptr); }},
      {"ncclScatter", [=](ncclComm_t c) { return ncclScatter(s, r, 8, ncclFloat32, 0, c, nullptr); }},
      {"ncclCommFinalize", [](ncclComm_t c) { return ncclCommFinalize(c); }},
      {"ncclCommRevoke", [](ncclComm_t c) { return ncclCommRevoke(c, 0); }},
      {"ncclCommShrink", [](ncclComm_t c) { return ncclCommShrink(c, exclude, 1, &child, nullptr, 0); }},
      {"ncclCommSplit", [](ncclComm_t c) { return ncclCommSplit(c, 0, 0, &child, nullptr); }},
      {"ncclCommGetAsyncError", [](ncclComm_t c) { return ncclCommGetAsyncError(c, &async); }},
      {"ncclCommCount", [](ncclComm_t c) { return ncclCommCount(c, &value); }},
      {"ncclCommCuDevice", [](ncclComm_t c) { return ncclCommCuDevice(c, &value); }},
      {"ncclCommUserRank", [](ncclComm_t c) { return ncclCommUserRank(c, &value); }},
      {"ncclCommRegister", [=](ncclComm_t c) { return ncclCommRegister(c, s, 64, &handle); }},
      {"ncclCommDeregister", [](ncclComm_t c) { return ncclCommDeregister(c, registered); }},
      {"ncclCommWindowRegister", [=](ncclComm_t c) { return ncclCommWindowRegister(c, s, 64, &win, 0); }},
      {"ncclCommWindowDeregister", [](ncclComm_t c) { return ncclCommWindowDeregister(c, nullptr); }},
      {"ncclRedOpCreatePreMulSum",
       [](ncclComm_t c) { return ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarHostImmediate, c); }},
      {"ncclRedOpDestroy", [](ncclComm_t c) { return ncclRedOpDestroy(ncclSum, c); }},
      // Device API (nccl_device.h)
      {"ncclDevCommCreate", [](ncclComm_t c) { return ncclDevCommCreate(c, &devReqs, &devComm); }},
      {"ncclDevCommDestroy", [](ncclComm_t c) { return ncclDevCommDestroy(c, &devComm); }},
      {"ncclGinBarrierCreateRequirement",
       [](ncclComm_t c) { return ncclGinBarrierCreateRequirement(c, ncclTeam_t{1, 0, 1}, 1, &ginBar, &resReq); }},
  };
}
