// What the worker keeps of a node's Devices object: the ledger a pass reads, built once when the
// object comes in, instead of the object as JSON. At 1,000 nodes of 8 cards each such object is
// about 20 KB of map nodes, and the pass kept its ledger beside it anyway (docs/footprint.md).
#ifndef GPUSTACK_HOST_OPERATOR_DEVICES_RECORD_H_
#define GPUSTACK_HOST_OPERATOR_DEVICES_RECORD_H_

#include <nlohmann/json.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "host/ledger/allocated.h"
#include "host/ledger/ledger.h"

namespace gpustack::op {

struct DevicesRecord {
  std::string name;  // the node's
  std::string resource_version;
  // Null when the spec cannot be read: nothing is known of the node's cards. When the status
  // cannot be believed, the spec's cards all unhealthy (taken) until a sound status comes.
  std::shared_ptr<const ledger::NodeLedger> ledger;
  std::vector<ledger::Allocation> claims;  // what ResourceClaims hold (docs/dra.md)
  std::string problem;                     // why the object cannot be used as it is
  // A 64-bit hash of what the record is made of (spec, status, the claims annotation): a version
  // with the same digest as the one before starts no pass. Kept instead of the texts it hashes
  // (the memory this record saves); a collision, at odds of 2^-64 per change, would leave that
  // change to the next pass another event starts.
  size_t digest = 0;
};

// Pure: the record of a Devices object.
DevicesRecord DevicesRecordOf(const nlohmann::json& devices);

// The informer's key and version of a record (host/kube/informer.h).
inline std::string CacheKey(const DevicesRecord& record) { return record.name; }
inline std::string CacheVersion(const DevicesRecord& record) { return record.resource_version; }

}  // namespace gpustack::op

#endif  // GPUSTACK_HOST_OPERATOR_DEVICES_RECORD_H_
