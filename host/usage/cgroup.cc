#include "host/usage/cgroup.h"

#include <algorithm>
#include <optional>
#include <vector>

namespace gpustack::usage {
namespace {

bool IsHex(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
}

// A Pod uid: 36 characters, hex in five dash-separated groups (8-4-4-4-12).
bool IsUid(std::string_view s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? s[i] != '-' : !IsHex(s.substr(i, 1))) return false;
  }
  return true;
}

std::string_view StripSuffix(std::string_view s, std::string_view suffix) {
  if (s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix)
    s.remove_suffix(suffix.size());
  return s;
}

// "pod<uid>" (cgroupfs) or "kubepods-<qos>-pod<uid_underscored>.slice" (systemd).
std::optional<std::string> PodUidOf(std::string_view component) {
  component = StripSuffix(component, ".slice");
  const size_t at = component.rfind("pod");
  if (at == std::string_view::npos || (at != 0 && component[at - 1] != '-')) return std::nullopt;
  std::string uid(component.substr(at + 3));
  std::replace(uid.begin(), uid.end(), '_', '-');
  if (!IsUid(uid)) return std::nullopt;
  return uid;
}

// "<id>" (cgroupfs) or "<runtime>-<id>.scope" (systemd; CRI-O's cgroupfs "crio-<id>"). A
// runtime's helper ("crio-conmon-<id>") is not the container.
std::optional<std::string> ContainerIdOf(std::string_view component) {
  component = StripSuffix(component, ".scope");
  if (component.find("conmon") != std::string_view::npos) return std::nullopt;
  const size_t dash = component.rfind('-');
  const std::string_view id =
      dash == std::string_view::npos ? component : component.substr(dash + 1);
  if (id.size() < 12 || !IsHex(id)) return std::nullopt;
  return std::string(id);
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  while (true) {
    const size_t at = s.find(sep);
    out.push_back(s.substr(0, at));
    if (at == std::string_view::npos) return out;
    s.remove_prefix(at + 1);
  }
}

}  // namespace

Result<ContainerRef> ContainerOfCgroup(std::string_view proc_cgroup) {
  for (std::string_view line : Split(proc_cgroup, '\n')) {
    // hierarchy-id:controllers:path; the path may itself hold ':' only in theory, so split twice.
    const size_t first = line.find(':');
    if (first == std::string_view::npos) continue;
    const size_t second = line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    const std::vector<std::string_view> parts = Split(line.substr(second + 1), '/');
    for (size_t i = 0; i < parts.size(); ++i) {
      auto uid = PodUidOf(parts[i]);
      if (!uid) continue;
      ContainerRef ref{*uid, {}};
      if (i + 1 < parts.size()) {
        if (auto id = ContainerIdOf(parts[i + 1])) ref.container_id = *id;
      }
      return ref;
    }
  }
  return Error{"in no Pod's cgroup", Code::kNotFound, 0, kNoPodComponent};
}

}  // namespace gpustack::usage
