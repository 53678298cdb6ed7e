// What the node daemon tells the cluster (docs/behaviour.md §2.1, §3.4): the node's `Devices`
// object (spec = what the plugins found, status = the ledger, plus which plugins run and why not)
// and the node labels of docs/behaviour.md §3.4, all by server-side apply under the daemon's own
// field manager, so labels it stops publishing are removed and nobody else's fields are touched.
// Writes only on change.
#ifndef GPUSTACK_HOST_NODE_PUBLISHER_H_
#define GPUSTACK_HOST_NODE_PUBLISHER_H_

#include <nlohmann/json.hpp>

#include <map>

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
  // `claims`: what ResourceClaims hold, published as the Devices object's
  // device.gpustack.ai/claims.allocated annotation for gate 3 (docs/dra.md).
  Status Publish(const runtime::NodeReport& report, const ledger::DevicesStatus& status,
                 const std::vector<enforcement::State>& enforcement = {},
                 const std::vector<ledger::Allocation>& claims = {});

  // The node's ResourceSlices (docs/dra.md), from `slices` (host/dra/slices.h), owned by the
  // Node: a pool any of whose slices changed is applied whole at a new generation (the
  // scheduler reads a pool at its highest generation only); the first call also deletes this
  // driver's slices of the node that `slices` no longer has (a manufacturer gone since the last
  // life), later calls those it published before.
  Status PublishResourceSlices(std::vector<nlohmann::json> slices);
  // False once the apiserver dropped a slice's sharedCounters (DRAPartitionableDevices off):
  // partitions are then left out, or the scheduler would allocate overlapping ones.
  bool partitions_served() const { return partitions_served_; }

 private:
  kube::Client& client_;
  const std::string node_name_;
  std::string node_uid_;
  nlohmann::json last_spec_, last_status_, last_labels_;
  std::string last_claims_;
  bool published_ = false;
  Status ReadNodeUid();
  std::map<std::string, nlohmann::json> last_slices_;  // by name: the spec applied, generation 0
  bool slices_swept_ = false;
  int64_t slice_generation_ = 0;
  bool partitions_served_ = true;
};

}  // namespace gpustack::node

#endif  // GPUSTACK_HOST_NODE_PUBLISHER_H_
