#include "host/runtime/quarantine.h"

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>

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
    const bool typed =
        e.value("plugin", json("")).is_string() && e.value("library", json("")).is_string() &&
        e.value("device", json(0)).is_number_unsigned() &&
        e.value("inode", json(0)).is_number_unsigned() &&
        e.value("size", json(0)).is_number_unsigned() &&
        e.value("mtimeNs", json(0)).is_number_integer() && e.value("hook", json("")).is_string() &&
        e.value("reason", json("")).is_string() && e.value("since", json("")).is_string();
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
  const std::filesystem::path temporary = file_.string() + ".tmp." + std::to_string(::getpid());
  {
    // 0600 whatever the umask: whoever can write this list can lift a quarantine.
    const int fd =
        ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
      return Error{"cannot write " + temporary.string() + ": " + std::strerror(errno),
                   Code::kUnavailable};
    }
    const std::string text = json{{"plugins", plugins}}.dump(2) + "\n";
    const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    const int error = errno;
    ::close(fd);
    if (!written) {
      ::unlink(temporary.c_str());
      return Error{"cannot write " + temporary.string() + ": " + std::strerror(error),
                   Code::kUnavailable};
    }
  }
  std::error_code ec;
  std::filesystem::rename(temporary, file_, ec);
  if (ec)
    return Error{"cannot replace " + file_.string() + ": " + ec.message(), Code::kUnavailable};
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
