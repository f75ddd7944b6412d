// src/common/gpu.h emulated on the CPU (see emu_gpu.h for the model), so that
// the whole library runs end to end without a GPU. Semantics and result codes
// follow the GPU backends (src/gpu_common/gpu_runtime.cc): runtime failures are ncclUnhandledCudaError,
// failed host allocations ncclSystemError, a pending event ncclInProgress.
//
// One mutex guards all emulator state; waits sleep on condition variables.
// Stream work runs outside the lock on the stream's worker thread, so kernels
// and host functions of different streams run concurrently, as on a GPU.
#include "emu_gpu.h"
#include "emu_rocm.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "common/util/debug.h"
#include "device/dev_types.h"

// The emulated backend also links into standalone tests that lack src/common's
// logger: WARN is used when the logger is linked, stderr otherwise.
namespace uniccl::detail {
extern void logMessage(int level, uint64_t subsys, const char* file, int line, const char* fmt, ...)
    __attribute__((weak));
}  // namespace uniccl::detail

namespace uniccl::gpu {
using emu::RocmVmm;
using emu::rocmFromEnv;
using emu::rocmVmm;
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kDefaultDevices = 2;
constexpr int kMaxDevices = 128;                          // bus ids are two hex digits
constexpr size_t kDeviceMemBytes = size_t(16) << 30;      // per virtual device
constexpr size_t kDeviceAlign = 256;                      // cudaMalloc's guarantee
constexpr size_t kDefaultDynShared = 48u << 10;           // without opting in
constexpr size_t kMaxDynShared = 227u << 10;              // sm_90's opt-in limit
constexpr unsigned kMaxThreadsPerBlock = 1024;
constexpr int kGarbage = 0xCD;                            // fresh memory is never zeros
constexpr uint64_t kIpcMagic = 0x756e6963636c454dull;     // "unicclEM"
// Virtual memory: physical allocations are memfds, reservations PROT_NONE
// anonymous mappings, maps MAP_SHARED views of the memfd. 64 KiB stands for
// the GPUs' 2 MiB (a multiple of the page size; small enough that tests can
// make thousands of them).
constexpr size_t kVmmGranularity = size_t(64) << 10;
constexpr char kMemfdPrefix[] = "uniccl-emu-vmm-dev";     // + the device: an importer reads it back
constexpr char kMemfdPolled[] = "-polled";                // after the device: memCreate(..., polled = true)

// Reports a failure once, where it happened, and keeps its text as the
// calling thread's last runtime error.
thread_local std::string tLastError;
thread_local int tDevice = 0;  // like CUDA: every thread starts on device 0

__attribute__((format(printf, 2, 3))) ncclResult_t fail(ncclResult_t res, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  tLastError = buf;
  if (&detail::logMessage != nullptr) {
    detail::logMessage(kLogWarn, kSubsysAll, __FILE__, __LINE__, "%s", buf);
  } else {
    std::fprintf(stderr, "[emu-gpu] WARN %s\n", buf);
  }
  return res;
}

// One record of an event: a stream marker that completes when the stream's
// worker reaches it. Waits hold the record, so re-recording the event later
// does not change what an earlier streamWaitEvent waits for.
struct Record {
  bool done = false;
  Clock::time_point at;
};

struct EmuStream {
  uint64_t id = 0;         // unique: tells a destroyed stream from a new one at the same address
  int device = 0;
  bool isDefault = false;
  std::deque<std::function<void()>> queue;
  uint64_t enqueued = 0;   // items ever enqueued
  uint64_t finished = 0;   // items ever finished (in order)
  bool stop = false;
  std::condition_variable workCv;
  std::thread worker;
};

struct EmuEvent {
  int device = 0;
  unsigned flags = 0;
  std::shared_ptr<Record> latest;  // nullptr: never recorded
};

// Mapped: a view of a physical allocation (memMap), device memory of the
// allocation's device for pointerGetInfo and memGetAddressRange.
enum class RangeKind { Device, HostPinned, HostMapped, Registered, Mapped };
struct Range {
  Range() = default;
  Range(size_t b, RangeKind k, int dev, MemHandle h = 0, std::vector<int> access = {}, bool poll = false)
      : bytes(b), kind(k), device(dev), handle(h), accessDevices(std::move(access)), polled(poll) {}

  size_t bytes = 0;
  RangeKind kind = RangeKind::Device;
  int device = -1;  // Device and Mapped only
  MemHandle handle = 0;              // Mapped only: the physical allocation
  std::vector<int> accessDevices;    // Mapped only: memMap's device, then memSetAccess's
  bool polled = false;               // memory others may poll (emu::polledRange)
};

// A physical allocation (memCreate, or memImportFd of one made elsewhere).
struct Phys {
  int fd = -1;            // the memfd holding the bytes; closed when the allocation goes
  size_t bytes = 0;
  int device = 0;
  int refs = 0;           // handles given out and not released (create, import, retain)
  int maps = 0;           // live mappings of it
  bool counted = false;   // made by memCreate here: its bytes count in deviceUsed (an import's belong to its exporter)
  bool polled = false;    // memCreate(..., polled = true)'s, also when imported (the memfd's name says)
  dev_t inodeDev = 0;     // the memfd's identity: an import of it here finds this allocation
  ino_t inode = 0;
};

struct State {
  std::mutex mu;
  std::condition_variable doneCv;  // any stream item or record finished
  int devices = kDefaultDevices;
  uint64_t nextStreamId = 1;
  std::vector<EmuStream*> defaultStreams;  // per device, created on first use
  std::unordered_set<EmuStream*> streams;  // every live stream, default ones included
  std::unordered_set<EmuEvent*> events;
  std::map<uintptr_t, Range> ranges;       // by base address; never overlapping
  std::vector<size_t> deviceUsed;          // deviceAlloc and memCreate bytes
  std::map<MemHandle, Phys> phys;          // live physical allocations by handle
  MemHandle nextHandle = 1;
  std::map<uintptr_t, size_t> reservations;  // addressReserve'd ranges by start
  std::multiset<uintptr_t> ipcOpens;
  std::map<const void*, size_t> dynSharedLimit;
  std::set<std::pair<int, int>> peerEnabled;
  int rocm = rocmFromEnv();                // UNICCL_EMU_ROCM (emu_rocm.h); 0: CUDA's answers

