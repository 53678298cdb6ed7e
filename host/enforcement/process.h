// Running a short-lived helper program (the MPS control client) with a bounded wait. The output
// goes through a temporary file rather than a pipe, so a helper that forks a daemon which keeps
// the descriptors open cannot hold the caller until the daemon exits.
#ifndef GPUSTACK_HOST_ENFORCEMENT_PROCESS_H_
#define GPUSTACK_HOST_ENFORCEMENT_PROCESS_H_

#include <chrono>
#include <string>
#include <vector>

#include "host/common/result.h"

namespace gpustack::enforcement {

struct ProcessResult {
  int exit_code = -1;  // 128 + signal when a signal ended it
  std::string output;  // stdout and stderr, at most 64 KiB
};

// Runs `argv` (argv[0] a path) with exactly `env` ("KEY=value") and `input` on its stdin. An
// error when it cannot start or runs past `timeout` (it is killed then).
Result<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                 const std::vector<std::string>& env, const std::string& input,
                                 std::chrono::milliseconds timeout);

}  // namespace gpustack::enforcement

#endif  // GPUSTACK_HOST_ENFORCEMENT_PROCESS_H_
