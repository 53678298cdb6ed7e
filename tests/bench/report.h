// What the load benchmarks (kube_bench, operator_bench) print: latency percentiles and a
// process's memory and CPU time from /proc. Figures only; nothing here asserts.
#ifndef GPUSTACK_TESTS_BENCH_REPORT_H_
#define GPUSTACK_TESTS_BENCH_REPORT_H_

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace gpustack::bench {

inline double Ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// "what n=… p50=… p90=… p99=… max=…", in milliseconds.
inline void Percentiles(const char* what, std::vector<double> samples) {
  if (samples.empty()) return;
  std::sort(samples.begin(), samples.end());
  auto at = [&](double p) {
    return samples[std::min(samples.size() - 1, static_cast<size_t>(p * samples.size()))];
  };
  std::printf("%-44s n=%zu p50=%.2f ms p90=%.2f ms p99=%.2f ms max=%.2f ms\n", what, samples.size(),
              at(0.50), at(0.90), at(0.99), samples.back());
}

// User plus system CPU time a process has used, in ms (/proc/<pid>/stat); -1 when unreadable.
inline double CpuMs(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t comm_end = stat.rfind(')');  // the name may hold spaces and parentheses
  if (comm_end == std::string::npos) return -1;
  std::istringstream fields(stat.substr(comm_end + 2));
  std::string skip;
  for (int field = 3; field < 14; ++field) fields >> skip;  // state .. cmajflt
  unsigned long long utime = 0, stime = 0;
  if (!(fields >> utime >> stime)) return -1;
  return 1000.0 * static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace gpustack::bench

#endif  // GPUSTACK_TESTS_BENCH_REPORT_H_
