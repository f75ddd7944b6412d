// Entry point of one *_perf tool; meson compiles it once per tool with
// -DBENCH_COLL=<the CollSpec it measures>.
#include "common.h"

int main(int argc, char** argv) { return bench::benchMain(argc, argv, bench::BENCH_COLL); }
