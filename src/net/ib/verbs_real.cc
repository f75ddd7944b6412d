// The verbs seam implemented on libibverbs. Nothing here decides anything:
// each call converts our structs to ibv_* ones and back.
//
// libibverbs is dlopen'ed on first use rather than linked (as NCCL does), so
// that the library loads where it is not installed. The header still supplies
// the types, and its static inline "verbs" (ibv_post_send, ibv_post_recv,
// ibv_poll_cq, the extended path of ibv_query_port) call through the provider's
// ops in the context, so they need no symbol; the exported entry points are
// resolved with dlvsym at the versions NCCL asks for (IBVERBS_1.0 is the
// pre-1.1 ABI with other struct layouts, never the one wanted).
#include "net/ib/verbs_real.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <limits.h>
#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/util/debug.h"

namespace uniccl {
namespace ib {

static_assert(kPortActive == IBV_PORT_ACTIVE, "port state");
static_assert(kAccessLocalWrite == IBV_ACCESS_LOCAL_WRITE && kAccessRemoteWrite == IBV_ACCESS_REMOTE_WRITE &&
                  kAccessRemoteRead == IBV_ACCESS_REMOTE_READ,
              "access flags");
static_assert((int)QpState::kReset == IBV_QPS_RESET && (int)QpState::kInit == IBV_QPS_INIT &&
                  (int)QpState::kRtr == IBV_QPS_RTR && (int)QpState::kRts == IBV_QPS_RTS &&
                  (int)QpState::kErr == IBV_QPS_ERR,
              "QP states");
static_assert(kQpState == IBV_QP_STATE && kQpAccessFlags == IBV_QP_ACCESS_FLAGS && kQpPkeyIndex == IBV_QP_PKEY_INDEX &&
                  kQpPort == IBV_QP_PORT && kQpAv == IBV_QP_AV && kQpPathMtu == IBV_QP_PATH_MTU &&
                  kQpTimeout == IBV_QP_TIMEOUT && kQpRetryCnt == IBV_QP_RETRY_CNT && kQpRnrRetry == IBV_QP_RNR_RETRY &&
                  kQpRqPsn == IBV_QP_RQ_PSN && kQpMaxQpRdAtomic == IBV_QP_MAX_QP_RD_ATOMIC &&
                  kQpMinRnrTimer == IBV_QP_MIN_RNR_TIMER && kQpSqPsn == IBV_QP_SQ_PSN &&
                  kQpMaxDestRdAtomic == IBV_QP_MAX_DEST_RD_ATOMIC && kQpDestQpn == IBV_QP_DEST_QPN,
              "QP attribute mask");
static_assert((int)WrOpcode::kRdmaWrite == IBV_WR_RDMA_WRITE &&
                  (int)WrOpcode::kRdmaWriteWithImm == IBV_WR_RDMA_WRITE_WITH_IMM &&
                  (int)WrOpcode::kSend == IBV_WR_SEND && (int)WrOpcode::kRdmaRead == IBV_WR_RDMA_READ,
              "work request opcodes");
static_assert((int)WcOpcode::kSend == IBV_WC_SEND && (int)WcOpcode::kRdmaWrite == IBV_WC_RDMA_WRITE &&
                  (int)WcOpcode::kRdmaRead == IBV_WC_RDMA_READ && (int)WcOpcode::kRecv == IBV_WC_RECV &&
                  (int)WcOpcode::kRecvRdmaWithImm == IBV_WC_RECV_RDMA_WITH_IMM,
              "completion opcodes");
static_assert(kWcSuccess == IBV_WC_SUCCESS && kWcLocProtErr == IBV_WC_LOC_PROT_ERR &&
                  kWcWrFlushErr == IBV_WC_WR_FLUSH_ERR && kWcRemAccessErr == IBV_WC_REM_ACCESS_ERR &&
                  kWcRetryExcErr == IBV_WC_RETRY_EXC_ERR && kWcRnrRetryExcErr == IBV_WC_RNR_RETRY_EXC_ERR,
              "completion status");
static_assert(sizeof(Gid) == sizeof(ibv_gid), "GID");

struct DeviceList {
  ibv_device** devs = nullptr;
  int count = 0;
};

namespace {

template <typename T, typename U>
T* as(U* p) {
  return reinterpret_cast<T*>(p);
}

int errnoOr(int fallback) { return errno != 0 ? errno : fallback; }

// Declared here rather than taken from the header, which may predate them:
// their use is decided by the library found at run time.
using RegMrIova2Fn = ibv_mr* (*)(ibv_pd*, void*, size_t, uint64_t, unsigned int);
using RegDmabufMrFn = ibv_mr* (*)(ibv_pd*, uint64_t, size_t, uint64_t, int, int);

// The exported entry points the seam calls.
struct IbvApi {
  decltype(&::ibv_get_device_list) getDeviceList = nullptr;
  decltype(&::ibv_free_device_list) freeDeviceList = nullptr;
  decltype(&::ibv_get_device_name) getDeviceName = nullptr;
  decltype(&::ibv_open_device) openDevice = nullptr;
  decltype(&::ibv_close_device) closeDevice = nullptr;
  decltype(&::ibv_query_device) queryDevice = nullptr;
  // The exported fallback of the header's inline ibv_query_port (older struct).
  decltype(&::ibv_query_port) queryPort = nullptr;
  decltype(&::ibv_query_gid) queryGid = nullptr;
  decltype(&::ibv_alloc_pd) allocPd = nullptr;
  decltype(&::ibv_dealloc_pd) deallocPd = nullptr;
  decltype(&::ibv_reg_mr) regMr = nullptr;
  RegMrIova2Fn regMrIova2 = nullptr;    // optional: rdma-core 22+ (IBVERBS_1.8)
  RegDmabufMrFn regDmabufMr = nullptr;  // optional: rdma-core 34+ (IBVERBS_1.12); none = no dma-buf
  decltype(&::ibv_dereg_mr) deregMr = nullptr;
  decltype(&::ibv_create_cq) createCq = nullptr;
  decltype(&::ibv_destroy_cq) destroyCq = nullptr;
  decltype(&::ibv_create_qp) createQp = nullptr;
  decltype(&::ibv_modify_qp) modifyQp = nullptr;
  decltype(&::ibv_destroy_qp) destroyQp = nullptr;
  decltype(&::ibv_wc_status_str) wcStatusStr = nullptr;
};

constexpr const char* kIbverbs11 = "IBVERBS_1.1";

// One entry point; on failure records which one in *missing (left as is when
// an earlier one already failed, so the first is reported).
template <typename Fn>
bool resolve(void* lib, const char* name, const char* version, Fn* fn, std::string* missing) {
  *fn = reinterpret_cast<Fn>(dlvsym(lib, name, version));
  if (*fn == nullptr && missing->empty()) *missing = std::string(name) + "@" + version;
  return *fn != nullptr;
}

// libibverbs, loaded once on first use from any thread. The handle is never
// closed once loaded: the providers libibverbs loads hold pointers into it
// (NCCL never closes it either).
class IbvLibrary {
 public:
  explicit IbvLibrary(std::vector<std::string> names) : names_(std::move(names)) {}

