// Calls the enqueue path makes while a stream of this (or, in global capture
// mode, any) thread may be capturing a graph: completion polling, graph-owned
// work buffers, freeing the buffers of destroyed graphs, and connecting to a
// peer first used inside a capture (allocation, IPC, copies). Global capture
// mode forbids them; they touch nothing the capture records, so the backends
// run them relaxed, inside one of these.
#pragma once

#include "vendor_alias.h"

namespace uniccl::gpu::backend {

class RelaxedCapture {
 public:
  // A failure to switch leaves the mode as it was: the guarded call then
  // reports the capture error itself.
  RelaxedCapture() { (void)gpuThreadExchangeStreamCaptureMode(&mode_); }
  ~RelaxedCapture() { (void)gpuThreadExchangeStreamCaptureMode(&mode_); }
  RelaxedCapture(const RelaxedCapture&) = delete;
  RelaxedCapture& operator=(const RelaxedCapture&) = delete;

 private:
  gpuStreamCaptureMode mode_ = gpuStreamCaptureModeRelaxed;
};

}  // namespace uniccl::gpu::backend
