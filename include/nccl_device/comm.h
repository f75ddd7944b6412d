/* uniccl's Device API: the device communicator (defined with the core types). */
#ifndef UNICCL_NCCL_DEVICE_COMM_H
#define UNICCL_NCCL_DEVICE_COMM_H
#include "core.h"
#endif
