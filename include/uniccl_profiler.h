/*
 * uniccl profiler plugin interface.
 *
 * The layouts, values and symbol names below are NCCL's profiler plugin ABI as
 * NCCL 2.28 speaks it: versions 5 (the newest in 2.28) and 4. A profiler plugin
 * built for NCCL (libnccl-profiler-<name>.so exporting ncclProfiler_v5 or
 * ncclProfiler_v4) loads into uniccl unchanged, and a plugin written against
 * this header loads into NCCL 2.26+ (v4) / 2.27+ (v5).
 *
 * uniccl looks for ncclProfiler_v5 first, then ncclProfiler_v4 (adapted
 * internally: the v4 table never sees the v5-only API events). See
 * docs/profiler.md for loading rules, the event hierarchy and the knobs.
 *
 * Layouts are ABI: never reorder, resize or renumber anything here.
 */
#ifndef UNICCL_PROFILER_H_
#define UNICCL_PROFILER_H_

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h> /* pid_t */
#ifndef __cplusplus
#include <stdbool.h>
#endif

#include "uniccl_net.h" /* ncclResult_t, ncclDebugLogLevel, ncclDebugLogger_t */

#ifdef __cplusplus
extern "C" {
#endif

/* Subsystem bit for profiler log lines (NCCL_DEBUG_SUBSYS=PROFILE). */
#define UNICCL_PROFILER_LOG_SUBSYS 0x4000UL

/* ------------------------------------------------------------ event types
 * One bit per event type: the activation mask a plugin writes in init() is an
 * OR of these. */
enum {
  ncclProfileGroup = (1 << 0),        /* a group of operations handed to the GPU (one per launch plan) */
  ncclProfileColl = (1 << 1),         /* a collective of that group */
  ncclProfileP2p = (1 << 2),          /* a send or receive of that group */
  ncclProfileProxyOp = (1 << 3),      /* a proxy (network) operation on one channel */
  ncclProfileProxyStep = (1 << 4),    /* one network transfer of a proxy operation */
  ncclProfileProxyCtrl = (1 << 5),    /* proxy progress thread activity (idle, sleep, append) */
  ncclProfileKernelCh = (1 << 6),     /* one channel (GPU block) working on an operation */
  ncclProfileNetPlugin = (1 << 7),    /* events defined by the network plugin */
  ncclProfileGroupApi = (1 << 8),     /* v5: ncclGroupStart..ncclGroupEnd as the application called them */
  ncclProfileCollApi = (1 << 9),      /* v5: one collective API call */
  ncclProfileP2pApi = (1 << 10),      /* v5: one ncclSend / ncclRecv API call */
  ncclProfileKernelLaunch = (1 << 11) /* v5: one kernel launch */
};

/* ------------------------------------------------------------ event states
 * Passed to recordEventState(). Values are ABI; the gaps are states of older
 * versions that NCCL retired (their numbers are never reused). */
typedef enum {
  /* ProxyOp states of v1-v3 (not emitted to v4/v5 plugins) */
  ncclProfilerProxyOpSendPosted = 0,
  ncclProfilerProxyOpSendRemFifoWait = 1,
  ncclProfilerProxyOpSendTransmitted = 2,
  ncclProfilerProxyOpSendDone = 3,
  ncclProfilerProxyOpRecvPosted = 4,
  ncclProfilerProxyOpRecvReceived = 5,
  ncclProfilerProxyOpRecvTransmitted = 6,
  ncclProfilerProxyOpRecvDone = 7,
  ncclProfilerProxyOpInProgress_v4 = 19,

  /* ProxyStep states (args: proxyStep.transSize) */
  ncclProfilerProxyStepSendGPUWait = 8,     /* send: waiting for the GPU to fill the slot */
  ncclProfilerProxyStepSendPeerWait_v4 = 20, /* send: waiting for the peer's receive credit */
  ncclProfilerProxyStepSendWait = 9,        /* send: posted to the network, waiting for completion */
  ncclProfilerProxyStepRecvWait = 10,       /* recv: posted to the network, waiting for data */
  ncclProfilerProxyStepRecvFlushWait = 11,  /* recv: data in, waiting for the flush to the GPU */
  ncclProfilerProxyStepRecvGPUWait = 12,    /* recv: waiting for the GPU to consume the slot */

  /* ProxyCtrl states (args: proxyCtrl.appendedProxyOps for AppendEnd) */
  ncclProfilerProxyCtrlIdle = 13,
  ncclProfilerProxyCtrlActive = 14,
  ncclProfilerProxyCtrlSleep = 15,
  ncclProfilerProxyCtrlWakeup = 16,
  ncclProfilerProxyCtrlAppend = 17,
  ncclProfilerProxyCtrlAppendEnd = 18,

  /* NetPlugin event update (args: netPlugin.data) */
  ncclProfilerNetPluginUpdate = 21,

  /* KernelCh: the channel finished (args: kernelCh.pTimer = GPU stop timer) */
  ncclProfilerKernelChStop = 22,

  /* GroupApi (v5): ncclGroupStart returned / ncclGroupEnd entered */
  ncclProfilerGroupStartApiStop = 23,
  ncclProfilerGroupEndApiStart = 24
} ncclProfilerEventState_t;

typedef ncclProfilerEventState_t ncclProfilerEventState_v4_t;
typedef ncclProfilerEventState_t ncclProfilerEventState_v5_t;

/* ------------------------------------------------------------------- v5 */
typedef struct {
  uint64_t type;   /* one ncclProfile* bit */
  void* parentObj; /* handle the plugin returned for the parent event (may be NULL) */
  int rank;        /* rank in the communicator that produced the event */
  union {
    struct {
      bool graphCaptured; /* the calls are being captured into a graph */
      int groupDepth;     /* ncclGroupStart nesting depth when the event began */
    } groupApi;

    struct {
      const char* func; /* "AllReduce", "Broadcast", ... */
      size_t count;
      const char* datatype; /* "ncclFloat32", ... */
      int root;
      void* stream;
      bool graphCaptured;
    } collApi;

    struct {
      const char* func; /* "Send" or "Recv" */
      size_t count;
      const char* datatype;
      void* stream;
      bool graphCaptured;
    } p2pApi;

    struct {
      void* stream;
    } kernelLaunch;

    struct {
      uint64_t seqNumber; /* per-communicator sequence number of the operation */
      const char* func;
      void const* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;  /* "Ring", ... */
      const char* proto; /* "LL", "LL128", "Simple" */
      void* parentGroup; /* the Group event (v5 parentObj is the CollApi event) */
    } coll;

    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
      void* parentGroup; /* the Group event (v5 parentObj is the P2pApi event) */
    } p2p;

    struct {
      pid_t pid;         /* process that created the operation (compare with getpid()
                            before dereferencing parentObj) */
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;

    struct {
      int step;
    } proxyStep;

    struct {
      uint8_t channelId;
      uint64_t pTimer; /* GPU global timer when the channel started, ns */
    } kernelCh;

    struct {
      int64_t id; /* NCCL_PROFILER_NET_TYPE_* | version */
      void* data; /* the network plugin's own event descriptor */
    } netPlugin;
  };
} ncclProfilerEventDescr_v5_t;

typedef union {
  struct {
    size_t transSize;
  } proxyStep;

  struct {
    int appendedProxyOps;
  } proxyCtrl;

  struct {
    void* data;
  } netPlugin;

  struct {
    uint64_t pTimer; /* GPU global timer when the channel stopped, ns */
  } kernelCh;
} ncclProfilerEventStateArgs_v5_t;

typedef struct {
  const char* name; /* used in log lines */

  /* Called once per communicator. Writes the event types it wants into
   * *eActivationMask (the pointer stays valid until finalize: a plugin may
   * change the mask later) and its per-communicator state into *context.
   * A result other than ncclSuccess disables the plugin for this
   * communicator. */
  ncclResult_t (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes,
                       int nranks, int rank, ncclDebugLogger_t logfn);

  /* Starts an event; *eHandle receives the plugin's handle (NULL: not tracked). */
  ncclResult_t (*startEvent)(void* context, void** eHandle, ncclProfilerEventDescr_v5_t* eDescr);

  /* Stops an event; the handle is not used again by uniccl, except as the
   * parentObj of events that started while it was alive. */
  ncclResult_t (*stopEvent)(void* eHandle);

  /* A state transition of a started event (see ncclProfilerEventState_t). */
  ncclResult_t (*recordEventState)(void* eHandle, ncclProfilerEventState_v5_t eState,
                                   ncclProfilerEventStateArgs_v5_t* eStateArgs);

  /* Called at ncclCommDestroy / ncclCommAbort with init()'s context. */
  ncclResult_t (*finalize)(void* context);
} ncclProfiler_v5_t;

/* ------------------------------------------------------------------- v4 */
typedef struct {
  uint8_t type;    /* one ncclProfile* bit (only bits 0-7 exist in v4) */
  void* parentObj; /* for Coll / P2p: the Group event */
  int rank;
  union {
    struct {
      uint64_t seqNumber;
      const char* func;
      void const* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
    } coll;

    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
    } p2p;

    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;

    struct {
      int step;
    } proxyStep;

    struct {
      uint8_t channelId;
      uint64_t pTimer;
    } kernelCh;

    struct {
      int64_t id;
      void* data;
    } netPlugin;
  };
} ncclProfilerEventDescr_v4_t;

