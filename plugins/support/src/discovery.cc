#include "gpustack_support/discovery.h"

namespace gpustack::support {

DiscardingSink::DiscardingSink()
    : raw_{sizeof(gpustack_discovery_sink), nullptr, nullptr,
           [](void*, const gpustack_accelerator_group*) {
             return static_cast<gpustack_status>(GPUSTACK_STATUS_OK);
           }},
      sink_(raw_) {}

}  // namespace gpustack::support