  State() {
    const char* env = std::getenv("UNICCL_EMU_DEVICES");
    if (env != nullptr && *env != '\0') {
      char* end = nullptr;
      long n = std::strtol(env, &end, 10);
      if (*end != '\0' || n < 0 || n > kMaxDevices) {
        std::fprintf(stderr, "[emu-gpu] WARN UNICCL_EMU_DEVICES=%s is not a device count in 0..%d; using %d\n", env,
                     kMaxDevices, kDefaultDevices);
      } else {
        devices = (int)n;
      }
    }
    defaultStreams.assign(devices, nullptr);
    deviceUsed.assign(devices, 0);
  }
};

std::atomic<emu::KernelRunner> gRunner{nullptr};

// The state is leaked on purpose: worker threads may still wait on its
// condition variables while static destructors run at exit.
State*& statePtr();

void forkPrepare() { statePtr()->mu.lock(); }
void forkParent() { statePtr()->mu.unlock(); }
// The child has none of the parent's worker threads: it gets a fresh runtime
// (the old one, its mutex held by this thread, stays leaked).
void forkChild() { statePtr() = new State(); }

State*& statePtr() {
  static State* p = [] {
    auto* s = new State();
    pthread_atfork(forkPrepare, forkParent, forkChild);
    return s;
  }();
  return p;
}
State& st() { return *statePtr(); }

void workerLoop(State* s, EmuStream* q) {
  tDevice = q->device;
  std::unique_lock<std::mutex> lk(s->mu);
  for (;;) {
    q->workCv.wait(lk, [q] { return !q->queue.empty() || q->stop; });
    if (q->queue.empty()) return;  // stopped and drained
    std::function<void()> item = std::move(q->queue.front());
    q->queue.pop_front();
    lk.unlock();
    item();
    item = nullptr;  // release what it captured outside the lock
    lk.lock();
    ++q->finished;
    s->doneCv.notify_all();
  }
}

EmuStream* newStream(State& s, int dev, bool isDefault) {
  auto* q = new EmuStream();
  q->id = s.nextStreamId++;
  q->device = dev;
  q->isDefault = isDefault;
  q->worker = std::thread(workerLoop, &s, q);
  s.streams.insert(q);
  return q;
}

bool validDevice(const State& s, int dev) { return dev >= 0 && dev < s.devices; }

// Lock held. nullptr stands for the current device's default stream.
ncclResult_t findStream(State& s, Stream h, const char* call, EmuStream** out) {
  if (h == nullptr) {
    if (!validDevice(s, tDevice)) return fail(ncclUnhandledCudaError, "%s failed: invalid device ordinal", call);
    EmuStream*& d = s.defaultStreams[tDevice];
    if (d == nullptr) d = newStream(s, tDevice, true);
    *out = d;
    return ncclSuccess;
  }
  auto* q = static_cast<EmuStream*>(h);
  if (s.streams.count(q) == 0 || q->stop)
    return fail(ncclUnhandledCudaError, "%s failed: invalid resource handle (stream %p)", call, h);
  *out = q;
  return ncclSuccess;
}

ncclResult_t findEvent(State& s, Event h, const char* call, EmuEvent** out) {
  auto* e = static_cast<EmuEvent*>(h);
  if (h == nullptr || s.events.count(e) == 0)
    return fail(ncclUnhandledCudaError, "%s failed: invalid resource handle (event %p)", call, h);
  *out = e;
  return ncclSuccess;
}

// Lock held.
void enqueue(EmuStream* q, std::function<void()> item) {
  q->queue.push_back(std::move(item));
  ++q->enqueued;
  q->workCv.notify_one();
}

// Waits (lock held through `lk`) until the streams finished what they had
// been given when the wait began. A stream destroyed meanwhile was drained
// (and may be freed): it counts as done.
void waitStreams(State& s, std::unique_lock<std::mutex>& lk, const std::vector<EmuStream*>& qs) {
  struct Target {
    EmuStream* q;
    uint64_t id, enqueued;
  };
  std::vector<Target> targets;
  for (EmuStream* q : qs) targets.push_back({q, q->id, q->enqueued});
  s.doneCv.wait(lk, [&] {
    for (const Target& t : targets)
      if (s.streams.count(t.q) != 0 && t.q->id == t.id && t.q->finished < t.enqueued) return false;
    return true;
  });
}

std::vector<EmuStream*> streamsOf(const State& s, int dev) {
  std::vector<EmuStream*> out;
  for (EmuStream* q : s.streams)
    if (q->device == dev) out.push_back(q);
  return out;
}

// A marker that completes `rec` when the worker reaches it.
std::function<void()> completer(State* s, std::shared_ptr<Record> rec) {
  return [s, rec] {
    Clock::time_point now = Clock::now();
    std::lock_guard<std::mutex> lk(s->mu);
    rec->at = now;
    rec->done = true;
    s->doneCv.notify_all();
  };
}

// Lock held. Starts a new record of `e` on `q` (CUDA: the event now tracks
// the work enqueued on q so far).
ncclResult_t recordOn(State& s, EmuEvent* e, EmuStream* q, const char* call) {
  if (e->device != q->device)
    return fail(ncclUnhandledCudaError,
                "%s failed: invalid resource handle (event of device %d recorded on a stream of device %d)", call,
                e->device, q->device);
  auto rec = std::make_shared<Record>();
  e->latest = rec;
  enqueue(q, completer(&s, rec));
  return ncclSuccess;
}

// Lock held. The range that contains p, or ranges.end().
std::map<uintptr_t, Range>::iterator findRange(State& s, const void* p) {
  uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = s.ranges.upper_bound(a);
  if (it == s.ranges.begin()) return s.ranges.end();
  --it;
  return a < it->first + it->second.bytes ? it : s.ranges.end();
}

// Lock held. Whether [p, p + bytes) overlaps a known range (they are disjoint
// and sorted, so the last one starting before the end decides).
bool overlaps(State& s, uintptr_t p, size_t bytes) {
  auto it = s.ranges.lower_bound(p + bytes);
  if (it == s.ranges.begin()) return false;
  --it;
  return it->first + it->second.bytes > p;
}

size_t roundUp(size_t n, size_t a) { return (n + a - 1) / a * a; }

ncclResult_t hostAlloc(void** ptr, size_t bytes, RangeKind kind, const char* call) {
  if (ptr == nullptr) return fail(ncclUnhandledCudaError, "%s failed: invalid argument (null output pointer)", call);
  *ptr = nullptr;
  if (bytes == 0) return ncclSuccess;
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  void* p = std::aligned_alloc(page, roundUp(bytes, page));
  if (p == nullptr) return fail(ncclSystemError, "%s failed: out of memory (%zu bytes)", call, bytes);
  std::memset(p, kGarbage, bytes);
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  s.ranges[reinterpret_cast<uintptr_t>(p)] = Range{bytes, kind, -1};
  s.ranges[reinterpret_cast<uintptr_t>(p)].polled = kind == RangeKind::HostMapped;
  *ptr = p;
  return ncclSuccess;
}

}  // namespace

// ------------------------------------------------------------------ devices
ncclResult_t getDeviceCount(int* count) {
  if (count == nullptr) return fail(ncclUnhandledCudaError, "getDeviceCount failed: invalid argument");
  *count = st().devices;
  if (*count == 0) return fail(ncclUnhandledCudaError, "getDeviceCount failed: no emulated device (UNICCL_EMU_DEVICES=0)");
  return ncclSuccess;
}
ncclResult_t getDevice(int* dev) {
  if (dev == nullptr) return fail(ncclUnhandledCudaError, "getDevice failed: invalid argument");
  *dev = tDevice;
  return ncclSuccess;
}
ncclResult_t setDevice(int dev) {
  if (!validDevice(st(), dev))
    return fail(ncclUnhandledCudaError, "setDevice(%d) failed: invalid device ordinal (%d emulated devices)", dev,
                st().devices);
  tDevice = dev;
  return ncclSuccess;
}

// Accepts what CUDA does: "domain:bus:device.function" or "bus:device.function".
ncclResult_t deviceGetByBusId(const char* busId, int* dev) {
  if (busId == nullptr || dev == nullptr) return ncclInvalidArgument;
  unsigned dom = 0, bus = 0, d = 0, f = 0;
  char tail = 0;
  if (std::sscanf(busId, "%x:%x:%x.%x%c", &dom, &bus, &d, &f, &tail) != 4) {
    dom = 0;
    if (std::sscanf(busId, "%x:%x.%x%c", &bus, &d, &f, &tail) != 3) return ncclInvalidArgument;
  }
  const int n = st().devices;
  if (dom != 0 || d != 0 || f != 0 || bus < 1 || (int)bus > n) return ncclInvalidArgument;
  *dev = (int)bus - 1;
  return ncclSuccess;
}

ncclResult_t getDeviceProps(int dev, DeviceProps* props) {
  if (!validDevice(st(), dev) || props == nullptr)
    return fail(ncclUnhandledCudaError, "getDeviceProps(%d) failed: invalid device ordinal or null output", dev);
  DeviceProps out{};
  std::snprintf(out.name, sizeof(out.name), "uniccl emulated GPU %d", dev);
  out.multiProcessorCount = 8;
  out.warpSize = 32;
  out.timerRateKHz = 1000000;
  out.computeMajor = 9;
  out.computeMinor = 0;
  // device/port_cpu.h makes LL128 lines whole by ordering (a faithful model
  // of the sm_70+ guarantee), so the emulator runs LL128.
  out.lineStoreAtomic128 = 1;
  out.totalGlobalMem = kDeviceMemBytes;
  out.pciDomain = 0;
  out.pciBus = dev + 1;
  out.pciDevice = 0;
  std::snprintf(out.busId, sizeof(out.busId), "0000:%02x:00.0", dev + 1);
  out.canMapHostMemory = 1;
  out.concurrentManagedAccess = 1;
  *props = out;
  return ncclSuccess;
}

