// The in-memory loopback net plugin behind loopback_net.h.
#include "loopback_net.h"

#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <random>
#include <set>

namespace uniccl::test {
namespace {

struct Req;
struct Channel {
  std::deque<Req*> sends, recvs;  // unmatched, in post order
};
struct Comm {
  bool isSend = false;
  std::shared_ptr<Channel> ch;
  std::set<Req*> reqs;  // outstanding: freed by test(done) or close
};
struct Req {
  Comm* owner = nullptr;
  void* data = nullptr;
  int size = 0;
  int tag = 0;
  bool done = false;
  bool error = false;
  int moved = 0;
};
struct Listen {
  uint64_t id = 0;
  int connectCalls = 0;
  std::deque<std::shared_ptr<Channel>> pending;
};

std::mutex gMu;
std::map<uint64_t, Listen*> gListens;
uint64_t gNextId = 1;
LoopbackCounts gCounts{};
std::mt19937 gRng(1);
int gBusy = 0;
int gFailIsendIn = 0;
int gThrowIsendIn = 0;

bool busy() { return gBusy > 0 && static_cast<int>(gRng() % 100) < gBusy; }

void match(Channel* ch) {
  while (!ch->sends.empty() && !ch->recvs.empty()) {
    Req* s = ch->sends.front();
    Req* r = ch->recvs.front();
    ch->sends.pop_front();
    ch->recvs.pop_front();
    if (s->tag != r->tag || s->size > r->size) {
      s->error = r->error = true;
    } else {
      if (s->size > 0) std::memcpy(r->data, s->data, s->size);
      s->moved = r->moved = s->size;
    }
    s->done = r->done = true;
  }
}

Req* newReq(Comm* c, void* data, int size, int tag) {
  Req* q = new Req;
  q->owner = c;
  q->data = data;
  q->size = size;
  q->tag = tag;
  c->reqs.insert(q);
  gCounts.requests++;
  return q;
}

void freeReq(Req* q) {
  q->owner->reqs.erase(q);
  gCounts.requests--;
  delete q;
}

ncclResult_t lbInit(ncclDebugLogger_t) { return ncclSuccess; }
ncclResult_t lbDevices(int* n) {
  *n = 1;
  return ncclSuccess;
}
ncclResult_t lbProps(int, ncclNetProperties_v8_t* p) {
  std::memset(p, 0, sizeof(*p));
  p->name = const_cast<char*>("loopback");
  p->ptrSupport = NCCL_PTR_HOST;
  p->maxComms = 1024;
  p->maxRecvs = 1;
  return ncclSuccess;
}
ncclResult_t lbListen(int, void* handle, void** listenComm) {
  std::lock_guard<std::mutex> lk(gMu);
  Listen* l = new Listen;
  l->id = gNextId++;
  gListens[l->id] = l;
  std::memset(handle, 0, NCCL_NET_HANDLE_MAXSIZE);
  std::memcpy(handle, &l->id, sizeof(l->id));
  gCounts.comms++;
  *listenComm = l;
  return ncclSuccess;
}
ncclResult_t lbConnect(int, void* handle, void** sendComm, ncclNetDeviceHandle_v8_t**) {
  std::lock_guard<std::mutex> lk(gMu);
  uint64_t id;
  std::memcpy(&id, handle, sizeof(id));
  auto it = gListens.find(id);
  if (it == gListens.end()) return ncclInvalidArgument;
  *sendComm = nullptr;
  if (++it->second->connectCalls % 2 == 1) return ncclSuccess;  // "in progress": call again
  auto ch = std::make_shared<Channel>();
  it->second->pending.push_back(ch);
  Comm* c = new Comm;
  c->isSend = true;
  c->ch = ch;
  gCounts.comms++;
  *sendComm = c;
  return ncclSuccess;
}
ncclResult_t lbAccept(void* listenComm, void** recvComm, ncclNetDeviceHandle_v8_t**) {
  std::lock_guard<std::mutex> lk(gMu);
  Listen* l = static_cast<Listen*>(listenComm);
  *recvComm = nullptr;
  if (l->pending.empty()) return ncclSuccess;
  Comm* c = new Comm;
  c->ch = l->pending.front();
  l->pending.pop_front();
  gCounts.comms++;
  *recvComm = c;
  return ncclSuccess;
}
ncclResult_t lbRegMr(void*, void*, size_t, int, void** mh) {
  std::lock_guard<std::mutex> lk(gMu);
  gCounts.mrs++;
  *mh = new int(42);
  return ncclSuccess;
}
ncclResult_t lbRegMrDmaBuf(void*, void*, size_t, int, uint64_t, int, void**) { return ncclInternalError; }
ncclResult_t lbDeregMr(void*, void* mh) {
  std::lock_guard<std::mutex> lk(gMu);
  gCounts.mrs--;
  delete static_cast<int*>(mh);
  return ncclSuccess;
}
ncclResult_t lbIsend(void* sendComm, void* data, int size, int tag, void* mh, void** request) {
  std::lock_guard<std::mutex> lk(gMu);
  *request = nullptr;
  if (mh == nullptr || *static_cast<int*>(mh) != 42) return ncclInvalidArgument;  // unregistered buffer
  if (gFailIsendIn > 0 && --gFailIsendIn == 0) return ncclSystemError;
  if (gThrowIsendIn > 0 && --gThrowIsendIn == 0) throw std::bad_alloc();
  if (busy()) return ncclSuccess;
  Comm* c = static_cast<Comm*>(sendComm);
  Req* q = newReq(c, data, size, tag);
  c->ch->sends.push_back(q);
  match(c->ch.get());
  *request = q;
  return ncclSuccess;
}
ncclResult_t lbIrecv(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhs, void** request) {
  std::lock_guard<std::mutex> lk(gMu);
  *request = nullptr;
  if (n != 1 || mhs[0] == nullptr) return ncclInvalidArgument;
  if (busy()) return ncclSuccess;
  Comm* c = static_cast<Comm*>(recvComm);
  Req* q = newReq(c, data[0], sizes[0], tags[0]);
  c->ch->recvs.push_back(q);
  match(c->ch.get());
  *request = q;
  return ncclSuccess;
}
ncclResult_t lbIflush(void* recvComm, int, void**, int*, void**, void** request) {
  std::lock_guard<std::mutex> lk(gMu);
  gCounts.flushes++;
  Req* q = newReq(static_cast<Comm*>(recvComm), nullptr, 0, 0);
  q->done = true;  // completes at its first (non-busy) test
  *request = q;
  return ncclSuccess;
}
ncclResult_t lbTest(void* request, int* done, int* sizes) {
  std::lock_guard<std::mutex> lk(gMu);
  Req* q = static_cast<Req*>(request);
  *done = 0;
  if (!q->done || busy()) return ncclSuccess;
  bool error = q->error;
  int moved = q->moved;
  freeReq(q);
  if (error) return ncclRemoteError;
  *done = 1;
  if (sizes != nullptr) *sizes = moved;
  return ncclSuccess;
}
ncclResult_t closeComm(void* comm) {
  std::lock_guard<std::mutex> lk(gMu);
  Comm* c = static_cast<Comm*>(comm);
  for (Req* q : std::set<Req*>(c->reqs)) {
    auto& queue = c->isSend ? c->ch->sends : c->ch->recvs;
    for (auto it = queue.begin(); it != queue.end(); ++it) {
      if (*it == q) {
        queue.erase(it);
        break;
      }
    }
    freeReq(q);
  }
  gCounts.comms--;
  delete c;
  return ncclSuccess;
}
ncclResult_t lbCloseListen(void* listenComm) {
  std::lock_guard<std::mutex> lk(gMu);
  Listen* l = static_cast<Listen*>(listenComm);
  gListens.erase(l->id);
  gCounts.comms--;
  delete l;
  return ncclSuccess;
}

const ncclNet_v8_t kLoopback = {
    "loopback", lbInit,  lbDevices, lbProps,  lbListen,  lbConnect,     lbAccept,
    lbRegMr,    lbRegMrDmaBuf, lbDeregMr, lbIsend, lbIrecv, lbIflush, lbTest,
    closeComm,  closeComm, lbCloseListen, nullptr, nullptr,
};

}  // namespace

const ncclNet_v8_t* loopbackNet() { return &kLoopback; }

LoopbackCounts loopbackCounts() {
  std::lock_guard<std::mutex> lk(gMu);
  return gCounts;
}

void loopbackSetChaos(unsigned seed, int busyPercent) {
  std::lock_guard<std::mutex> lk(gMu);
  gRng.seed(seed);
  gBusy = busyPercent;
}

void loopbackFailIsendAfter(int n) {
  std::lock_guard<std::mutex> lk(gMu);
  gFailIsendIn = n;
}

void loopbackThrowIsendAfter(int n) {
  std::lock_guard<std::mutex> lk(gMu);
  gThrowIsendIn = n;
}

}  // namespace uniccl::test
