// A scripted, host-memory implementation of src/common/gpu.h for host unit
// tests (see fake_gpu.h for the model). It links in place of src/cuda or
// src/hip; nothing here talks to a GPU runtime.
#include "fake_gpu.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace uniccl::fake {
namespace {

struct FakeEvent {
  unsigned flags = 0;
  EventState state = EventState::NotRecorded;
  uint64_t serial = 0;
  ncclResult_t failWith = ncclUnhandledCudaError;
};

struct Node {   // a captured kernel launch
  Launch launch{};
};

struct FakeGraph {
  uint64_t id = 0;
  std::vector<Node> nodes;
  std::vector<std::pair<void (*)(void*), void*>> userObjects;
};

struct FakeStream {
  int device = 0;
  FakeGraph* capture = nullptr;
  bool invalidated = false;
};

struct Alloc {
  size_t bytes;
  gpu::MemoryKind kind;
  int device;
  bool polled;   // deviceAllocPolled or hostAllocMapped: memory others may spin on
  bool mapped;   // its own anonymous mapping (large allocations), not the heap
};

// Allocations from this size on get their own anonymous mapping, so that
// memset(0) can drop their pages instead of writing them (fakeMemset):
// "GPU memory" nobody writes then costs no host memory, and init of
// thousands of ranks in one process measures what the library really
// touches.
constexpr size_t kMapFromBytes = size_t(256) << 10;
constexpr size_t kPage = 4096;

constexpr uint64_t kIpcMagic = 0x756e6963636c4950ull;  // "unicclIP"
constexpr char kMemfdPrefix[] = "uniccl-fake-vmm-dev";   // + the device: an import reads it back
constexpr char kMemfdPolled[] = "-polled";               // after the device: memCreate(..., polled = true)

// Virtual memory, real in host memory (as the emulator's): a physical
// allocation is a memfd, a reservation a PROT_NONE mapping, a map a
// MAP_SHARED view of the memfd, so two maps of one handle share bytes.
struct Phys {
  int fd = -1;
  size_t bytes = 0;
  int device = 0;
  int refs = 0;   // handles not yet released
  int maps = 0;   // live mappings
  dev_t inodeDev = 0;
  ino_t inode = 0;
  bool polled = false;   // memCreate(..., polled = true)
};
struct Mapping {
  size_t bytes;
  gpu::MemHandle handle;
  int device;   // the allocation's
};

struct State {
  std::mutex mu;
  std::condition_variable cv;
  int deviceCount = 1;
  bool peerAccess = true;
  int residentBlocks = 256;
  int workQueues = 8;
  bool processesShare = false;
  bool captureSupported = true;
  bool rocmVmm = false;   // setRocmVmmSemantics
  int currentDevice = 0;
  std::map<FakeEvent*, std::unique_ptr<FakeEvent>> events;
  std::map<FakeStream*, std::unique_ptr<FakeStream>> streams;
  std::map<FakeGraph*, std::unique_ptr<FakeGraph>> graphs;
  std::map<uintptr_t, Alloc> allocs;         // by start address
  std::map<uintptr_t, size_t> registrations;
  std::multiset<void*> ipcOpens;
  uint64_t serial = 0;
  uint64_t nextGraphId = 1;
  bool autoComplete = false;
  int syncTimeoutMs = 5000;
  std::function<void(gpu::Event)> syncHook;
  std::function<void(const Launch&)> launchHook;
  size_t argBytes = 0;
  std::vector<Launch> launches;
  std::map<std::string, std::pair<ncclResult_t, int>> inject;
  std::map<std::string, uint64_t> calls;
  gpu::VmmInfo vmm{true, true, size_t(64) << 10, nullptr};
  std::map<gpu::MemHandle, Phys> phys;
  gpu::MemHandle nextHandle = 1;
  std::map<uintptr_t, size_t> reservations;
  std::map<uintptr_t, Mapping> mappings;
};

State& st() {
  static State s;
  return s;
}

// Counts the call and answers an injected failure, if one is due. Lock held.
ncclResult_t enter(State& s, const char* call) {
  ++s.calls[call];
  auto it = s.inject.find(call);
  if (it == s.inject.end()) return ncclSuccess;
  ncclResult_t r = it->second.first;
  if (--it->second.second <= 0) s.inject.erase(it);
  return r;
}

#define FAKE_ENTER(name)                                  \
  State& s = st();                                        \
  std::unique_lock<std::mutex> lk(s.mu);                  \
  if (ncclResult_t inj_ = enter(s, name); inj_ != ncclSuccess) return inj_

FakeEvent* findEvent(State& s, gpu::Event e) {
  auto it = s.events.find(static_cast<FakeEvent*>(e));
  return it == s.events.end() ? nullptr : it->second.get();
}

FakeStream* findStream(State& s, gpu::Stream st) {
  auto it = s.streams.find(static_cast<FakeStream*>(st));
  return it == s.streams.end() ? nullptr : it->second.get();
}

FakeGraph* capturing(State& s, gpu::Stream stream) {
  FakeStream* fs = findStream(s, stream);
  return fs != nullptr && !fs->invalidated ? fs->capture : nullptr;
}

void completeLocked(State& s, FakeEvent* e) {
  e->state = EventState::Completed;
  s.cv.notify_all();
}

void recordLocked(State& s, FakeEvent* e) {
  e->serial = ++s.serial;
  e->state = EventState::Pending;
  if (s.autoComplete) completeLocked(s, e);
}

// `why` documents the call site (the fake keeps no error string: the core
// never asks a backend for one).
ncclResult_t bad(State&, const char* /*why*/) {
  return ncclUnhandledCudaError;
}

const Alloc* containing(State& s, const void* p, uintptr_t* start) {
  auto it = s.allocs.upper_bound(reinterpret_cast<uintptr_t>(p));
  if (it == s.allocs.begin()) return nullptr;
  --it;
  if (reinterpret_cast<uintptr_t>(p) >= it->first + std::max<size_t>(it->second.bytes, 1)) return nullptr;
  if (start) *start = it->first;
  return &it->second;
}

ncclResult_t allocate(State& s, void** p, size_t bytes, gpu::MemoryKind kind, bool polled = false) {
  // Page-aligned like the real allocators (conn FIFOs check 64-byte alignment).
  void* m = nullptr;
  const bool mapped = bytes >= kMapFromBytes;
  if (mapped) {
    m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return ncclSystemError;
  } else if (posix_memalign(&m, kPage, bytes == 0 ? 1 : bytes) != 0) {
    return ncclSystemError;
  }
  s.allocs[reinterpret_cast<uintptr_t>(m)] =
      Alloc{bytes, kind, kind == gpu::MemoryKind::Device ? s.currentDevice : -1, polled, mapped};
  *p = m;
  return ncclSuccess;
}

ncclResult_t release(State& s, void* p, bool device) {
  if (p == nullptr) return ncclSuccess;
  auto it = s.allocs.find(reinterpret_cast<uintptr_t>(p));
  if (it == s.allocs.end() || (it->second.kind == gpu::MemoryKind::Device) != device)
    return bad(s, "free of a pointer this allocator did not return");
  if (it->second.mapped) {
    munmap(p, it->second.bytes);
  } else {
    std::free(p);
  }
  s.allocs.erase(it);
  return ncclSuccess;
}

// memset: zeros over whole pages of a mapped allocation drop those pages
// (MADV_DONTNEED on private anonymous memory: the next read sees zeros), so
// the bytes read the same and nothing becomes resident. Lock held.
void fakeMemset(State& s, void* dst, int value, size_t bytes) {
  uintptr_t start = 0;
  const Alloc* a = containing(s, dst, &start);
  uintptr_t lo = reinterpret_cast<uintptr_t>(dst), hi = lo + bytes;
  if (value != 0 || a == nullptr || !a->mapped || hi > start + a->bytes) {
    std::memset(dst, value, bytes);
    return;
  }
  uintptr_t pageLo = (lo + kPage - 1) & ~(kPage - 1), pageHi = hi & ~(kPage - 1);
  if (pageLo >= pageHi || madvise(reinterpret_cast<void*>(pageLo), pageHi - pageLo, MADV_DONTNEED) != 0) {
    std::memset(dst, 0, bytes);
    return;
  }
  std::memset(dst, 0, pageLo - lo);
  std::memset(reinterpret_cast<void*>(pageHi), 0, hi - pageHi);
}

// The mapping that contains p. Lock held.
const Mapping* mappingOf(State& s, const void* p, uintptr_t* start) {
  auto it = s.mappings.upper_bound(reinterpret_cast<uintptr_t>(p));
  if (it == s.mappings.begin()) return nullptr;
  --it;
  if (reinterpret_cast<uintptr_t>(p) >= it->first + it->second.bytes) return nullptr;
  if (start) *start = it->first;
  return &it->second;
}

// Closes the allocation once no handle and no mapping holds it. Lock held.
void dropIfUnused(State& s, std::map<gpu::MemHandle, Phys>::iterator it) {
  if (it->second.refs > 0 || it->second.maps > 0) return;
  ::close(it->second.fd);
  s.phys.erase(it);
}

void logLaunchAndHook(std::unique_lock<std::mutex>& lk, State& s, Launch l) {
  s.launches.push_back(l);
  auto hook = s.launchHook;
  lk.unlock();
  if (hook) hook(l);
  lk.lock();
}

}  // namespace

