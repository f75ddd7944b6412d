#include "common/topo/lsa_team.h"

#include <numeric>

namespace uniccl {

int lsaTeamSize(int nRanks, int sizeHint, const std::function<bool(int, int)>& canLoadStore) {
  if (nRanks <= 1) return 1;
  int size = sizeHint > 0 ? sizeHint : 0;   // gcd(0, x) = x
  int runStart = 0;
  for (int r = 1; r <= nRanks; r++) {
    bool joins = r < nRanks;
    for (int s = runStart; joins && s < r; s++) joins = canLoadStore(s, r);
    if (joins) continue;
    size = std::gcd(size, r - runStart);
    runStart = r;
  }
  return size;   // divides every run, so nRanks (the runs add up to it)
}

}  // namespace uniccl