// One address space: every device reaches every other.
ncclResult_t canAccessPeer(int dev, int peer, bool* can) {
  if (!validDevice(st(), dev) || !validDevice(st(), peer) || can == nullptr)
    return fail(ncclUnhandledCudaError, "canAccessPeer(%d, %d) failed: invalid device ordinal", dev, peer);
  *can = dev != peer;  // CUDA answers 0 for a device and itself
  return ncclSuccess;
}

// The emulated GPUs share one memory, and device/port_cpu.h keeps LL128 lines whole.
ncclResult_t p2pLinkKeepsLines(int dev, int peer, bool* whole) {
  if (!validDevice(st(), dev) || !validDevice(st(), peer) || whole == nullptr)
    return fail(ncclUnhandledCudaError, "p2pLinkKeepsLines(%d, %d) failed: invalid device ordinal", dev, peer);
  *whole = true;
  return ncclSuccess;
}

// One shared memory behind every emulated GPU: a switch-like fabric.
ncclResult_t peerLinkKind(int dev, int peer, int* kind, int* count) {
  if (!validDevice(st(), dev) || !validDevice(st(), peer) || kind == nullptr || count == nullptr)
    return fail(ncclUnhandledCudaError, "peerLinkKind(%d, %d) failed: invalid device ordinal", dev, peer);
  *kind = dev != peer ? kPeerLinkSwitch : kPeerLinkNone;
  *count = 0;
  return ncclSuccess;
}

ncclResult_t enablePeerAccess(int peer) {
  State& s = st();
  if (!validDevice(s, peer) || peer == tDevice)
    return fail(ncclUnhandledCudaError, "enablePeerAccess(%d) failed: invalid device ordinal (current device %d)", peer,
                tDevice);
  std::lock_guard<std::mutex> lk(s.mu);
  s.peerEnabled.insert({tDevice, peer});  // already enabled is success, as in the real backends
  return ncclSuccess;
}

// ------------------------------------------------------------------ streams
ncclResult_t streamCreate(Stream* out) {
  State& s = st();
  if (out == nullptr) return fail(ncclUnhandledCudaError, "streamCreate failed: invalid argument");
  if (!validDevice(s, tDevice)) return fail(ncclUnhandledCudaError, "streamCreate failed: invalid device ordinal");
  std::lock_guard<std::mutex> lk(s.mu);
  *out = newStream(s, tDevice, false);
  return ncclSuccess;
}

// Drains the stream, then joins its worker. While it drains the stream takes
// no new work but still counts for deviceSynchronize.
ncclResult_t streamDestroy(Stream h) {
  State& s = st();
  EmuStream* q;
  {
    std::lock_guard<std::mutex> lk(s.mu);
    if (h == nullptr) return fail(ncclUnhandledCudaError, "streamDestroy failed: the default stream cannot be destroyed");
    ncclResult_t r = findStream(s, h, "streamDestroy", &q);
    if (r != ncclSuccess) return r;
    q->stop = true;
    q->workCv.notify_one();
  }
  q->worker.join();
  {
    std::lock_guard<std::mutex> lk(s.mu);
    s.streams.erase(q);
    s.doneCv.notify_all();
  }
  delete q;
  return ncclSuccess;
}

ncclResult_t streamSynchronize(Stream h) {
  State& s = st();
  std::unique_lock<std::mutex> lk(s.mu);
  EmuStream* q;
  ncclResult_t r = findStream(s, h, "streamSynchronize", &q);
  if (r != ncclSuccess) return r;
  waitStreams(s, lk, {q});
  return ncclSuccess;
}

ncclResult_t streamWaitEvent(Stream h, Event e) {
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  EmuStream* q;
  EmuEvent* ev;
  ncclResult_t r = findStream(s, h, "streamWaitEvent", &q);
  if (r == ncclSuccess) r = findEvent(s, e, "streamWaitEvent", &ev);
  if (r != ncclSuccess) return r;
  std::shared_ptr<Record> rec = ev->latest;
  if (rec == nullptr || rec->done) return ncclSuccess;  // never recorded or already complete: nothing to wait for
  State* sp = &s;
  enqueue(q, [sp, rec] {
    std::unique_lock<std::mutex> l(sp->mu);
    sp->doneCv.wait(l, [&] { return rec->done; });
  });
  return ncclSuccess;
}

ncclResult_t streamGetCaptureInfo(Stream h, CaptureInfo* info) {
  State& s = st();
  if (info == nullptr) return fail(ncclUnhandledCudaError, "streamGetCaptureInfo failed: invalid argument");
  if (h != nullptr) {
    std::lock_guard<std::mutex> lk(s.mu);
    EmuStream* q;
    ncclResult_t r = findStream(s, h, "streamGetCaptureInfo", &q);
    if (r != ncclSuccess) return r;
  }
  *info = CaptureInfo{CaptureStatus::None, 0, nullptr};  // capture is not emulated
  return ncclSuccess;
}
// Capture is not emulated (nothing ever captures): nothing to refuse.
bool graphCaptureSupported(const char** why) {
  *why = nullptr;
  return true;
}

// ------------------------------------------------------------------- events
ncclResult_t eventCreate(Event* out, unsigned flags) {
  if (out == nullptr) return fail(ncclUnhandledCudaError, "eventCreate failed: invalid argument");
  if ((flags & ~(unsigned)(kEventDisableTiming | kEventInterprocess | kEventBlockingSync)) != 0 ||
      ((flags & kEventInterprocess) && !(flags & kEventDisableTiming)))
    return fail(ncclUnhandledCudaError, "eventCreate failed: invalid argument (flags 0x%x; interprocess events need "
                "timing disabled)", flags);
  State& s = st();
  if (!validDevice(s, tDevice)) return fail(ncclUnhandledCudaError, "eventCreate failed: invalid device ordinal");
  auto* e = new EmuEvent();
  e->device = tDevice;
  e->flags = flags;
  std::lock_guard<std::mutex> lk(s.mu);
  s.events.insert(e);
  *out = e;
  return ncclSuccess;
}

// A pending record stays in its stream and completes there; only the event goes.
ncclResult_t eventDestroy(Event h) {
  State& s = st();
  EmuEvent* e;
  {
    std::lock_guard<std::mutex> lk(s.mu);
    ncclResult_t r = findEvent(s, h, "eventDestroy", &e);
    if (r != ncclSuccess) return r;
    s.events.erase(e);
  }
  delete e;
  return ncclSuccess;
}

ncclResult_t eventRecord(Event h, Stream sh) {
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  EmuEvent* e;
  EmuStream* q;
  ncclResult_t r = findEvent(s, h, "eventRecord", &e);
  if (r == ncclSuccess) r = findStream(s, sh, "eventRecord", &q);
  if (r != ncclSuccess) return r;
  return recordOn(s, e, q, "eventRecord");
}

ncclResult_t eventQuery(Event h) {
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  EmuEvent* e;
  ncclResult_t r = findEvent(s, h, "eventQuery", &e);
  if (r != ncclSuccess) return r;
  if (e->latest == nullptr || e->latest->done) return ncclSuccess;
  return ncclInProgress;  // not ready is not an error: nothing logged
}

ncclResult_t eventSynchronize(Event h) {
  State& s = st();
  std::unique_lock<std::mutex> lk(s.mu);
  EmuEvent* e;
  ncclResult_t r = findEvent(s, h, "eventSynchronize", &e);
  if (r != ncclSuccess) return r;
  std::shared_ptr<Record> rec = e->latest;
  if (rec != nullptr) s.doneCv.wait(lk, [&] { return rec->done; });
  return ncclSuccess;
}

