#include "host/operator/node_record.h"

#include <functional>

#include "host/common/json_path.h"
#include "host/operator/reconciler.h"

namespace gpustack::op {

nlohmann::json NodeRecord::Parse() const { return nlohmann::json::parse(text.Text()); }

NodeRecord NodeRecordOf(const nlohmann::json& node) {
  NodeRecord record;
  record.name = StringAt(node, {"metadata", "name"});
  record.resource_version = StringAt(node, {"metadata", "resourceVersion"});
  record.hostname = StringAt(node, {"metadata", "labels", "kubernetes.io/hostname"});
  record.pass_digest = std::hash<std::string>{}(NodePassView(node).dump());
  record.text = PackedText::Of(node.dump());
  return record;
}

}  // namespace gpustack::op
