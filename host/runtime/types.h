// What the node runtime knows about plugins and their cards. The values that cross the runtime's
// backend seam are the SDK's own (gpustack/plugin_types.hpp and the SDK client's Identity and
// MetricsSnapshot): the loader hands on a plugin's answers exactly as the SDK client read and
// checked them, and the in-memory fake backend speaks the same values, so a plugin's answer is
// converted from the ABI's C structs once (docs/decisions.md D26). What only the host has is
// added here, never copied.
#ifndef GPUSTACK_HOST_RUNTIME_TYPES_H_
#define GPUSTACK_HOST_RUNTIME_TYPES_H_

#include <gpustack/client/plugin.hpp>
#include <gpustack/plugin_types.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "host/ledger/model.h"

namespace gpustack::runtime {

// The calls the runtime makes into a plugin: its hooks, and loading, init and shutdown.
using client::Hook;
using client::HookName;  // "discover"

// A plugin's identity as the host uses it: what identify reported, checked against the manifest
// by the SDK client, plus the ABI version negotiated.
struct PluginIdentity : client::Identity {
  std::string abi;  // "1.2"

  bool Has(gpustack_capabilities capability) const { return (capabilities & capability) != 0; }
  bool runtime_injects_driver() const {
    return (runtime_flags & GPUSTACK_RUNTIME_INJECTS_DRIVER) != 0;
  }
  bool one_card_per_container() const {
    return (admission_flags & GPUSTACK_ADMIT_ONE_CARD_PER_CONTAINER) != 0;
  }
};
std::string CapabilitiesText(gpustack_capabilities capabilities);  // "shared,sliced" or "-"

std::string_view HealthName(gpustack_health health);  // "Healthy"

size_t CardCount(const std::vector<sdk::AcceleratorGroup>& groups);

// The one sharing-mode vocabulary inside the host is ledger::Mode; the ABI's gpustack_grant_mode
// has the same numbers, so a grant crosses with a cast checked here at compile time.
gpustack_grant_mode ToGrantMode(ledger::Mode mode);

using PluginSettings = std::map<std::string, std::string>;

}  // namespace gpustack::runtime

#endif  // GPUSTACK_HOST_RUNTIME_TYPES_H_