// ------------------------------------------------------------------- memory
ncclResult_t deviceAlloc(void** ptr, size_t bytes) {
  State& s = st();
  if (ptr == nullptr) return fail(ncclUnhandledCudaError, "deviceAlloc failed: invalid argument (null output pointer)");
  *ptr = nullptr;
  const int dev = tDevice;
  if (!validDevice(s, dev)) return fail(ncclUnhandledCudaError, "deviceAlloc failed: invalid device ordinal %d", dev);
  if (bytes == 0) return ncclSuccess;
  {
    std::lock_guard<std::mutex> lk(s.mu);
    if (bytes > kDeviceMemBytes - s.deviceUsed[dev])
      return fail(ncclUnhandledCudaError, "deviceAlloc(%zu bytes) failed: out of memory (%zu of %zu bytes in use on "
                  "emulated device %d)", bytes, s.deviceUsed[dev], kDeviceMemBytes, dev);
    s.deviceUsed[dev] += bytes;  // reserved before the allocation, so racing threads cannot overcommit
  }
  void* p = std::aligned_alloc(kDeviceAlign, roundUp(bytes, kDeviceAlign));
  std::lock_guard<std::mutex> lk(s.mu);
  if (p == nullptr) {
    s.deviceUsed[dev] -= bytes;
    return fail(ncclUnhandledCudaError, "deviceAlloc(%zu bytes) failed: out of memory (host allocation failed)", bytes);
  }
  std::memset(p, kGarbage, bytes);
  s.ranges[reinterpret_cast<uintptr_t>(p)] = Range{bytes, RangeKind::Device, dev};
  *ptr = p;
  return ncclSuccess;
}

// Like cudaFree, waits for the owning device's streams first: work still
// queued there may use the memory.
// Host memory is coherent: polled memory is ordinary emulated device memory,
// marked as polled for emu::polledRange.
ncclResult_t deviceAllocPolled(void** ptr, size_t bytes) {
  ncclResult_t res = deviceAlloc(ptr, bytes);
  if (res != ncclSuccess || *ptr == nullptr) return res;
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  s.ranges.at(reinterpret_cast<uintptr_t>(*ptr)).polled = true;
  return ncclSuccess;
}
ncclResult_t deviceFree(void* ptr) {
  if (ptr == nullptr) return ncclSuccess;
  State& s = st();
  std::unique_lock<std::mutex> lk(s.mu);
  auto it = s.ranges.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == s.ranges.end() || it->second.kind != RangeKind::Device)
    return fail(ncclUnhandledCudaError, "deviceFree(%p) failed: invalid argument (not a device allocation's base "
                "pointer)", ptr);
  const int dev = it->second.device;
  waitStreams(s, lk, streamsOf(s, dev));
  it = s.ranges.find(reinterpret_cast<uintptr_t>(ptr));  // another thread may have freed it meanwhile
  if (it == s.ranges.end() || it->second.kind != RangeKind::Device)
    return fail(ncclUnhandledCudaError, "deviceFree(%p) failed: invalid argument (freed twice)", ptr);
  s.deviceUsed[dev] -= it->second.bytes;
  s.ranges.erase(it);
  lk.unlock();
  std::free(ptr);
  return ncclSuccess;
}

ncclResult_t hostAllocMapped(void** hostPtr, void** devPtr, size_t bytes) {
  if (devPtr == nullptr) return fail(ncclUnhandledCudaError, "hostAllocMapped failed: invalid argument (null devPtr)");
  ncclResult_t r = hostAlloc(hostPtr, bytes, RangeKind::HostMapped, "hostAllocMapped");
  if (r != ncclSuccess) return r;
  *devPtr = *hostPtr;  // one address space
  return ncclSuccess;
}

ncclResult_t hostFree(void* ptr) {
  if (ptr == nullptr) return ncclSuccess;
  State& s = st();
  {
    std::lock_guard<std::mutex> lk(s.mu);
    auto it = s.ranges.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == s.ranges.end() || (it->second.kind != RangeKind::HostPinned && it->second.kind != RangeKind::HostMapped))
      return fail(ncclUnhandledCudaError, "hostFree(%p) failed: invalid argument (not a pinned host allocation's base "
                  "pointer)", ptr);
    s.ranges.erase(it);
  }
  std::free(ptr);
  return ncclSuccess;
}

ncclResult_t hostRegister(void* ptr, size_t bytes, void** devPtr) {
  if (ptr == nullptr || bytes == 0 || devPtr == nullptr)
    return fail(ncclUnhandledCudaError, "hostRegister(%p, %zu) failed: invalid argument", ptr, bytes);
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  if (overlaps(s, p, bytes))
    return fail(ncclUnhandledCudaError, "hostRegister(%p, %zu) failed: part or all of the requested memory range is "
                "already mapped", ptr, bytes);
  s.ranges[p] = Range{bytes, RangeKind::Registered, -1};
  s.ranges[p].polled = true;   // registered host memory is coherent (HIP: hipHostRegister)
  *devPtr = ptr;
  return ncclSuccess;
}

ncclResult_t hostUnregister(void* ptr) {
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  auto it = s.ranges.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == s.ranges.end() || it->second.kind != RangeKind::Registered)
    return fail(ncclUnhandledCudaError, "hostUnregister(%p) failed: pointer does not correspond to a registered memory "
                "region", ptr);
  s.ranges.erase(it);
  return ncclSuccess;
}

ncclResult_t memcpyAsync(void* dst, const void* src, size_t bytes, Stream h) {
  if (bytes != 0 && (dst == nullptr || src == nullptr))
    return fail(ncclUnhandledCudaError, "memcpyAsync(%p, %p, %zu) failed: invalid argument", dst, src, bytes);
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  EmuStream* q;
  ncclResult_t r = findStream(s, h, "memcpyAsync", &q);
  if (r != ncclSuccess) return r;
  if (bytes != 0) enqueue(q, [dst, src, bytes] { std::memcpy(dst, src, bytes); });
  return ncclSuccess;
}

ncclResult_t streamWriteValue32(Stream h, void* devAddr, uint32_t value) {
  if (devAddr == nullptr) return fail(ncclUnhandledCudaError, "streamWriteValue32(%p) failed: invalid argument", devAddr);
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  EmuStream* q;
  ncclResult_t r = findStream(s, h, "streamWriteValue32", &q);
  if (r != ncclSuccess) return r;
  // Release: a host thread that sees the value sees the stream's earlier copies.
  enqueue(q, [devAddr, value] { __atomic_store_n(static_cast<uint32_t*>(devAddr), value, __ATOMIC_RELEASE); });
  return ncclSuccess;
}

namespace {
// Synchronous copies and sets wait for the current device's default stream
// (the legacy stream's ordering); the other streams are non-blocking.
ncclResult_t waitDefaultStream(const char* call) {
  State& s = st();
  std::unique_lock<std::mutex> lk(s.mu);
  if (!validDevice(s, tDevice)) return fail(ncclUnhandledCudaError, "%s failed: invalid device ordinal", call);
  EmuStream* d = s.defaultStreams[tDevice];
  if (d != nullptr) waitStreams(s, lk, {d});
  return ncclSuccess;
}
}  // namespace

ncclResult_t memcpy(void* dst, const void* src, size_t bytes) {
  if (bytes != 0 && (dst == nullptr || src == nullptr))
    return fail(ncclUnhandledCudaError, "memcpy(%p, %p, %zu) failed: invalid argument", dst, src, bytes);
  ncclResult_t r = waitDefaultStream("memcpy");
  if (r != ncclSuccess) return r;
  if (bytes != 0) std::memcpy(dst, src, bytes);
  return ncclSuccess;
}

