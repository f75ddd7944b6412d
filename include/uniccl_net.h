/*
 * uniccl network plugin interface.
 *
 * The layouts and symbol names below are NCCL's net plugin ABI (versions 8 and
 * 7), so a network plugin built for NCCL (libnccl-net-<name>.so exporting
 * ncclNetPlugin_v8 or ncclNetPlugin_v7) loads into uniccl unchanged, and a
 * plugin written against this header loads into NCCL.
 *
 * uniccl looks for ncclNetPlugin_v8 first, then ncclNetPlugin_v7. Layouts are
 * ABI: never reorder or resize anything here. See docs/network.md.
 */
#ifndef UNICCL_NET_H_
#define UNICCL_NET_H_

#include <stddef.h>
#include <stdint.h>

#include "uniccl.h" /* ncclResult_t */

#ifdef __cplusplus
extern "C" {
#endif

#define NCCL_NET_HANDLE_MAXSIZE 128

/* Memory kinds for ptrSupport and regMr's type. */
#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4

/* Most requests a caller keeps in flight per comm (NCCL's value for v7/v8). */
#define NCCL_NET_MAX_REQUESTS 8

/* -------------------------------------------------------------- logging */
typedef enum {
  NCCL_LOG_NONE = 0,
  NCCL_LOG_VERSION = 1,
  NCCL_LOG_WARN = 2,
  NCCL_LOG_INFO = 3,
  NCCL_LOG_ABORT = 4,
  NCCL_LOG_TRACE = 5
} ncclDebugLogLevel;

typedef enum {
  NCCL_INIT = 1,
  NCCL_COLL = 2,
  NCCL_P2P = 4,
  NCCL_SHM = 8,
  NCCL_NET = 16,
  NCCL_GRAPH = 32,
  NCCL_TUNING = 64,
  NCCL_ENV = 128,
  NCCL_ALLOC = 256,
  NCCL_CALL = 512,
  NCCL_PROXY = 1024,
  NCCL_NVLS = 2048,
  NCCL_BOOTSTRAP = 4096,
  NCCL_REG = 8192,
  NCCL_ALL = ~0
} ncclDebugLogSubSys;

/* Handed to init(): the plugin logs through the host library's NCCL_DEBUG. */
typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                                  const char* fmt, ...);

/* ------------------------------------------------------ device offload */
#define NCCL_NET_DEVICE_INVALID_VERSION 0x0
#define NCCL_NET_MTU_SIZE 4096

typedef enum {
  NCCL_NET_DEVICE_HOST = 0,
  NCCL_NET_DEVICE_UNPACK = 1,
  NCCL_NET_DEVICE_GIN_PROXY = 2, /* GIN through the proxy thread (nccl_device/gin.h) */
  NCCL_NET_DEVICE_GIN_GDAKI = 3  /* NCCL's GPU-driven NIC backend: never used by uniccl */
} ncclNetDeviceType;

typedef struct {
  ncclNetDeviceType netDeviceType; /* network offload type */
  int netDeviceVersion;            /* version number for network offload */
  void* handle;
  size_t size;
  int needsProxyProgress;
} ncclNetDeviceHandle_v7_t;

typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v8_t;

/* ------------------------------------------------------------------ v8 */
typedef struct {
  char* name;                      /* used mostly for logging */
  char* pciPath;                   /* path to the PCI device in /sys (may be NULL) */
  uint64_t guid;                   /* unique identifier of the NIC chip */
  int ptrSupport;                  /* NCCL_PTR_HOST | NCCL_PTR_CUDA | NCCL_PTR_DMABUF */
  int regIsGlobal;                 /* regMr is not tied to a particular comm */
  int speed;                       /* port speed in Mbps */
  int port;                        /* port number */
  float latency;                   /* network latency (us) */
  int maxComms;                    /* most comms that can be created */
  int maxRecvs;                    /* most grouped receives (irecv's n) */
  ncclNetDeviceType netDeviceType; /* network offload type */
  int netDeviceVersion;            /* version number for network offload */
} ncclNetProperties_v8_t;

typedef struct {
  /* Name of the network (logs, and NCCL_NET selects by it). */
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  /* Number of adapters. */
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v8_t* props);
  /* Creates a receiving object and writes into `handle` (up to
   * NCCL_NET_HANDLE_MAXSIZE bytes) what the peer needs to connect to it. */
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  /* Never blocks: returns ncclSuccess with *sendComm == NULL until the
   * connection is established; call again with the same handle until then. */
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v8_t** sendDevComm);
  /* Same contract on the receiving side. */
  ncclResult_t (*accept)(void* listenComm, void** recvComm, ncclNetDeviceHandle_v8_t** recvDevComm);
  /* Register/deregister memory; comm is a sendComm or a recvComm. */
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                              void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  /* Asynchronous send/receive; *request == NULL means "cannot now, retry". */
  ncclResult_t (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles,
                        void** request);
  /* Makes data received into GPU memory visible to the GPU. */
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  /* Whether a request is complete; sizes (if not NULL) gets the bytes moved. */
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  /* Optional (may be NULL): device-side offload. */
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
} ncclNet_v8_t;

/* ------------------------------------------------------------------ v7 */
/* As v8 without regIsGlobal, and regMr takes an int size. */
typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
} ncclNetProperties_v7_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v7_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v7_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, ncclNetDeviceHandle_v7_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, int size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                              void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles,
                        void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
} ncclNet_v7_t;

#ifdef __cplusplus
}
#endif

#endif /* UNICCL_NET_H_ */
