// The "IB" network: NCCL's net plugin table over RDMA verbs (InfiniBand and
// RoCE), built on the seam in verbs_seam.h.
//
//   NCCL_IB_DISABLE   1: report no devices, so the Socket transport is chosen (default 0)
//   NCCL_IB_HCA, NCCL_IB_GID_INDEX, NCCL_IB_ADDR_FAMILY, NCCL_IB_ROCE_VERSION_NUM: ib_devices.h / gid_select.h
//   NCCL_IB_TIMEOUT, NCCL_IB_RETRY_CNT, NCCL_IB_SL, NCCL_IB_TC, NCCL_IB_PKEY: qp_setup.h
//   UNICCL_IB_GDR     1: advertise NCCL_PTR_CUDA (and NCCL_PTR_DMABUF where
//                     libibverbs has it): GPUDirect RDMA; 0: host memory only (default 0)
//   NCCL_GDR_FLUSH_DISABLE  1: iflush of GPU memory does nothing (default 0)
//   UNICCL_NET_CONNECT_TIMEOUT_MS  handshake limit (default 30000)
//   NCCL_SOCKET_IFNAME / NCCL_SOCKET_FAMILY: the interface of the handshake's TCP socket
//
// Data path (as NCCL's): the receiver posts a receive WR and RDMA-writes a FIFO
// entry {address, rkey, size, tag, index} into the sender's FIFO; the sender
// waits for the entry of its next message, RDMA-writes the data there with the
// size as immediate data, which completes the receiver's WR. iflush of GPU
// memory RDMA-reads one byte of it through a QP connected to itself, which
// orders the earlier writes before the read's completion.
#pragma once

#include "net/ib/verbs_seam.h"
#include "net/net.h"

namespace uniccl {

// libibverbs builds (src/net/ib/ib_entry.cc): the table on the real verbs.
const NetApi* ibNetApi();

namespace ib {

// Installs the verbs implementation the table uses (before init; once, or
// after ibResetForTesting). ibNetApi installs the real one unless another is.
void installVerbs(Verbs* verbs);
bool verbsInstalled();

// The table (name "IB") over the installed verbs.
const NetApi* ibNetTable();
// netAbandonConnect for the IB table's handles: the QP, CQ, FIFO
// registration and handshake socket of a connect in progress go.
void abandonConnect(void* handle);

// Forgets init (devices, knobs) and the installed verbs. Tests only: comms and
// registrations made before keep their devices alive until closed.
void resetForTesting();

}  // namespace ib
}  // namespace uniccl
