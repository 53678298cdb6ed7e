#include "host/ledger/chosen.h"

#include <algorithm>

namespace gpustack::ledger {

std::vector<std::string> Chosen::CardsFor(const std::string& container) const {
  std::vector<std::string> cards;
  for (const auto& pod : pods) {
    auto it = pod.find(container);
    if (it == pod.end()) continue;
    for (const Charge& c : it->second) {
      if (std::find(cards.begin(), cards.end(), c.accelerator_id) == cards.end())
        cards.push_back(c.accelerator_id);
    }
  }
  return cards;
}

std::string ToAnnotation(const Chosen& chosen) {
  nlohmann::json pods = nlohmann::json::array();
  for (size_t i = 0; i < chosen.pods.size(); ++i) {
    nlohmann::json containers = nlohmann::json::array();
    for (const auto& [container, charges] : chosen.pods[i]) {
      containers.push_back(
          ToJson(Allocation{{chosen.workload_uid + "/" + std::to_string(i), container}, charges}));
    }
    pods.push_back(std::move(containers));
  }
  return nlohmann::json{{"workload", chosen.workload_uid},
                        {"podSet", chosen.pod_set},
                        {"node", chosen.node},
                        {"pods", pods}}
      .dump();
}

Result<Chosen> ChosenFromAnnotation(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return Error{std::string(kChosenAnnotation) + " is not a JSON object"};
  Chosen chosen;
  for (auto [field, out] :
       {std::pair{"workload", &chosen.workload_uid}, std::pair{"podSet", &chosen.pod_set},
        std::pair{"node", &chosen.node}}) {
    auto it = j.find(field);
    if (it == j.end() || !it->is_string() || it->get<std::string>().empty())
      return Error{std::string(kChosenAnnotation) + ": " + field + " must be a non-empty string"};
    *out = it->get<std::string>();
  }
  auto pods = j.find("pods");
  if (pods == j.end() || !pods->is_array())
    return Error{std::string(kChosenAnnotation) + ": pods must be a list"};
  for (const nlohmann::json& pod : *pods) {
    if (!pod.is_array()) return Error{std::string(kChosenAnnotation) + ": a pod must be a list"};
    std::map<std::string, std::vector<Charge>> containers;
    for (const nlohmann::json& entry : pod) {
      auto allocation = AllocationFromJson(entry);
      if (!allocation) return Error{std::string(kChosenAnnotation) + ": " + allocation.error()};
      containers[allocation->owner.container] = std::move(allocation->charges);
    }
    chosen.pods.push_back(std::move(containers));
  }
  return chosen;
}

}  // namespace gpustack::ledger
