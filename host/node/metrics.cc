#include "host/node/metrics.h"

#include <map>
#include <sstream>

namespace gpustack::node {
namespace {

// Label values escape backslash, double quote and newline.
std::string Escape(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string Number(double value) {
  std::ostringstream out;
  out.precision(15);
  out << value;
  return out.str();
}

struct Family {
  const char* name;
  const char* help;
  sdk::Measurement sdk::DeviceSample::*figure;
};

constexpr Family kFamilies[] = {
    {"gpustack_instance_accelerator_memory_total_mib", "Memory of the accelerator, MiB.",
     &sdk::DeviceSample::memory_total_mib},
    {"gpustack_instance_accelerator_memory_used_mib", "Memory in use on the accelerator, MiB.",
     &sdk::DeviceSample::memory_used_mib},
    {"gpustack_instance_accelerator_memory_utilization_percent",
     "Memory controller utilization of the accelerator, percent.",
     &sdk::DeviceSample::memory_utilization_percent},
    {"gpustack_instance_accelerator_cores_utilization_percent",
     "Compute utilization of the accelerator, percent.",
     &sdk::DeviceSample::cores_utilization_percent},
    {"gpustack_instance_accelerator_temperature_celsius", "Temperature of the accelerator.",
     &sdk::DeviceSample::temperature_celsius},
    {"gpustack_instance_accelerator_power_usage_watts", "Power drawn by the accelerator, W.",
     &sdk::DeviceSample::power_watts},
};

}  // namespace

std::string RenderMetrics(const MetricsInput& input) {
  std::map<std::string, const runtime::CardSample*> samples;
  for (const runtime::CardSample& c : input.round.cards) samples[c.sample.accelerator_id] = &c;
  std::ostringstream out;
  auto labels = [&](const Holder& h, const runtime::CardSample& c) {
    return "{namespace=\"" + Escape(h.ns) + "\",instance_name=\"" + Escape(h.pod) +
           "\",instance_uid=\"" + Escape(h.pod_uid) + "\",node=\"" + Escape(input.node) +
           "\",id=\"" + Escape(h.card_id) + "\",index=\"" + std::to_string(c.index) +
           "\",manufacturer=\"" + Escape(c.manufacturer) + "\",mode=\"" + ledger::ModeName(h.mode) +
           "\"}";
  };
  if (input.sampled) {
    for (const Family& f : kFamilies) {
      bool header = false;
      for (const Holder& h : input.holders) {
        auto it = samples.find(h.card_id);
        if (it == samples.end() || !(it->second->sample.*f.figure)) continue;
        if (!header) {
          out << "# HELP " << f.name << " " << f.help << "\n# TYPE " << f.name << " gauge\n";
          header = true;
        }
        out << f.name << labels(h, *it->second) << " " << Number(*(it->second->sample.*f.figure))
            << "\n";
      }
    }
    bool header = false;
    for (const Holder& h : input.holders) {
      auto it = samples.find(h.card_id);
      if (it == samples.end() || it->second->sample.health == GPUSTACK_HEALTH_UNKNOWN) continue;
      if (!header) {
        out << "# HELP gpustack_instance_accelerator_unhealthy 1 when the accelerator is "
               "unhealthy.\n# TYPE gpustack_instance_accelerator_unhealthy gauge\n";
        header = true;
      }
      out << "gpustack_instance_accelerator_unhealthy" << labels(h, *it->second) << " "
          << (it->second->sample.health == GPUSTACK_HEALTH_UNHEALTHY ? 1 : 0) << "\n";
    }
  }
  const bool ok = input.sampled && input.round.errors.empty();
  out << "# HELP gpustack_instance_metrics_collector_success 1 when the latest sampling round "
         "worked.\n# TYPE gpustack_instance_metrics_collector_success gauge\n"
      << "gpustack_instance_metrics_collector_success{source=\"snapshot\"} " << (ok ? 1 : 0)
      << "\n";
  return out.str();
}

nlohmann::json SnapshotJson(const MetricsInput& input) {
  nlohmann::json cards = nlohmann::json::array();
  for (const runtime::CardSample& c : input.round.cards) {
    nlohmann::json card = {{"id", c.sample.accelerator_id},
                           {"index", c.index},
                           {"manufacturer", c.manufacturer},
                           {"product", c.product},
                           {"health", std::string(runtime::HealthName(c.sample.health))}};
    for (const Family& f : kFamilies) {
      // The family name without its prefix: "memory_used_mib".
      const std::string key =
          std::string(f.name).substr(sizeof("gpustack_instance_accelerator_") - 1);
      if (c.sample.*f.figure) card[key] = *(c.sample.*f.figure);
    }
    cards.push_back(std::move(card));
  }
  return {{"node", input.node},
          {"sampled", input.sampled},
          {"cards", cards},
          {"errors", input.round.errors}};
}

}  // namespace gpustack::node
