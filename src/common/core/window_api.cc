// ncclCommWindowRegister / ncclCommWindowDeregister (symmetric/symmetric.h does the work).
// Inside a group, registration runs at ncclGroupEnd together with the other
// communicators' (one thread may register a window on several GPUs' comms),
// and *win is written then.
#include "common/api_export.h"
#include "common/check.h"
#include "common/core/comm.h"
#include "common/core/comm_symmetric.h"
#include "common/core/group.h"
#include "common/core/validate.h"
#include "common/symmetric/symmetric.h"
#include "common/util/debug.h"

using namespace uniccl;

namespace {

[[nodiscard]] ncclResult_t checkRegister(void* buff, size_t size, ncclWindow_t* win, int winFlags) {
  const char* fn = "ncclCommWindowRegister";
  if (win == nullptr || buff == nullptr || size == 0) {
    WARN("%s: need a buffer, a size > 0 and a window pointer (got %p, %zu, %p)", fn, buff, size, (void*)win);
    return ncclInvalidArgument;
  }
  if ((winFlags & ~(NCCL_WIN_DEFAULT | NCCL_WIN_COLL_SYMMETRIC)) != 0) {
    WARN("%s: unknown window flags 0x%x (NCCL_WIN_DEFAULT, NCCL_WIN_COLL_SYMMETRIC)", fn, winFlags);
    return ncclInvalidArgument;
  }
  if (reinterpret_cast<uintptr_t>(buff) % NCCL_WIN_REQUIRED_ALIGNMENT != 0) {
    WARN("%s: buffer %p is not aligned to NCCL_WIN_REQUIRED_ALIGNMENT (%d bytes)", fn, buff,
         NCCL_WIN_REQUIRED_ALIGNMENT);
    return ncclInvalidArgument;
  }
  if (size > UINTPTR_MAX - reinterpret_cast<uintptr_t>(buff)) {
    WARN("%s: size %zu from %p runs past the end of the address space", fn, size, buff);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

}  // namespace

NCCL_API(ncclResult_t, ncclCommWindowRegister, ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
         int winFlags);
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags) {
  UCHECK(groupErrCheck(checkCommUsable(comm, "ncclCommWindowRegister")));
  ncclResult_t args = checkRegister(buff, size, win, winFlags);
  if (inGroup()) {
    // Runs at ncclGroupEnd, after this comm's earlier deferred calls (they
    // share its bootstrap). A bad call fails the group (NCCL's rule) and
    // still takes part in the registration, so the other ranks fail with it
    // rather than wait for it (the group end runs deferred jobs either way).
    deferToGroupEnd([comm, buff, size, win, winFlags, args]() -> ncclResult_t {
      SymWindow* w = nullptr;
      UCHECK(registerUserWindow(windowComm(comm), buff, size, winFlags, args, &w));
      *win = w->dev;
      return ncclSuccess;
    }, comm);
    return args != ncclSuccess ? groupErrCheck(args) : ncclSuccess;
  }
  // Outside a group a bad call still joins the collective, so the other
  // ranks fail with it rather than wait for it.
  SymWindow* w = nullptr;
  UCHECK(registerUserWindow(windowComm(comm), buff, size, winFlags, args, &w));
  *win = w->dev;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommWindowDeregister, ncclComm_t comm, ncclWindow_t win);
ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  const char* fn = "ncclCommWindowDeregister";
  UCHECK(checkCommHandle(comm, fn));
  if (win == nullptr) return ncclSuccess;   // as ncclCommDeregister: nothing was registered
  SymWindow* w = findWindow(comm->symmetric, win);
  if (w == nullptr || w->internal) {
    WARN("%s: %p is not a window registered on this communicator (rank %d)", fn, (void*)win, comm->rank);
    return ncclInvalidArgument;
  }
  return deregisterWindow(windowComm(comm), w);
}
