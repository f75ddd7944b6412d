// The production conn FIFO allocation: mapped host memory, so the kernel
// (through device()) and the proxy thread (through host()) share it. Kept
// apart from conn_fifo.cc so host-only users never pull in the GPU backend.
#include "common/gpu.h"
#include "common/proxy/conn_fifo.h"

namespace uniccl {

ncclResult_t ConnFifoBuffer::allocateMapped() { return allocate(gpu::hostAllocMapped, gpu::hostFree); }

}  // namespace uniccl
