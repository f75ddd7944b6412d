// RCCL's names on real GPUs (the CPU emulator covers them in the unit suite,
// tests/emu/emu_rccl_test.cc): a program written against <rccl/rccl.h>
// runs ncclAllToAllv (uneven counts, zeros, gaps between blocks) and
// ncclAllToAll on every visible GPU from one thread, checked on the host.
// Exit status: 0 passed, 1 failures, 77 no GPU.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "rccl/rccl.h"
#include "rt.h"
#include "test_check.h"

namespace rt = colltest::rt;

namespace {

// Elements rank i sends to rank j: uneven, zero on the diagonal of every
// third pair and for a whole rank when `idle` >= 0; a 1 MiB block in there.
size_t countOf(int i, int j, int idle) {
  if (i == idle || j == idle) return 0;
  if ((i + j) % 3 == 2) return 0;
  if (i == 0 && j == 1) return 1 << 18;
  return 1 + 997 * (size_t)(i + 1) + 31 * (size_t)j;
}

struct Dev {
  ncclComm_t comm;
  rtStream stream;
  float* send;
  float* recv;
};

void allToAllv(std::vector<Dev>& devs, int idle, size_t gap) {
  const int n = (int)devs.size();
  std::vector<std::vector<size_t>> sc(n, std::vector<size_t>(n)), rc = sc, sd = sc, rd = sc;
  std::vector<size_t> sendLen(n), recvLen(n);
  for (int i = 0; i < n; i++) {
    size_t s = gap, r = gap;
    for (int j = 0; j < n; j++) {
      sc[i][j] = countOf(i, j, idle);
      rc[i][j] = countOf(j, i, idle);
      sd[i][j] = s;
      s += sc[i][j] + gap;
      rd[i][j] = r;
      r += rc[i][j] + gap;
    }
    sendLen[i] = s;
    recvLen[i] = r;
  }
  std::vector<std::vector<float>> in(n);
  for (int i = 0; i < n; i++) {
    in[i].resize(sendLen[i]);
    for (size_t k = 0; k < in[i].size(); k++) in[i][k] = (float)((i * 7919 + k) % 65521);
    RT_OK_OR_EXIT(rt::setDevice(i));
    RT_OK_OR_EXIT(rt::malloc((void**)&devs[i].send, sendLen[i] * sizeof(float)));
    RT_OK_OR_EXIT(rt::malloc((void**)&devs[i].recv, recvLen[i] * sizeof(float)));
    RT_OK_OR_EXIT(rt::toDevice(devs[i].send, in[i].data(), sendLen[i] * sizeof(float)));
    RT_OK_OR_EXIT(rt::memset(devs[i].recv, 0xff, recvLen[i] * sizeof(float)));   // NaN everywhere: gaps must stay so
  }
  NCCL_OK_OR_EXIT(ncclGroupStart());
  for (int i = 0; i < n; i++) {
    RT_OK_OR_EXIT(rt::setDevice(i));
    NCCL_OK_OR_EXIT(ncclAllToAllv(devs[i].send, sc[i].data(), sd[i].data(), devs[i].recv, rc[i].data(), rd[i].data(),
                          ncclFloat, devs[i].comm, devs[i].stream));
  }
  NCCL_OK_OR_EXIT(ncclGroupEnd());
  for (int j = 0; j < n; j++) {
    RT_OK_OR_EXIT(rt::setDevice(j));
    RT_OK_OR_EXIT(rt::streamSync(devs[j].stream));
    std::vector<float> got(recvLen[j]);
    RT_OK_OR_EXIT(rt::toHost(got.data(), devs[j].recv, recvLen[j] * sizeof(float)));
    std::vector<char> inBlock(recvLen[j], 0);
    size_t bad = 0;
    for (int i = 0; i < n; i++)
      for (size_t k = 0; k < rc[j][i]; k++) {
        inBlock[rd[j][i] + k] = 1;
        if (got[rd[j][i] + k] != in[i][sd[i][j] + k]) bad++;
      }
    for (size_t k = 0; k < recvLen[j]; k++)
      if (!inBlock[k] && got[k] == got[k]) bad++;   // a gap was written
    CHECK(bad == 0, "AllToAllv idle=%d gap=%zu rank %d: %zu wrong elements", idle, gap, j, bad);
    RT_OK_OR_EXIT(rt::free(devs[j].send));
    RT_OK_OR_EXIT(rt::free(devs[j].recv));
  }
}

void allToAll(std::vector<Dev>& devs, size_t count) {
  const int n = (int)devs.size();
  for (int i = 0; i < n; i++) {
    std::vector<float> in(count * n);
    for (size_t k = 0; k < in.size(); k++) in[k] = (float)(i * 100000 + (int)k);
    RT_OK_OR_EXIT(rt::setDevice(i));
    RT_OK_OR_EXIT(rt::malloc((void**)&devs[i].send, in.size() * sizeof(float)));
    RT_OK_OR_EXIT(rt::malloc((void**)&devs[i].recv, in.size() * sizeof(float)));
    RT_OK_OR_EXIT(rt::toDevice(devs[i].send, in.data(), in.size() * sizeof(float)));
  }
  NCCL_OK_OR_EXIT(ncclGroupStart());
  for (int i = 0; i < n; i++) {
    RT_OK_OR_EXIT(rt::setDevice(i));
    NCCL_OK_OR_EXIT(ncclAllToAll(devs[i].send, devs[i].recv, count, ncclFloat, devs[i].comm, devs[i].stream));
  }
  NCCL_OK_OR_EXIT(ncclGroupEnd());
  for (int j = 0; j < n; j++) {
    RT_OK_OR_EXIT(rt::setDevice(j));
    RT_OK_OR_EXIT(rt::streamSync(devs[j].stream));
    std::vector<float> got(count * n);
    RT_OK_OR_EXIT(rt::toHost(got.data(), devs[j].recv, got.size() * sizeof(float)));
    size_t bad = 0;
    for (int i = 0; i < n; i++)
      for (size_t k = 0; k < count; k++)
        if (got[i * count + k] != (float)(i * 100000 + (int)(j * count + k))) bad++;
    CHECK(bad == 0, "AllToAll count %zu rank %d: %zu wrong elements", count, j, bad);
    RT_OK_OR_EXIT(rt::free(devs[j].send));
    RT_OK_OR_EXIT(rt::free(devs[j].recv));
  }
}

}  // namespace

