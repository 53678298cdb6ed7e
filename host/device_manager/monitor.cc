#include "host/device_manager/monitor.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <sstream>

#include "host/common/text.h"

namespace gpustack::device_manager {
namespace {

std::string NowRfc3339() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

void Put(nlohmann::json& out, const char* key, const sdk::Measurement& f) {
  if (f) out[key] = *f;
}

std::string Cell(const sdk::Measurement& f, const char* format) {
  if (!f) return "-";
  char text[32];
  std::snprintf(text, sizeof text, format, *f);
  return text;
}

}  // namespace

MonitorRound SampleRound(runtime::NodeRuntime& node, bool include_processes) {
  return {NowRfc3339(), node.Sample(include_processes)};
}

nlohmann::json ToJson(const MonitorRound& round) {
  nlohmann::json cards = nlohmann::json::array();
  for (const runtime::CardSample& c : round.samples.cards) {
    const sdk::DeviceSample& s = c.sample;
    nlohmann::json card = {{"id", s.accelerator_id},
                           {"manufacturer", c.manufacturer},
                           {"product", c.product},
                           {"index", c.index},
                           {"unhealthy", s.health == GPUSTACK_HEALTH_UNHEALTHY}};
    Put(card, "memory", s.memory_total_mib);
    Put(card, "memoryUsage", s.memory_used_mib);
    Put(card, "memoryUtilization", s.memory_utilization_percent);
    Put(card, "coresUtilization", s.cores_utilization_percent);
    Put(card, "temperature", s.temperature_celsius);
    Put(card, "powerUsage", s.power_watts);
    if (!c.processes.empty()) {
      nlohmann::json processes = nlohmann::json::array();
      for (const sdk::ProcessSample& p : c.processes) {
        nlohmann::json process = {{"pid", p.pid}};
        if (!p.partition_id.empty()) process["partition"] = p.partition_id;
        Put(process, "memoryUsage", p.memory_used_mib);
        Put(process, "coresUtilization", p.cores_utilization_percent);
        processes.push_back(std::move(process));
      }
      card["processes"] = std::move(processes);
    }
    cards.push_back(std::move(card));
  }
  nlohmann::json out = {{"time", round.time}, {"accelerators", cards}};
  if (!round.samples.errors.empty()) out["errors"] = round.samples.errors;
  if (!round.samples.warnings.empty()) out["warnings"] = round.samples.warnings;
  return out;
}

std::string ToText(const MonitorRound& round) {
  // The id column is as wide as the longest id: cards of one product differ only at the end.
  size_t id_width = 2;
  for (const runtime::CardSample& c : round.samples.cards) {
    id_width = std::max(id_width, Printable(c.sample.accelerator_id).size());
  }
  const int width = static_cast<int>(id_width);
  std::ostringstream out;
  char line[512];
  out << round.time << "\n";
  std::snprintf(line, sizeof line, "%-10s %-3s %-*s %9s %9s %6s %6s %6s %8s %s\n", "VENDOR", "IDX",
                width, "ID", "MEM MiB", "USED MiB", "MEM%", "CORE%", "TEMP C", "POWER W", "HEALTH");
  out << line;
  for (const runtime::CardSample& c : round.samples.cards) {
    const sdk::DeviceSample& s = c.sample;
    std::snprintf(line, sizeof line, "%-10.10s %-3u ", Printable(c.manufacturer).c_str(), c.index);
    out << line << Printable(s.accelerator_id)
        << std::string(id_width - Printable(s.accelerator_id).size(), ' ');
    std::snprintf(line, sizeof line, " %9s %9s %6s %6s %6s %8s %s\n",
                  Cell(s.memory_total_mib, "%.0f").c_str(), Cell(s.memory_used_mib, "%.0f").c_str(),
                  Cell(s.memory_utilization_percent, "%.1f").c_str(),
                  Cell(s.cores_utilization_percent, "%.0f").c_str(),
                  Cell(s.temperature_celsius, "%.0f").c_str(), Cell(s.power_watts, "%.1f").c_str(),
                  s.health == GPUSTACK_HEALTH_UNHEALTHY ? "unhealthy" : "ok");
    out << line;
    for (const sdk::ProcessSample& p : c.processes) {
      std::snprintf(line, sizeof line, "    pid %-8u %9s MiB %6s%%  ", p.pid,
                    Cell(p.memory_used_mib, "%.0f").c_str(),
                    Cell(p.cores_utilization_percent, "%.0f").c_str());
      out << line << Printable(p.partition_id) << "\n";
    }
  }
  if (round.samples.cards.empty()) {
    out << (round.samples.errors.empty() ? "no accelerators\n"
                                         : "no accelerators sampled: see the errors below\n");
  }
  for (const std::string& w : round.samples.warnings) out << "warning: " << Printable(w) << "\n";
  for (const std::string& e : round.samples.errors) out << "error: " << Printable(e) << "\n";
  return out.str();
}

}  // namespace gpustack::device_manager
