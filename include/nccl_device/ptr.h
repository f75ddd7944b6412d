/*
 * uniccl's Device API: ncclSymPtr<T>, a symmetric pointer: a window and a
 * byte offset into it, the same on every rank, from which device code makes
 * the local or a peer's pointer (core.h's pointer functions). The value type
 * and its arithmetic are host and device code (C++); the pointers, device
 * code only. Multimem pointers are absent (core.h says why).
 */
#ifndef UNICCL_NCCL_DEVICE_PTR_H
#define UNICCL_NCCL_DEVICE_PTR_H
#include "core.h"

#ifdef __cplusplus
template <typename T>
struct ncclSymPtr {
  using ElementType = T;
  ncclWindow_t window;
  size_t offset; /* bytes */

  NCCL_HOST_DEVICE_INLINE constexpr ncclSymPtr(ncclWindow_t window = nullptr, size_t offset = 0)
      : window(window), offset(offset) {}

  template <typename U>
  NCCL_HOST_DEVICE_INLINE operator ncclSymPtr<U>() const {
    return ncclSymPtr<U>(window, offset);
  }

  /* Moves by d elements of T, as T* arithmetic does. */
  template <typename Int>
  NCCL_HOST_DEVICE_INLINE ncclSymPtr& operator+=(Int d) {
    offset += (size_t)((long long)d * (long long)sizeof(T));
    return *this;
  }
  template <typename Int>
  NCCL_HOST_DEVICE_INLINE ncclSymPtr& operator-=(Int d) {
    offset -= (size_t)((long long)d * (long long)sizeof(T));
    return *this;
  }

#if UNICCL_DEVICE_API
  NCCL_DEVICE_INLINE T* localPtr() const { return (T*)ncclGetLocalPointer(window, offset); }
  NCCL_DEVICE_INLINE T* lsaPtr(int peer) const { return (T*)ncclGetLsaPointer(window, offset, peer); }
  NCCL_DEVICE_INLINE T* peerPtr(int peer) const { return (T*)ncclGetPeerPointer(window, offset, peer); }
  NCCL_DEVICE_INLINE T* peerPtr(ncclTeam team, int peer) const {
    return (T*)ncclGetPeerPointer(window, offset, team, peer);
  }
#endif
};

template <typename T, typename Int>
NCCL_HOST_DEVICE_INLINE ncclSymPtr<T> operator+(ncclSymPtr<T> p, Int d) {
  return p += d;
}
template <typename T, typename Int>
NCCL_HOST_DEVICE_INLINE ncclSymPtr<T> operator-(ncclSymPtr<T> p, Int d) {
  return p -= d;
}
/* Elements of T between two pointers into one window. */
template <typename T>
NCCL_HOST_DEVICE_INLINE ptrdiff_t operator-(ncclSymPtr<T> a, ncclSymPtr<T> b) {
  return (ptrdiff_t)(a.offset - b.offset) / (ptrdiff_t)sizeof(T);
}
template <typename T>
NCCL_HOST_DEVICE_INLINE bool operator==(ncclSymPtr<T> a, ncclSymPtr<T> b) {
  return a.window == b.window && a.offset == b.offset;
}
template <typename T>
NCCL_HOST_DEVICE_INLINE bool operator!=(ncclSymPtr<T> a, ncclSymPtr<T> b) {
  return !(a == b);
}

#if UNICCL_DEVICE_API
/* A resource buffer as a symmetric pointer into comm.resourceWindow. */
NCCL_DEVICE_INLINE ncclSymPtr<char> ncclGetResourceBuffer(ncclDevComm const& comm, ncclDevResourceHandle h) {
  return ncclSymPtr<char>(comm.resourceWindow, ncclGetResourceBufferOffset(h));
}
#endif
#endif /* __cplusplus */

#endif /* UNICCL_NCCL_DEVICE_PTR_H */