  // The entry points, or nullptr when the library or a required one is missing.
  const IbvApi* get() {
    std::call_once(once_, [this] { loaded_ = load(); });
    return loaded_ ? &api_ : nullptr;
  }

 private:
  bool load() {
    void* lib = nullptr;
    std::string name, errors;
    for (const std::string& n : names_) {
      lib = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (lib != nullptr) {
        name = n;
        break;
      }
      const char* e = dlerror();
      errors += (errors.empty() ? "" : "; ") + (e ? std::string(e) : n);
    }
    if (lib == nullptr) {
      // Not a warning: machines without RDMA commonly lack it, and Socket is used.
      INFO(kSubsysInit | kSubsysNet,
           "NET/IB: libibverbs not loaded (%s): no IB devices (install rdma-core's libibverbs for InfiniBand/RoCE)",
           errors.c_str());
      return false;
    }
    IbvApi a;
    std::string missing;
    bool ok = resolve(lib, "ibv_get_device_list", kIbverbs11, &a.getDeviceList, &missing);
    ok &= resolve(lib, "ibv_free_device_list", kIbverbs11, &a.freeDeviceList, &missing);
    ok &= resolve(lib, "ibv_get_device_name", kIbverbs11, &a.getDeviceName, &missing);
    ok &= resolve(lib, "ibv_open_device", kIbverbs11, &a.openDevice, &missing);
    ok &= resolve(lib, "ibv_close_device", kIbverbs11, &a.closeDevice, &missing);
    ok &= resolve(lib, "ibv_query_device", kIbverbs11, &a.queryDevice, &missing);
    ok &= resolve(lib, "ibv_query_port", kIbverbs11, &a.queryPort, &missing);
    ok &= resolve(lib, "ibv_query_gid", kIbverbs11, &a.queryGid, &missing);
    ok &= resolve(lib, "ibv_alloc_pd", kIbverbs11, &a.allocPd, &missing);
    ok &= resolve(lib, "ibv_dealloc_pd", kIbverbs11, &a.deallocPd, &missing);
    ok &= resolve(lib, "ibv_reg_mr", kIbverbs11, &a.regMr, &missing);
    ok &= resolve(lib, "ibv_dereg_mr", kIbverbs11, &a.deregMr, &missing);
    ok &= resolve(lib, "ibv_create_cq", kIbverbs11, &a.createCq, &missing);
    ok &= resolve(lib, "ibv_destroy_cq", kIbverbs11, &a.destroyCq, &missing);
    ok &= resolve(lib, "ibv_create_qp", kIbverbs11, &a.createQp, &missing);
    ok &= resolve(lib, "ibv_modify_qp", kIbverbs11, &a.modifyQp, &missing);
    ok &= resolve(lib, "ibv_destroy_qp", kIbverbs11, &a.destroyQp, &missing);
    ok &= resolve(lib, "ibv_wc_status_str", kIbverbs11, &a.wcStatusStr, &missing);
    if (!ok) {
      INFO(kSubsysInit | kSubsysNet, "NET/IB: %s lacks %s (libibverbs too old or not libibverbs?): no IB devices",
           name.c_str(), missing.c_str());
      dlclose(lib);  // nothing from it is in use yet
      return false;
    }
    std::string optional;
    resolve(lib, "ibv_reg_mr_iova2", "IBVERBS_1.8", &a.regMrIova2, &optional);
    resolve(lib, "ibv_reg_dmabuf_mr", "IBVERBS_1.12", &a.regDmabufMr, &optional);
    INFO(kSubsysInit | kSubsysNet, "NET/IB: loaded %s%s", name.c_str(),
         a.regDmabufMr ? "" : " (no ibv_reg_dmabuf_mr: no dma-buf registration)");
    api_ = a;
    return true;
  }

