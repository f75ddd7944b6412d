#include "common/memory/mem_alloc.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>

#include "common/check.h"
#include "common/util/debug.h"

namespace uniccl {
namespace {

struct Table {
  std::mutex mu;
  std::map<uintptr_t, MemAllocInfo> byBase;
};
// Never destroyed: applications free buffers from their own static destructors.
Table& table() {
  static Table& t = *new Table();
  return t;
}

// Lock held. The entry whose range contains p, or byBase.end().
std::map<uintptr_t, MemAllocInfo>::iterator containing(Table& t, const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = t.byBase.upper_bound(a);
  if (it == t.byBase.begin()) return t.byBase.end();
  --it;
  return a < it->first + std::max<size_t>(it->second.bytes, 1) ? it : t.byBase.end();
}

// A VMM allocation under construction: whatever was done is undone when it
// goes out of scope, unless keep() was called.
class VmmBuild {
 public:
  explicit VmmBuild(size_t bytes) : bytes_(bytes) {}
  ~VmmBuild() {
    if (mapped_) (void)gpu::memUnmap(va_, bytes_);
    if (va_ != nullptr) (void)gpu::addressFree(va_, bytes_);
    if (created_) (void)gpu::memRelease(handle_);
  }
  VmmBuild(const VmmBuild&) = delete;
  VmmBuild& operator=(const VmmBuild&) = delete;

  [[nodiscard]] ncclResult_t build(int dev, size_t align, bool polled) {
    UCHECK(gpu::memCreate(&handle_, bytes_, dev, polled));
    created_ = true;
    UCHECK(gpu::addressReserve(&va_, bytes_, align));
    UCHECK(gpu::memMap(va_, bytes_, handle_, dev));
    mapped_ = true;
    // Every GPU that can reach this one's memory may load, store or copy
    // here (the copy engines of core/side_stream.h write into a peer's
    // buffer): give it access too, as NCCL's ncclMemAlloc does.
    int n = 0;
    UCHECK(gpu::getDeviceCount(&n));
    for (int peer = 0; peer < n; ++peer) {
      bool can = false;
      if (peer == dev) continue;
      UCHECK(gpu::canAccessPeer(peer, dev, &can));
      if (can) UCHECK(gpu::memSetAccess(va_, bytes_, peer));
    }
    return ncclSuccess;
  }
  void* va() const { return va_; }
  gpu::MemHandle handle() const { return handle_; }
  void keep() {
    mapped_ = false;
    created_ = false;
    va_ = nullptr;
  }

