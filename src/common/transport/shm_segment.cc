// POSIX shared memory for the SHM transport.
//
// A segment's name lives in /dev/shm only while the peer still has to find
// it: the creator makes it (O_EXCL, 0600, a random part), the peer opens it
// and removes the name at once, and both mappings stay valid. So once a
// connection is set up, a rank killed with SIGKILL leaves nothing in
// /dev/shm: the kernel frees the memory with its last mapping. The creator
// also removes the name when it releases the segment (the peer never came:
// an aborted or failed setup). What remains is the time between the
// creator's shm_open and the peer's: a kill -9 of the creator in that time,
// when the peer then never opens the segment, leaves the name behind.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

#include "common/check.h"
#include "common/transport/transport.h"
#include "common/util/debug.h"

namespace uniccl {

ShmSegment::~ShmSegment() { release(); }

void ShmSegment::release() {
  if (dev_ != nullptr) {
    (void)gpu::hostUnregister(host_);   // teardown: the backend logs a failure; the unmap below still runs
    dev_ = nullptr;
  }
  if (host_ != nullptr) {
    munmap(host_, bytes_);
    host_ = nullptr;
  }
  unlinkName();
}

void ShmSegment::unlinkName() {
  // ENOENT is the normal case for the creator: the peer removed the name.
  if (owner_ && !name_.empty()) shm_unlink(name_.c_str());
  owner_ = false;
}

[[nodiscard]] static ncclResult_t mapAndRegister(int fd, size_t bytes, void** host, void** dev, const char* name) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    WARN("SHM transport: mmap of %s (%zu bytes) failed: %s", name, bytes, strerror(errno));
    return ncclSystemError;
  }
  ncclResult_t res = gpu::hostRegister(p, bytes, dev);
  if (res != ncclSuccess) {
    munmap(p, bytes);
    return res;
  }
  *host = p;
  return ncclSuccess;
}

ncclResult_t ShmSegment::create(size_t bytes) {
  static std::atomic<uint64_t> counter{0};
  std::random_device rd;
  char name[64];
  snprintf(name, sizeof(name), "/uniccl-%d-%llx-%llx", (int)getpid(),
           (unsigned long long)counter.fetch_add(1), (unsigned long long)rd());
  int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) {
    WARN("SHM transport: shm_open(%s) failed: %s (is /dev/shm mounted and large enough?)", name, strerror(errno));
    return ncclSystemError;
  }
  name_ = name;
  owner_ = true;
  if (ftruncate(fd, (off_t)bytes) != 0) {
    WARN("SHM transport: ftruncate(%s, %zu) failed: %s (increase /dev/shm size)", name, bytes, strerror(errno));
    close(fd);
    release();
    return ncclSystemError;
  }
  bytes_ = bytes;
  ncclResult_t res = mapAndRegister(fd, bytes, &host_, &dev_, name);
  close(fd);
  if (res != ncclSuccess) release();
  return res;
}

ncclResult_t ShmSegment::open(const std::string& name, size_t bytes) {
  int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) {
    WARN("SHM transport: cannot open peer segment %s: %s", name.c_str(), strerror(errno));
    return ncclSystemError;
  }
  // This rank is the only one that opens the segment by name (one segment per
  // direction of one pair): with the descriptor open, the name has done its
  // work. Removing it now, before anything else can fail, leaves nothing in
  // /dev/shm however either process ends from here on.
  if (shm_unlink(name.c_str()) != 0)
    INFO(kSubsysInit, "SHM transport: removing the name of peer segment %s: %s", name.c_str(), strerror(errno));
  name_ = name;
  bytes_ = bytes;
  ncclResult_t res = mapAndRegister(fd, bytes, &host_, &dev_, name.c_str());
  close(fd);
  if (res != ncclSuccess) release();
  return res;
}

}  // namespace uniccl
