/*
 * <nccl.h> for programs written against NVIDIA NCCL: the whole API comes from
 * uniccl.h. uniccl's include/ directory must come before any vendor include
 * directory (e.g. /usr/local/cuda/include, which ships NVIDIA's nccl.h) on the
 * compiler's search path; uniccl.h stops with an error if the vendor's header
 * got in first.
 */
#ifndef NCCL_H_
#include "uniccl.h" /* defines NCCL_H_ */
#endif
