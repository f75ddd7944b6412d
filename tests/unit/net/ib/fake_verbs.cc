#include "fake_verbs.h"

#include <cerrno>
#include <cstring>

#include "fake_verbs_model.h"

namespace uniccl {
namespace ib {

namespace fake {

namespace {

// Every seam call: the lock, then whatever the wire brought (cross-process mode).
struct Locked {
  std::lock_guard<std::mutex> lock;
  explicit Locked(FakeVerbs::State* s) : lock(s->mutex) { s->pump(); }
};

}  // namespace

FMr* FakeVerbs::State::findMr(FPd* pd, uint32_t key, bool remote, uintptr_t addr, size_t len, int access) {
  for (void* p : mrs) {
    FMr* m = static_cast<FMr*>(p);
    if (m->pd != pd || (remote ? m->rkey : m->lkey) != key) continue;
    if ((m->access & access) != access) return nullptr;
    if (addr < m->addr || len > m->len || addr - m->addr > m->len - len) return nullptr;
    return m;
  }
  return nullptr;
}

int FakeVerbs::State::apply(FQp* target, const SendWr& wr, uint32_t srcQpn, uint32_t srcPsn, const void* payload,
                            void* readOut) {
  bool data = wr.opcode == WrOpcode::kRdmaWriteWithImm || wr.opcode == WrOpcode::kSend;
  if (data && failNextStatus != 0) {
    int status = failNextStatus;
    failNextStatus = 0;
    return status;
  }
  if (target->state != QpState::kRtr && target->state != QpState::kRts) {
    violate("operation landed on QP " + std::to_string(target->qpn) + " that is not in RTR/RTS");
    return kWcRetryExcErr;
  }
  if (target->rqPsn != srcPsn) {
    violate("PSN mismatch between QP " + std::to_string(srcQpn) + " and " + std::to_string(target->qpn));
    return kWcRetryExcErr;
  }
  if (wr.opcode == WrOpcode::kRdmaWrite || wr.opcode == WrOpcode::kRdmaWriteWithImm) {
    bool needRecv = wr.opcode == WrOpcode::kRdmaWriteWithImm;
    FMr* m = wr.length == 0 ? nullptr : findMr(target->pd, wr.rkey, true, wr.remoteAddr, wr.length, kAccessRemoteWrite);
    if ((wr.length > 0 && m == nullptr) || (target->access & kAccessRemoteWrite) == 0) return kWcRemAccessErr;
    if (needRecv && target->rq.empty()) {
      violate("RDMA write with immediate reached QP " + std::to_string(target->qpn) + " with no receive posted");
      return kWcRnrRetryExcErr;
    }
    if (wr.length > 0) memcpy((void*)(uintptr_t)wr.remoteAddr, payload, wr.length);
    if (needRecv) {
      RecvWr r = target->rq.front();
      target->rq.pop_front();
      Wc wc;
      wc.wrId = r.wrId;
      wc.opcode = WcOpcode::kRecvRdmaWithImm;
      wc.byteLen = wr.length;
      wc.immData = wr.immData;
      wc.hasImm = true;
      complete(target->rcq, wc);
    }
    return kWcSuccess;
  }
  if (wr.opcode == WrOpcode::kRdmaRead) {
    FMr* m = findMr(target->pd, wr.rkey, true, wr.remoteAddr, wr.length, kAccessRemoteRead);
    if (m == nullptr || (target->access & kAccessRemoteRead) == 0) return kWcRemAccessErr;
    if (wr.length > 0) memcpy(readOut, (const void*)(uintptr_t)wr.remoteAddr, wr.length);
    return kWcSuccess;
  }
  // kSend
  if (target->rq.empty()) {
    violate("send reached QP " + std::to_string(target->qpn) + " with no receive posted");
    return kWcRnrRetryExcErr;
  }
  RecvWr r = target->rq.front();
  target->rq.pop_front();
  bool ok = wr.length == 0 || (r.numSge == 1 && r.length >= wr.length &&
                               findMr(target->pd, r.lkey, false, r.addr, wr.length, kAccessLocalWrite));
  Wc wc;
  wc.wrId = r.wrId;
  wc.opcode = WcOpcode::kRecv;
  wc.byteLen = wr.length;
  int status = kWcSuccess;
  if (!ok) {
    wc.status = kWcLocProtErr;
    status = kWcRemAccessErr;
  } else if (wr.length > 0) {
    memcpy((void*)(uintptr_t)r.addr, payload, wr.length);
  }
  complete(target->rcq, wc);
  return status;
}

void FakeVerbs::State::finish(FQp* src, const SendWr& wr, int status) {
  if (status != kWcSuccess) src->state = QpState::kErr;
  if (wr.signaled || status != kWcSuccess) {
    Wc wc;
    wc.wrId = wr.wrId;
    wc.status = status;
    wc.opcode = senderOpcode(wr.opcode);
    wc.byteLen = wr.length;
    wc.vendorErr = status != kWcSuccess ? 0x81 : 0;
    complete(src->scq, wc);
  }
}

void FakeVerbs::State::land(FQp* target, Inbound& in) {
  if (in.src != nullptr) {  // same process: the sender's buffer is right here
    in.src->outstanding--;
    void* local = (void*)(uintptr_t)in.wr.localAddr;
    finish(in.src, in.wr, apply(target, in.wr, in.src->qpn, in.src->sqPsn, local, local));
    return;
  }
  std::vector<char> readData(in.wr.opcode == WrOpcode::kRdmaRead ? in.wr.length : 0);
  int status;
  if (target->state == QpState::kErr) {
    status = kWcRetryExcErr;  // a QP in the error state drops what arrives: the sender's retries run out
  } else if (target->remote != in.srcAddress || target->destQpn != in.srcQpn) {
    status = violate("an operation from QP " + std::to_string(in.srcQpn) + " of " + in.srcAddress + " reached QP " +
                         std::to_string(target->qpn) + ", which is connected to QP " +
                         std::to_string(target->destQpn) + " of " +
                         (target->remote.empty() ? "this process" : target->remote),
                     kWcRetryExcErr);
  } else {
    status = apply(target, in.wr, in.srcQpn, in.srcPsn, in.payload.data(), readData.data());
  }
  if (status != kWcSuccess) readData.clear();
  answer(in, status, readData);
}

void FakeVerbs::State::flushQueues(FQp* qp) {
  for (const RecvWr& r : qp->rq) {
    Wc wc;
    wc.wrId = r.wrId;
    wc.status = kWcWrFlushErr;
    wc.opcode = WcOpcode::kRecv;
    complete(qp->rcq, wc);
  }
  qp->rq.clear();
  for (const AwaitedWr& w : qp->awaiting) {
    Wc wc;
    wc.wrId = w.wr.wrId;
    wc.status = kWcWrFlushErr;
    wc.opcode = senderOpcode(w.wr.opcode);
    complete(qp->scq, wc);
    qp->outstanding--;
  }
  qp->awaiting.clear();
}

Gid ipv4Gid(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  Gid g{};
  g.raw[10] = 0xff;
  g.raw[11] = 0xff;
  g.raw[12] = a;
  g.raw[13] = b;
  g.raw[14] = c;
  g.raw[15] = d;
  return g;
}

Gid ipv6Gid(uint16_t first, uint16_t last) {
  Gid g{};
  g.raw[0] = (uint8_t)(first >> 8);
  g.raw[1] = (uint8_t)first;
  g.raw[14] = (uint8_t)(last >> 8);
  g.raw[15] = (uint8_t)last;
  return g;
}

Gid linkLocalGid(uint8_t last) { return ipv6Gid(0xfe80, last); }

FakeVerbs::FakeVerbs() : s_(new State()) {}
FakeVerbs::~FakeVerbs() = default;

void FakeVerbs::addDevice(const FakeDevice& d) {
  std::lock_guard<std::mutex> lock(s_->mutex);
  s_->devices.push_back(d);
}

FakeDevice FakeVerbs::roceDevice(const std::string& name, int nPorts) {
  FakeDevice d;
  d.name = name;
  d.guid = std::hash<std::string>()(name);
  for (int p = 0; p < nPorts; p++) {
    FakePort port;
    port.linkLayer = LinkLayer::kEthernet;
    uint8_t host = (uint8_t)(d.guid % 200 + p + 1);
    // The usual RoCE table: link-local v1, v2; IPv4 v1, v2.
    port.gids = {{linkLocalGid(host), GidType::kIbRoceV1},
                 {linkLocalGid(host), GidType::kRoceV2},
                 {ipv4Gid(10, 0, p, host), GidType::kIbRoceV1},
                 {ipv4Gid(10, 0, p, host), GidType::kRoceV2}};
    d.ports.push_back(port);
  }
  return d;
}

FakeDevice FakeVerbs::roceHost(const std::string& name, uint8_t host) {
  FakeDevice d;
  d.name = name;
  d.guid = 0x1000 + host;
  FakePort port;
  port.linkLayer = LinkLayer::kEthernet;
  port.gids = {{linkLocalGid(host), GidType::kIbRoceV1},
               {linkLocalGid(host), GidType::kRoceV2},
               {ipv4Gid(10, 0, 0, host), GidType::kIbRoceV1},
               {ipv4Gid(10, 0, 0, host), GidType::kRoceV2}};
  d.ports.push_back(port);
  return d;
}

FakeDevice FakeVerbs::ibDevice(const std::string& name, uint16_t lid, int nPorts) {
  FakeDevice d;
  d.name = name;
  d.guid = std::hash<std::string>()(name);
  for (int p = 0; p < nPorts; p++) {
    FakePort port;
    port.linkLayer = LinkLayer::kInfiniBand;
    port.lid = (uint16_t)(lid + p);
    port.activeSpeed = 32;  // EDR
    port.activeWidth = 2;   // 4x
    port.gids = {{ipv6Gid(0xfe80, (uint16_t)(lid + p)), GidType::kIbRoceV1}};
    d.ports.push_back(port);
  }
  return d;
}

void FakeVerbs::failModifyTo(QpState state, int err) {
  std::lock_guard<std::mutex> lock(s_->mutex);
  s_->failModify[(int)state] = err;
}

void FakeVerbs::onCreateQp(std::function<void(int)> hook) {
  std::lock_guard<std::mutex> lock(s_->mutex);
  s_->createQpHook = std::move(hook);
}

void FakeVerbs::failNextCompletion(int status) {
  std::lock_guard<std::mutex> lock(s_->mutex);
  s_->failNextStatus = status;
}

std::vector<std::string> FakeVerbs::violations() {
  std::lock_guard<std::mutex> lock(s_->mutex);
  return s_->violations;
}

int FakeVerbs::liveObjects() {
  std::lock_guard<std::mutex> lock(s_->mutex);
  return (int)(s_->ctxs.size() + s_->pds.size() + s_->mrs.size() + s_->cqs.size() + s_->qps.size());
}

FakeVerbs::Census FakeVerbs::census() {
  std::lock_guard<std::mutex> lock(s_->mutex);
  Census c;
  c.contexts = (int)s_->ctxs.size();
  c.pds = (int)s_->pds.size();
  c.mrs = (int)s_->mrs.size();
  c.cqs = (int)s_->cqs.size();
  c.qps = (int)s_->qps.size();
  return c;
}

long long FakeVerbs::postedSends() {
  std::lock_guard<std::mutex> lock(s_->mutex);
  return s_->postedSends;
}

int FakeVerbs::transitions(QpState to) {
  std::lock_guard<std::mutex> lock(s_->mutex);
  return s_->transitions[(int)to];
}

int FakeVerbs::getDeviceList(DeviceList** list, int* count) {
  Locked lock(s_.get());
  if (s_->devices.empty()) return ENOSYS;  // what libibverbs reports without RDMA devices
  FList* l = new FList{(int)s_->devices.size()};
  *list = as<DeviceList>(l);
  *count = l->count;
  return 0;
}

void FakeVerbs::freeDeviceList(DeviceList* list) { delete as<FList>(list); }

std::string FakeVerbs::deviceName(DeviceList*, int index) {
  Locked lock(s_.get());
  return s_->devices[index].name;
}

std::string FakeVerbs::devicePciPath(DeviceList*, int index) {
  return "/sys/devices/pci0000:00/0000:00:0" + std::to_string(index) + ".0";
}

int FakeVerbs::openDevice(DeviceList*, int index, Context** ctx) {
  Locked lock(s_.get());
  if (s_->devices[index].failOpen) return EACCES;
  FCtx* c = new FCtx{index};
  s_->ctxs.insert(c);
  *ctx = as<Context>(c);
  return 0;
}

int FakeVerbs::closeDevice(Context* ctx) {
  Locked lock(s_.get());
  FCtx* c = as<FCtx>(ctx);
  if (!s_->ctxs.count(c)) return s_->violate("ibv_close_device of an unknown context");
  for (void* p : s_->pds)
    if (static_cast<FPd*>(p)->ctx == c) return s_->violate("ibv_close_device with a PD still allocated", EBUSY);
  for (void* p : s_->cqs)
    if (static_cast<FCq*>(p)->ctx == c) return s_->violate("ibv_close_device with a CQ still alive", EBUSY);
  s_->ctxs.erase(c);
  delete c;
  return 0;
}

int FakeVerbs::queryDevice(Context* ctx, DeviceAttr* attr) {
  Locked lock(s_.get());
  const FakeDevice& d = s_->devices[as<FCtx>(ctx)->dev];
  *attr = DeviceAttr();
  attr->nodeGuid = d.guid;
  attr->maxMrSize = ~0ull;
  attr->physPortCnt = (int)d.ports.size();
  attr->maxQpWr = 1024;
  attr->maxCqe = 4096;
  attr->maxQp = 1000;
  return 0;
}

int FakeVerbs::queryPort(Context* ctx, int port, PortAttr* attr) {
  Locked lock(s_.get());
  const FakeDevice& d = s_->devices[as<FCtx>(ctx)->dev];
  if (port < 1 || port > (int)d.ports.size()) return EINVAL;
  const FakePort& p = d.ports[port - 1];
  attr->state = p.state;
  attr->activeMtu = p.activeMtu;
  attr->lid = p.lid;
  attr->linkLayer = p.linkLayer;
  attr->activeSpeed = p.activeSpeed;
  attr->activeWidth = p.activeWidth;
  attr->gidTblLen = (int)p.gids.size();
  return 0;
}

int FakeVerbs::queryGid(Context* ctx, int port, int index, Gid* gid) {
  Locked lock(s_.get());
  const FakeDevice& d = s_->devices[as<FCtx>(ctx)->dev];
  if (port < 1 || port > (int)d.ports.size() || index < 0 || index >= (int)d.ports[port - 1].gids.size())
    return EINVAL;
  *gid = d.ports[port - 1].gids[index].first;
  return 0;
}

int FakeVerbs::queryGidType(Context* ctx, int port, int index, GidType* type) {
  Locked lock(s_.get());
  const FakeDevice& d = s_->devices[as<FCtx>(ctx)->dev];
  if (port < 1 || port > (int)d.ports.size() || index < 0 || index >= (int)d.ports[port - 1].gids.size())
    return EINVAL;
  *type = d.ports[port - 1].gids[index].second;
  return 0;
}

int FakeVerbs::allocPd(Context* ctx, Pd** pd) {
  Locked lock(s_.get());
  if (!s_->ctxs.count(ctx)) return s_->violate("ibv_alloc_pd on an unknown context");
  FPd* p = new FPd{as<FCtx>(ctx)};
  s_->pds.insert(p);
  *pd = as<Pd>(p);
  return 0;
}

int FakeVerbs::deallocPd(Pd* pd) {
  Locked lock(s_.get());
  FPd* p = as<FPd>(pd);
  if (!s_->pds.count(p)) return s_->violate("ibv_dealloc_pd of an unknown PD");
  for (void* m : s_->mrs)
    if (static_cast<FMr*>(m)->pd == p) return s_->violate("ibv_dealloc_pd with an MR still registered", EBUSY);
  for (auto& q : s_->qps)
    if (q.second->pd == p) return s_->violate("ibv_dealloc_pd with a QP still alive", EBUSY);
  s_->pds.erase(p);
  delete p;
  return 0;
}

int FakeVerbs::regMr(Pd* pd, void* addr, size_t length, int access, Mr** mr, MrKeys* keys) {
  Locked lock(s_.get());
  if (!s_->pds.count(pd)) return s_->violate("ibv_reg_mr on an unknown PD");
  if (length == 0 || addr == nullptr) return s_->violate("ibv_reg_mr of an empty range");
  if ((access & kAccessRemoteWrite) && !(access & kAccessLocalWrite))
    return s_->violate("ibv_reg_mr with remote write but without local write");
  FMr* m = new FMr{as<FPd>(pd), (uintptr_t)addr, length, access, s_->nextKey, s_->nextKey + 1};
  s_->nextKey += 2;
  s_->mrs.insert(m);
  keys->lkey = m->lkey;
  keys->rkey = m->rkey;
  *mr = as<Mr>(m);
  return 0;
}

int FakeVerbs::regDmabufMr(Pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access, Mr** mr,
                           MrKeys* keys) {
  if (!hasDmabuf_) return EOPNOTSUPP;
  if (fd < 0) return EBADF;
  // The fake maps every dma-buf at its iova: the test hands host memory.
  return regMr(pd, (void*)(uintptr_t)iova, length, access, mr, keys);
}

int FakeVerbs::deregMr(Mr* mr) {
  Locked lock(s_.get());
  FMr* m = as<FMr>(mr);
  if (!s_->mrs.count(m)) return s_->violate("ibv_dereg_mr of an unknown MR");
  s_->mrs.erase(m);
  delete m;
  return 0;
}

int FakeVerbs::createCq(Context* ctx, int cqe, Cq** cq) {
  Locked lock(s_.get());
  if (!s_->ctxs.count(ctx)) return s_->violate("ibv_create_cq on an unknown context");
  if (cqe < 1) return s_->violate("ibv_create_cq with cqe < 1");
  FCq* c = new FCq();
  c->ctx = as<FCtx>(ctx);
  c->cqe = cqe;
  s_->cqs.insert(c);
  *cq = as<Cq>(c);
  return 0;
}

int FakeVerbs::destroyCq(Cq* cq) {
  Locked lock(s_.get());
  FCq* c = as<FCq>(cq);
  if (!s_->cqs.count(c)) return s_->violate("ibv_destroy_cq of an unknown CQ");
  for (auto& q : s_->qps)
    if (q.second->scq == c || q.second->rcq == c) return s_->violate("ibv_destroy_cq with a QP still on it", EBUSY);
  s_->cqs.erase(c);
  delete c;
  return 0;
}

int FakeVerbs::createQp(Pd* pd, const QpInitAttr& attr, Qp** qp, uint32_t* qpn) {
  Locked lock(s_.get());
  if (!s_->pds.count(pd)) return s_->violate("ibv_create_qp on an unknown PD");
  if (!s_->cqs.count(attr.sendCq) || !s_->cqs.count(attr.recvCq))
    return s_->violate("ibv_create_qp with an unknown CQ");
  if (attr.maxSendWr < 1 || attr.maxRecvWr < 1 || attr.maxSendSge < 1)
    return s_->violate("ibv_create_qp with an empty queue");
  FQp* q = new FQp();
  q->pd = as<FPd>(pd);
  q->scq = as<FCq>(attr.sendCq);
  q->rcq = as<FCq>(attr.recvCq);
  q->qpn = s_->nextQpn++;
  q->maxSendWr = attr.maxSendWr;
  q->maxRecvWr = attr.maxRecvWr;
  s_->qps[q->qpn] = q;
  *qp = as<Qp>(q);
  *qpn = q->qpn;
  s_->createdQps++;
  if (s_->createQpHook) s_->createQpHook(s_->createdQps);
  return 0;
}

int FakeVerbs::modifyQp(Qp* qp, const QpAttr& a, int mask) {
  Locked lock(s_.get());
  FQp* q = as<FQp>(qp);
  if (!s_->qps.count(q->qpn) || s_->qps[q->qpn] != q) return s_->violate("ibv_modify_qp of an unknown QP");
  if (!(mask & kQpState)) return s_->violate("ibv_modify_qp without IBV_QP_STATE");
  auto fail = s_->failModify.find((int)a.state);
  if (fail != s_->failModify.end()) return fail->second;
  auto need = [&](int bits, const char* what) {
    if ((mask & bits) == bits) return true;
    s_->violate(std::string("transition to ") + what + " without its required attributes");
    return false;
  };
  std::string qn = "QP " + std::to_string(q->qpn);
  if (a.state == QpState::kInit) {
    if (q->state != QpState::kReset) return s_->violate(qn + ": INIT from a state other than RESET");
    if (!need(kQpPkeyIndex | kQpPort | kQpAccessFlags, "INIT")) return EINVAL;
    const FakeDevice& d = s_->devices[q->pd->ctx->dev];
    if (a.portNum < 1 || a.portNum > d.ports.size()) return s_->violate(qn + ": INIT on a port that does not exist");
    if (a.pkeyIndex != 0) return EINVAL;  // the fake's P_Key table has one entry
    q->port = a.portNum;
    q->access = a.accessFlags;
  } else if (a.state == QpState::kRtr) {
    if (q->state != QpState::kInit) return s_->violate(qn + ": RTR from a state other than INIT");
    if (!need(kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer, "RTR"))
      return EINVAL;
    const FakePort* mine = s_->port(q);
    if (a.ah.portNum != q->port) return s_->violate(qn + ": address vector names another port");
    if (a.pathMtu < 1 || a.pathMtu > mine->activeMtu)
      return s_->violate(qn + ": path MTU " + std::to_string(a.pathMtu) + " exceeds the port's active MTU");
    const bool roce = mine->linkLayer == LinkLayer::kEthernet;
    if (roce) {
      if (!a.ah.isGlobal) return s_->violate(qn + ": RoCE needs a global route (GRH)");
      if (a.ah.sgidIndex >= mine->gids.size()) return s_->violate(qn + ": source GID index out of the table");
      if (a.ah.hopLimit == 0) return s_->violate(qn + ": hop limit 0");
    }
    const std::string dest = roce ? fabricAddress(a.ah.dgid) : fabricAddress(a.ah.dlid);
    if (s_->wire && !s_->isOwnAddress(dest)) {
      // Another process's port: its QP is checked when our operations reach it.
      if (!roce && a.ah.dlid == 0) return s_->violate(qn + ": destination LID 0");
      s_->connectRemote(q, dest, roce ? fabricAddress(mine->gids[a.ah.sgidIndex].first) : fabricAddress(mine->lid));
    } else {
      auto it = s_->qps.find(a.destQpn);
      if (it == s_->qps.end()) return s_->violate(qn + ": RTR towards QPN " + std::to_string(a.destQpn) + " (none)");
      const FakePort* theirs = s_->port(it->second);
      if (theirs == nullptr) return s_->violate(qn + ": RTR towards a QP not in INIT yet");
      if (a.pathMtu > theirs->activeMtu)
        return s_->violate(qn + ": path MTU " + std::to_string(a.pathMtu) + " exceeds the peer port's active MTU");
      if (mine->linkLayer != theirs->linkLayer) return s_->violate(qn + ": link layers differ");
      if (roce) {
        bool found = false;
        for (auto& g : theirs->gids) found = found || memcmp(g.first.raw, a.ah.dgid.raw, 16) == 0;
        if (!found) return s_->violate(qn + ": destination GID is not on the destination QP's port");
      } else if (a.ah.dlid != theirs->lid) {
        return s_->violate(qn + ": destination LID does not match the peer port");
      }
    }
    q->destQpn = a.destQpn;
    q->pathMtu = a.pathMtu;
    q->rqPsn = a.rqPsn;
  } else if (a.state == QpState::kRts) {
    if (q->state != QpState::kRtr) return s_->violate(qn + ": RTS from a state other than RTR");
    if (!need(kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpSqPsn | kQpMaxQpRdAtomic, "RTS")) return EINVAL;
    if (a.retryCnt > 7 || a.rnrRetry > 7 || a.timeout > 31) return s_->violate(qn + ": RTS attribute out of range");
    q->sqPsn = a.sqPsn;
    q->timeout = a.timeout;
    q->retryCnt = a.retryCnt;
  } else if (a.state == QpState::kErr) {
    s_->flushQueues(q);
  } else if (a.state != QpState::kReset) {
    return s_->violate(qn + ": unsupported transition");
  }
  q->state = a.state;
  s_->transitions[(int)a.state]++;
  return 0;
}

int FakeVerbs::destroyQp(Qp* qp) {
  Locked lock(s_.get());
  FQp* q = as<FQp>(qp);
  auto it = s_->qps.find(q->qpn);
  if (it == s_->qps.end() || it->second != q) return s_->violate("ibv_destroy_qp of an unknown QP");
  s_->qps.erase(it);
  for (auto& other : s_->qps) {  // its operations in flight vanish with it
    auto& in = other.second->inbound;
    for (auto i = in.begin(); i != in.end();) i = i->src == q ? in.erase(i) : i + 1;
  }
  s_->forgetRemote(q);
  delete q;
  return 0;
}

int FakeVerbs::postSend(Qp* qp, const SendWr& wr) {
  Locked lock(s_.get());
  FQp* q = as<FQp>(qp);
  std::string qn = "QP " + std::to_string(q->qpn);
  if (q->retriesOut) {  // what the HCA reports once its retries towards a dead peer ran out
    Wc wc;
    wc.wrId = wr.wrId;
    wc.status = kWcRetryExcErr;
    wc.opcode = senderOpcode(wr.opcode);
    s_->complete(q->scq, wc);
    return 0;
  }
  if (q->state == QpState::kErr) {  // flushed, as real verbs do
    Wc wc;
    wc.wrId = wr.wrId;
    wc.status = kWcWrFlushErr;
    s_->complete(q->scq, wc);
    return 0;
  }
  if (q->state != QpState::kRts) return s_->violate(qn + ": post_send outside RTS");
  if (q->outstanding >= (int)q->maxSendWr) return s_->violate(qn + ": send queue overflow", ENOMEM);
  if (wr.numSge < 0 || wr.numSge > 1) return s_->violate(qn + ": bad scatter/gather count");
  if (wr.numSge == 0 && wr.length != 0) return s_->violate(qn + ": length without a scatter/gather element");
  if (wr.opcode == WrOpcode::kRdmaWriteWithImm && !wr.signaled) return s_->violate(qn + ": unsignaled data write");
  if (wr.numSge == 1) {
    int need = wr.opcode == WrOpcode::kRdmaRead ? kAccessLocalWrite : 0;
    if (s_->findMr(q->pd, wr.lkey, false, (uintptr_t)wr.localAddr, wr.length, need) == nullptr) {
      s_->violate(qn + ": local buffer outside the lkey's registration");
      Wc wc;
      wc.wrId = wr.wrId;
      wc.status = kWcLocProtErr;
      s_->complete(q->scq, wc);
      q->state = QpState::kErr;
      return 0;
    }
  }
  if (!q->remote.empty()) {
    s_->postRemote(q, wr);
    s_->postedSends++;
    return 0;
  }
  auto it = s_->qps.find(q->destQpn);
  if (it == s_->qps.end()) {  // the peer is gone: the transport gives up after its retries
    Wc wc;
    wc.wrId = wr.wrId;
    wc.status = kWcRetryExcErr;
    s_->complete(q->scq, wc);
    q->state = QpState::kErr;
    return 0;
  }
  q->outstanding++;
  Inbound in;
  in.src = q;
  in.wr = wr;
  it->second->inbound.push_back(std::move(in));
  s_->postedSends++;
  return 0;
}

int FakeVerbs::postRecv(Qp* qp, const RecvWr& wr) {
  Locked lock(s_.get());
  FQp* q = as<FQp>(qp);
  if (q->state == QpState::kReset) return s_->violate("post_recv on a QP in RESET");
  if (q->rq.size() >= q->maxRecvWr) return s_->violate("receive queue overflow", ENOMEM);
  q->rq.push_back(wr);
  return 0;
}

int FakeVerbs::pollCq(Cq* cq, int n, Wc* wc) {
  Locked lock(s_.get());
  FCq* c = as<FCq>(cq);
  if (!s_->cqs.count(c)) {
    s_->violate("ibv_poll_cq of an unknown CQ");
    return -1;
  }
  for (auto& kv : s_->qps) {
    FQp* q = kv.second;
    if (q->scq != c && q->rcq != c) continue;
    while (!q->inbound.empty()) {
      Inbound in = std::move(q->inbound.front());
      q->inbound.pop_front();
      s_->land(q, in);
    }
  }
  if ((int)c->q.size() > c->cqe) s_->violate("CQ overrun: more completions than its cqe");
  int got = 0;
  while (got < n && !c->q.empty()) {
    wc[got++] = c->q.front();
    c->q.pop_front();
  }
  return got;
}

const char* FakeVerbs::wcStatusString(int status) {
  switch (status) {
    case kWcSuccess: return "success";
    case kWcLocProtErr: return "local protection error";
    case kWcWrFlushErr: return "Work Request Flushed Error";
    case kWcRemAccessErr: return "remote access error";
    case kWcRetryExcErr: return "transport retry counter exceeded";
    case kWcRnrRetryExcErr: return "RNR retry counter exceeded";
    default: return "unknown";
  }
}

}  // namespace fake
}  // namespace ib
}  // namespace uniccl
