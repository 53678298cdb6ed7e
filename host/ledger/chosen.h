// The cards gate 3 (the gpustack-node-devices AdmissionCheck) counted a Workload's Pods on
// (docs/decisions.md D13): Kueue copies this annotation onto each Pod of the PodSet with the
// node pin, and the node's allocator prefers exactly these cards, so gate 5 settles where gate 3
// counted. Pure JSON; the ledger's own Allocation shape per container.
#ifndef GPUSTACK_HOST_LEDGER_CHOSEN_H_
#define GPUSTACK_HOST_LEDGER_CHOSEN_H_

#include <map>
#include <string>
#include <vector>

#include "host/common/result.h"
#include "host/ledger/model.h"

namespace gpustack::ledger {

inline constexpr const char* kChosenAnnotation = "device.gpustack.ai/accelerator.chosen";

struct Chosen {
  std::string workload_uid;
  std::string pod_set;
  std::string node;
  // One entry per Pod of the PodSet: what each requesting container was counted on.
  std::vector<std::map<std::string, std::vector<Charge>>> pods;

  // The cards any Pod of the set was counted on for `container`, in first-seen order.
  std::vector<std::string> CardsFor(const std::string& container) const;
};

std::string ToAnnotation(const Chosen& chosen);
// Refuses what ToAnnotation would not write, naming the field.
Result<Chosen> ChosenFromAnnotation(const std::string& text);

}  // namespace gpustack::ledger

#endif  // GPUSTACK_HOST_LEDGER_CHOSEN_H_
