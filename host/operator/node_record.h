// What the worker keeps of a Node: its trimmed JSON (TrimNodeForWorkerCache) packed, and the
// few fields read on every pass or admission beside it. At 1,000 nodes the cached Nodes as JSON
// were the largest part of the worker's heap after the served texts (docs/footprint.md); a pass
// unpacks a Node only where its facts changed.
#ifndef GPUSTACK_HOST_OPERATOR_NODE_RECORD_H_
#define GPUSTACK_HOST_OPERATOR_NODE_RECORD_H_

#include <nlohmann/json.hpp>

#include <cstddef>
#include <memory>
#include <string>

#include "host/common/packed_text.h"
#include "host/kube/informer.h"

namespace gpustack::op {

struct NodeRecord {
  std::string name;
  std::string resource_version;
  std::string hostname;  // its kubernetes.io/hostname label: gate 3 reads it at every admission
  // A 64-bit hash of what a pass reads of the Node (SameForPass): a version with the same digest
  // starts no pass. A collision, at odds of 2^-64 per change, would leave that change to the next
  // pass another event starts (as with DevicesRecord's digest).
  size_t pass_digest = 0;
  PackedText text;

  nlohmann::json Parse() const;
};
using NodeRecordPtr = std::shared_ptr<const NodeRecord>;
using NodeInformer = kube::BasicInformer<NodeRecord>;

// Pure: the record of a Node already trimmed.
NodeRecord NodeRecordOf(const nlohmann::json& node);

// The informer's key and version of a record (host/kube/informer.h).
inline std::string CacheKey(const NodeRecord& record) { return record.name; }
inline std::string CacheVersion(const NodeRecord& record) { return record.resource_version; }

}  // namespace gpustack::op

#endif  // GPUSTACK_HOST_OPERATOR_NODE_RECORD_H_