// ============================================================ control API
void reset() {
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  for (auto& a : s.allocs) {
    if (a.second.mapped) {
      munmap(reinterpret_cast<void*>(a.first), a.second.bytes);
    } else {
      std::free(reinterpret_cast<void*>(a.first));
    }
  }
  s.allocs.clear();
  for (auto& m : s.mappings) munmap(reinterpret_cast<void*>(m.first), m.second.bytes);
  for (auto& r : s.reservations) munmap(reinterpret_cast<void*>(r.first), r.second);
  for (auto& p : s.phys) ::close(p.second.fd);
  s.mappings.clear();
  s.reservations.clear();
  s.phys.clear();
  s.vmm = gpu::VmmInfo{true, true, size_t(64) << 10, nullptr};
  s.vmm.polled = true;
  s.events.clear();
  s.streams.clear();
  s.graphs.clear();
  s.registrations.clear();
  s.ipcOpens.clear();
  s.deviceCount = 1;
  s.peerAccess = true;
  s.residentBlocks = 256;
  s.workQueues = 8;
  s.processesShare = false;
  s.captureSupported = true;
  s.rocmVmm = false;
  s.currentDevice = 0;
  s.serial = 0;
  s.nextGraphId = 1;
  s.autoComplete = false;
  s.syncTimeoutMs = 5000;
  s.syncHook = nullptr;
  s.launchHook = nullptr;
  s.argBytes = 0;
  s.launches.clear();
  s.inject.clear();
  s.calls.clear();
}