ncclResult_t memset(void* dst, int value, size_t bytes) {
  if (bytes != 0 && dst == nullptr) return fail(ncclUnhandledCudaError, "memset failed: invalid argument");
  ncclResult_t r = waitDefaultStream("memset");
  if (r != ncclSuccess) return r;
  if (bytes != 0) std::memset(dst, value, bytes);
  return ncclSuccess;
}

ncclResult_t pointerGetInfo(const void* ptr, PointerInfo* info) {
  if (info == nullptr) return fail(ncclUnhandledCudaError, "pointerGetInfo failed: invalid argument");
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  PointerInfo out{MemoryKind::Unregistered, -1};
  auto it = findRange(s, ptr);
  if (it != s.ranges.end()) {
    if (it->second.kind == RangeKind::Device || it->second.kind == RangeKind::Mapped) {
      out.kind = MemoryKind::Device;
      out.device = it->second.device;
    } else {
      out.kind = MemoryKind::Host;
    }
  }
  *info = out;
  return ncclSuccess;
}

// The requested size, not a rounded one: overruns past it are caught. For
// mapped memory, the mapping (a multiple of the granularity), as CUDA says.
ncclResult_t memGetAddressRange(const void* ptr, void** base, size_t* size) {
  if (base == nullptr || size == nullptr) return fail(ncclUnhandledCudaError, "memGetAddressRange failed: invalid argument");
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  auto it = findRange(s, ptr);
  if (it == s.ranges.end() || (it->second.kind != RangeKind::Device && it->second.kind != RangeKind::Mapped))
    return fail(ncclUnhandledCudaError, "memGetAddressRange(%p) failed: not inside a device allocation", ptr);
  *base = reinterpret_cast<void*>(it->first);
  *size = it->second.bytes;
  return ncclSuccess;
}

// ---------------------------------------------------------- virtual memory
// A physical allocation is a memfd (named after its device, so that another
// process importing it knows the device), a reservation a PROT_NONE anonymous
// mapping, and memMap a MAP_SHARED view of the memfd inside it: two maps of
// one handle, in this process or another, see the same bytes, and kernels
// (host threads here) read and write them like any memory.
namespace {

// Lock held. Frees the allocation once neither a handle nor a mapping holds it.
void dropIfUnused(State& s, std::map<MemHandle, Phys>::iterator it) {
  Phys& p = it->second;
  if (p.refs > 0 || p.maps > 0) return;
  ::close(p.fd);
  if (p.counted) s.deviceUsed[p.device] -= p.bytes;
  s.phys.erase(it);
}

// Lock held. The allocation behind a handle the caller holds, or phys.end().
std::map<MemHandle, Phys>::iterator findHandle(State& s, MemHandle h) {
  auto it = s.phys.find(h);
  return it != s.phys.end() && it->second.refs > 0 ? it : s.phys.end();
}

// Fills a fresh allocation with garbage, as deviceAlloc does (never zeros).
bool fillGarbage(int fd, size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return false;
  std::memset(p, kGarbage, bytes);
  munmap(p, bytes);
  return true;
}

// Lock held. The reservation that holds all of [p, p + bytes), or end().
std::map<uintptr_t, size_t>::iterator findReservation(State& s, uintptr_t p, size_t bytes) {
  auto it = s.reservations.upper_bound(p);
  if (it == s.reservations.begin()) return s.reservations.end();
  --it;
  return p + bytes <= it->first + it->second ? it : s.reservations.end();
}

}  // namespace

ncclResult_t vmmQuery(int dev, VmmInfo* info) {
  if (info == nullptr || !validDevice(st(), dev))
    return fail(ncclUnhandledCudaError, "vmmQuery(%d) failed: invalid device ordinal or null output", dev);
  // One coherent host memory: polled memory is as good as CUDA's device
  // memory, unless a ROCm release without uncached VMM is emulated.
  const RocmVmm r = rocmVmm(st().rocm);
  *info = VmmInfo{r.vmm, r.vmm && r.fdExport, r.vmm ? kVmmGranularity : 0, nullptr};
  info->polled = r.vmm && r.polled;
  if (!r.vmm)
    info->why = "virtual memory needs ROCm 6.0 or newer (UNICCL_EMU_ROCM)";
  else if (!r.fdExport)
    info->why = "sharing virtual-memory allocations between processes needs ROCm 6.2 or newer (UNICCL_EMU_ROCM)";
  if (!info->polled) info->polledWhy = "uncached virtual memory needs ROCm 7.2 or newer (UNICCL_EMU_ROCM)";
  return ncclSuccess;
}

ncclResult_t memCreate(MemHandle* handle, size_t bytes, int dev, bool polled) {
  State& s = st();
  if (handle == nullptr) return fail(ncclUnhandledCudaError, "memCreate failed: invalid argument (null handle)");
  if (!validDevice(s, dev)) return fail(ncclUnhandledCudaError, "memCreate failed: invalid device ordinal %d", dev);
  const RocmVmm r = rocmVmm(s.rocm);
  if (!r.vmm) return fail(ncclInvalidUsage, "memCreate failed: not supported (no virtual memory before ROCm 6.0)");
  if (polled && !r.polled)
    return fail(ncclInvalidUsage, "memCreate(uncached) failed: not supported (hipMemAllocationTypeUncached needs "
                "ROCm 7.2)");
  if (bytes == 0 || bytes % kVmmGranularity != 0)
    return fail(ncclUnhandledCudaError, "memCreate(%zu bytes) failed: invalid value (not a nonzero multiple of the "
                "granularity, %zu bytes)", bytes, kVmmGranularity);
  {
    std::lock_guard<std::mutex> lk(s.mu);
    if (bytes > kDeviceMemBytes - s.deviceUsed[dev])
      return fail(ncclUnhandledCudaError, "memCreate(%zu bytes) failed: out of memory (%zu of %zu bytes in use on "
                  "emulated device %d)", bytes, s.deviceUsed[dev], kDeviceMemBytes, dev);
    s.deviceUsed[dev] += bytes;  // reserved first, as deviceAlloc does
  }
  char name[64];
  std::snprintf(name, sizeof(name), "%s%d%s", kMemfdPrefix, dev, polled ? kMemfdPolled : "");
  int fd = memfd_create(name, MFD_CLOEXEC);
  struct stat sb {};
  int err = 0;
  if (fd < 0 || ftruncate(fd, (off_t)bytes) != 0 || !fillGarbage(fd, bytes) || fstat(fd, &sb) != 0) err = errno;
  std::lock_guard<std::mutex> lk(s.mu);
  if (err != 0) {
    if (fd >= 0) ::close(fd);
    s.deviceUsed[dev] -= bytes;
    return fail(ncclUnhandledCudaError, "memCreate(%zu bytes) failed: out of memory (memfd: %s)", bytes,
                std::strerror(err));
  }
  const MemHandle h = s.nextHandle++;
  Phys& p = s.phys[h];
  p.fd = fd;
  p.bytes = bytes;
  p.device = dev;
  p.refs = 1;
  p.counted = true;
  p.polled = polled;
  p.inodeDev = sb.st_dev;
  p.inode = sb.st_ino;
  *handle = h;
  return ncclSuccess;
}

ncclResult_t memRelease(MemHandle handle) {
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  auto it = findHandle(s, handle);
  if (it == s.phys.end())
    return fail(ncclUnhandledCudaError, "memRelease(%llu) failed: invalid value (not a live allocation handle)",
                (unsigned long long)handle);
  --it->second.refs;
  dropIfUnused(s, it);
  return ncclSuccess;
}