  const std::vector<std::string> names_;
  std::once_flag once_;
  bool loaded_ = false;
  IbvApi api_;
};

class RealVerbs final : public Verbs {
 public:
  explicit RealVerbs(std::vector<std::string> libraryNames) : lib_(std::move(libraryNames)) {}

  int getDeviceList(DeviceList** list, int* count) override {
    const IbvApi* ibv = lib_.get();
    if (ibv == nullptr) return kVerbsUnavailable;
    errno = 0;
    int n = 0;
    ibv_device** devs = ibv->getDeviceList(&n);
    if (devs == nullptr) return errnoOr(ENODEV);
    *list = new DeviceList{devs, n};
    *count = n;
    return 0;
  }
  void freeDeviceList(DeviceList* list) override {
    api().freeDeviceList(list->devs);
    delete list;
  }
  std::string deviceName(DeviceList* list, int index) override {
    const char* n = api().getDeviceName(list->devs[index]);
    return n ? n : "?";
  }
  std::string devicePciPath(DeviceList* list, int index) override {
    std::string dev = std::string(list->devs[index]->ibdev_path) + "/device";
    char buf[PATH_MAX];
    if (realpath(dev.c_str(), buf) == nullptr) return std::string();
    return buf;
  }
  int openDevice(DeviceList* list, int index, Context** ctx) override {
    errno = 0;
    ibv_context* c = api().openDevice(list->devs[index]);
    if (c == nullptr) return errnoOr(ENODEV);
    *ctx = as<Context>(c);
    return 0;
  }
  int closeDevice(Context* ctx) override { return api().closeDevice(as<ibv_context>(ctx)); }
  int queryDevice(Context* ctx, DeviceAttr* attr) override {
    ibv_device_attr a;
    memset(&a, 0, sizeof(a));
    if (int err = api().queryDevice(as<ibv_context>(ctx), &a)) return err;
    attr->nodeGuid = a.node_guid;
    attr->maxMrSize = a.max_mr_size;
    attr->physPortCnt = a.phys_port_cnt;
    attr->maxQpWr = a.max_qp_wr;
    attr->maxCqe = a.max_cqe;
    attr->maxQp = a.max_qp;
    attr->vendorId = a.vendor_id;
    attr->vendorPartId = a.vendor_part_id;
    return 0;
  }
  int queryPort(Context* ctx, int port, PortAttr* attr) override {
    ibv_context* c = as<ibv_context>(ctx);
    ibv_port_attr a;
    memset(&a, 0, sizeof(a));
    // What the header's inline ibv_query_port does: the provider's extended
    // entry when it has one, else the exported one, which fills the older,
    // shorter struct (every field read below is in it; the rest stays zero).
    int err = 0;
    if (verbs_context* vctx = verbs_get_ctx_op(c, query_port)) {
      err = vctx->query_port(c, (uint8_t)port, &a, sizeof(a));
    } else {
      err = api().queryPort(c, (uint8_t)port, reinterpret_cast<_compat_ibv_port_attr*>(&a));
    }
    if (err != 0) return err;
    attr->state = a.state;
    attr->activeMtu = a.active_mtu;
    attr->lid = a.lid;
    attr->linkLayer = a.link_layer == IBV_LINK_LAYER_INFINIBAND ? LinkLayer::kInfiniBand
                      : a.link_layer == IBV_LINK_LAYER_ETHERNET ? LinkLayer::kEthernet
                                                                : LinkLayer::kUnspecified;
    attr->activeSpeed = a.active_speed;
    attr->activeWidth = a.active_width;
    attr->gidTblLen = a.gid_tbl_len;
    return 0;
  }
  int queryGid(Context* ctx, int port, int index, Gid* gid) override {
    ibv_gid g;
    if (int err = api().queryGid(as<ibv_context>(ctx), (uint8_t)port, index, &g)) return err;
    memcpy(gid->raw, g.raw, sizeof(gid->raw));
    return 0;
  }
  // NCCL reads the same file: "IB/RoCE v1" or "RoCE v2".
  int queryGidType(Context* ctx, int port, int index, GidType* type) override {
    ibv_context* c = as<ibv_context>(ctx);
    std::string path = std::string(c->device->ibdev_path) + "/ports/" + std::to_string(port) +
                       "/gid_attrs/types/" + std::to_string(index);
    std::ifstream f(path);
    std::string line;
    if (!std::getline(f, line)) {
      *type = GidType::kUnknown;
      return ENOENT;
    }
    *type = line.find("v2") != std::string::npos ? GidType::kRoceV2 : GidType::kIbRoceV1;
    return 0;
  }
  int allocPd(Context* ctx, Pd** pd) override {
    errno = 0;
    ibv_pd* p = api().allocPd(as<ibv_context>(ctx));
    if (p == nullptr) return errnoOr(ENOMEM);
    *pd = as<Pd>(p);
    return 0;
  }
  int deallocPd(Pd* pd) override { return api().deallocPd(as<ibv_pd>(pd)); }
  int regMr(Pd* pd, void* addr, size_t length, int access, Mr** mr, MrKeys* keys) override {
    // The header's ibv_reg_mr macro picks ibv_reg_mr_iova2 (iova = address)
    // for access flags unknown at compile time; plain ibv_reg_mr is the same
    // call for ours (none in IBV_ACCESS_OPTIONAL_RANGE) on older libraries.
    const IbvApi& ibv = api();
    errno = 0;
    ibv_mr* m = ibv.regMrIova2 != nullptr
                    ? ibv.regMrIova2(as<ibv_pd>(pd), addr, length, (uintptr_t)addr, (unsigned)access)
                    : ibv.regMr(as<ibv_pd>(pd), addr, length, access);
    if (m == nullptr) return errnoOr(EINVAL);
    keys->lkey = m->lkey;
    keys->rkey = m->rkey;
    *mr = as<Mr>(m);
    return 0;
  }
  // Decided by the library found at run time, not by the headers built against.
  bool hasDmabuf() const override {
    const IbvApi* ibv = lib_.get();
    return ibv != nullptr && ibv->regDmabufMr != nullptr;
  }
  int regDmabufMr(Pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access, Mr** mr,
                  MrKeys* keys) override {
    const IbvApi& ibv = api();
    if (ibv.regDmabufMr == nullptr) return EOPNOTSUPP;
    errno = 0;
    ibv_mr* m = ibv.regDmabufMr(as<ibv_pd>(pd), offset, length, iova, fd, access);
    if (m == nullptr) return errnoOr(EINVAL);
    keys->lkey = m->lkey;
    keys->rkey = m->rkey;
    *mr = as<Mr>(m);
    return 0;
  }
  int deregMr(Mr* mr) override { return api().deregMr(as<ibv_mr>(mr)); }
  int createCq(Context* ctx, int cqe, Cq** cq) override {
    errno = 0;
    ibv_cq* c = api().createCq(as<ibv_context>(ctx), cqe, nullptr, nullptr, 0);
    if (c == nullptr) return errnoOr(ENOMEM);
    *cq = as<Cq>(c);
    return 0;
  }
  int destroyCq(Cq* cq) override { return api().destroyCq(as<ibv_cq>(cq)); }
  int createQp(Pd* pd, const QpInitAttr& attr, Qp** qp, uint32_t* qpn) override {
    ibv_qp_init_attr a;
    memset(&a, 0, sizeof(a));
    a.send_cq = as<ibv_cq>(attr.sendCq);
    a.recv_cq = as<ibv_cq>(attr.recvCq);
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = attr.maxSendWr;
    a.cap.max_recv_wr = attr.maxRecvWr;
    a.cap.max_send_sge = attr.maxSendSge;
    a.cap.max_recv_sge = attr.maxRecvSge;
    a.cap.max_inline_data = attr.maxInlineData;
    errno = 0;
    ibv_qp* q = api().createQp(as<ibv_pd>(pd), &a);
    if (q == nullptr) return errnoOr(ENOMEM);
    *qp = as<Qp>(q);
    *qpn = q->qp_num;
    return 0;
  }
  int modifyQp(Qp* qp, const QpAttr& attr, int mask) override {
    ibv_qp_attr a;
    memset(&a, 0, sizeof(a));
    a.qp_state = (ibv_qp_state)attr.state;
    a.pkey_index = attr.pkeyIndex;
    a.port_num = attr.portNum;
    a.qp_access_flags = (unsigned)attr.accessFlags;
    a.path_mtu = (ibv_mtu)attr.pathMtu;
    a.dest_qp_num = attr.destQpn;
    a.rq_psn = attr.rqPsn;
    a.max_dest_rd_atomic = attr.maxDestRdAtomic;
    a.min_rnr_timer = attr.minRnrTimer;
    a.ah_attr.is_global = attr.ah.isGlobal ? 1 : 0;
    memcpy(a.ah_attr.grh.dgid.raw, attr.ah.dgid.raw, sizeof(attr.ah.dgid.raw));
    a.ah_attr.grh.flow_label = attr.ah.flowLabel;
    a.ah_attr.grh.sgid_index = attr.ah.sgidIndex;
    a.ah_attr.grh.hop_limit = attr.ah.hopLimit;
    a.ah_attr.grh.traffic_class = attr.ah.trafficClass;
    a.ah_attr.dlid = attr.ah.dlid;
    a.ah_attr.sl = attr.ah.sl;
    a.ah_attr.src_path_bits = 0;
    a.ah_attr.port_num = attr.ah.portNum;
    a.timeout = attr.timeout;
    a.retry_cnt = attr.retryCnt;
    a.rnr_retry = attr.rnrRetry;
    a.sq_psn = attr.sqPsn;
    a.max_rd_atomic = attr.maxRdAtomic;
    return api().modifyQp(as<ibv_qp>(qp), &a, mask);
  }
  int destroyQp(Qp* qp) override { return api().destroyQp(as<ibv_qp>(qp)); }
  int postSend(Qp* qp, const SendWr& wr) override {
    ibv_sge sge;
    sge.addr = wr.localAddr;
    sge.length = wr.length;
    sge.lkey = wr.lkey;
    ibv_send_wr w;
    memset(&w, 0, sizeof(w));
    w.wr_id = wr.wrId;
    w.sg_list = wr.numSge > 0 ? &sge : nullptr;
    w.num_sge = wr.numSge;
    w.opcode = (ibv_wr_opcode)wr.opcode;
    w.send_flags = wr.signaled ? IBV_SEND_SIGNALED : 0;
    w.imm_data = htonl(wr.immData);
    w.wr.rdma.remote_addr = wr.remoteAddr;
    w.wr.rdma.rkey = wr.rkey;
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(as<ibv_qp>(qp), &w, &bad);
  }
  int postRecv(Qp* qp, const RecvWr& wr) override {
    ibv_sge sge;
    sge.addr = wr.addr;
    sge.length = wr.length;
    sge.lkey = wr.lkey;
    ibv_recv_wr w;
    memset(&w, 0, sizeof(w));
    w.wr_id = wr.wrId;
    w.sg_list = wr.numSge > 0 ? &sge : nullptr;
    w.num_sge = wr.numSge;
    ibv_recv_wr* bad = nullptr;
    return ibv_post_recv(as<ibv_qp>(qp), &w, &bad);
  }
  int pollCq(Cq* cq, int n, Wc* out) override {
    ibv_wc wcs[16];
    if (n > 16) n = 16;
    int got = ibv_poll_cq(as<ibv_cq>(cq), n, wcs);
    for (int i = 0; i < got; i++) {
      out[i].wrId = wcs[i].wr_id;
      out[i].status = wcs[i].status;
      out[i].opcode = (WcOpcode)wcs[i].opcode;
      out[i].byteLen = wcs[i].byte_len;
      out[i].hasImm = (wcs[i].wc_flags & IBV_WC_WITH_IMM) != 0;
      out[i].immData = out[i].hasImm ? ntohl(wcs[i].imm_data) : 0;
      out[i].vendorErr = wcs[i].vendor_err;
    }
    return got;
  }
  const char* wcStatusString(int status) override {
    const IbvApi* ibv = lib_.get();
    return ibv != nullptr ? ibv->wcStatusStr((ibv_wc_status)status) : "unknown completion status";
  }

 private:
  // Every other call takes a handle that only a successful getDeviceList can
  // lead to, so the library is loaded by then.
  const IbvApi& api() const { return *lib_.get(); }

  mutable IbvLibrary lib_;
};

}  // namespace

Verbs* realVerbs() {
  static RealVerbs* v = new RealVerbs({"libibverbs.so.1", "libibverbs.so"});
  return v;
}

std::unique_ptr<Verbs> newRealVerbsForTesting(const char* library) {
  return std::unique_ptr<Verbs>(new RealVerbs({library}));
}

}  // namespace ib
}  // namespace uniccl
