// Renders a DetectReport for people (text) and for programs (JSON). Pure.
#ifndef GPUSTACK_HOST_DEVICE_MANAGER_DETECT_REPORT_H_
#define GPUSTACK_HOST_DEVICE_MANAGER_DETECT_REPORT_H_

#include <nlohmann/json.hpp>

#include <string>

#include "host/device_manager/detect.h"

namespace gpustack::device_manager {

nlohmann::json ToJson(const DetectReport& report);
std::string ToText(const DetectReport& report);

}  // namespace gpustack::device_manager

#endif  // GPUSTACK_HOST_DEVICE_MANAGER_DETECT_REPORT_H_
