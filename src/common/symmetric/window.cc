// Window registration: a collective over the communicator. Every rank
// announces its buffer (allgather), maps its LSA peers' allocations into a
// flat range (flat_layout.h), then all ranks confirm (a second allgather)
// before any drops its own reference, so a failure on one rank unwinds on
// every rank and no rank is left holding a half-made window.
#include <cstring>
#include <vector>

#include "common/bootstrap/bootstrap.h"
#include "common/check.h"
#include "common/device_guard.h"
#include "common/memory/mem_alloc.h"
#include "common/symmetric/flat_layout.h"
#include "common/symmetric/handle_exchange.h"
#include "common/symmetric/symmetric.h"
#include "common/util/debug.h"
#include "device/dev_types.h"

namespace uniccl {

namespace {

SymmetricState* state(const WindowComm& comm) {
  if (*comm.state == nullptr) *comm.state = new SymmetricState();
  return *comm.state;
}

// Undoes whatever part of a window exists: mappings, reservation, device
// copy. A release that fails was logged by the backend and leaves nothing to
// undo: the rest is released all the same.
void unmapWindow(SymWindow* w) {
  for (const SymWindow::Mapping& m : w->mappings) (void)gpu::memUnmap(m.va, m.bytes);
  w->mappings.clear();
  if (w->reserve != nullptr) (void)gpu::addressFree(w->reserve, w->reserveBytes);
  w->reserve = nullptr;
  if (w->dev != nullptr) (void)gpu::deviceFree(w->dev);
  w->dev = nullptr;
}

// The local half of registration: what this rank can say about its buffer.
[[nodiscard]] ncclResult_t probeBuffer(const WindowComm& comm, void* buff, size_t bytes, WindowAnnounce* a,
                                       gpu::MemHandle* own) {
  gpu::VmmInfo info{};
  UCHECK(gpu::vmmQuery(comm.gpuDev, &info));
  if (!info.supported) {
    WARN("ncclCommWindowRegister: rank %d: GPU %d cannot map memory between ranks (%s); symmetric windows are "
         "unavailable here, collectives on ordinary memory still work", comm.rank, comm.gpuDev,
         info.why ? info.why : "no virtual-memory support");
    return ncclInvalidUsage;
  }
  void* mapBase = nullptr;
  size_t mapBytes = 0;
  const ncclResult_t retained = memRetainMapping(buff, own, &mapBase, &mapBytes);
  if (retained == ncclInvalidArgument) {
    WARN("ncclCommWindowRegister: rank %d: buffer %p is not memory that peers can map; allocate window buffers "
         "with ncclMemAlloc", comm.rank, buff);
    return ncclInvalidArgument;
  }
  if (retained != ncclSuccess) {   // the driver failed (its WARN says how), not the caller
    WARN("ncclCommWindowRegister: rank %d: the allocation behind buffer %p could not be looked up", comm.rank,
         buff);
    return retained;
  }
  const size_t offset = (size_t)((char*)buff - (char*)mapBase);
  if (bytes > mapBytes - offset) {
    (void)gpu::memRelease(*own);   // the caller's error is the one to report
    WARN("ncclCommWindowRegister: rank %d: %zu bytes from %p run past the end of its allocation (%zu bytes at %p)",
         comm.rank, bytes, buff, mapBytes, mapBase);
    return ncclInvalidArgument;
  }
  a->handle = *own;
  a->allocBytes = mapBytes;
  a->offset = offset;
  a->granularity = info.granularity;
  a->fdExport = info.fdExport ? 1 : 0;
  return ncclSuccess;
}

// Maps every LSA peer's allocation into a fresh flat range and fills the
// window's device-visible description.
[[nodiscard]] ncclResult_t mapWindow(const WindowComm& comm, const std::vector<WindowAnnounce>& all,
                       const std::vector<gpu::MemHandle>& handles, SymWindow* w) {
  const LsaPlace& lsa = comm.lsa;
  const int first = comm.rank - lsa.self;
  std::vector<FlatPeer> peers(lsa.size);
  size_t granularity = 0;
  for (int p = 0; p < lsa.size; p++) {
    const WindowAnnounce& a = all[first + p];
    peers[p] = FlatPeer{(size_t)a.allocBytes, (size_t)a.offset};
    if (a.granularity > granularity) granularity = a.granularity;
  }
  FlatLayout layout;
  const char* why = nullptr;
  if (!planFlatLayout(peers, granularity, &layout, &why)) {
    WARN("ncclCommWindowRegister: rank %d: cannot lay the LSA team's buffers out at one stride: %s", comm.rank, why);
    return ncclInvalidArgument;
  }
  UCHECK(gpu::addressReserve(&w->reserve, layout.reserveBytes, granularity));
  w->reserveBytes = layout.reserveBytes;
  for (int p = 0; p < lsa.size; p++) {
    void* va = static_cast<char*>(w->reserve) + layout.mapOffset[p];
    UCHECK(gpu::memMap(va, peers[p].allocBytes, handles[p], comm.gpuDev));
    w->mappings.push_back(SymWindow::Mapping{va, peers[p].allocBytes});
  }
  memset(&w->host, 0, sizeof(w->host));
  w->host.winHost = w;
  w->host.lsaFlatBase = static_cast<char*>(w->reserve) + layout.flatBaseOffset;
  w->host.lsaRank = lsa.self;
  w->host.worldRank = comm.rank;
  w->host.stride4G = (uint32_t)(layout.stride / kFlatStrideUnit);
  // GIN names the window by ginId in every context; offsets start at the buffer.
  for (int c = 0; c < NCCL_GIN_MAX_CONTEXTS; c++) w->host.ginWins[c] = reinterpret_cast<void*>((uintptr_t)w->ginId);
  w->host.ginOffset4K = 0;
  void* dev = nullptr;
  UCHECK(gpu::deviceAlloc(&dev, sizeof(ncclWindow_vidmem)));
  w->dev = static_cast<ncclWindow_vidmem*>(dev);
  return gpu::memcpy(w->dev, &w->host, sizeof(w->host));
}

// Every rank's status after its part: the first failure (by rank) decides
// what all ranks return.
[[nodiscard]] ncclResult_t agree(const WindowComm& comm, ncclResult_t mine, const char* step) {
  std::vector<int32_t> st(comm.nRanks, 0);
  st[comm.rank] = (int32_t)mine;
  UCHECK(comm.bootstrap->allGather(st.data(), sizeof(int32_t)));
  for (int r = 0; r < comm.nRanks; r++) {
    if (st[r] == ncclSuccess) continue;
    if (r != comm.rank && mine == ncclSuccess)
      WARN("ncclCommWindowRegister: rank %d failed to %s (error %d); the window is not registered on any rank", r,
           step, st[r]);
    return mine != ncclSuccess ? mine : (ncclResult_t)st[r];
  }
  return ncclSuccess;
}

}  // namespace

ncclResult_t registerWindow(const WindowComm& comm, void* buff, size_t bytes, int flags, bool internal,
                            ncclResult_t argStatus, SymWindow** out) {
  DeviceGuard device;
  UCHECK(device.use(comm.gpuDev));
  SymmetricState* s = state(comm);
  const LsaPlace& lsa = comm.lsa;
  const uint64_t seq = s->registrations++;

  // 1. Announce: what each rank's buffer is, or that it cannot take part.
  gpu::MemHandle own = 0;
  WindowAnnounce mine{};
  ncclResult_t local = argStatus != ncclSuccess ? argStatus : probeBuffer(comm, buff, bytes, &mine, &own);
  const bool haveOwn = local == ncclSuccess;
  mine.status = (int32_t)local;
  mine.flags = flags;
  std::vector<WindowAnnounce> all(comm.nRanks);
  ncclResult_t res = announce(comm, &mine, &all);
  if (res == ncclSuccess) {
    for (int r = 0; r < comm.nRanks && res == ncclSuccess; r++) {
      if (all[r].status == ncclSuccess) continue;
      // A rank that failed itself keeps its own WARN (the reason) as its last error.
      if (r != comm.rank && local == ncclSuccess)
        WARN("ncclCommWindowRegister: rank %d cannot register its buffer (error %d); the window is not registered on "
             "any rank", r, all[r].status);
      res = local != ncclSuccess ? local : (ncclResult_t)all[r].status;
    }
  }
  // The flags decide collective steps after this one (the symmetric
  // collectives' barrier): every rank must pass the same.
  for (int r = 0; r < comm.nRanks && res == ncclSuccess; r++) {
    if (all[r].flags == flags) continue;
    WARN("ncclCommWindowRegister: rank %d registers with flags 0x%x, rank %d with 0x%x; every rank must pass the same "
         "flags", comm.rank, flags, r, all[r].flags);
    res = ncclInvalidArgument;
  }
  if (res != ncclSuccess) {
    if (haveOwn) (void)gpu::memRelease(own);   // res is the failure to report
    return res;
  }

  // 2. Map: the LSA peers' handles (own and same-process peers' as they are,
  //    other processes' through file descriptors), then the flat range.
  auto w = std::make_unique<SymWindow>();
  w->userBase = buff;
  w->userBytes = bytes;
  w->flags = flags;
  w->internal = internal;
  w->ginId = seq + 1;
  std::vector<gpu::MemHandle> handles;
  std::vector<bool> imported;
  local = peerHandles(comm, all, seq, &handles, &imported);
  if (local == ncclSuccess) local = mapWindow(comm, all, handles, w.get());
  // 3. Confirm on every rank before anyone drops a reference that a peer may
  //    still be mapping; the mappings now hold the memory.
  res = agree(comm, local, "map its peers' buffers");
  // Dropping references: a failure was logged by the backend and the
  // mappings hold the memory either way.
  for (size_t p = 0; p < handles.size(); p++)
    if (imported[p]) (void)gpu::memRelease(handles[p]);
  (void)gpu::memRelease(own);
  if (res != ncclSuccess) {
    unmapWindow(w.get());
    return res;
  }

  std::lock_guard<std::mutex> lk(s->mu);
  res = s->table.add((uintptr_t)buff, bytes, w->dev, &w->tableSlot);
  if (res != ncclSuccess) {
    unmapWindow(w.get());
    return res;
  }
  INFO(NCCL_INIT, "Rank %d: window %p registered: %zu bytes at %p, LSA team of %d, stride %u x 4 GiB", comm.rank,
       (void*)w->dev, bytes, buff, lsa.size, w->host.stride4G);
  *out = w.get();
  s->windows.push_back(std::move(w));
  return ncclSuccess;
}

namespace {

// The first NCCL_WIN_COLL_SYMMETRIC window brings the symmetric
// collectives' barrier: zeroed flags (epoch 0) in an internal window, made
// on every rank together (every rank reaches this after the same
// successful registration). A failure leaves the user's window registered
// and the collectives on the ring and tree kernels, on every rank alike
// (the registration inside agrees).
void makeCollBarrier(const WindowComm& comm) {
  const size_t bytes = dev::symBarrierBytes(comm.nRanks);
  void* mem = nullptr;
  ncclResult_t res = memAllocPolled(&mem, bytes);   // peers poll it
  if (res == ncclSuccess) res = gpu::memset(mem, 0, bytes);
  SymWindow* win = nullptr;
  ncclResult_t reg = registerWindow(comm, mem, bytes, NCCL_WIN_DEFAULT, /*internal=*/true, res, &win);
  if (res == ncclSuccess) res = reg;
  if (res == ncclSuccess) {
    // The kernels find it in the communicator (DevComm), read in their
    // preamble; the symmetric items themselves carry only the user's windows.
    dev::DevComm& d = *comm.devCommHost;
    d.symBarFlat = win->host.lsaFlatBase;
    d.symBarStride4G = win->host.stride4G;
    static_assert(offsetof(dev::DevComm, symBarStride4G) == offsetof(dev::DevComm, symBarFlat) + 8, "adjacent");
    res = gpu::memcpy(&comm.devComm->symBarFlat, &d.symBarFlat, 8 + sizeof(d.symBarStride4G));
  }
  if (res != ncclSuccess) {
    if (win != nullptr) (void)deregisterWindow(comm, win);   // res is the failure the WARN below reports
    if (mem != nullptr) ncclMemFree(mem);
    WARN("Rank %d: no barrier for symmetric collectives (error %d): collectives on symmetric windows use the ring "
         "and tree kernels", comm.rank, (int)res);
    return;
  }
  SymmetricState* s = state(comm);
  std::lock_guard<std::mutex> lk(s->mu);
  s->collBarrier = win;
  s->collBarrierMem = mem;
}

}  // namespace

ncclResult_t registerUserWindow(const WindowComm& comm, void* buff, size_t bytes, int flags,
                                ncclResult_t argStatus, SymWindow** out) {
  UCHECK(registerWindow(comm, buff, bytes, flags, /*internal=*/false, argStatus, out));
  if ((flags & NCCL_WIN_COLL_SYMMETRIC) != 0 && comm.nRanks > 1 && collBarrierWindow(*comm.state) == nullptr)
    makeCollBarrier(comm);
  return ncclSuccess;
}

bool findSymmetricSpan(SymmetricState* s, const void* ptr, size_t bytes, SymSpan* out) {
  if (s == nullptr) return false;
  const uintptr_t p = (uintptr_t)ptr;
  std::lock_guard<std::mutex> lk(s->mu);
  for (auto& w : s->windows) {
    if (w->internal || (w->flags & NCCL_WIN_COLL_SYMMETRIC) == 0) continue;
    const uintptr_t b = (uintptr_t)w->userBase;
    if (p < b || p - b > w->userBytes || bytes > w->userBytes - (p - b)) continue;
    out->flatBase = w->host.lsaFlatBase;
    out->stride4G = w->host.stride4G;
    out->offset = p - b;
    return true;
  }
  return false;
}

SymWindow* collBarrierWindow(SymmetricState* s) {
  if (s == nullptr) return nullptr;
  std::lock_guard<std::mutex> lk(s->mu);
  return s->collBarrier;
}

ncclResult_t deregisterWindow(const WindowComm& comm, SymWindow* win) {
  DeviceGuard device;
  UCHECK(device.use(comm.gpuDev));
  SymmetricState* s = state(comm);
  std::lock_guard<std::mutex> lk(s->mu);
  for (auto it = s->windows.begin(); it != s->windows.end(); ++it) {
    if (it->get() != win) continue;
    if (s->collBarrier == win) s->collBarrier = nullptr;
    ncclResult_t res = win->tableSlot >= 0 ? s->table.remove(win->tableSlot) : ncclSuccess;
    unmapWindow(win);
    s->windows.erase(it);
    return res;
  }
  return ncclInvalidArgument;
}

SymWindow* findWindow(SymmetricState* s, ncclWindow_t handle) {
  if (s == nullptr || handle == nullptr) return nullptr;
  std::lock_guard<std::mutex> lk(s->mu);
  for (auto& w : s->windows)
    if (w->dev == handle) return w.get();
  return nullptr;
}

bool ginWindowMemory(SymmetricState* s, uint64_t ginId, char** base, size_t* bytes) {
  if (s == nullptr || ginId == 0) return false;
  std::lock_guard<std::mutex> lk(s->mu);
  for (auto& w : s->windows) {
    if (w->ginId != ginId) continue;
    *base = static_cast<char*>(w->userBase);
    *bytes = w->userBytes;
    return true;
  }
  return false;
}

bool ginWindowPeerMemory(SymmetricState* s, uint64_t ginId, int lsaPeer, char** base, size_t* bytes) {
  if (s == nullptr || ginId == 0 || lsaPeer < 0) return false;
  std::lock_guard<std::mutex> lk(s->mu);
  for (auto& w : s->windows) {
    if (w->ginId != ginId) continue;
    if (w->host.lsaFlatBase == nullptr || (size_t)lsaPeer >= w->mappings.size()) return false;
    char* b = w->host.lsaFlatBase + (size_t)lsaPeer * ((size_t)w->host.stride4G << 32);
    const SymWindow::Mapping& m = w->mappings[lsaPeer];
    char* end = static_cast<char*>(m.va) + m.bytes;
    if (b < static_cast<char*>(m.va) || b >= end) return false;
    *base = b;
    *bytes = (size_t)(end - b);   // what is mapped from the peer's buffer on (its allocation's rest)
    return true;
  }
  return false;
}

ncclResult_t windowTableHead(const WindowComm& comm, ncclDevCommWindowTable** head) {
  SymmetricState* s = state(comm);
  std::lock_guard<std::mutex> lk(s->mu);
  return s->table.head(head);
}

void addDevCommResources(const WindowComm& comm, const DevCommResources& r) {
  SymmetricState* s = state(comm);
  std::lock_guard<std::mutex> lk(s->mu);
  s->devComms.push_back(r);
}

bool takeDevCommResources(SymmetricState* s, ncclWindow_t resourceWindow, DevCommResources* out) {
  if (s == nullptr || resourceWindow == nullptr) return false;
  std::lock_guard<std::mutex> lk(s->mu);
  for (auto it = s->devComms.begin(); it != s->devComms.end(); ++it) {
    if (it->resourceWindow != resourceWindow) continue;
    *out = *it;
    s->devComms.erase(it);
    return true;
  }
  return false;
}

void releaseSymmetric(SymmetricState** state) {
  SymmetricState* s = *state;
  if (s == nullptr) return;
  // GIN first: its proxy poller reads the windows.
  for (DevCommResources& r : s->devComms) {
    if (r.stopReaders) r.stopReaders();
    r.stopReaders = nullptr;
  }
  for (auto& w : s->windows) unmapWindow(w.get());
  s->windows.clear();
  // The device communicators' memory, once no window maps it any more.
  for (const DevCommResources& r : s->devComms) ncclMemFree(r.memory);
  s->devComms.clear();
  if (s->collBarrierMem != nullptr) ncclMemFree(s->collBarrierMem);
  s->collBarrier = nullptr;
  s->collBarrierMem = nullptr;
  s->table.release();
  delete s;
  *state = nullptr;
}

}  // namespace uniccl
