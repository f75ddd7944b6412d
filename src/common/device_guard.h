// Restores the calling thread's current device when code switched it (a
// thread may drive communicators of several GPUs: groups, ncclCommInitAll,
// window registration).
#pragma once

#include "common/gpu.h"

namespace uniccl {

class DeviceGuard {
 public:
  DeviceGuard() { ok_ = gpu::getDevice(&saved_) == ncclSuccess; }
  // A destructor cannot pass a failure up; the backend logged it.
  ~DeviceGuard() {
    if (ok_ && switched_) (void)gpu::setDevice(saved_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  [[nodiscard]] ncclResult_t use(int dev) {
    if (ok_ && dev == current()) return ncclSuccess;
    switched_ = true;
    current_ = dev;
    return gpu::setDevice(dev);
  }

 private:
  int current() const { return switched_ ? current_ : saved_; }
  int saved_ = -1;
  int current_ = -1;
  bool ok_ = false;
  bool switched_ = false;
};

}  // namespace uniccl