ncclResult_t memExportFd(MemHandle handle, int* fd) {
  if (fd == nullptr) return fail(ncclUnhandledCudaError, "memExportFd failed: invalid argument (null output)");
  State& s = st();
  if (!rocmVmm(s.rocm).fdExport)
    return fail(ncclUnhandledCudaError, "memExportFd failed: not supported (fd export needs ROCm 6.2)");
  std::lock_guard<std::mutex> lk(s.mu);
  auto it = findHandle(s, handle);
  if (it == s.phys.end())
    return fail(ncclUnhandledCudaError, "memExportFd(%llu) failed: invalid value (not a live allocation handle)",
                (unsigned long long)handle);
  int d = fcntl(it->second.fd, F_DUPFD_CLOEXEC, 0);
  if (d < 0) return fail(ncclSystemError, "memExportFd(%llu) failed: dup: %s", (unsigned long long)handle,
                         std::strerror(errno));
  *fd = d;
  return ncclSuccess;
}

// The device comes from the memfd's name ("/memfd:uniccl-emu-vmm-dev<d>
// (deleted)"), the size from the file. An allocation of this process is
// found again (one more reference to it); another process's gets an entry
// of its own, whose bytes stay counted by its creator.
ncclResult_t memImportFd(int fd, MemHandle* handle) {
  if (handle == nullptr) return fail(ncclUnhandledCudaError, "memImportFd failed: invalid argument (null handle)");
  State& s = st();
  if (!rocmVmm(s.rocm).fdExport)
    return fail(ncclUnhandledCudaError, "memImportFd failed: not supported (fd import needs ROCm 6.2)");
  char path[64], target[256];
  std::snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
  ssize_t n = readlink(path, target, sizeof(target) - 1);
  struct stat sb {};
  if (n < 0 || fstat(fd, &sb) != 0)
    return fail(ncclUnhandledCudaError, "memImportFd(%d) failed: invalid value (not an open file descriptor)", fd);
  target[n] = '\0';
  const std::string prefix = std::string("/memfd:") + kMemfdPrefix;
  int dev = -1;
  if (std::strncmp(target, prefix.c_str(), prefix.size()) == 0) dev = std::atoi(target + prefix.size());
  if (dev < 0 || !validDevice(s, dev) || sb.st_size <= 0 || (size_t)sb.st_size % kVmmGranularity != 0)
    return fail(ncclUnhandledCudaError, "memImportFd(%d) failed: invalid value (%s is not an allocation of an "
                "emulated device of this runtime)", fd, target);
  std::lock_guard<std::mutex> lk(s.mu);
  for (auto& [h, p] : s.phys) {
    if (p.inodeDev == sb.st_dev && p.inode == sb.st_ino) {
      ++p.refs;
      *handle = h;
      return ncclSuccess;
    }
  }
  int d = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (d < 0) return fail(ncclSystemError, "memImportFd(%d) failed: dup: %s", fd, std::strerror(errno));
  const MemHandle h = s.nextHandle++;
  Phys& p = s.phys[h];
  p.fd = d;
  p.bytes = (size_t)sb.st_size;
  p.device = dev;
  p.refs = 1;
  p.inodeDev = sb.st_dev;
  p.inode = sb.st_ino;
  p.polled = std::strstr(target + prefix.size(), kMemfdPolled) != nullptr;
  *handle = h;
  return ncclSuccess;
}

// CUDA's answer: any address may be asked about; ROCm's (UNICCL_EMU_ROCM):
// only the mappings the caller made.
bool memRetainAnyAddress() { return st().rocm == 0; }

ncclResult_t memRetainFromAddress(const void* ptr, MemHandle* handle, void** mapBase, size_t* mapBytes) {
  if (handle == nullptr || mapBase == nullptr || mapBytes == nullptr)
    return fail(ncclUnhandledCudaError, "memRetainFromAddress failed: invalid argument (null output)");
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  auto it = findRange(s, ptr);
  const bool mapped = it != s.ranges.end() && it->second.kind == RangeKind::Mapped;
  if (!mapped && s.rocm != 0) {
    // ROCm 6.2+'s hipMemRetainAllocationHandle follows a null pointer here:
    // the process dies, and so does the test that let it happen.
    std::fprintf(stderr, "[emu-gpu] ROCm mode: memRetainFromAddress(%p) outside every VMM mapping: the runtime "
                 "would crash here\n", ptr);
    std::abort();
  }
  if (!mapped) return ncclInvalidArgument;  // an answer, not a failure
  ++s.phys.at(it->second.handle).refs;
  *handle = it->second.handle;
  *mapBase = reinterpret_cast<void*>(it->first);
  *mapBytes = it->second.bytes;
  return ncclSuccess;
}

ncclResult_t addressReserve(void** va, size_t bytes, size_t align) {
  if (va == nullptr) return fail(ncclUnhandledCudaError, "addressReserve failed: invalid argument (null output)");
  if (align == 0) align = kVmmGranularity;
  if (bytes == 0 || bytes % kVmmGranularity != 0 || (align & (align - 1)) != 0)
    return fail(ncclUnhandledCudaError, "addressReserve(%zu bytes, align %zu) failed: invalid value (the size must be "
                "a nonzero multiple of the granularity, %zu bytes, the alignment a power of two)", bytes, align,
                kVmmGranularity);
  align = std::max(align, kVmmGranularity);
  const size_t span = bytes + align;
  void* m = mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED)
    return fail(ncclUnhandledCudaError, "addressReserve(%zu bytes) failed: out of memory (mmap: %s)", bytes,
                std::strerror(errno));
  const uintptr_t lo = reinterpret_cast<uintptr_t>(m), start = roundUp(lo, align), end = lo + span;
  if (start > lo) munmap(m, start - lo);
  if (end > start + bytes) munmap(reinterpret_cast<void*>(start + bytes), end - (start + bytes));
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  s.reservations[start] = bytes;
  *va = reinterpret_cast<void*>(start);
  return ncclSuccess;
}

ncclResult_t addressFree(void* va, size_t bytes) {
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  const uintptr_t p = reinterpret_cast<uintptr_t>(va);
  auto it = s.reservations.find(p);
  if (it == s.reservations.end() || it->second != bytes)
    return fail(ncclUnhandledCudaError, "addressFree(%p, %zu) failed: invalid value (not a whole reservation of "
                "addressReserve)", va, bytes);
  if (overlaps(s, p, bytes))
    return fail(ncclUnhandledCudaError, "addressFree(%p, %zu) failed: invalid value (memory is still mapped there: "
                "memUnmap first)", va, bytes);
  munmap(va, bytes);
  s.reservations.erase(it);
  return ncclSuccess;
}

ncclResult_t memMap(void* va, size_t bytes, MemHandle handle, int dev) {
  State& s = st();
  if (!validDevice(s, dev)) return fail(ncclUnhandledCudaError, "memMap failed: invalid device ordinal %d", dev);
  std::lock_guard<std::mutex> lk(s.mu);
  auto it = findHandle(s, handle);
  if (it == s.phys.end())
    return fail(ncclUnhandledCudaError, "memMap(%p) failed: invalid value (handle %llu is not a live allocation "
                "handle)", va, (unsigned long long)handle);
  Phys& ph = it->second;
  const uintptr_t p = reinterpret_cast<uintptr_t>(va);
  if (bytes != ph.bytes)
    return fail(ncclUnhandledCudaError, "memMap(%p, %zu) failed: invalid value (the allocation has %zu bytes: map "
                "all of it)", va, bytes, ph.bytes);
  if (p % kVmmGranularity != 0 || findReservation(s, p, bytes) == s.reservations.end())
    return fail(ncclUnhandledCudaError, "memMap(%p, %zu) failed: invalid value (not a granularity-aligned range "
                "inside one reservation)", va, bytes);
  if (overlaps(s, p, bytes))
    return fail(ncclUnhandledCudaError, "memMap(%p, %zu) failed: invalid value (part of the range is already "
                "mapped)", va, bytes);
  if (mmap(va, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, ph.fd, 0) == MAP_FAILED)
    return fail(ncclUnhandledCudaError, "memMap(%p, %zu) failed: out of memory (mmap: %s)", va, bytes,
                std::strerror(errno));
  s.ranges[p] = Range{bytes, RangeKind::Mapped, ph.device, handle, {dev}, ph.polled};
  ++ph.maps;
  return ncclSuccess;
}