typedef ncclProfilerEventStateArgs_v5_t ncclProfilerEventStateArgs_v4_t; /* same layout */

typedef struct {
  const char* name;
  /* v4 takes commName before the communicator id */
  ncclResult_t (*init)(void** context, int* eActivationMask, const char* commName, uint64_t commHash, int nNodes,
                       int nranks, int rank, ncclDebugLogger_t logfn);
  ncclResult_t (*startEvent)(void* context, void** eHandle, ncclProfilerEventDescr_v4_t* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, ncclProfilerEventState_v4_t eState,
                                   ncclProfilerEventStateArgs_v4_t* eStateArgs);
  ncclResult_t (*finalize)(void* context);
} ncclProfiler_v4_t;

/* ------------------------------------------------- network plugin events
 * netPlugin.id: the low 16 bits are the version of the network plugin's event
 * struct, the next 16 the network type. */
#define NCCL_PROFILER_NET_VER_BITS (16)
#define NCCL_PROFILER_NET_VER_MASK (~0U >> NCCL_PROFILER_NET_VER_BITS)
#define NCCL_PROFILER_NET_TYPE_MASK (~0U << NCCL_PROFILER_NET_VER_BITS)

typedef enum {
  NCCL_PROFILER_NET_TYPE_IB = (1U << NCCL_PROFILER_NET_VER_BITS),
  NCCL_PROFILER_NET_TYPE_SOCK = (2U << NCCL_PROFILER_NET_VER_BITS)
} ncclProfilerNetType;

/* The callback NCCL hands network plugins (net API v9+) to report their
 * events: type 0 starts an event under pHandle, 1 stops *eHandle, 2 records
 * ncclProfilerNetPluginUpdate with extData. */
typedef ncclResult_t (*ncclProfilerCallback_t)(void** eHandle, int type, void* pHandle, int64_t pluginId,
                                               void* extData);

typedef ncclProfiler_v5_t ncclProfiler_t;
typedef ncclProfilerEventDescr_v5_t ncclProfilerEventDescr_t;
typedef ncclProfilerEventStateArgs_v5_t ncclProfilerEventStateArgs_t;

#ifdef __cplusplus
}
#endif

#endif /* UNICCL_PROFILER_H_ */