int main() {
  const int n = rt::deviceCount();
  if (n == 0) {
    printf("rccl_api_test: no GPU, skipped\n");
    return 77;
  }
  std::vector<Dev> devs(n);
  std::vector<ncclComm_t> comms(n);
  NCCL_OK_OR_EXIT(ncclCommInitAll(comms.data(), n, nullptr));
  for (int i = 0; i < n; i++) {
    devs[i].comm = comms[i];
    RT_OK_OR_EXIT(rt::setDevice(i));
    RT_OK_OR_EXIT(rt::streamCreate(&devs[i].stream));
  }
  for (int idle : {-1, 1 % n})
    for (size_t gap : {(size_t)0, (size_t)5}) allToAllv(devs, idle, gap);
  for (size_t count : {(size_t)1, (size_t)4099, (size_t)(1 << 20)}) allToAll(devs, count);
  for (int i = 0; i < n; i++) {
    RT_OK_OR_EXIT(rt::setDevice(i));
    NCCL_OK_OR_EXIT(ncclCommDestroy(devs[i].comm));
    RT_OK_OR_EXIT(rt::streamDestroy(devs[i].stream));
  }
  printf("rccl_api_test: %d GPU(s), %d failure(s)\n", n, testcheck::failures());
  return testcheck::failures() == 0 ? 0 : 1;
}
