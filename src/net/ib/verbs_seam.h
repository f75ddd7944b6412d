// The seam between the IB transport and libibverbs: exactly the ibv_* calls the
// transport makes, over plain structs of our own, so that everything above it
// compiles and is unit-tested without verbs headers or an RDMA device
// (tests/unit/net/ib/fake_verbs.* emulates devices and RC QPs in memory).
// verbs_real.cc is the only file that includes <infiniband/verbs.h>.
//
// Conventions: calls return 0 or a positive errno value (the verbs library's
// errno); handles are opaque and owned by RAII wrappers (verbs_handles.h).
// Enum values equal libibverbs' so that verbs_real.cc converts by cast
// (it static_asserts each one).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace uniccl {
namespace ib {

struct DeviceList;  // ibv_device** with its count
struct Context;     // ibv_context
struct Pd;          // ibv_pd
struct Mr;          // ibv_mr
struct Cq;          // ibv_cq
struct Qp;          // ibv_qp

enum class LinkLayer : uint8_t { kUnspecified = 0, kInfiniBand = 1, kEthernet = 2 };
enum class GidType : uint8_t { kUnknown = 0, kIbRoceV1 = 1, kRoceV2 = 2 };

constexpr int kPortActive = 4;  // IBV_PORT_ACTIVE

// enum ibv_mtu: 1 = 256 B ... 5 = 4096 B.
inline int mtuBytes(int mtu) { return mtu >= 1 && mtu <= 5 ? 128 << mtu : 0; }

struct Gid {
  uint8_t raw[16];
};

struct DeviceAttr {
  uint64_t nodeGuid = 0;
  uint64_t maxMrSize = 0;
  int physPortCnt = 0;
  int maxQpWr = 0;
  int maxCqe = 0;
  int maxQp = 0;
  uint32_t vendorId = 0;
  uint32_t vendorPartId = 0;
};

struct PortAttr {
  int state = 0;      // kPortActive when usable
  int activeMtu = 0;  // enum ibv_mtu
  uint16_t lid = 0;
  LinkLayer linkLayer = LinkLayer::kUnspecified;
  int activeSpeed = 0;  // ibv_port_attr.active_speed (encoded)
  int activeWidth = 0;  // ibv_port_attr.active_width (encoded)
  int gidTblLen = 0;
};

// Access flags (enum ibv_access_flags).
constexpr int kAccessLocalWrite = 1;
constexpr int kAccessRemoteWrite = 2;
constexpr int kAccessRemoteRead = 4;

struct MrKeys {
  uint32_t lkey = 0;
  uint32_t rkey = 0;
};

struct QpInitAttr {
  Cq* sendCq = nullptr;
  Cq* recvCq = nullptr;
  uint32_t maxSendWr = 0;
  uint32_t maxRecvWr = 0;
  uint32_t maxSendSge = 1;
  uint32_t maxRecvSge = 1;
  uint32_t maxInlineData = 0;
};

enum class QpState : uint8_t { kReset = 0, kInit = 1, kRtr = 2, kRts = 3, kSqd = 4, kSqe = 5, kErr = 6 };

// Attribute mask bits (enum ibv_qp_attr_mask).
constexpr int kQpState = 1 << 0;
constexpr int kQpAccessFlags = 1 << 3;
constexpr int kQpPkeyIndex = 1 << 4;
constexpr int kQpPort = 1 << 5;
constexpr int kQpAv = 1 << 7;
constexpr int kQpPathMtu = 1 << 8;
constexpr int kQpTimeout = 1 << 9;
constexpr int kQpRetryCnt = 1 << 10;
constexpr int kQpRnrRetry = 1 << 11;
constexpr int kQpRqPsn = 1 << 12;
constexpr int kQpMaxQpRdAtomic = 1 << 13;
constexpr int kQpMinRnrTimer = 1 << 15;
constexpr int kQpSqPsn = 1 << 16;
constexpr int kQpMaxDestRdAtomic = 1 << 17;
constexpr int kQpDestQpn = 1 << 20;

struct AhAttr {
  bool isGlobal = false;  // RoCE always; IB across subnets
  Gid dgid{};
  uint32_t flowLabel = 0;
  uint8_t sgidIndex = 0;
  uint8_t hopLimit = 0;
  uint8_t trafficClass = 0;
  uint16_t dlid = 0;
  uint8_t sl = 0;
  uint8_t portNum = 0;
};

struct QpAttr {
  QpState state = QpState::kReset;
  uint16_t pkeyIndex = 0;
  uint8_t portNum = 0;
  int accessFlags = 0;
  int pathMtu = 0;  // enum ibv_mtu
  uint32_t destQpn = 0;
  uint32_t rqPsn = 0;
  uint8_t maxDestRdAtomic = 0;
  uint8_t minRnrTimer = 0;
  AhAttr ah;
  uint8_t timeout = 0;
  uint8_t retryCnt = 0;
  uint8_t rnrRetry = 0;
  uint32_t sqPsn = 0;
  uint8_t maxRdAtomic = 0;
};

enum class WrOpcode : uint8_t { kRdmaWrite = 0, kRdmaWriteWithImm = 1, kSend = 2, kRdmaRead = 4 };

// One work request with at most one scatter/gather element (numSge 0 or 1).
struct SendWr {
  uint64_t wrId = 0;
  WrOpcode opcode = WrOpcode::kRdmaWrite;
  uint64_t localAddr = 0;
  uint32_t length = 0;
  uint32_t lkey = 0;
  int numSge = 0;
  uint64_t remoteAddr = 0;  // RDMA write/read
  uint32_t rkey = 0;
  uint32_t immData = 0;  // host byte order; converted at the seam
  bool signaled = true;
};

struct RecvWr {
  uint64_t wrId = 0;
  uint64_t addr = 0;
  uint32_t length = 0;
  uint32_t lkey = 0;
  int numSge = 0;
};

// Completion status values (enum ibv_wc_status) the transport names.
constexpr int kWcSuccess = 0;
constexpr int kWcLocProtErr = 4;
constexpr int kWcWrFlushErr = 5;
constexpr int kWcRemAccessErr = 10;
constexpr int kWcRetryExcErr = 12;
constexpr int kWcRnrRetryExcErr = 13;

enum class WcOpcode : uint8_t {
  kSend = 0,
  kRdmaWrite = 1,
  kRdmaRead = 2,
  kRecv = 128,
  kRecvRdmaWithImm = 129,
};

struct Wc {
  uint64_t wrId = 0;
  int status = kWcSuccess;
  WcOpcode opcode = WcOpcode::kSend;
  uint32_t byteLen = 0;
  uint32_t immData = 0;  // host byte order
  bool hasImm = false;
  uint32_t vendorErr = 0;
};

class Verbs {
 public:
  virtual ~Verbs() = default;

