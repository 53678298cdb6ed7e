#include "host/device_manager/monitor.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <sstream>

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

void Put(nlohmann::json& out, const char* key, const sdk::Measurement& m) {
  if (m) out[key] = *m;
}

std::string Cell(const sdk::Measurement& m, const char* format) {
  if (!m) return "-";
  char text[32];
  std::snprintf(text, sizeof text, format, *m);
  return text;
}

}  // namespace

MonitorRound SampleRound(NodeSession& session, bool include_processes) {
  MonitorRound round;
  round.time = NowRfc3339();
  for (const PluginReport& report : session.report.plugins) {
    auto running = session.running.find(report.name);
    if (running == session.running.end() || report.discovery_status != "OK" ||
        report.groups.empty()) {
      continue;
    }
    auto snapshot = running->second->SampleMetrics({{}, include_processes});
    if (!snapshot) {
      round.errors.push_back(report.name + ": " + snapshot.error());
      continue;
    }
    for (const sdk::AcceleratorGroup& group : report.groups) {
      for (const sdk::Accelerator& card : group.accelerators) {
        CardSample sample{report.name, group.product, card.index, {}, {}};
        bool found = false;
        for (const sdk::DeviceSample& s : snapshot->devices) {
          if (s.accelerator_id == card.id) {
            sample.sample = s;
            found = true;
          }
        }
        if (!found) continue;  // the plugin no longer sees it; detect will say why
        for (const sdk::ProcessSample& p : snapshot->processes) {
          if (p.accelerator_id == card.id) sample.processes.push_back(p);
        }
        round.cards.push_back(std::move(sample));
      }
    }
  }
  return round;
}

nlohmann::json ToJson(const MonitorRound& round) {
  nlohmann::json cards = nlohmann::json::array();
  for (const CardSample& c : round.cards) {
    nlohmann::json card = {{"id", c.sample.accelerator_id},
                           {"manufacturer", c.manufacturer},
                           {"product", c.product},
                           {"index", c.index},
                           {"unhealthy", c.sample.health == GPUSTACK_HEALTH_UNHEALTHY}};
    Put(card, "memory", c.sample.memory_total_mib);
    Put(card, "memoryUsage", c.sample.memory_used_mib);
    Put(card, "memoryUtilization", c.sample.memory_utilization_percent);
    Put(card, "coresUtilization", c.sample.cores_utilization_percent);
    Put(card, "temperature", c.sample.temperature_celsius);
    Put(card, "powerUsage", c.sample.power_watts);
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
  if (!round.errors.empty()) out["errors"] = round.errors;
  return out;
}

std::string ToText(const MonitorRound& round) {
  std::ostringstream out;
  char line[256];
  std::snprintf(line, sizeof line, "%s\n%-10s %-3s %-40s %9s %9s %6s %6s %6s %8s %s\n",
                round.time.c_str(), "VENDOR", "IDX", "ID", "MEM MiB", "USED MiB", "MEM%", "CORE%",
                "TEMP C", "POWER W", "HEALTH");
  out << line;
  for (const CardSample& c : round.cards) {
    const sdk::DeviceSample& s = c.sample;
    std::snprintf(line, sizeof line, "%-10.10s %-3u %-40.40s %9s %9s %6s %6s %6s %8s %s\n",
                  c.manufacturer.c_str(), c.index, s.accelerator_id.c_str(),
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
      out << line << p.partition_id << "\n";
    }
  }
  if (round.cards.empty()) out << "no accelerators\n";
  for (const std::string& e : round.errors) out << "error: " << e << "\n";
  return out.str();
}

}  // namespace gpustack::device_manager
