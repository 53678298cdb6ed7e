// The second kubelet front end (docs/dra.md): a DRA driver, "gpustack.ai", beside the device
// plugin and on the same allocator. The kubelet finds it through its plugin-registration
// directory and calls NodePrepareResources / NodeUnprepareResources (k8s.io/kubelet dra v1) for
// the ResourceClaims of the Pods it starts; the scheduler allocated the claims from the
// ResourceSlices the daemon publishes (host/dra/slices.h).
//
// Safety, as Allocate's: a claim's cards are charged in the node ledger under the allocator's
// mutex, the record of prepared claims is on disk (written, synced, renamed) before the kubelet
// gets an answer, and the ledger is rebuilt from it at every start before either front end
// serves. Prepare and unprepare are idempotent: the kubelet repeats them after a restart.
#ifndef GPUSTACK_HOST_NODE_DRA_PLUGIN_H_
#define GPUSTACK_HOST_NODE_DRA_PLUGIN_H_

#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "host/dra/claims.h"
#include "host/node/allocator.h"
#include "host/runtime/node_runtime.h"

namespace gpustack::kubelet_rpc {
class Server;
}

namespace gpustack::node {

struct DraOptions {
  // <kubelet root>/plugins: the driver's own socket is plugins/gpustack.ai/dra.sock.
  std::filesystem::path plugins_dir = "/var/lib/kubelet/plugins";
  // <kubelet root>/plugins_registry: where the kubelet looks for plugins to register.
  std::filesystem::path registry_dir = "/var/lib/kubelet/plugins_registry";
  // Where the container engine reads CDI specs (transient ones).
  std::filesystem::path cdi_dir = "/var/run/cdi";
  // The record of prepared claims (in the daemon's state directory, which outlives it).
  std::filesystem::path record = "/var/lib/gpustack/device-manager/dra-claims.json";
};

// Reads one ResourceClaim (the apiserver in the daemon; a table in tests).
using ClaimReader = std::function<Result<Json>(const std::string& ns, const std::string& name)>;

// What the kubelet gets for one claim: the devices with their CDI names, or an error.
struct PrepareOutcome {
  std::vector<dra::AllocatedDevice> devices;
  std::vector<std::vector<std::string>> cdi_devices;  // per device
  std::string error;
};

class DraFrontEnd {
 public:
  DraFrontEnd(runtime::NodeRuntime& runtime, Allocator& allocator, ClaimReader read_claim,
              std::string node_name, DraOptions options);
  ~DraFrontEnd();  // stops serving and removes its sockets
  DraFrontEnd(const DraFrontEnd&) = delete;
  DraFrontEnd& operator=(const DraFrontEnd&) = delete;

  // Reads the record and charges every prepared claim in the ledger again; removes CDI specs no
  // prepared claim names. Before Start, and before the device plugin serves. How many claims
  // were restored; an error when the record exists but cannot be read as a whole (nothing is
  // served then: a guess could double-book a card).
  Result<size_t> Restore();
  // Serves the DRA and registration services on their sockets.
  Status Start();
  void Stop();

  // The kubelet's two calls (the RPC services translate to these).
  PrepareOutcome Prepare(const dra::ClaimRef& claim);
  std::string Unprepare(const dra::ClaimRef& claim);  // empty: done

  // The kubelet said it registered the driver (GetInfo answered, NotifyRegistrationStatus true).
  bool registered() const { return registered_.load(); }
  void set_registered(bool registered) { registered_ = registered; }
  size_t prepared_claims() const;
  std::filesystem::path socket_path() const;
  std::filesystem::path registration_socket_path() const;

 private:
  PrepareOutcome OutcomeOf(const dra::PreparedClaim& claim) const;
  Status WriteRecordLocked();

  runtime::NodeRuntime& runtime_;
  Allocator& allocator_;
  ClaimReader read_claim_;
  const std::string node_name_;
  const DraOptions options_;
  std::atomic<bool> registered_{false};
  mutable std::mutex mutex_;  // prepares, unprepares and the record, one at a time
  std::map<std::string, dra::PreparedClaim> claims_;  // by uid
  std::unique_ptr<kubelet_rpc::Server> server_;
};

}  // namespace gpustack::node

#endif  // GPUSTACK_HOST_NODE_DRA_PLUGIN_H_
