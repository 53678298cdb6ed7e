#include "host/device_manager/last_good.h"

namespace gpustack::device_manager {

const LastGoodDiscovery::Entry& LastGoodDiscovery::Update(
    const std::string& manufacturer, const Result<std::vector<sdk::AcceleratorGroup>>& pass) {
  Entry& entry = entries_[manufacturer];
  if (pass) {
    entry = Entry{*pass, false, {}, 0};
  } else {
    entry.stale = true;
    entry.last_error = pass.error();
    ++entry.failed_passes;
  }
  return entry;
}

}  // namespace gpustack::device_manager
