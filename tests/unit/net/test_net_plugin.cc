// A minimal external net plugin for the loader tests: it reports one device
// and counts the calls it gets; it moves no data (its data-path entries fail
// loudly). Built as libnccl-net-testnet.so (net API v8, "TestNet") and, with
// TEST_NET_V7, libnccl-net-testnet7.so (net API v7, "TestNet7").
// TESTNET_INIT_FAIL=1 in the environment makes init() fail.
#include <cstdlib>
#include <cstring>

#include "uniccl_net.h"

extern "C" {
__attribute__((visibility("default"))) int testNetInitCalls = 0;
__attribute__((visibility("default"))) int testNetDevicesCalls = 0;
__attribute__((visibility("default"))) int testNetGetPropertiesCalls = 0;
}

namespace {

ncclDebugLogger_t gLog = nullptr;
char kDevName[] = "testnet0";

ncclResult_t tnInit(ncclDebugLogger_t log) {
  testNetInitCalls++;
  gLog = log;
  const char* fail = getenv("TESTNET_INIT_FAIL");
  if (fail && strcmp(fail, "1") == 0) {
    if (gLog) gLog(NCCL_LOG_WARN, NCCL_NET, __FILE__, __LINE__, "TestNet: init failing as asked by TESTNET_INIT_FAIL");
    return ncclSystemError;
  }
  if (gLog) gLog(NCCL_LOG_INFO, NCCL_NET, __FILE__, __LINE__, "TestNet: init #%d", testNetInitCalls);
  return ncclSuccess;
}

ncclResult_t tnDevices(int* ndev) {
  testNetDevicesCalls++;
  *ndev = 1;
  return ncclSuccess;
}

template <typename Props>
ncclResult_t fillProps(int dev, Props* props) {
  testNetGetPropertiesCalls++;
  if (dev != 0) return ncclInvalidArgument;
  memset(props, 0, sizeof(*props));
  props->name = kDevName;
  props->guid = 0x1234;
  props->ptrSupport = NCCL_PTR_HOST;
  props->speed = 4242;
  props->maxComms = 1;
  props->maxRecvs = 1;
  return ncclSuccess;
}

ncclResult_t tnUnsupported() {
  if (gLog) gLog(NCCL_LOG_WARN, NCCL_NET, __FILE__, __LINE__, "TestNet moves no data");
  return ncclInternalError;
}

ncclResult_t tnListen(int, void*, void**) { return tnUnsupported(); }
template <typename DevHandle>
ncclResult_t tnConnect(int, void*, void**, DevHandle**) { return tnUnsupported(); }
template <typename DevHandle>
ncclResult_t tnAccept(void*, void**, DevHandle**) { return tnUnsupported(); }
template <typename Size>
ncclResult_t tnRegMr(void*, void*, Size, int, void**) { return tnUnsupported(); }
ncclResult_t tnRegMrDmaBuf(void*, void*, size_t, int, uint64_t, int, void**) { return tnUnsupported(); }
ncclResult_t tnDeregMr(void*, void*) { return tnUnsupported(); }
ncclResult_t tnIsend(void*, void*, int, int, void*, void**) { return tnUnsupported(); }
ncclResult_t tnIrecv(void*, int, void**, int*, int*, void**, void**) { return tnUnsupported(); }
ncclResult_t tnIflush(void*, int, void**, int*, void**, void**) { return tnUnsupported(); }
ncclResult_t tnTest(void*, int*, int*) { return tnUnsupported(); }
ncclResult_t tnClose(void*) { return tnUnsupported(); }

}  // namespace

#ifdef TEST_NET_V7
extern "C" __attribute__((visibility("default"))) const ncclNet_v7_t ncclNetPlugin_v7 = {
    "TestNet7", tnInit, tnDevices, fillProps<ncclNetProperties_v7_t>, tnListen,
    tnConnect<ncclNetDeviceHandle_v7_t>, tnAccept<ncclNetDeviceHandle_v7_t>, tnRegMr<int>, tnRegMrDmaBuf,
    tnDeregMr, tnIsend, tnIrecv, tnIflush, tnTest, tnClose, tnClose, tnClose, nullptr, nullptr,
};
#else
extern "C" __attribute__((visibility("default"))) const ncclNet_v8_t ncclNetPlugin_v8 = {
    "TestNet", tnInit, tnDevices, fillProps<ncclNetProperties_v8_t>, tnListen,
    tnConnect<ncclNetDeviceHandle_v8_t>, tnAccept<ncclNetDeviceHandle_v8_t>, tnRegMr<size_t>, tnRegMrDmaBuf,
    tnDeregMr, tnIsend, tnIrecv, tnIflush, tnTest, tnClose, tnClose, tnClose, nullptr, nullptr,
};
#endif