// One address space: every device reaches the bytes anyway. The device is
// remembered, for memUnmap to wait for its streams.
ncclResult_t memSetAccess(void* va, size_t bytes, int dev) {
  State& s = st();
  if (!validDevice(s, dev)) return fail(ncclUnhandledCudaError, "memSetAccess failed: invalid device ordinal %d", dev);
  std::lock_guard<std::mutex> lk(s.mu);
  auto it = s.ranges.find(reinterpret_cast<uintptr_t>(va));
  if (it == s.ranges.end() || it->second.kind != RangeKind::Mapped || it->second.bytes != bytes)
    return fail(ncclUnhandledCudaError, "memSetAccess(%p, %zu) failed: invalid value (not a whole mapping of memMap)",
                va, bytes);
  std::vector<int>& devs = it->second.accessDevices;
  if (std::find(devs.begin(), devs.end(), dev) == devs.end()) devs.push_back(dev);
  return ncclSuccess;
}

// Like deviceFree, waits for the work queued on the devices that may use the
// mapping (its memory's and those given access) before the bytes go.
ncclResult_t memUnmap(void* va, size_t bytes) {
  State& s = st();
  std::unique_lock<std::mutex> lk(s.mu);
  const uintptr_t p = reinterpret_cast<uintptr_t>(va);
  auto it = s.ranges.find(p);
  if (it == s.ranges.end() || it->second.kind != RangeKind::Mapped || it->second.bytes != bytes)
    return fail(ncclUnhandledCudaError, "memUnmap(%p, %zu) failed: invalid value (not a whole mapping of memMap)", va,
                bytes);
  std::vector<EmuStream*> qs = streamsOf(s, it->second.device);
  for (int d : it->second.accessDevices) {
    if (d == it->second.device) continue;
    std::vector<EmuStream*> more = streamsOf(s, d);
    qs.insert(qs.end(), more.begin(), more.end());
  }
  waitStreams(s, lk, qs);
  it = s.ranges.find(p);  // another thread may have unmapped it meanwhile
  if (it == s.ranges.end() || it->second.kind != RangeKind::Mapped || it->second.bytes != bytes)
    return fail(ncclUnhandledCudaError, "memUnmap(%p, %zu) failed: invalid value (unmapped twice)", va, bytes);
  // Back to reserved address space (PROT_NONE), never to a hole another mmap could take.
  if (mmap(va, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == MAP_FAILED)
    return fail(ncclSystemError, "memUnmap(%p, %zu) failed: mmap: %s", va, bytes, std::strerror(errno));
  const MemHandle h = it->second.handle;
  s.ranges.erase(it);
  auto ph = s.phys.find(h);
  --ph->second.maps;
  dropIfUnused(s, ph);
  return ncclSuccess;
}

// -------------------------------------------------------------- IPC handles
namespace {
struct IpcFields {
  uint64_t magic;
  uint64_t base;
  uint64_t pid;
  uint64_t device;
};
static_assert(sizeof(IpcFields) <= kIpcHandleBytes, "IpcMemHandle must hold the emulated handle");
}  // namespace

// Like CUDA, a handle names the whole allocation that contains devPtr; opening
// it gives the allocation's base.
ncclResult_t ipcGetMemHandle(IpcMemHandle* handle, void* devPtr) {
  if (handle == nullptr) return fail(ncclUnhandledCudaError, "ipcGetMemHandle failed: invalid argument");
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  auto it = findRange(s, devPtr);
  if (it == s.ranges.end() || it->second.kind != RangeKind::Device)
    return fail(ncclUnhandledCudaError, "ipcGetMemHandle(%p) failed: invalid argument (not device memory)", devPtr);
  IpcFields f{kIpcMagic, it->first, (uint64_t)getpid(), (uint64_t)it->second.device};
  IpcMemHandle out{};
  std::memcpy(out.bytes, &f, sizeof(f));
  *handle = out;
  return ncclSuccess;
}

ncclResult_t ipcOpenMemHandle(void** devPtr, const IpcMemHandle& handle) {
  if (devPtr == nullptr) return fail(ncclUnhandledCudaError, "ipcOpenMemHandle failed: invalid argument");
  IpcFields f;
  std::memcpy(&f, handle.bytes, sizeof(f));
  if (f.magic != kIpcMagic)
    return fail(ncclUnhandledCudaError, "ipcOpenMemHandle failed: invalid argument (not a handle of the emulated GPU "
                "backend)");
  if (f.pid != (uint64_t)getpid())
    return fail(ncclInvalidUsage, "ipcOpenMemHandle failed: IPC across processes is not emulated (handle of pid %llu, "
                "this is pid %d); run emulated ranks in one process or over the network/shm transports",
                (unsigned long long)f.pid, (int)getpid());
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  auto it = s.ranges.find(f.base);
  if (it == s.ranges.end() || it->second.kind != RangeKind::Device)
    return fail(ncclUnhandledCudaError, "ipcOpenMemHandle failed: invalid argument (the allocation was freed)");
  s.ipcOpens.insert(f.base);
  *devPtr = reinterpret_cast<void*>(f.base);
  return ncclSuccess;
}

ncclResult_t ipcCloseMemHandle(void* devPtr) {
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  auto it = s.ipcOpens.find(reinterpret_cast<uintptr_t>(devPtr));
  if (it == s.ipcOpens.end())
    return fail(ncclUnhandledCudaError, "ipcCloseMemHandle(%p) failed: invalid argument (not opened from an IPC handle)",
                devPtr);
  s.ipcOpens.erase(it);
  return ncclSuccess;
}

// ------------------------------------------------------------------ kernels
ncclResult_t launchKernel(const void* kernel, const LaunchConfig& cfg, void** args, Event done) {
  emu::KernelRunner runner = gRunner.load();
  if (runner == nullptr)
    return fail(ncclInvalidUsage, "launchKernel failed: no kernel runner is installed; the emulated GPU backend "
                "runs kernels through uniccl::emu::setKernelRunner (tests/emu/emu_gpu.h)");
  if (kernel == nullptr) return fail(ncclUnhandledCudaError, "launchKernel failed: invalid device function");
  if (args == nullptr || args[0] == nullptr)
    return fail(ncclUnhandledCudaError, "launchKernel failed: invalid argument (no kernel arguments)");
  if (cfg.gridX == 0 || cfg.blockX == 0 || cfg.blockX > kMaxThreadsPerBlock)
    return fail(ncclUnhandledCudaError, "launchKernel failed: invalid configuration argument (grid %u, block %u)",
                cfg.gridX, cfg.blockX);
  // Every uniccl kernel takes one KernelArgs by value: copied now, as a launch does.
  dev::KernelArgs a;
  std::memcpy(&a, args[0], sizeof(a));

  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  EmuStream* q;
  ncclResult_t r = findStream(s, cfg.stream, "launchKernel", &q);
  if (r != ncclSuccess) return r;
  auto lim = s.dynSharedLimit.find(kernel);
  const size_t limit = lim == s.dynSharedLimit.end() ? kDefaultDynShared : lim->second;
  if (cfg.sharedMemBytes > limit)
    return fail(ncclUnhandledCudaError, "launchKernel failed: too many resources requested for launch (%zu bytes "
                "of dynamic shared memory, limit %zu; raise it with setKernelMaxDynamicShared)", cfg.sharedMemBytes,
                limit);
  EmuEvent* ev = nullptr;
  if (done != nullptr) {
    r = findEvent(s, done, "launchKernel", &ev);
    if (r != ncclSuccess) return r;
    if (ev->device != q->device)
      return fail(ncclUnhandledCudaError, "launchKernel failed: invalid resource handle (done event of device %d, "
                  "stream of device %d)", ev->device, q->device);
  }
  const unsigned grid = cfg.gridX, block = cfg.blockX;
  enqueue(q, [runner, kernel, grid, block, a] { runner(kernel, grid, block, &a); });
  if (ev != nullptr) return recordOn(s, ev, q, "launchKernel");
  return ncclSuccess;
}

ncclResult_t preloadKernel(const void* kernel) {
  if (kernel == nullptr) return fail(ncclUnhandledCudaError, "preloadKernel failed: invalid device function");
  return ncclSuccess;
}

// Emulated launches of a stream run one after the other (no early start).
ncclResult_t programmaticLaunchSupported(const void* kernel, bool* supported) {
  *supported = false;
  if (kernel == nullptr) return fail(ncclUnhandledCudaError, "programmaticLaunchSupported failed: invalid device function");
  return ncclSuccess;
}

// Every block of a launch runs as its own threads, so any number is
// resident; UNICCL_EMU_RESIDENT_BLOCKS (default 8 multiprocessors x 16)
// stands for the occupancy limit of a real GPU, which the cap on channels
// of ranks sharing a GPU is computed from.
ncclResult_t kernelResidentBlocks(const void* kernel, unsigned blockThreads, int* blocks) {
  if (kernel == nullptr || blockThreads == 0 || blocks == nullptr)
    return fail(ncclUnhandledCudaError, "kernelResidentBlocks failed: invalid device function");
  const char* env = std::getenv("UNICCL_EMU_RESIDENT_BLOCKS");
  *blocks = env != nullptr ? std::atoi(env) : 8 * 16;
  return ncclSuccess;
}

// Streams never serialize each other here (each has its own worker thread).
WorkQueues workQueues() { return WorkQueues{1 << 20, "UNICCL_EMU_WORK_QUEUES"}; }

// A forked child has a runtime of its own: processes share no emulated GPU.
ncclResult_t processesShareDevice(bool* concurrent, const char** how) {
  *concurrent = false;
  *how = "the CPU emulator runs no GPU across processes";
  return ncclSuccess;
}

// ------------------------------------------------------------------- graphs
// Ownership of `arg` passes to this call even when it fails (gpu_common/gpu_runtime.cc).
ncclResult_t graphRetainNewUserObject(Graph, void (*destroy)(void*), void* arg) {
  if (destroy != nullptr) destroy(arg);
  return fail(ncclInvalidUsage, "graphRetainNewUserObject failed: graph capture is not emulated");
}

}  // namespace uniccl::gpu

