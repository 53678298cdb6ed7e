#include "host/ssh_enter/enter.h"

#include <gtest/gtest.h>

namespace gpustack::ssh_enter {
namespace {

TEST(MainProcess, LowestPidOutsideTheSidecarAndThePause) {
  const std::string sidecar = "mnt:[1]", pause = "mnt:[2]", main = "mnt:[3]";
  EXPECT_EQ(MainProcess({{1, pause}, {7, sidecar}, {12, main}, {9, main}, {30, sidecar}}, sidecar),
            9);
  // main restarting: only the pause and the sidecar's own processes are left.
  EXPECT_EQ(MainProcess({{1, pause}, {7, sidecar}}, sidecar), std::nullopt);
  // A process that exited between readdir and readlink has no namespace to read.
  EXPECT_EQ(MainProcess({{1, pause}, {5, ""}, {6, main}}, sidecar), 6);
}

TEST(SessionEnvironment, MainsOwnPlusTheTerminal) {
  constexpr char kText[] = "PATH=/bin\0CUDA_DEVICE_MEMORY_LIMIT_0=3072m\0junk\0";
  const std::string environ(kText, sizeof kText - 1);
  EXPECT_EQ(SessionEnvironment(environ, "xterm"),
            (std::vector<std::string>{"PATH=/bin", "CUDA_DEVICE_MEMORY_LIMIT_0=3072m",
                                      "TERM=xterm"}));
  EXPECT_EQ(SessionEnvironment(std::string("TERM=dumb\0", 10), "xterm"),
            (std::vector<std::string>{"TERM=dumb"}));
  EXPECT_EQ(SessionEnvironment("", nullptr), (std::vector<std::string>{}));
}

TEST(ShellArguments, CommandOrLogin) {
  EXPECT_EQ(ShellArguments("/bin/sh", "env | sort"),
            (std::vector<std::string>{"/bin/sh", "-c", "env | sort"}));
  EXPECT_EQ(ShellArguments("/bin/bash", nullptr), (std::vector<std::string>{"/bin/bash", "-l"}));
  EXPECT_EQ(ShellArguments("/bin/bash", ""), (std::vector<std::string>{"/bin/bash", "-l"}));
}

}  // namespace
}  // namespace gpustack::ssh_enter
