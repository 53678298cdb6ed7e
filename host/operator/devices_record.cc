#include "host/operator/devices_record.h"

#include <functional>
#include <utility>

#include "host/common/json_path.h"
#include "host/ledger/model.h"

namespace gpustack::op {

using Json = nlohmann::json;

DevicesRecord DevicesRecordOf(const Json& devices) {
  DevicesRecord out;
  out.name = StringAt(devices, {"metadata", "name"});
  out.resource_version = StringAt(devices, {"metadata", "resourceVersion"});
  static const Json kNoSpec = Json::object();
  const Json& spec_json =
      devices.is_object() && devices.contains("spec") ? devices["spec"] : kNoSpec;
  const Json& status_json = JsonAt(devices, {"status"});
  const Json& claims_json = JsonAt(devices, {"metadata", "annotations", ledger::kClaimsAnnotation});
  out.digest = std::hash<std::string>{}(spec_json.dump() + '\n' + status_json.dump() + '\n' +
                                        claims_json.dump());

  auto spec = ledger::SpecFromJson(spec_json);
  if (!spec) {
    // Without a spec nothing is known of the cards: the node has none.
    out.problem = "Devices " + out.name + ": spec: " + spec.error();
    return out;
  }
  Result<ledger::DevicesStatus> published = ledger::DevicesStatus{};
  if (status_json.is_object() && status_json.contains("groups"))
    published = ledger::StatusFromJson(status_json);
  // Gate 3 counts the claims' holdings beside the Pods' records; unreadable, nothing is free.
  if (auto claims = ledger::ClaimsAllocatedOf(devices); !claims) {
    published = claims.failure();
  } else {
    out.claims = std::move(*claims);
  }
  auto built = published ? ledger::PublishedLedger(out.name, *spec, *published)
                         : Result<std::shared_ptr<const ledger::NodeLedger>>(published.failure());
  if (!built) {
    // A status that cannot be believed: the cards stay in their pools (no flavor, quota or
    // queue changes), but none counts as free until the node publishes a sound ledger.
    out.problem = "Devices " + out.name + ": status: " + built.error() +
                  " (its cards are counted as taken until it publishes a sound status)";
    for (ledger::Group& g : spec->groups)
      for (ledger::Accelerator& a : g.accelerators) a.unhealthy = true;
    built = std::shared_ptr<const ledger::NodeLedger>(
        std::make_shared<ledger::NodeLedger>(out.name, std::move(*spec)));
  }
  out.ledger = std::move(*built);
  return out;
}

}  // namespace gpustack::op
