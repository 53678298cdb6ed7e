#include "host/runtime/quarantine.h"

#include <gpustack/small_file.hpp>
#include <nlohmann/json.hpp>

namespace gpustack::runtime {
namespace {

using nlohmann::json;

constexpr size_t kMaxBytes = 1 << 20;

}  // namespace

Status QuarantineStore::Load() {
  entries_.clear();
  auto text = ReadSmallFile(file_, kMaxBytes, "quarantine list");
  if (!text) return text.code() == Code::kNotFound ? Status(Ok{}) : Status(text.failure());
  const json doc = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("plugins") || !doc["plugins"].is_array()) {
    return Error{"quarantine list " + file_.string() + ": not {\"plugins\": [...]}; ignored",
                 Code::kDataLoss};
  }
  std::string bad;
  for (const json& e : doc["plugins"]) {
    if (!e.is_object()) continue;
    // A field of the wrong type (an administrator's edit) drops that entry, loudly, not the host.
    auto is = [&](const char* key, bool (json::*type)() const noexcept) {
      return !e.contains(key) || (e[key].*type)();
    };
    const bool typed = is("plugin", &json::is_string) && is("library", &json::is_string) &&
                       is("device", &json::is_number_unsigned) &&
                       is("inode", &json::is_number_unsigned) &&
                       is("size", &json::is_number_unsigned) &&
                       is("mtimeNs", &json::is_number_integer) && is("hook", &json::is_string) &&
                       is("reason", &json::is_string) && is("since", &json::is_string);
    if (!typed) {
      bad += (bad.empty() ? "" : ", ") + e.dump();
      continue;
    }
    QuarantineEntry entry;
    entry.plugin = e.value("plugin", "");
    entry.library = e.value("library", "");
    entry.identity = {e.value("device", uint64_t{0}), e.value("inode", uint64_t{0}),
                      e.value("size", uint64_t{0}), e.value("mtimeNs", int64_t{0})};
    entry.hook = e.value("hook", "");
    entry.reason = e.value("reason", "");
    entry.since = e.value("since", "");
    if (!entry.plugin.empty()) entries_[entry.plugin] = std::move(entry);
  }
  if (!bad.empty()) {
    return Error{"quarantine list " + file_.string() +
                     ": entries with a field of the wrong type "
                     "ignored (fix or remove them): " +
                     bad,
                 Code::kDataLoss};
  }
  return Ok{};
}

Status QuarantineStore::Save() const {
  json plugins = json::array();
  for (const auto& [name, e] : entries_) {
    plugins.push_back({{"plugin", e.plugin},
                       {"library", e.library},
                       {"device", e.identity.device},
                       {"inode", e.identity.inode},
                       {"size", e.identity.size},
                       {"mtimeNs", e.identity.mtime_ns},
                       {"hook", e.hook},
                       {"reason", e.reason},
                       {"since", e.since}});
  }
  // 0600: whoever can write this list can lift a quarantine.
  std::string why;
  if (!sdk::ReplaceSmallFile(file_.string(), json{{"plugins", plugins}}.dump(2) + "\n", &why)) {
    return Error{"quarantine list: " + why, Code::kUnavailable};
  }
  return Ok{};
}

const QuarantineEntry* QuarantineStore::Find(const std::string& plugin) const {
  auto it = entries_.find(plugin);
  return it == entries_.end() ? nullptr : &it->second;
}

void QuarantineStore::Put(QuarantineEntry entry) {
  std::string name = entry.plugin;
  entries_[name] = std::move(entry);
}

bool QuarantineStore::Remove(const std::string& plugin) { return entries_.erase(plugin) > 0; }

}  // namespace gpustack::runtime
