// What the node daemon tells the cluster (docs/behaviour.md §2.1, §3.4): the node's `Devices`
// object (spec = what the plugins found, status = the ledger, plus which plugins run and why not)
// and the node labels of docs/behaviour.md §3.4, all by server-side apply under the daemon's own
// field manager, so labels it stops publishing are removed and nobody else's fields are touched.
// Writes only on change.
#ifndef GPUSTACK_HOST_NODE_PUBLISHER_H_
#define GPUSTACK_HOST_NODE_PUBLISHER_H_

#include <nlohmann/json.hpp>

#include <string>

#include "host/common/result.h"
#include "host/enforcement/enforcement.h"
#include "host/kube/client.h"
#include "host/ledger/model.h"
#include "host/runtime/node_runtime.h"

namespace gpustack::node {

inline constexpr const char* kFieldManager = "gpustack-device-manager";

// The Devices status: the ledger's groups, one entry per plugin, a PluginsReady condition, and
// a SlicesEnforced condition when a plugin slices: False, saying why, where slices are counted
// but nothing binds them (docs/enforcement.md). Pure; `now` is the RFC 3339 time a changed
// condition carries.
nlohmann::json DevicesStatusJson(const runtime::NodeReport& report,
                                 const ledger::DevicesStatus& status, const std::string& now,
                                 const std::vector<enforcement::State>& enforcement = {});

class Publisher {
 public:
  Publisher(kube::Client& client, std::string node_name);

  // Applies the Devices object, its status and the Node's labels where they changed. A node with
  // no accelerator has no Devices object (one published earlier is deleted).
  Status Publish(const runtime::NodeReport& report, const ledger::DevicesStatus& status,
                 const std::vector<enforcement::State>& enforcement = {});

 private:
  kube::Client& client_;
  const std::string node_name_;
  std::string node_uid_;
  nlohmann::json last_spec_, last_status_, last_labels_;
  bool published_ = false;
};

}  // namespace gpustack::node

#endif  // GPUSTACK_HOST_NODE_PUBLISHER_H_