void setDeviceCount(int n) { std::lock_guard<std::mutex> lk(st().mu); st().deviceCount = n; }
void setPeerAccess(bool can) { std::lock_guard<std::mutex> lk(st().mu); st().peerAccess = can; }
void setResidentBlocks(int n) { std::lock_guard<std::mutex> lk(st().mu); st().residentBlocks = n; }
void setWorkQueues(int n) { std::lock_guard<std::mutex> lk(st().mu); st().workQueues = n; }
void setProcessesShareDevice(bool on) { std::lock_guard<std::mutex> lk(st().mu); st().processesShare = on; }

EventState eventState(gpu::Event e) {
  std::lock_guard<std::mutex> lk(st().mu);
  FakeEvent* fe = findEvent(st(), e);
  return fe ? fe->state : EventState::NotRecorded;
}
void setEventState(gpu::Event e, EventState state) {
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  if (FakeEvent* fe = findEvent(s, e)) {
    if (state == EventState::Completed) completeLocked(s, fe);
    else fe->state = state;
    s.cv.notify_all();
  }
}
uint64_t eventSerial(gpu::Event e) {
  std::lock_guard<std::mutex> lk(st().mu);
  FakeEvent* fe = findEvent(st(), e);
  return fe ? fe->serial : 0;
}
unsigned eventFlags(gpu::Event e) {
  std::lock_guard<std::mutex> lk(st().mu);
  FakeEvent* fe = findEvent(st(), e);
  return fe ? fe->flags : 0;
}
uint64_t lastSerial() { std::lock_guard<std::mutex> lk(st().mu); return st().serial; }
void completeEvent(gpu::Event e) { setEventState(e, EventState::Completed); }

size_t completeOldest(size_t n) {
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  size_t done = 0;
  while (done < n) {
    FakeEvent* oldest = nullptr;
    for (auto& kv : s.events)
      if (kv.second->state == EventState::Pending && (!oldest || kv.second->serial < oldest->serial))
        oldest = kv.second.get();
    if (!oldest) break;
    completeLocked(s, oldest);
    ++done;
  }
  return done;
}
size_t completeEventsUpTo(uint64_t serial) {
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  size_t done = 0;
  for (auto& kv : s.events)
    if (kv.second->state == EventState::Pending && kv.second->serial <= serial) {
      completeLocked(s, kv.second.get());
      ++done;
    }
  return done;
}
size_t pendingEventCount() {
  std::lock_guard<std::mutex> lk(st().mu);
  size_t n = 0;
  for (auto& kv : st().events) n += kv.second->state == EventState::Pending;
  return n;
}
void failEvent(gpu::Event e, ncclResult_t err) {
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  if (FakeEvent* fe = findEvent(s, e)) {
    fe->state = EventState::Failed;
    fe->failWith = err;
    s.cv.notify_all();
  }
}
void setAutoComplete(bool on) { std::lock_guard<std::mutex> lk(st().mu); st().autoComplete = on; }
void setSyncHook(std::function<void(gpu::Event)> hook) { std::lock_guard<std::mutex> lk(st().mu); st().syncHook = std::move(hook); }
void setSyncTimeoutMs(int ms) { std::lock_guard<std::mutex> lk(st().mu); st().syncTimeoutMs = ms; }

void setLaunchArgBytes(size_t n) { std::lock_guard<std::mutex> lk(st().mu); st().argBytes = n; }
std::vector<Launch> launches() { std::lock_guard<std::mutex> lk(st().mu); return st().launches; }
size_t launchCount() { std::lock_guard<std::mutex> lk(st().mu); return st().launches.size(); }
void setLaunchHook(std::function<void(const Launch&)> hook) { std::lock_guard<std::mutex> lk(st().mu); st().launchHook = std::move(hook); }

gpu::Graph beginCapture(gpu::Stream stream) {
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  FakeStream* fs = findStream(s, stream);
  if (fs == nullptr || fs->capture != nullptr) return nullptr;
  auto g = std::make_unique<FakeGraph>();
  g->id = s.nextGraphId++;
  fs->capture = g.get();
  fs->invalidated = false;
  FakeGraph* raw = g.get();
  s.graphs[raw] = std::move(g);
  return raw;
}
gpu::Graph endCapture(gpu::Stream stream) {
  std::lock_guard<std::mutex> lk(st().mu);
  FakeStream* fs = findStream(st(), stream);
  if (fs == nullptr) return nullptr;
  FakeGraph* g = fs->capture;
  fs->capture = nullptr;
  fs->invalidated = false;
  return g;
}
void invalidateCapture(gpu::Stream stream) {
  std::lock_guard<std::mutex> lk(st().mu);
  if (FakeStream* fs = findStream(st(), stream)) fs->invalidated = fs->capture != nullptr;
}
void replayGraph(gpu::Graph graph) {
  State& s = st();
  std::unique_lock<std::mutex> lk(s.mu);
  auto it = s.graphs.find(static_cast<FakeGraph*>(graph));
  if (it == s.graphs.end()) return;
  const std::vector<Node> nodes = it->second->nodes;
  for (const Node& n : nodes) logLaunchAndHook(lk, s, n.launch);
}
void destroyGraph(gpu::Graph graph) {
  State& s = st();
  std::unique_lock<std::mutex> lk(s.mu);
  auto it = s.graphs.find(static_cast<FakeGraph*>(graph));
  if (it == s.graphs.end()) return;
  auto objs = std::move(it->second->userObjects);
  for (auto& kv : s.streams)
    if (kv.second->capture == graph) kv.second->capture = nullptr;
  s.graphs.erase(it);
  lk.unlock();
  for (auto& o : objs) o.first(o.second);
}

