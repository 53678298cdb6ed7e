// "A detector error is not 'no accelerators'" (docs/behaviour.md §3.4): per manufacturer, the last
// discovery that succeeded stays published until a later pass succeeds, and only a clean pass
// that finds nothing removes a manufacturer's devices. Pure.
#ifndef GPUSTACK_HOST_RUNTIME_LAST_GOOD_H_
#define GPUSTACK_HOST_RUNTIME_LAST_GOOD_H_

#include <map>
#include <string>
#include <vector>

#include "host/common/result.h"
#include "host/runtime/types.h"

namespace gpustack::runtime {

class LastGoodDiscovery {
 public:
  struct Entry {
    std::vector<sdk::AcceleratorGroup> groups;  // what is published
    bool discovered = false;                    // a pass has succeeded at least once
    bool stale = false;                         // the latest pass failed
    Error last_error;                           // why, when stale
    uint64_t failed_passes = 0;                 // consecutive failures
  };

  // Records one pass and returns what the node publishes for `manufacturer` now.
  const Entry& Update(const std::string& manufacturer,
                      const Result<std::vector<sdk::AcceleratorGroup>>& pass);
  const std::map<std::string, Entry>& entries() const { return entries_; }
  // Applies a health change to the published card, wherever it is; false when no such card.
  bool SetHealth(const std::string& card_id, gpustack_health health, const std::string& reason);

 private:
  std::map<std::string, Entry> entries_;
};

}  // namespace gpustack::runtime

#endif  // GPUSTACK_HOST_RUNTIME_LAST_GOOD_H_
