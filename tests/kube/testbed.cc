#include "tests/kube/testbed.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "host/common/yaml.h"

namespace gpustack::kube::testing {
namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') {
    ADD_FAILURE() << name
                  << " is not set: run this test through ctest, whose fixture starts the "
                     "control plane";
    return {};
  }
  return value;
}

}  // namespace

// Values are written with printf %q; paths in the testbed need no unquoting.
std::string TestbedEnv(const std::string& key) {
  std::ifstream in(TestbedDir() + "/env");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + "=", 0) == 0) {
      return line.substr(key.size() + 1);
    }
  }
  ADD_FAILURE() << "no " << key << " in " << TestbedDir() << "/env";
  return {};
}

std::string TestbedDir() { return Env("GPUSTACK_TESTBED_DIR"); }

ClientConfig TestbedConfig() {
  auto config = LoadKubeconfig({Env("KUBECONFIG")});
  EXPECT_TRUE(config) << config.error();
  return config ? *config : ClientConfig{};
}

std::unique_ptr<Client> TestbedClient(ClientOptions options) {
  auto client = Client::Create(TestbedConfig(), options);
  EXPECT_TRUE(client) << client.error();
  return client ? std::move(*client) : nullptr;
}

std::string Run(const std::string& command, int* status) {
  std::string output;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) {
    ADD_FAILURE() << "cannot run " << command;
    return output;
  }
  std::array<char, 4096> buffer;
  while (size_t n = fread(buffer.data(), 1, buffer.size(), pipe)) {
    output.append(buffer.data(), n);
  }
  int raw = pclose(pipe);
  if (status != nullptr) {
    *status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  }
  return output;
}

int Testbed(const std::string& command, const std::string& args) {
  int status = 0;
  std::string output =
      Run(Env("GPUSTACK_TESTBED_SCRIPT") + " " + command + " --dir " + TestbedDir() + " " + args,
          &status);
  if (status != 0) {
    ADD_FAILURE() << "testbed " << command << " " << args << " failed:\n" << output;
  }
  return status;
}

std::string Kubectl(const std::string& args, int* status) {
  return Run(TestbedEnv("KUBE_BIN") + "/kubectl --kubeconfig " + Env("KUBECONFIG") + " " + args,
             status);
}

std::string CreateNamespace(Client& client, const std::string& prefix) {
  // The server picks the unique suffix: tests in parallel processes never share one.
  Json ns = {
      {"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"generateName", prefix + "-"}}}};
  auto created = client.Create(resources::Namespaces(), ns);
  if (!created) {
    ADD_FAILURE() << created.error();
    return prefix + "-not-created";
  }
  return (*created)["metadata"]["name"];
}

bool WaitForDefaultServiceAccount(Client& client, const std::string& ns) {
  return WaitFor([&] {
    return client.Get({"", "v1", "serviceaccounts", true}, ns, "default").ok();
  });
}

void ApplyCrds(Client& client, const std::string& path, const std::string& field_manager) {
  std::ifstream in(path);
  ASSERT_TRUE(in) << "cannot read " << path;
  std::stringstream text;
  text << in.rdbuf();
  auto documents = FromYaml(text.str());
  ASSERT_TRUE(documents) << path << ": " << documents.error();
  for (const Json& doc : *documents) {
    std::string api_version = doc.value("apiVersion", "");
    size_t slash = api_version.find('/');
    ASSERT_EQ(doc.value("kind", ""), "CustomResourceDefinition")
        << "only CRD files are applied here";
    ASSERT_NE(slash, std::string::npos);
    auto applied = client.Apply(resources::CustomResourceDefinitions(), doc, {field_manager, true});
    ASSERT_TRUE(applied) << path << ": " << applied.error();
  }
}

bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (done()) {
      return true;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

Json ConfigMap(const std::string& ns, const std::string& name, Json data) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"data", std::move(data)}};
}

Process::Process(std::vector<std::string> argv, std::vector<std::string> env, std::string log_path)
    : argv_(std::move(argv)), env_(std::move(env)), log_path_(std::move(log_path)) {}

Process::~Process() { Stop(SIGKILL); }

bool Process::Start() {
  std::vector<char*> argv, envp;
  for (std::string& a : argv_) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (std::string& e : env_) envp.push_back(e.data());
  envp.push_back(nullptr);
  const int out = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (out < 0) return false;
  pid_ = fork();
  if (pid_ == 0) {
    if (dup2(out, 1) < 0 || dup2(out, 2) < 0) _exit(126);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  close(out);
  return pid_ > 0;
}

int Process::Stop(int signal) {
  if (pid_ <= 0) return -1;
  kill(pid_, signal);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string Process::Log() const {
  std::ifstream in(log_path_);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  close(fd);
  return port;
}

}  // namespace gpustack::kube::testing