void setCaptureSupported(bool on) {
  std::lock_guard<std::mutex> lk(st().mu);
  st().captureSupported = on;
}

void failNext(const std::string& call, ncclResult_t err, int times) {
  std::lock_guard<std::mutex> lk(st().mu);
  st().inject[call] = {err, times};
}
uint64_t callCount(const std::string& call) {
  std::lock_guard<std::mutex> lk(st().mu);
  auto it = st().calls.find(call);
  return it == st().calls.end() ? 0 : it->second;
}

bool isPolledMemory(const void* p) {
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  const Alloc* a = containing(s, p, nullptr);
  if (a != nullptr) return a->polled;
  const Mapping* m = mappingOf(s, p, nullptr);
  return m != nullptr && s.phys.at(m->handle).polled;
}

Live live() {
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  Live l{};
  l.events = s.events.size();
  l.streams = s.streams.size();
  for (auto& a : s.allocs) (a.second.kind == gpu::MemoryKind::Device ? l.deviceAllocs : l.hostAllocs)++;
  l.registrations = s.registrations.size();
  l.ipcOpens = s.ipcOpens.size();
  l.graphs = s.graphs.size();
  for (auto& g : s.graphs) l.userObjects += g.second->userObjects.size();
  l.physAllocs = s.phys.size();
  l.mappings = s.mappings.size();
  l.reservations = s.reservations.size();
  return l;
}

Bytes liveBytes() {
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  Bytes b{};
  for (auto& a : s.allocs) (a.second.kind == gpu::MemoryKind::Device ? b.device : b.host) += a.second.bytes;
  for (auto& p : s.phys) b.device += p.second.bytes;
  return b;
}

void setRocmVmmSemantics(bool on) {
  std::lock_guard<std::mutex> lk(st().mu);
  st().rocmVmm = on;
}

void setVmm(bool supported, bool fdExport, size_t granularity) {
  std::lock_guard<std::mutex> lk(st().mu);
  st().vmm = gpu::VmmInfo{supported, fdExport, granularity,
                          supported && fdExport ? nullptr : "virtual memory switched off in the fake (fake::setVmm)"};
  st().vmm.polled = supported;
}
void setVmmPolled(bool available) {
  std::lock_guard<std::mutex> lk(st().mu);
  st().vmm.polled = available && st().vmm.supported;
  st().vmm.polledWhy = available ? nullptr : "polled virtual memory switched off in the fake (fake::setVmmPolled)";
}

}  // namespace uniccl::fake

