// An in-memory RDMA fabric behind the verbs seam: devices, ports, GID tables,
// protection domains, memory regions (lkey/rkey and access checked on every
// access), CQs and RC QPs whose state machine refuses illegal transitions.
//
// Delivery model: a posted RDMA write/read/send is queued at its target QP and
// lands (memory copied, receive WR consumed, completions queued on both ends)
// when the target's side next polls one of its CQs. A real NIC lands it on its
// own; the transport polls before it reads anything remote ends write, so the
// fake only models a slow NIC, and every memory access stays on a thread that
// synchronizes through the fake's lock (clean under ThreadSanitizer).
//
// Across processes (joinFabric): each process has its own fake devices, whose
// ports carry GIDs/LIDs no other process of the job has. A QP moved to RTR
// towards an address that is not one of this process's reaches the process
// serving it over a FabricWire (fake_fabric_wire.h). The delivery model stays
// the same: a posted operation travels as a message (opcode, remote address,
// rkey, immediate data, a write's or send's bytes; a read as a request) and
// lands when the target process next polls a CQ of the target QP, checked
// against the target's own MRs; the sender's completion comes when the
// target's answer arrives (RC: acknowledged delivery). When the peer process
// dies (its connection closes), every send WR awaiting an answer and every
// later one on QPs towards it completes with kWcRetryExcErr, as a real HCA
// reports once its retries run out, and those QPs enter the error state;
// their posted receives stay until the owner moves the QP to the error state
// (kWcWrFlushErr) or destroys it. No call ever blocks: every seam call writes
// what is queued and reads what arrived, without waiting.
//
// Misuse that real verbs would reject or turn into errors is recorded in
// violations() (tests check it stays empty) and fails the call.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "net/ib/verbs_seam.h"

namespace uniccl {
namespace ib {
namespace fake {

struct FakePort {
  int state = kPortActive;
  LinkLayer linkLayer = LinkLayer::kEthernet;
  uint16_t lid = 0;
  int activeMtu = 5;  // 4096
  int activeSpeed = 64;
  int activeWidth = 2;
  std::vector<std::pair<Gid, GidType>> gids;
};

struct FakeDevice {
  std::string name;
  uint64_t guid = 0;
  std::vector<FakePort> ports;  // port 1 is ports[0]
  bool failOpen = false;
};

Gid ipv4Gid(uint8_t a, uint8_t b, uint8_t c, uint8_t d);  // ::ffff:a.b.c.d
Gid ipv6Gid(uint16_t first, uint16_t last);               // first::last
Gid linkLocalGid(uint8_t last);                           // fe80::last

class FakeVerbs final : public Verbs {
 public:
  FakeVerbs();
  ~FakeVerbs() override;

  void addDevice(const FakeDevice& d);

  // A RoCE v2 device with an IPv4 GID at index `v4Index` (link-local v1/v2 before it).
  static FakeDevice roceDevice(const std::string& name, int nPorts = 1);
  // A one-port RoCE device whose GIDs are fe80::host and ::ffff:10.0.0.host
  // (v1 and v2 each): one host of a cross-process fabric.
  static FakeDevice roceHost(const std::string& name, uint8_t host);
  // An InfiniBand device whose ports have LIDs `lid`, `lid + 1`, ...
  static FakeDevice ibDevice(const std::string& name, uint16_t lid, int nPorts = 1);

  // Fault injection.
  void failModifyTo(QpState state, int err);     // every later transition to `state` fails with err
  void failNextCompletion(int status);           // the next data completion gets this status
  // Called with the number of QPs created so far after each createQp, under
  // the fake's lock (it must not call the fake): e.g. a process that dies
  // while its connections are being set up.
  void onCreateQp(std::function<void(int created)> hook);
  void setHasDmabuf(bool v) { hasDmabuf_ = v; }

  // Cross-process mode for job `jobToken` (see the top). Once, after
  // addDevice and before the first QP; false (with *error) when this
  // process cannot serve its ports' addresses.
  bool joinFabric(const std::string& jobToken, std::string* error);

  std::vector<std::string> violations();
  int liveObjects();  // contexts, PDs, MRs, CQs, QPs not destroyed
  struct Census {
    int contexts = 0, pds = 0, mrs = 0, cqs = 0, qps = 0;
  };
  Census census();  // liveObjects() by kind
  long long postedSends();  // every post_send accepted so far
  int transitions(QpState to);

  // Seam.
  int getDeviceList(DeviceList** list, int* count) override;
  void freeDeviceList(DeviceList* list) override;
  std::string deviceName(DeviceList* list, int index) override;
  std::string devicePciPath(DeviceList* list, int index) override;
  int openDevice(DeviceList* list, int index, Context** ctx) override;
  int closeDevice(Context* ctx) override;
  int queryDevice(Context* ctx, DeviceAttr* attr) override;
  int queryPort(Context* ctx, int port, PortAttr* attr) override;
  int queryGid(Context* ctx, int port, int index, Gid* gid) override;
  int queryGidType(Context* ctx, int port, int index, GidType* type) override;
  int allocPd(Context* ctx, Pd** pd) override;
  int deallocPd(Pd* pd) override;
  int regMr(Pd* pd, void* addr, size_t length, int access, Mr** mr, MrKeys* keys) override;
  bool hasDmabuf() const override { return hasDmabuf_; }
  int regDmabufMr(Pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access, Mr** mr,
                  MrKeys* keys) override;
  int deregMr(Mr* mr) override;
  int createCq(Context* ctx, int cqe, Cq** cq) override;
  int destroyCq(Cq* cq) override;
  int createQp(Pd* pd, const QpInitAttr& attr, Qp** qp, uint32_t* qpn) override;
  int modifyQp(Qp* qp, const QpAttr& attr, int mask) override;
  int destroyQp(Qp* qp) override;
  int postSend(Qp* qp, const SendWr& wr) override;
  int postRecv(Qp* qp, const RecvWr& wr) override;
  int pollCq(Cq* cq, int n, Wc* wc) override;
  const char* wcStatusString(int status) override;

  struct State;

 private:
  std::unique_ptr<State> s_;
  bool hasDmabuf_ = true;
};

}  // namespace fake
}  // namespace ib
}  // namespace uniccl
