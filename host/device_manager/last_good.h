// "A detector error is not 'no accelerators'" (reference §3.4): per manufacturer, the last
// discovery that succeeded stays published until a later pass succeeds, and only a clean pass
// that finds nothing removes a manufacturer's devices. Pure.
#ifndef GPUSTACK_HOST_DEVICE_MANAGER_LAST_GOOD_H_
#define GPUSTACK_HOST_DEVICE_MANAGER_LAST_GOOD_H_

#include <gpustack/plugin_types.hpp>

#include <map>
#include <string>
#include <vector>

#include "host/common/result.h"

namespace gpustack::device_manager {

class LastGoodDiscovery {
 public:
  struct Entry {
    std::vector<sdk::AcceleratorGroup> groups;  // what is published
    bool stale = false;                         // the latest pass failed
    std::string last_error;                     // why, when stale
    uint64_t failed_passes = 0;                 // consecutive failures
  };

  // Records one pass and returns what the node publishes for `manufacturer` now.
  const Entry& Update(const std::string& manufacturer,
                      const Result<std::vector<sdk::AcceleratorGroup>>& pass);
  const std::map<std::string, Entry>& entries() const { return entries_; }

 private:
  std::map<std::string, Entry> entries_;
};

}  // namespace gpustack::device_manager

#endif  // GPUSTACK_HOST_DEVICE_MANAGER_LAST_GOOD_H_