  // Device enumeration (ibv_get_device_list / ibv_free_device_list).
  virtual int getDeviceList(DeviceList** list, int* count) = 0;
  virtual void freeDeviceList(DeviceList* list) = 0;
  virtual std::string deviceName(DeviceList* list, int index) = 0;
  // The device's PCI path in sysfs ("" when unknown).
  virtual std::string devicePciPath(DeviceList* list, int index) = 0;

  virtual int openDevice(DeviceList* list, int index, Context** ctx) = 0;
  virtual int closeDevice(Context* ctx) = 0;
  virtual int queryDevice(Context* ctx, DeviceAttr* attr) = 0;
  virtual int queryPort(Context* ctx, int port, PortAttr* attr) = 0;
  virtual int queryGid(Context* ctx, int port, int index, Gid* gid) = 0;
  // RoCE version of a GID entry (sysfs gid_attrs/types on Linux).
  virtual int queryGidType(Context* ctx, int port, int index, GidType* type) = 0;

  virtual int allocPd(Context* ctx, Pd** pd) = 0;
  virtual int deallocPd(Pd* pd) = 0;
  virtual int regMr(Pd* pd, void* addr, size_t length, int access, Mr** mr, MrKeys* keys) = 0;
  // Whether this build's libibverbs has ibv_reg_dmabuf_mr.
  virtual bool hasDmabuf() const = 0;
  virtual int regDmabufMr(Pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access, Mr** mr,
                          MrKeys* keys) = 0;
  virtual int deregMr(Mr* mr) = 0;

  virtual int createCq(Context* ctx, int cqe, Cq** cq) = 0;
  virtual int destroyCq(Cq* cq) = 0;
  virtual int createQp(Pd* pd, const QpInitAttr& attr, Qp** qp, uint32_t* qpn) = 0;
  virtual int modifyQp(Qp* qp, const QpAttr& attr, int mask) = 0;
  virtual int destroyQp(Qp* qp) = 0;

  virtual int postSend(Qp* qp, const SendWr& wr) = 0;
  virtual int postRecv(Qp* qp, const RecvWr& wr) = 0;
  // Up to `n` completions into wc; returns how many, or a negative value on failure.
  virtual int pollCq(Cq* cq, int n, Wc* wc) = 0;
  virtual const char* wcStatusString(int status) = 0;
};

}  // namespace ib
}  // namespace uniccl
