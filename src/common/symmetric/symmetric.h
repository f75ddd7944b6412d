// Symmetric memory windows (ncclCommWindowRegister) of one communicator.
//
// A window is a buffer every rank registers together. Each rank maps the
// physical allocations behind its LSA peers' buffers (and its own) into one
// flat address range, peer p at lsaFlatBase + p * stride (flat_layout.h),
// and publishes an ncclWindow_vidmem in device memory that kernels read
// (the Device API's ncclGetLsaPointer and friends, the symmetric
// collectives). The comm's device window table (window_table.h) lists the
// windows by the user's buffer address, for ncclFindWindow.
//
// Owner: ncclComm::symmetric; releaseSymmetric() at destroy and abort unmaps
// and frees everything still registered. What registration needs of the
// communicator comes as a WindowComm (window_comm.h); lookups take the
// state itself (nullptr: nothing registered yet).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "common/gpu.h"
#include "common/symmetric/window_comm.h"
#include "common/symmetric/window_table.h"
#include "nccl_device.h"

namespace uniccl {

struct SymWindow {
  void* userBase = nullptr;     // what the user registered
  size_t userBytes = 0;
  int flags = 0;                // NCCL_WIN_*
  bool internal = false;        // a device communicator's resource window, not the user's
  void* reserve = nullptr;      // the flat range's reservation
  size_t reserveBytes = 0;
  struct Mapping {
    void* va;
    size_t bytes;
  };
  std::vector<Mapping> mappings;    // one per LSA peer (own allocation included)
  ncclWindow_vidmem host{};         // what the device copy holds
  ncclWindow_vidmem* dev = nullptr; // ncclWindow_t handed out (device memory)
  int tableSlot = -1;               // entry in the comm's window table
  uint64_t ginId = 0;               // GIN's name for it (ginWins[*]): the registration's sequence number + 1,
                                    // the same on every rank, so a peer's descriptor names this rank's window
};

// A device communicator's resources (device_api/dev_comm_api.cc): its
// resource window and the ncclMemAlloc memory under it.
struct DevCommResources {
  ncclWindow_t resourceWindow;
  SymWindow* window;
  void* memory;
  // Stops and frees what reads the comm's windows for the device
  // communicator (its GIN proxy poller), so it runs before they are
  // unmapped: by ncclDevCommDestroy, or by releaseSymmetric for a device
  // communicator still alive at destroy or abort. Empty without GIN.
  std::function<void()> stopReaders;
};

struct SymmetricState {
  std::mutex mu;   // windows, table, devComms (register/deregister may come from several threads of one process)
  std::vector<std::unique_ptr<SymWindow>> windows;
  WindowTable table;
  std::vector<DevCommResources> devComms;
  uint64_t registrations = 0;   // registrations run (names their sockets; equal on every rank)
  // The symmetric collectives' barrier (device/dev_types.h, symBarrierBytes):
  // an internal window made collectively with the first NCCL_WIN_COLL_SYMMETRIC
  // window, freed at destroy. Null until then (no symmetric collective runs).
  SymWindow* collBarrier = nullptr;
  void* collBarrierMem = nullptr;
};

// Where a local buffer lies in a registered window, for the symmetric
// collectives: the window's flat range, and the buffer's offset in it.
struct SymSpan {
  char* flatBase;       // LSA rank 0's buffer start in the flat range
  uint32_t stride4G;
  size_t offset;        // from the window's start (the same on every rank, by the user's contract)
};
// A window with NCCL_WIN_COLL_SYMMETRIC holding [ptr, ptr + bytes); false when none.
bool findSymmetricSpan(SymmetricState* s, const void* ptr, size_t bytes, SymSpan* out);
// The collective barrier's window; nullptr while there is none.
SymWindow* collBarrierWindow(SymmetricState* s);

// Registers [buff, buff + bytes) on every rank of comm (collective: every
// rank calls it with its own buffer). buff must lie in memory that peers can
// map (ncclMemAlloc, or the VMM allocations of frameworks) and be aligned to
// NCCL_WIN_REQUIRED_ALIGNMENT. internal: a device communicator's resource
// window. A rank whose arguments were already found bad passes that error
// as argStatus: it still takes part, so every rank fails at once instead of
// waiting for it.
[[nodiscard]] ncclResult_t registerWindow(const WindowComm& comm, void* buff, size_t bytes, int flags, bool internal,
                            ncclResult_t argStatus, SymWindow** out);
// A user's registration (ncclCommWindowRegister): registerWindow, and with
// the first NCCL_WIN_COLL_SYMMETRIC window the collectives' barrier.
[[nodiscard]] ncclResult_t registerUserWindow(const WindowComm& comm, void* buff, size_t bytes, int flags,
                                ncclResult_t argStatus, SymWindow** out);
// Local: unmaps this rank's view; peers keep theirs (their mappings hold the
// memory), so no rank waits on another.
[[nodiscard]] ncclResult_t deregisterWindow(const WindowComm& comm, SymWindow* win);
// The registered window whose handle is `handle`; nullptr when none.
SymWindow* findWindow(SymmetricState* s, ncclWindow_t handle);
// GIN: the local memory of the window whose GIN handle is ginId; false when
// none is registered (any more).
bool ginWindowMemory(SymmetricState* s, uint64_t ginId, char** base, size_t* bytes);
// GIN: the same window's view of LSA peer lsaPeer's buffer through this
// rank's mapping of it, and the bytes mapped from there on (the rest of the
// peer's allocation: the peer's own window size is checked by the peer);
// false when none is registered or the peer is not mapped.
bool ginWindowPeerMemory(SymmetricState* s, uint64_t ginId, int lsaPeer, char** base, size_t* bytes);
// The comm's device window table (ncclDevComm::windowTable), created on first use.
[[nodiscard]] ncclResult_t windowTableHead(const WindowComm& comm, ncclDevCommWindowTable** head);
// Device communicators' resources, by their resource window.
void addDevCommResources(const WindowComm& comm, const DevCommResources& r);
// Removes and returns the record; false when none has that window.
bool takeDevCommResources(SymmetricState* s, ncclWindow_t resourceWindow, DevCommResources* out);
// Destroy and abort: every window and table, whatever state they are in;
// *state is nullptr after.
void releaseSymmetric(SymmetricState** state);

}  // namespace uniccl