 private:
  size_t bytes_;
  gpu::MemHandle handle_ = 0;
  bool created_ = false;
  void* va_ = nullptr;
  bool mapped_ = false;
};

void remember(void* ptr, const MemAllocInfo& info) {
  Table& t = table();
  std::lock_guard<std::mutex> lk(t.mu);
  t.byBase[reinterpret_cast<uintptr_t>(ptr)] = info;
}

}  // namespace

namespace {

[[nodiscard]] ncclResult_t allocVmm(void** ptr, size_t bytes, int dev, const gpu::VmmInfo& vmm, bool polled) {
  const size_t g = vmm.granularity;
  if (g == 0 || bytes > SIZE_MAX - g) {
    WARN("ncclMemAlloc: %zu bytes cannot be rounded up to the allocation granularity (%zu bytes)", bytes, g);
    return ncclInvalidArgument;
  }
  const size_t rounded = (bytes + g - 1) / g * g;
  VmmBuild b(rounded);
  UCHECK(b.build(dev, std::max<size_t>(g, NCCL_WIN_REQUIRED_ALIGNMENT), polled));
  remember(b.va(), MemAllocInfo{b.va(), rounded, true, b.handle(), dev});
  *ptr = b.va();
  b.keep();
  TRACE(kSubsysAlloc, "ncclMemAlloc: %zu bytes (mapped %zu%s) at %p on GPU %d", bytes, rounded,
        polled ? ", polled" : "", *ptr, dev);
  return ncclSuccess;
}

}  // namespace

ncclResult_t memAllocPolled(void** ptr, size_t bytes) {
  int dev = 0;
  UCHECK(gpu::getDevice(&dev));
  gpu::VmmInfo vmm{};
  UCHECK(gpu::vmmQuery(dev, &vmm));
  if (!vmm.supported || !vmm.polled) {
    const char* why = !vmm.supported ? vmm.why : vmm.polledWhy;
    WARN("GPU %d has no virtual memory that peers may poll (%s): the barriers of symmetric collectives and of the "
         "Device API need it", dev, why != nullptr ? why : "unsupported");
    return ncclInvalidUsage;
  }
  return allocVmm(ptr, bytes, dev, vmm, /*polled=*/true);
}

ncclResult_t memAlloc(void** ptr, size_t bytes) {
  int dev = 0;
  UCHECK(gpu::getDevice(&dev));
  gpu::VmmInfo vmm{};
  UCHECK(gpu::vmmQuery(dev, &vmm));
  if (!vmm.supported) {
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
      INFO(kSubsysAlloc | kSubsysInit, "ncclMemAlloc: no virtual memory management on GPU %d (%s): plain device "
           "memory, which peers cannot map (no symmetric windows on it)", dev, vmm.why ? vmm.why : "unsupported");
    void* p = nullptr;
    UCHECK(gpu::deviceAlloc(&p, bytes));
    remember(p, MemAllocInfo{p, bytes, false, 0, dev});
    *ptr = p;
    return ncclSuccess;
  }
  return allocVmm(ptr, bytes, dev, vmm, /*polled=*/false);
}

ncclResult_t memFree(void* ptr) {
  MemAllocInfo e{};
  {
    Table& t = table();
    std::lock_guard<std::mutex> lk(t.mu);
    auto it = containing(t, ptr);
    if (it == t.byBase.end()) {
      WARN("ncclMemFree: %p was not allocated by ncclMemAlloc (or was freed already)", ptr);
      return ncclInvalidArgument;
    }
    if (it->first != reinterpret_cast<uintptr_t>(ptr)) {
      WARN("ncclMemFree: %p points inside the allocation at %p; pass the pointer ncclMemAlloc returned", ptr,
           it->second.base);
      return ncclInvalidArgument;
    }
    e = it->second;
    t.byBase.erase(it);   // before the frees: a racing second free is refused, never done twice
  }
  if (!e.vmm) return gpu::deviceFree(ptr);
  // Every step is tried, so that one failure leaks no more than it must;
  // the first error is the answer.
  ncclResult_t res = gpu::memUnmap(ptr, e.bytes);
  ncclResult_t r = gpu::addressFree(ptr, e.bytes);
  if (res == ncclSuccess) res = r;
  r = gpu::memRelease(e.handle);
  return res == ncclSuccess ? r : res;
}

bool memAllocFind(const void* ptr, MemAllocInfo* out) {
  Table& t = table();
  std::lock_guard<std::mutex> lk(t.mu);
  auto it = containing(t, ptr);
  if (it == t.byBase.end()) return false;
  *out = it->second;
  return true;
}

ncclResult_t memRetainMapping(const void* ptr, gpu::MemHandle* handle, void** mapBase, size_t* mapBytes) {
  MemAllocInfo mi{};
  const bool ours = memAllocFind(ptr, &mi);
  if (ours && !mi.vmm) return ncclInvalidArgument;   // ncclMemAlloc's plain device memory
  if (!ours && !gpu::memRetainAnyAddress()) return ncclInvalidArgument;
  return gpu::memRetainFromAddress(ptr, handle, mapBase, mapBytes);
}

size_t memAllocLive() {
  Table& t = table();
  std::lock_guard<std::mutex> lk(t.mu);
  return t.byBase.size();
}

}  // namespace uniccl
