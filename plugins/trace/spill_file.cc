#include "spill_file.h"

#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace trace {

std::unique_ptr<SpillFile> SpillFile::create(const std::string& dir) {
  // O_TMPFILE: never a name. File systems without it (some network ones)
  // get a name that is removed at once.
  int fd = open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    std::string name = dir + "/.uniccl-trace-spill.XXXXXX";
    fd = mkostemp(&name[0], O_CLOEXEC);
    if (fd < 0) return nullptr;
    unlink(name.c_str());
  }
  return std::unique_ptr<SpillFile>(new SpillFile(fd));
}

SpillFile::~SpillFile() { close(fd_); }

bool SpillFile::append(iovec* parts, size_t count) {
  const uint64_t before = size_;
  size_t first = 0;
  while (first < count && parts[first].iov_len == 0) first++;
  while (first < count) {
    const int n = (int)std::min<size_t>(count - first, IOV_MAX);
    const ssize_t w = pwritev(fd_, &parts[first], n, (off_t)size_);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      // A partial block would be read as records: cut it off.
      if (ftruncate(fd_, (off_t)before) == 0) size_ = before;
      return false;
    }
    size_ += (uint64_t)w;
    for (size_t left = (size_t)w; left > 0;) {   // past what was written
      iovec& v = parts[first];
      if (left >= v.iov_len) {
        left -= v.iov_len;
        first++;
      } else {
        v.iov_base = static_cast<char*>(v.iov_base) + left;
        v.iov_len -= left;
        left = 0;
      }
    }
    while (first < count && parts[first].iov_len == 0) first++;
  }
  return true;
}

size_t SpillFile::read(uint64_t offset, void* to, size_t n) const {
  size_t done = 0;
  while (done < n) {
    const ssize_t r = pread(fd_, static_cast<char*>(to) + done, n - done, (off_t)(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return 0;
    if (r == 0) break;
    done += (size_t)r;
  }
  return done;
}

bool SpillFile::clear() {
  if (ftruncate(fd_, 0) != 0) return false;
  size_ = 0;
  return true;
}

}  // namespace trace