// ------------------------------------------------------------- test control
namespace uniccl::emu {

void setKernelRunner(KernelRunner runner) { gpu::gRunner.store(runner); }

// Runtime calls the core never makes (src/common/gpu.h has none of them):
// the emulator's own tests drive and check its streams, events and memory
// with them, as a CUDA program would.
using namespace gpu;

ncclResult_t deviceSynchronize() {
  State& s = st();
  std::unique_lock<std::mutex> lk(s.mu);
  waitStreams(s, lk, streamsOf(s, tDevice));
  return ncclSuccess;
}

ncclResult_t streamGetDevice(Stream h, int* dev) {
  if (dev == nullptr) return fail(ncclUnhandledCudaError, "streamGetDevice failed: invalid argument");
  if (h == nullptr) {
    *dev = tDevice;
    return ncclSuccess;
  }
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  EmuStream* q;
  ncclResult_t r = findStream(s, h, "streamGetDevice", &q);
  if (r != ncclSuccess) return r;
  *dev = q->device;
  return ncclSuccess;
}

ncclResult_t eventElapsedMs(Event start, Event end, float* ms) {
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  EmuEvent *a, *b;
  ncclResult_t r = findEvent(s, start, "eventElapsedMs", &a);
  if (r == ncclSuccess) r = findEvent(s, end, "eventElapsedMs", &b);
  if (r != ncclSuccess) return r;
  if (ms == nullptr) return fail(ncclUnhandledCudaError, "eventElapsedMs failed: invalid argument");
  if ((a->flags | b->flags) & kEventDisableTiming)
    return fail(ncclUnhandledCudaError, "eventElapsedMs failed: invalid resource handle (an event was created with "
                "timing disabled)");
  if (a->latest == nullptr || b->latest == nullptr)
    return fail(ncclUnhandledCudaError, "eventElapsedMs failed: invalid resource handle (an event was never recorded)");
  if (!a->latest->done || !b->latest->done)
    return fail(ncclUnhandledCudaError, "eventElapsedMs failed: device not ready (an event has not completed)");
  *ms = std::chrono::duration<float, std::milli>(b->latest->at - a->latest->at).count();
  return ncclSuccess;
}

ncclResult_t hostAllocPinned(void** ptr, size_t bytes) {
  return hostAlloc(ptr, bytes, RangeKind::HostPinned, "hostAllocPinned");
}

ncclResult_t memsetAsync(void* dst, int value, size_t bytes, Stream h) {
  if (bytes != 0 && dst == nullptr) return fail(ncclUnhandledCudaError, "memsetAsync failed: invalid argument");
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  EmuStream* q;
  ncclResult_t r = findStream(s, h, "memsetAsync", &q);
  if (r != ncclSuccess) return r;
  if (bytes != 0) enqueue(q, [dst, value, bytes] { std::memset(dst, value, bytes); });
  return ncclSuccess;
}

ncclResult_t setKernelMaxDynamicShared(const void* kernel, size_t bytes) {
  if (kernel == nullptr || bytes > kMaxDynShared)
    return fail(ncclUnhandledCudaError, "setKernelMaxDynamicShared(%zu) failed: invalid argument (limit %zu bytes)", bytes,
                kMaxDynShared);
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  s.dynSharedLimit[kernel] = bytes;
  return ncclSuccess;
}

ncclResult_t launchHostFunc(Stream h, void (*fn)(void*), void* arg) {
  if (fn == nullptr) return fail(ncclUnhandledCudaError, "launchHostFunc failed: invalid argument (null function)");
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  EmuStream* q;
  ncclResult_t r = findStream(s, h, "launchHostFunc", &q);
  if (r != ncclSuccess) return r;
  enqueue(q, [fn, arg] { fn(arg); });
  return ncclSuccess;
}

const char* lastErrorString() { return tLastError.empty() ? "no error" : tLastError.c_str(); }

void clearLastError() { tLastError.clear(); }

bool polledRange(const void* p, uintptr_t* lo, uintptr_t* hi, const char** kind) {
  gpu::State& s = gpu::st();
  std::lock_guard<std::mutex> lk(s.mu);
  auto it = gpu::findRange(s, p);
  if (it == s.ranges.end()) {
    *kind = "no allocation of the emulated runtime";
    return false;
  }
  static const char* const kNames[] = {"device memory", "pinned host memory", "host-mapped memory",
                                       "registered host memory", "virtual memory"};
  *kind = kNames[(int)it->second.kind];
  *lo = it->first;
  *hi = it->first + it->second.bytes;
  return it->second.polled;
}

Usage usage() {
  gpu::State& s = gpu::st();
  std::lock_guard<std::mutex> lk(s.mu);
  Usage u{};
  for (const auto& [base, r] : s.ranges) {
    (void)base;
    switch (r.kind) {
      case gpu::RangeKind::Device: ++u.deviceAllocs; u.deviceBytes += r.bytes; break;
      case gpu::RangeKind::HostPinned:
      case gpu::RangeKind::HostMapped: ++u.hostAllocs; break;
      case gpu::RangeKind::Registered: ++u.registrations; break;
      case gpu::RangeKind::Mapped: ++u.mappings; break;
    }
  }
  for (const auto& [h, p] : s.phys) {
    (void)h;
    ++u.physAllocs;
    if (p.counted) u.physBytes += p.bytes;
  }
  u.reservations = s.reservations.size();
  for (gpu::EmuStream* q : s.streams) u.streams += q->isDefault ? 0 : 1;
  u.events = s.events.size();
  u.ipcOpens = s.ipcOpens.size();
  return u;
}

}  // namespace uniccl::emu
