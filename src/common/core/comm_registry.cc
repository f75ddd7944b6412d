#include "common/core/comm_registry.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <new>
#include <unordered_set>
#include <vector>

#include "common/core/comm.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNICCL_LSAN_ROOTS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNICCL_LSAN_ROOTS 1
#endif
#endif
#ifdef UNICCL_LSAN_ROOTS
#include <sanitizer/lsan_interface.h>
#endif

// Where a communicator lives, and why.
//
// The handle the user holds is the communicator's address, so nothing can
// travel with it (no generation count). What makes a stale handle
// detectable forever is that its address is never handed out again: each
// communicator gets pages of its own from mmap (two 4 KiB pages today), and
// destroying it gives the pages' memory back to the system (MADV_DONTNEED)
// but keeps the address range reserved, inaccessible (PROT_NONE). A destroyed
// communicator therefore costs 8 KiB of address space and no memory; the
// allocator never returns that address, so no new communicator can appear
// there and make the old handle valid again. Keeping freed heap blocks in a
// quarantine instead would either hold 7.5 KiB of memory per destroyed
// communicator or, once bounded, let an old address come back.
// A library bug that still read a destroyed communicator would fault at once
// instead of reading someone else's data.
//
// The registry of live addresses answers the API's checks without reading
// the handle. The common case (the thread's last few communicators, none
// destroyed since) is answered from a thread-local cache tagged with a
// process-wide epoch that every destroy advances: a relaxed load of a word
// written only by destroys, no lock, no shared write on the hot path.

namespace uniccl {

namespace {

struct Registry {
  std::mutex mutex;
  std::unordered_set<const void*> live;
  // The newest destroyed addresses, only so that the message can say
  // "destroyed": older ones are answered Unknown, still without a read.
  static constexpr size_t kRemembered = 1 << 16;
  std::unordered_set<const void*> destroyed;
  std::vector<const void*> destroyedOrder;   // ring of the same, oldest at destroyedNext
  size_t destroyedNext = 0;
};

// Never destroyed: communicators may be released by other static destructors.
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

// Advanced by every destroy; 0 is never current, so a fresh thread's cache
// (zero-initialized) starts invalid.
std::atomic<uint64_t> gEpoch{1};

struct LiveCache {
  static constexpr unsigned kSlots = 4;   // a thread driving several comms (one per GPU) stays in the cache
  uint64_t epoch;
  const void* comms[kSlots];
  unsigned next;
};
thread_local LiveCache tCache;

size_t commBytes() {
  static const size_t bytes = [] {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (sizeof(ncclComm) + page - 1) / page * page;
  }();
  return bytes;
}

void* allocComm(size_t bytes) noexcept {
  if (bytes > commBytes()) return nullptr;   // ncclComm has no subclasses: never happens
  void* p = mmap(nullptr, commBytes(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  Registry& r = registry();
  try {
    std::lock_guard<std::mutex> lock(r.mutex);
    r.live.insert(p);
  } catch (...) {   // out of memory for the set entry
    munmap(p, commBytes());
    return nullptr;
  }
#ifdef UNICCL_LSAN_ROOTS
  // The leak checker scans the heap, stacks and globals, not our pages:
  // what only a live communicator points to is not a leak.
  __lsan_register_root_region(p, commBytes());
#endif
  return p;
}

void retireComm(void* p) noexcept {
  if (p == nullptr) return;
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    r.live.erase(p);
    try {
      if (r.destroyedOrder.size() < Registry::kRemembered) {
        r.destroyedOrder.push_back(p);
      } else {
        r.destroyed.erase(r.destroyedOrder[r.destroyedNext]);
        r.destroyedOrder[r.destroyedNext] = p;
        r.destroyedNext = (r.destroyedNext + 1) % Registry::kRemembered;
      }
      r.destroyed.insert(p);
    } catch (...) {
      // Out of memory: the handle will read as Unknown instead of
      // Destroyed; it is refused all the same.
    }
    gEpoch.fetch_add(1, std::memory_order_release);
  }
#ifdef UNICCL_LSAN_ROOTS
  __lsan_unregister_root_region(p, commBytes());
#endif
  // The memory goes back to the system; the address range stays ours. If
  // mprotect fails (the process's mapping limit), the pages stay readable
  // and zero: still never handed out again.
  madvise(p, commBytes(), MADV_DONTNEED);
  mprotect(p, commBytes(), PROT_NONE);
}

}  // namespace

namespace {

// Not inlined: the fast path below stays a leaf without a stack frame.
[[gnu::noinline]] CommHandle lookUp(const ncclComm* comm, uint64_t epoch) {
  LiveCache& c = tCache;
  if (c.epoch != epoch) {
    c = LiveCache{};
    // Tagged with the epoch read before the lookup: a destroy racing with
    // it advances the epoch past this tag and empties the cache next time.
    c.epoch = epoch;
  }
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (r.live.count(comm) != 0) {
    c.comms[c.next++ % LiveCache::kSlots] = comm;
    return CommHandle::Live;
  }
  return r.destroyed.count(comm) != 0 ? CommHandle::Destroyed : CommHandle::Unknown;
}

}  // namespace

CommHandle commHandleState(const ncclComm* comm) {
  const LiveCache& c = tCache;
  // Relaxed suffices: a call ordered after a destroy (as the user must
  // order them) sees that destroy's epoch by coherence.
  const uint64_t epoch = gEpoch.load(std::memory_order_relaxed);
  if (c.epoch == epoch) {
    for (const void* p : c.comms)
      if (p == comm) return CommHandle::Live;
  }
  return lookUp(comm, epoch);
}

}  // namespace uniccl

void* ncclComm::operator new(std::size_t bytes) {
  void* p = uniccl::allocComm(bytes);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

void* ncclComm::operator new(std::size_t bytes, const std::nothrow_t&) noexcept { return uniccl::allocComm(bytes); }

void ncclComm::operator delete(void* p) noexcept { uniccl::retireComm(p); }

void ncclComm::operator delete(void* p, const std::nothrow_t&) noexcept { uniccl::retireComm(p); }
