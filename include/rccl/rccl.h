/*
 * <rccl/rccl.h> for programs written against AMD RCCL: the whole API comes
 * from uniccl.h (RCCL speaks the same NCCL API on hipStream_t).
 */
#ifndef NCCL_H_
#include "../uniccl.h" /* defines NCCL_H_ */
#endif
