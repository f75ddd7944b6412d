// RAII owners of verbs objects: each destroys its object through the seam that
// made it, so every early return and every error path releases what it built.
// Destruction order matters to verbs (QP before CQ, MR before PD, PD before
// context); owners are declared in that reverse order in their structs.
#pragma once

#include <memory>

#include "net/ib/verbs_seam.h"

namespace uniccl {
namespace ib {

template <typename T, int (Verbs::*Destroy)(T*)>
struct VerbsDeleter {
  Verbs* verbs = nullptr;
  void operator()(T* p) const {
    if (p && verbs) (verbs->*Destroy)(p);  // teardown failures leave nothing to recover
  }
};

using ContextPtr = std::unique_ptr<Context, VerbsDeleter<Context, &Verbs::closeDevice>>;
using PdPtr = std::unique_ptr<Pd, VerbsDeleter<Pd, &Verbs::deallocPd>>;
using MrPtr = std::unique_ptr<Mr, VerbsDeleter<Mr, &Verbs::deregMr>>;
using CqPtr = std::unique_ptr<Cq, VerbsDeleter<Cq, &Verbs::destroyCq>>;
using QpPtr = std::unique_ptr<Qp, VerbsDeleter<Qp, &Verbs::destroyQp>>;

template <typename Ptr, typename T>
Ptr own(Verbs* verbs, T* p) {
  return Ptr(p, typename Ptr::deleter_type{verbs});
}

struct DeviceListDeleter {
  Verbs* verbs = nullptr;
  void operator()(DeviceList* l) const {
    if (l && verbs) verbs->freeDeviceList(l);
  }
};
using DeviceListPtr = std::unique_ptr<DeviceList, DeviceListDeleter>;

}  // namespace ib
}  // namespace uniccl
