// Command line of the *_perf tools: the nccl-tests / rccl-tests flags.
#include <getopt.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common.h"

namespace bench {

bool parseSize(const std::string& s, size_t* out) {
  if (s.empty() || !isdigit(static_cast<unsigned char>(s[0]))) return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = strtoull(s.c_str(), &end, 10);
  if (errno) return false;
  std::string suffix(end);
  for (auto& c : suffix) c = char(toupper(static_cast<unsigned char>(c)));
  if (suffix.size() == 2 && suffix[1] == 'B') suffix.resize(1);
  unsigned shift = 0;
  if (suffix == "" || suffix == "B") shift = 0;
  else if (suffix == "K") shift = 10;
  else if (suffix == "M") shift = 20;
  else if (suffix == "G") shift = 30;
  else if (suffix == "T") shift = 40;
  else return false;
  if (shift && v > (~0ull >> shift)) return false;
  *out = size_t(v << shift);
  return true;
}

std::vector<size_t> sweepSizes(const Args& a) {
  std::vector<size_t> sizes;
  for (size_t s = a.minBytes; s <= a.maxBytes;) {
    sizes.push_back(s);
    size_t next = a.stepFactor > 1 ? size_t(double(s) * a.stepFactor) : s + a.stepBytes;
    if (next <= s) break;  // factor 1 with step 0, or overflow
    s = next;
  }
  return sizes;
}

void printUsage(const CollSpec& coll) {
  printf(
      "USAGE: %s [options]\n"
      "  -b,--minbytes <N>        smallest size in bytes (K/M/G suffixes), default 32M\n"
      "  -e,--maxbytes <N>        largest size in bytes, default 32M\n"
      "  -i,--stepbytes <N>       size increment when -f is 1, default 1M\n"
      "  -f,--stepfactor <F>      size multiplier between steps (> 1 overrides -i)\n"
      "  -g,--ngpus <N>           GPUs per thread, default 1\n"
      "  -P,--ranks-per-gpu <K>   K ranks on each GPU (-g 1 -P 2: two ranks sharing one GPU), default 1;\n"
      "                           uniccl only (sets UNICCL_RANKS_PER_GPU; NCCL refuses duplicate GPUs).\n"
      "                           The bandwidth is then that of ranks sharing one GPU, not of NVLink\n"
      "  -R,--local_register <0|1|2> buffers from ncclMemAlloc, registered: 1 ncclCommRegister, 2 a symmetric\n"
      "                           window (ncclCommWindowRegister, NCCL_WIN_COLL_SYMMETRIC); 0 (default):\n"
      "                           plain device memory, not registered (nccl-tests' -R)\n"
      "  -t,--nthreads <N>        threads per process, default 1\n"
      "  -n,--iters <N>           timed iterations, default 20\n"
      "  -w,--warmup_iters <N>    warm-up iterations, default 5\n"
      "  -m,--agg_iters <N>       operations aggregated in one group per iteration, default 1\n"
      "  -c,--check <0/1>         check results on fresh data after timing, default 1\n"
      "  -o,--op <op>             sum/prod/min/max/avg/premulsum/all, default sum\n"
      "  -d,--datatype <type>     int8,uint8,int32,uint32,int64,uint64,half,float,double,\n"
      "                           bfloat16,f8e4m3,f8e5m2 or all, default float\n"
      "  -r,--root <N|all>        root rank of rooted collectives, default 0\n"
      "  -z,--blocking <0/1>      wait for completion after every operation, default 0\n"
      "  -a,--average <0/1/2/3>   report rank 0 (0), the average (1), min (2) or max (3) over ranks\n"
      "  -G,--cudagraph <N>       capture the -n iterations into a graph, time N replays of it\n"
      "  -C,--report_cputime <0/1> extra column: host time inside the enqueue calls per iteration\n"
      "  -T,--timeout <sec>       abort when an operation takes longer, default 0 (no limit)\n"
      "  -J,--json <file>         also write every row as JSON\n"
      "  --self-test              host-only self-test of sizes, data, checker and output\n"
      "  -h,--help\n"
      "Launch: one process with -g/-t GPUs; under mpirun one process per -g*-t GPUs;\n"
      "or NCCL_COMM_ID=<host:port> with RANK/WORLD_SIZE (or UNICCL_RANK/UNICCL_NRANKS)\n"
      "and LOCAL_RANK per process (%s).\n",
      coll.tool, coll.name);
}

static bool parseInt(const char* s, int lo, int* out) {
  char* end = nullptr;
  long v = strtol(s, &end, 10);
  if (!*s || *end || v < lo || v > 1 << 30) return false;
  *out = int(v);
  return true;
}

bool parseArgs(int argc, char** argv, const CollSpec& coll, Args* a, bool* selfTest) {
  static const option longOpts[] = {
      {"minbytes", required_argument, 0, 'b'}, {"maxbytes", required_argument, 0, 'e'},
      {"stepbytes", required_argument, 0, 'i'}, {"stepfactor", required_argument, 0, 'f'},
      {"ngpus", required_argument, 0, 'g'}, {"nthreads", required_argument, 0, 't'},
      {"ranks-per-gpu", required_argument, 0, 'P'}, {"local_register", required_argument, 0, 'R'},
      {"iters", required_argument, 0, 'n'}, {"warmup_iters", required_argument, 0, 'w'},
      {"agg_iters", required_argument, 0, 'm'}, {"check", required_argument, 0, 'c'},
      {"op", required_argument, 0, 'o'}, {"datatype", required_argument, 0, 'd'},
      {"root", required_argument, 0, 'r'}, {"blocking", required_argument, 0, 'z'},
      {"average", required_argument, 0, 'a'}, {"cudagraph", required_argument, 0, 'G'},
      {"report_cputime", required_argument, 0, 'C'}, {"timeout", required_argument, 0, 'T'},
      {"json", required_argument, 0, 'J'}, {"self-test", no_argument, 0, 'S'},
      {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
  *selfTest = false;
  a->types.clear();
  optind = 1;
  opterr = 1;
  int c;
  auto bad = [&](const char* what, const char* val) {
    fprintf(stderr, "%s: invalid %s '%s' (see --help)\n", coll.tool, what, val);
    return false;
  };
  while ((c = getopt_long(argc, argv, "b:e:i:f:g:P:R:t:n:w:m:c:o:d:r:z:a:G:C:T:J:h", longOpts, nullptr)) != -1) {
    switch (c) {
      case 'b': if (!parseSize(optarg, &a->minBytes)) return bad("-b size", optarg); break;
      case 'e': if (!parseSize(optarg, &a->maxBytes)) return bad("-e size", optarg); break;
      case 'i': if (!parseSize(optarg, &a->stepBytes)) return bad("-i size", optarg); break;
      case 'f': {
        char* end = nullptr;
        a->stepFactor = strtod(optarg, &end);
        if (*end || !(a->stepFactor >= 1)) return bad("-f factor (>= 1)", optarg);
        break;
      }
      case 'g': if (!parseInt(optarg, 1, &a->nGpus)) return bad("-g", optarg); break;
      case 'P': if (!parseInt(optarg, 1, &a->ranksPerGpu) || a->ranksPerGpu > 64) return bad("-P (1..64)", optarg); break;
      case 'R': if (!parseInt(optarg, 0, &a->registration) || a->registration > 2) return bad("-R (0, 1, 2)", optarg); break;
      case 't': if (!parseInt(optarg, 1, &a->nThreads)) return bad("-t", optarg); break;
      case 'n': if (!parseInt(optarg, 1, &a->iters)) return bad("-n", optarg); break;
      case 'w': if (!parseInt(optarg, 0, &a->warmup)) return bad("-w", optarg); break;
      case 'm': if (!parseInt(optarg, 1, &a->aggIters)) return bad("-m", optarg); break;
      case 'c': if (!parseInt(optarg, 0, &a->check) || a->check > 1) return bad("-c", optarg); break;
      case 'o': if (!parseOp(optarg, &a->ops)) return bad("-o op", optarg); break;
      case 'd':
        if (!strcmp(optarg, "all")) {
          for (const auto& t : allTypes()) a->types.push_back(&t);
        } else if (const TypeInfo* t = findType(optarg)) {
          a->types.push_back(t);
        } else {
          return bad("-d datatype", optarg);
        }
        break;
      case 'r':
        if (!strcmp(optarg, "all")) a->root = -1;
        else if (!parseInt(optarg, 0, &a->root)) return bad("-r root", optarg);
        break;
      case 'z': if (!parseInt(optarg, 0, &a->blocking) || a->blocking > 1) return bad("-z", optarg); break;
      case 'a': if (!parseInt(optarg, 0, &a->average) || a->average > 3) return bad("-a", optarg); break;
      case 'G': if (!parseInt(optarg, 0, &a->graphLaunches)) return bad("-G", optarg); break;
      case 'C': if (!parseInt(optarg, 0, &a->reportCpu) || a->reportCpu > 1) return bad("-C", optarg); break;
      case 'T': {
        char* end = nullptr;
        a->timeoutSec = strtod(optarg, &end);
        if (*end || !(a->timeoutSec >= 0)) return bad("-T seconds", optarg);
        break;
      }
      case 'J': a->jsonPath = optarg; break;
      case 'S': *selfTest = true; break;
      case 'h': printUsage(coll); exit(0);
      default: return false;  // getopt printed the reason
    }
  }
  if (optind < argc) return bad("argument", argv[optind]);
  if (a->types.empty()) a->types.push_back(findType("float"));
  if (a->minBytes > a->maxBytes) {
    fprintf(stderr, "%s: -b %zu is larger than -e %zu\n", coll.tool, a->minBytes, a->maxBytes);
    return false;
  }
  if (!coll.hasOp) a->ops.assign(1, Op::None);
  return true;
}

}  // namespace bench