// ====================================================== gpu.h over the fake
namespace uniccl::gpu {
using namespace uniccl::fake;

ncclResult_t getDeviceCount(int* count) {
  FAKE_ENTER("getDeviceCount");
  *count = s.deviceCount;
  return ncclSuccess;
}
ncclResult_t getDevice(int* dev) {
  FAKE_ENTER("getDevice");
  *dev = s.currentDevice;
  return ncclSuccess;
}
ncclResult_t setDevice(int dev) {
  FAKE_ENTER("setDevice");
  if (dev < 0 || dev >= s.deviceCount) return bad(s, "invalid device ordinal");
  s.currentDevice = dev;
  return ncclSuccess;
}
ncclResult_t getDeviceProps(int dev, DeviceProps* props) {
  FAKE_ENTER("getDeviceProps");
  if (dev < 0 || dev >= s.deviceCount) return bad(s, "invalid device ordinal");
  DeviceProps p{};
  std::snprintf(p.name, sizeof(p.name), "uniccl fake GPU %d", dev);
  p.multiProcessorCount = 4;
  p.warpSize = 32;
  p.timerRateKHz = 1000000;
  p.computeMajor = 9;
  p.totalGlobalMem = size_t(1) << 30;
  p.pciBus = 0x10 + dev;
  std::snprintf(p.busId, sizeof(p.busId), "0000:%02x:00.0", p.pciBus);
  p.canMapHostMemory = 1;
  *props = p;
  return ncclSuccess;
}
ncclResult_t canAccessPeer(int dev, int peer, bool* can) {
  FAKE_ENTER("canAccessPeer");
  if (dev < 0 || dev >= s.deviceCount || peer < 0 || peer >= s.deviceCount) return bad(s, "invalid device ordinal");
  *can = dev != peer && s.peerAccess;
  return ncclSuccess;
}
ncclResult_t p2pLinkKeepsLines(int dev, int peer, bool* whole) {
  FAKE_ENTER("p2pLinkKeepsLines");
  if (dev < 0 || dev >= s.deviceCount || peer < 0 || peer >= s.deviceCount) return bad(s, "invalid device ordinal");
  *whole = false;   // the fake GPUs report no LL128 (DeviceProps::lineStoreAtomic128 = 0)
  return ncclSuccess;
}
ncclResult_t peerLinkKind(int dev, int peer, int* kind, int* count) {
  FAKE_ENTER("peerLinkKind");
  if (dev < 0 || dev >= s.deviceCount || peer < 0 || peer >= s.deviceCount) return bad(s, "invalid device ordinal");
  *kind = dev != peer && s.peerAccess ? kPeerLinkSwitch : kPeerLinkNone;
  *count = 0;
  return ncclSuccess;
}
ncclResult_t enablePeerAccess(int peer) {
  FAKE_ENTER("enablePeerAccess");
  return peer >= 0 && peer < s.deviceCount && s.peerAccess ? ncclSuccess : bad(s, "peer access unsupported");
}

ncclResult_t streamCreate(Stream* out) {
  FAKE_ENTER("streamCreate");
  auto fs = std::make_unique<FakeStream>();
  fs->device = s.currentDevice;
  *out = fs.get();
  s.streams[fs.get()] = std::move(fs);
  return ncclSuccess;
}
ncclResult_t streamDestroy(Stream stream) {
  FAKE_ENTER("streamDestroy");
  return s.streams.erase(static_cast<FakeStream*>(stream)) ? ncclSuccess : bad(s, "invalid stream");
}
ncclResult_t streamSynchronize(Stream stream) {
  FAKE_ENTER("streamSynchronize");
  if (stream != nullptr && !findStream(s, stream)) return bad(s, "invalid stream");
  for (auto& kv : s.events)
    if (kv.second->state == EventState::Pending) completeLocked(s, kv.second.get());
  return ncclSuccess;
}
ncclResult_t streamWaitEvent(Stream stream, Event e) {
  FAKE_ENTER("streamWaitEvent");
  if ((stream != nullptr && !findStream(s, stream)) || !findEvent(s, e)) return bad(s, "invalid handle");
  return ncclSuccess;
}
ncclResult_t streamGetCaptureInfo(Stream stream, CaptureInfo* info) {
  FAKE_ENTER("streamGetCaptureInfo");
  CaptureInfo out{CaptureStatus::None, 0, nullptr};
  if (stream != nullptr) {
    FakeStream* fs = findStream(s, stream);
    if (!fs) return bad(s, "invalid stream");
    if (fs->capture != nullptr) {
      out.status = fs->invalidated ? CaptureStatus::Invalidated : CaptureStatus::Active;
      out.graphId = fs->capture->id;
      out.graph = fs->invalidated ? nullptr : fs->capture;
    }
  }
  *info = out;
  return ncclSuccess;
}
bool graphCaptureSupported(const char** why) {
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  *why = s.captureSupported ? nullptr : "graph capture is not supported by this (fake) runtime";
  return s.captureSupported;
}

ncclResult_t eventCreate(Event* e, unsigned flags) {
  FAKE_ENTER("eventCreate");
  if ((flags & kEventInterprocess) && !(flags & kEventDisableTiming)) return bad(s, "interprocess event needs disabled timing");
  auto fe = std::make_unique<FakeEvent>();
  fe->flags = flags;
  *e = fe.get();
  s.events[fe.get()] = std::move(fe);
  return ncclSuccess;
}
ncclResult_t eventDestroy(Event e) {
  FAKE_ENTER("eventDestroy");
  return s.events.erase(static_cast<FakeEvent*>(e)) ? ncclSuccess : bad(s, "invalid event");
}
ncclResult_t eventRecord(Event e, Stream stream) {
  FAKE_ENTER("eventRecord");
  FakeEvent* fe = findEvent(s, e);
  if (!fe || (stream != nullptr && !findStream(s, stream))) return bad(s, "invalid handle");
  // Inside a capture a plain record only orders captured work; nothing to track.
  if (!capturing(s, stream)) recordLocked(s, fe);
  return ncclSuccess;
}
// Bus ids as getDeviceProps makes them: "0000:<0x10 + dev>:00.0".
ncclResult_t deviceGetByBusId(const char* busId, int* dev) {
  FAKE_ENTER("deviceGetByBusId");
  if (busId == nullptr || dev == nullptr) return ncclInvalidArgument;
  for (int d = 0; d < s.deviceCount; d++) {
    char id[32];
    std::snprintf(id, sizeof(id), "0000:%02x:00.0", 0x10 + d);
    if (strcmp(busId, id) == 0) {
      *dev = d;
      return ncclSuccess;
    }
  }
  return ncclInvalidArgument;
}

ncclResult_t preloadKernel(const void* kernel) { return kernel ? ncclSuccess : ncclInvalidArgument; }
ncclResult_t programmaticLaunchSupported(const void* kernel, bool* supported) {
  *supported = false;
  return kernel ? ncclSuccess : ncclInvalidArgument;
}

ncclResult_t kernelResidentBlocks(const void* kernel, unsigned blockThreads, int* blocks) {
  FAKE_ENTER("kernelResidentBlocks");
  if (kernel == nullptr || blockThreads == 0) return bad(s, "invalid device function");
  *blocks = s.residentBlocks;
  return ncclSuccess;
}
WorkQueues workQueues() {
  std::lock_guard<std::mutex> lk(st().mu);
  return WorkQueues{st().workQueues, "FAKE_WORK_QUEUES"};
}
ncclResult_t processesShareDevice(bool* concurrent, const char** how) {
  FAKE_ENTER("processesShareDevice");
  *concurrent = s.processesShare;
  *how = s.processesShare ? "the fake says so" : "the fake says no";
  return ncclSuccess;
}

ncclResult_t eventQuery(Event e) {
  FAKE_ENTER("eventQuery");
  FakeEvent* fe = findEvent(s, e);
  if (!fe) return bad(s, "invalid event");
  if (fe->state == EventState::Pending) return ncclInProgress;
  if (fe->state == EventState::Failed) return fe->failWith;
  return ncclSuccess;
}
ncclResult_t eventSynchronize(Event e) {
  FAKE_ENTER("eventSynchronize");
  FakeEvent* fe = findEvent(s, e);
  if (!fe) return bad(s, "invalid event");
  if (fe->state == EventState::Pending) {
    auto hook = s.syncHook;
    if (hook) {
      lk.unlock();
      hook(e);
      lk.lock();
      fe = findEvent(s, e);
      if (!fe) return bad(s, "event destroyed while being waited on");
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(s.syncTimeoutMs);
    while (fe->state == EventState::Pending) {
      const bool timedOut = s.cv.wait_until(lk, deadline) == std::cv_status::timeout;
      fe = findEvent(s, e);
      if (!fe) return bad(s, "event destroyed while being waited on");
      if (timedOut && fe->state == EventState::Pending) {
        std::fprintf(stderr, "fake gpu: eventSynchronize on an event nobody completes (timed out after %d ms)\n",
                     s.syncTimeoutMs);
        return ncclInternalError;
      }
    }
  }
  return fe->state == EventState::Failed ? fe->failWith : ncclSuccess;
}

ncclResult_t deviceAlloc(void** ptr, size_t bytes) {
  FAKE_ENTER("deviceAlloc");
  return allocate(s, ptr, bytes, MemoryKind::Device);
}
ncclResult_t deviceAllocPolled(void** ptr, size_t bytes) {
  FAKE_ENTER("deviceAllocPolled");
  return allocate(s, ptr, bytes, MemoryKind::Device, true);
}
ncclResult_t deviceFree(void* ptr) {
  FAKE_ENTER("deviceFree");
  return release(s, ptr, true);
}
ncclResult_t hostAllocMapped(void** hostPtr, void** devPtr, size_t bytes) {
  FAKE_ENTER("hostAllocMapped");
  void* p = nullptr;
  if (ncclResult_t r = allocate(s, &p, bytes, MemoryKind::Host, true); r != ncclSuccess) return r;
  *hostPtr = p;
  *devPtr = p;  // one address space: the "device" reads host memory directly
  return ncclSuccess;
}
ncclResult_t hostFree(void* ptr) {
  FAKE_ENTER("hostFree");
  return release(s, ptr, false);
}
ncclResult_t hostRegister(void* ptr, size_t bytes, void** devPtr) {
  FAKE_ENTER("hostRegister");
  if (ptr == nullptr || bytes == 0 || s.registrations.count(reinterpret_cast<uintptr_t>(ptr)))
    return bad(s, "invalid or already registered range");
  s.registrations[reinterpret_cast<uintptr_t>(ptr)] = bytes;
  *devPtr = ptr;
  return ncclSuccess;
}
ncclResult_t hostUnregister(void* ptr) {
  FAKE_ENTER("hostUnregister");
  return s.registrations.erase(reinterpret_cast<uintptr_t>(ptr)) ? ncclSuccess : bad(s, "not registered");
}
ncclResult_t memcpyAsync(void* dst, const void* src, size_t bytes, Stream) {
  FAKE_ENTER("memcpyAsync");
  std::memmove(dst, src, bytes);
  return ncclSuccess;
}
// Copies complete at once here, so the value is stored at once too.
ncclResult_t streamWriteValue32(Stream, void* devAddr, uint32_t value) {
  FAKE_ENTER("streamWriteValue32");
  if (devAddr == nullptr) return bad(s, "invalid argument");
  __atomic_store_n(static_cast<uint32_t*>(devAddr), value, __ATOMIC_RELEASE);
  return ncclSuccess;
}
ncclResult_t memcpy(void* dst, const void* src, size_t bytes) {
  FAKE_ENTER("memcpy");
  std::memmove(dst, src, bytes);
  return ncclSuccess;
}
ncclResult_t memset(void* dst, int value, size_t bytes) {
  FAKE_ENTER("memset");
  fakeMemset(s, dst, value, bytes);
  return ncclSuccess;
}
ncclResult_t pointerGetInfo(const void* ptr, PointerInfo* info) {
  FAKE_ENTER("pointerGetInfo");
  PointerInfo out{MemoryKind::Unregistered, -1};
  if (const Alloc* a = containing(s, ptr, nullptr)) {
    out.kind = a->kind;
    out.device = a->device;
  } else if (const Mapping* m = mappingOf(s, ptr, nullptr)) {
    out.kind = MemoryKind::Device;
    out.device = m->device;
  } else {
    for (auto& r : s.registrations)
      if (reinterpret_cast<uintptr_t>(ptr) >= r.first && reinterpret_cast<uintptr_t>(ptr) < r.first + r.second)
        out.kind = MemoryKind::Host;
  }
  *info = out;
  return ncclSuccess;
}
ncclResult_t memGetAddressRange(const void* ptr, void** base, size_t* size) {
  FAKE_ENTER("memGetAddressRange");
  uintptr_t start = 0;
  if (const Mapping* m = mappingOf(s, ptr, &start)) {
    *base = reinterpret_cast<void*>(start);
    *size = m->bytes;
    return ncclSuccess;
  }
  const Alloc* a = containing(s, ptr, &start);
  if (!a) return bad(s, "pointer not in any allocation");
  *base = reinterpret_cast<void*>(start);
  *size = a->bytes;
  return ncclSuccess;
}

// ----------------------------------------------------------- virtual memory
ncclResult_t vmmQuery(int dev, VmmInfo* info) {
  FAKE_ENTER("vmmQuery");
  if (dev < 0 || dev >= s.deviceCount) return bad(s, "invalid device ordinal");
  *info = s.vmm;
  return ncclSuccess;
}
ncclResult_t memCreate(MemHandle* handle, size_t bytes, int dev, bool polled) {
  FAKE_ENTER("memCreate");
  if (!s.vmm.supported) return bad(s, "virtual memory unsupported");
  if (polled && !s.vmm.polled) return ncclInvalidUsage;
  if (dev < 0 || dev >= s.deviceCount) return bad(s, "invalid device ordinal");
  if (bytes == 0 || bytes % s.vmm.granularity != 0) return bad(s, "size not a multiple of the granularity");
  char name[64];
  std::snprintf(name, sizeof(name), "%s%d%s", kMemfdPrefix, dev, polled ? kMemfdPolled : "");
  int fd = memfd_create(name, MFD_CLOEXEC);
  struct stat sb {};
  if (fd < 0 || ftruncate(fd, (off_t)bytes) != 0 || fstat(fd, &sb) != 0) {
    if (fd >= 0) ::close(fd);
    return ncclSystemError;
  }
  const MemHandle h = s.nextHandle++;
  s.phys[h] = Phys{fd, bytes, dev, 1, 0, sb.st_dev, sb.st_ino, polled};
  *handle = h;
  return ncclSuccess;
}
ncclResult_t memRelease(MemHandle handle) {
  FAKE_ENTER("memRelease");
  auto it = s.phys.find(handle);
  if (it == s.phys.end() || it->second.refs == 0) return bad(s, "not a live allocation handle");
  --it->second.refs;
  dropIfUnused(s, it);
  return ncclSuccess;
}
ncclResult_t memExportFd(MemHandle handle, int* fd) {
  FAKE_ENTER("memExportFd");
  auto it = s.phys.find(handle);
  if (it == s.phys.end() || it->second.refs == 0) return bad(s, "not a live allocation handle");
  if (!s.vmm.fdExport) return bad(s, "fd export unsupported");
  int d = fcntl(it->second.fd, F_DUPFD_CLOEXEC, 0);
  if (d < 0) return ncclSystemError;
  *fd = d;
  return ncclSuccess;
}
ncclResult_t memImportFd(int fd, MemHandle* handle) {
  FAKE_ENTER("memImportFd");
  char path[64], target[256];
  std::snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
  ssize_t n = readlink(path, target, sizeof(target) - 1);
  struct stat sb {};
  if (n < 0 || fstat(fd, &sb) != 0) return bad(s, "not an open file descriptor");
  target[n] = '\0';
  const std::string prefix = std::string("/memfd:") + kMemfdPrefix;
  if (std::strncmp(target, prefix.c_str(), prefix.size()) != 0) return bad(s, "not a fake allocation's fd");
  const int dev = std::atoi(target + prefix.size());
  for (auto& kv : s.phys)
    if (kv.second.inodeDev == sb.st_dev && kv.second.inode == sb.st_ino) {
      ++kv.second.refs;
      *handle = kv.first;
      return ncclSuccess;
    }
  int d = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (d < 0) return ncclSystemError;
  const MemHandle h = s.nextHandle++;
  s.phys[h] = Phys{d, (size_t)sb.st_size, dev, 1, 0, sb.st_dev, sb.st_ino,
                   std::strstr(target + prefix.size(), kMemfdPolled) != nullptr};
  *handle = h;
  return ncclSuccess;
}
bool memRetainAnyAddress() {
  std::lock_guard<std::mutex> lk(st().mu);
  return !st().rocmVmm;
}
ncclResult_t memRetainFromAddress(const void* ptr, MemHandle* handle, void** mapBase, size_t* mapBytes) {
  FAKE_ENTER("memRetainFromAddress");
  uintptr_t start = 0;
  const Mapping* m = mappingOf(s, ptr, &start);
  if (m == nullptr && s.rocmVmm) {
    // ROCm 6.2+'s hipMemRetainAllocationHandle follows a null pointer here:
    // the process dies, and so does the test that let it happen.
    std::fprintf(stderr, "fake gpu (ROCm semantics): memRetainFromAddress(%p) outside every VMM mapping: the "
                 "runtime would crash here\n", ptr);
    std::abort();
  }
  if (m == nullptr) return ncclInvalidArgument;
  ++s.phys.at(m->handle).refs;
  *handle = m->handle;
  *mapBase = reinterpret_cast<void*>(start);
  *mapBytes = m->bytes;
  return ncclSuccess;
}
ncclResult_t addressReserve(void** va, size_t bytes, size_t align) {
  FAKE_ENTER("addressReserve");
  const size_t g = s.vmm.granularity;
  if (align == 0) align = g;
  if (!s.vmm.supported || bytes == 0 || bytes % g != 0 || (align & (align - 1)) != 0) return bad(s, "invalid reservation");
  align = std::max(align, g);
  void* m = mmap(nullptr, bytes + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return ncclSystemError;
  const uintptr_t lo = reinterpret_cast<uintptr_t>(m), start = (lo + align - 1) / align * align, end = lo + bytes + align;
  if (start > lo) munmap(m, start - lo);
  if (end > start + bytes) munmap(reinterpret_cast<void*>(start + bytes), end - start - bytes);
  s.reservations[start] = bytes;
  *va = reinterpret_cast<void*>(start);
  return ncclSuccess;
}
ncclResult_t addressFree(void* va, size_t bytes) {
  FAKE_ENTER("addressFree");
  const uintptr_t p = reinterpret_cast<uintptr_t>(va);
  auto it = s.reservations.find(p);
  if (it == s.reservations.end() || it->second != bytes) return bad(s, "not a whole reservation");
  auto m = s.mappings.lower_bound(p);
  if (m != s.mappings.end() && m->first < p + bytes) return bad(s, "still mapped");
  munmap(va, bytes);
  s.reservations.erase(it);
  return ncclSuccess;
}
ncclResult_t memMap(void* va, size_t bytes, MemHandle handle, int dev) {
  FAKE_ENTER("memMap");
  auto it = s.phys.find(handle);
  if (it == s.phys.end() || it->second.refs == 0) return bad(s, "not a live allocation handle");
  if (dev < 0 || dev >= s.deviceCount || bytes != it->second.bytes) return bad(s, "invalid device or size");
  const uintptr_t p = reinterpret_cast<uintptr_t>(va);
  auto r = s.reservations.upper_bound(p);
  if (r == s.reservations.begin() || p % s.vmm.granularity != 0) return bad(s, "not inside a reservation");
  --r;
  if (p + bytes > r->first + r->second) return bad(s, "not inside a reservation");
  auto next = s.mappings.lower_bound(p);
  if ((next != s.mappings.end() && next->first < p + bytes) || mappingOf(s, va, nullptr) != nullptr)
    return bad(s, "already mapped");
  if (mmap(va, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, it->second.fd, 0) == MAP_FAILED)
    return ncclSystemError;
  s.mappings[p] = Mapping{bytes, handle, it->second.device};
  ++it->second.maps;
  return ncclSuccess;
}
ncclResult_t memSetAccess(void* va, size_t bytes, int dev) {
  FAKE_ENTER("memSetAccess");
  auto it = s.mappings.find(reinterpret_cast<uintptr_t>(va));
  if (it == s.mappings.end() || it->second.bytes != bytes) return bad(s, "not a whole mapping");
  if (dev < 0 || dev >= s.deviceCount) return bad(s, "invalid device ordinal");
  return ncclSuccess;
}
ncclResult_t memUnmap(void* va, size_t bytes) {
  FAKE_ENTER("memUnmap");
  auto it = s.mappings.find(reinterpret_cast<uintptr_t>(va));
  if (it == s.mappings.end() || it->second.bytes != bytes) return bad(s, "not a whole mapping");
  if (mmap(va, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == MAP_FAILED)
    return ncclSystemError;
  auto ph = s.phys.find(it->second.handle);
  s.mappings.erase(it);
  --ph->second.maps;
  dropIfUnused(s, ph);
  return ncclSuccess;
}

ncclResult_t ipcGetMemHandle(IpcMemHandle* handle, void* devPtr) {
  FAKE_ENTER("ipcGetMemHandle");
  uintptr_t start = 0;
  const Alloc* a = containing(s, devPtr, &start);
  if (!a || a->kind != MemoryKind::Device) return bad(s, "IPC handle of non-device memory");
  IpcMemHandle h{};
  const uint64_t fields[3] = {kIpcMagic, static_cast<uint64_t>(start), static_cast<uint64_t>(getpid())};
  std::memcpy(h.bytes, fields, sizeof(fields));
  *handle = h;
  return ncclSuccess;
}
ncclResult_t ipcOpenMemHandle(void** devPtr, const IpcMemHandle& handle) {
  FAKE_ENTER("ipcOpenMemHandle");
  uint64_t fields[3];
  std::memcpy(fields, handle.bytes, sizeof(fields));
  void* p = reinterpret_cast<void*>(static_cast<uintptr_t>(fields[1]));
  if (fields[0] != kIpcMagic || fields[2] != static_cast<uint64_t>(getpid()) || !s.allocs.count(fields[1]))
    return bad(s, "invalid IPC handle (the fake maps handles of this process only)");
  s.ipcOpens.insert(p);
  *devPtr = p;
  return ncclSuccess;
}
ncclResult_t ipcCloseMemHandle(void* devPtr) {
  FAKE_ENTER("ipcCloseMemHandle");
  auto it = s.ipcOpens.find(devPtr);
  if (it == s.ipcOpens.end()) return bad(s, "pointer not opened from an IPC handle");
  s.ipcOpens.erase(it);
  return ncclSuccess;
}

ncclResult_t launchKernel(const void* kernel, const LaunchConfig& cfg, void** args, Event done) {
  FAKE_ENTER("launchKernel");
  if (kernel == nullptr || cfg.gridX == 0 || cfg.blockX == 0) return bad(s, "invalid launch configuration");
  if (cfg.stream != nullptr && !findStream(s, cfg.stream)) return bad(s, "invalid stream");
  FakeEvent* fe = nullptr;
  if (done != nullptr && !(fe = findEvent(s, done))) return bad(s, "invalid event");
  Launch l{kernel, cfg.gridX, cfg.blockX, cfg.sharedMemBytes, cfg.stream, done, 0, false, {}};
  if (s.argBytes > 0 && args != nullptr && args[0] != nullptr) {
    const auto* b = static_cast<const unsigned char*>(args[0]);
    l.args.assign(b, b + s.argBytes);
  }
  if (FakeGraph* g = capturing(s, cfg.stream)) {
    l.captured = true;
    l.done = nullptr;  // a record inside a capture is not host-queryable
    Node n;
    n.launch = l;
    g->nodes.push_back(n);
    return ncclSuccess;
  }
  if (fe) {
    recordLocked(s, fe);
    l.doneSerial = fe->serial;
  }
  logLaunchAndHook(lk, s, l);
  return ncclSuccess;
}

ncclResult_t graphRetainNewUserObject(Graph g, void (*destroy)(void*), void* arg) {
  State& s = st();
  std::unique_lock<std::mutex> lk(s.mu);
  ncclResult_t r = enter(s, "graphRetainNewUserObject");
  auto it = s.graphs.find(static_cast<FakeGraph*>(g));
  if (r == ncclSuccess && it == s.graphs.end()) r = bad(s, "invalid graph");
  if (r != ncclSuccess) {
    // Ownership passes even on failure, as with the real backends.
    lk.unlock();
    destroy(arg);
    return r;
  }
  it->second->userObjects.emplace_back(destroy, arg);
  return ncclSuccess;
}

}  // namespace uniccl::gpu
