// The member clusters of a gateway: the config file that names them (pure parsing), and one
// Member per cluster that watches its worker's v1 API and says how fresh what it holds is.
//
// The config file (YAML or JSON):
//   clusters:
//   - name: a10g                      # a DNS label, unique in the file
//     kubeconfig: members/a10g.yaml   # loopback mode; relative to the config file's folder
//     context: admin@a10g             # optional; the kubeconfig's current-context otherwise
//   - name: h100
//     token: <bearer token>           # gpustack-api mode: the GPUStack server's token for it
// An entry that is wrong is reported by name and skipped; the others are served.
#ifndef GPUSTACK_HOST_GATEWAY_MEMBERS_H_
#define GPUSTACK_HOST_GATEWAY_MEMBERS_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "host/common/result.h"
#include "host/gateway/aggregate.h"
#include "host/kube/config.h"
#include "host/kube/informer.h"

namespace gpustack::gateway {

enum class ConnMode { kLoopback, kGpustackApi };

struct MemberSpec {
  std::string name;
  std::filesystem::path kubeconfig;  // loopback
  std::string context;
  std::string token;  // gpustack-api
  // The kubeconfig file's text when the member was made: new credentials in the same file make
  // a new member (the gateway reads it; ParseMembersConfig leaves it empty).
  std::string kubeconfig_text;
  bool operator==(const MemberSpec&) const = default;
};

struct MembersConfig {
  std::vector<MemberSpec> members;
  // entry -> why: its name, "#<index>" when it has none, "<name>#<index>" for a repeated name.
  std::map<std::string, std::string> invalid;
};

// The file's text; `base_dir` resolves relative kubeconfig paths. An error only when the file as
// a whole is unusable (not YAML, no `clusters` list): then the gateway keeps what it serves.
Result<MembersConfig> ParseMembersConfig(const std::string& text,
                                         const std::filesystem::path& base_dir, ConnMode mode);

// How a member is reached: its kubeconfig (loopback), or the GPUStack server's proxy for the
// cluster (https://<host>:<port>/v2/clusters/<name>/proxy with the entry's token).
struct Connection {
  ConnMode mode = ConnMode::kLoopback;
  std::string gpustack_api_host = "localhost";
  int gpustack_api_port = 30080;
  std::chrono::milliseconds readiness_timeout{30000};  // a probe slower than this is a failure
  std::chrono::milliseconds probe_every{2000};
  std::chrono::milliseconds request_timeout{300000};
};
Result<kube::ClientConfig> MemberClientConfig(const MemberSpec& spec, const Connection& connection);

// The kinds a member serves that the gateway reads (worker.gpustack.ai/v1).
struct MemberKind {
  std::string resource;  // "instancetypes"
  std::string kind;      // "InstanceType"
  bool namespaced;
};
const std::vector<MemberKind>& MemberKinds();

struct MemberState {
  std::string name;
  std::string state;  // Ready, Connecting, Stale, Invalid
  std::string since;  // when it entered that state
  std::string reason;
  std::map<std::string, size_t> objects;  // by resource
  Json ToJson() const;
};

// One member cluster: its client, an informer per kind, and a probe of its v1 API. Everything
// runs on its own threads: a member that hangs never holds the others or a request.
class Member {
 public:
  Member(MemberSpec spec, Connection connection, std::function<void()> on_change);
  ~Member();
  Member(const Member&) = delete;
  Member& operator=(const Member&) = delete;

  const MemberSpec& spec() const { return spec_; }
  // Asks its threads to end; the destructor waits for them.
  void RequestStop();
  // The last objects seen of `resource`; kept while the member is stale.
  std::vector<kube::ObjectPtr> Objects(const std::string& resource) const;
  Freshness freshness() const;
  MemberState state() const;

 private:
  void Run(std::stop_token stop);
  void SetState(std::string state, std::string reason);

  MemberSpec spec_;
  Connection connection_;
  std::function<void()> on_change_;
  std::unique_ptr<kube::Client> client_;
  std::map<std::string, std::unique_ptr<kube::Informer>> informers_;  // by resource
  mutable std::mutex mutex_;
  std::condition_variable_any wake_;
  std::string state_ = "Connecting", since_, reason_;
  std::string stale_since_;  // first failure since the last success
  std::jthread thread_;
};

}  // namespace gpustack::gateway

#endif  // GPUSTACK_HOST_GATEWAY_MEMBERS_H_
