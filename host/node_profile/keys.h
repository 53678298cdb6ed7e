// The names a node's hardware is grouped under (docs/behaviour.md §3.3, §3.4): the CPU key (gKey),
// the accelerator group id and key (aKey), and the nominal VRAM size labels and pools use. Pure.
#ifndef GPUSTACK_HOST_NODE_PROFILE_KEYS_H_
#define GPUSTACK_HOST_NODE_PROFILE_KEYS_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace gpustack::node_profile {

// Lower-case, every run of characters outside [a-z0-9] becomes one '-', no '-' at either end,
// at most `max` characters (cut at a '-' boundary when one is near): a label-value segment.
std::string LabelSegment(std::string_view text, size_t max = 63);

// "AMD EPYC 7763 64-Core Processor" -> "amd-epyc-7763"; "Intel(R) Xeon(R) Platinum 8259CL CPU
// @ 2.50GHz" -> "intel-xeon-platinum-8259cl". `vendor` is NFD's cpuid vendor name ("Intel",
// "AMD"; empty when unknown); without a name the key is <vendor>-<family>-<model>; with nothing
// at all, "generic".
std::string CpuKey(std::string_view vendor, std::string_view name, std::string_view family,
                   std::string_view model);

// "NVIDIA H100 80GB HBM3" (manufacturer "nvidia") -> "h100-80gb-hbm3"; "Tesla T4" ->
// "tesla-t4". With `with_memory` the size in whole GiB is appended: "tesla-t4-16g".
std::string AcceleratorGroupId(std::string_view manufacturer, std::string_view product,
                               uint64_t memory_mib = 0, bool with_memory = false);
// "<manufacturer>-<group id>": "nvidia-a10g".
std::string AcceleratorKey(std::string_view manufacturer, std::string_view group_id);

// The label form of a card's memory at its largest binary unit, to the nearest whole unit:
// 24576 -> "24Gi", 16368 -> "16Gi" (RX 7800 XT), 512 -> "512Mi".
std::string MemoryQuantity(uint64_t mib);

}  // namespace gpustack::node_profile

#endif  // GPUSTACK_HOST_NODE_PROFILE_KEYS_H_
