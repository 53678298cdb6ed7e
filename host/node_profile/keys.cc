#include "host/node_profile/keys.h"

#include <cctype>
#include <sstream>
#include <vector>

namespace gpustack::node_profile {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string Erase(std::string s, std::string_view what) {
  for (size_t at; (at = s.find(what)) != std::string::npos;) s.erase(at, what.size());
  return s;
}

bool IsCoreCount(const std::string& token) {  // "64-core"
  const size_t dash = token.find("-core");
  if (dash == std::string::npos || dash == 0 || dash + 5 != token.size()) return false;
  for (size_t i = 0; i < dash; ++i) {
    if (std::isdigit(static_cast<unsigned char>(token[i])) == 0) return false;
  }
  return true;
}

}  // namespace

std::string LabelSegment(std::string_view text, size_t max) {
  std::string out;
  bool dash = false;
  for (char raw : text) {
    const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(raw)));
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
      if (dash && !out.empty()) out += '-';
      out += c;
      dash = false;
    } else {
      dash = true;
    }
  }
  if (out.size() > max) {
    out.resize(max);
    const size_t cut = out.rfind('-');
    if (cut != std::string::npos && cut + 12 >= max) out.resize(cut);  // keep whole words
    while (!out.empty() && out.back() == '-') out.pop_back();
  }
  return out;
}

std::string CpuKey(std::string_view vendor, std::string_view name, std::string_view family,
                   std::string_view model) {
  const std::string manufacturer = LabelSegment(vendor).empty() ? "generic" : LabelSegment(vendor);
  std::string cleaned = Lower(name);
  cleaned = Erase(Erase(Erase(std::move(cleaned), "(r)"), "(tm)"), "(c)");
  if (const size_t at = cleaned.find(" cpu @"); at != std::string::npos) cleaned.resize(at);
  if (const size_t at = cleaned.find('@'); at != std::string::npos) cleaned.resize(at);
  // Marketing words that say nothing about the model: "Processor", "64-Core", "CPU".
  std::istringstream words(cleaned);
  std::vector<std::string> kept;
  for (std::string w; words >> w;) {
    if (w == "processor" || w == "cpu" || IsCoreCount(w)) continue;
    kept.push_back(w);
  }
  std::string joined;
  for (const std::string& w : kept) joined += (joined.empty() ? "" : " ") + w;
  std::string id = LabelSegment(joined);
  if (id.empty()) {
    if (vendor.empty() || family.empty()) return "generic";
    return LabelSegment(manufacturer + "-" + std::string(family) + "-" + std::string(model));
  }
  // The manufacturer leads once: "amd-epyc-7763", not "amd-amd-epyc-7763".
  if (id.rfind(manufacturer + "-", 0) != 0) id = manufacturer + "-" + id;
  return LabelSegment(id);
}

std::string AcceleratorGroupId(std::string_view manufacturer, std::string_view product,
                               uint64_t memory_mib, bool with_memory) {
  std::string id = LabelSegment(product);
  const std::string prefix = LabelSegment(manufacturer) + "-";
  if (id.rfind(prefix, 0) == 0) id.erase(0, prefix.size());
  if (with_memory && memory_mib > 0) {
    id += "-" + std::to_string((memory_mib + 512) / 1024) + "g";
  }
  return LabelSegment(id);
}

std::string AcceleratorKey(std::string_view manufacturer, std::string_view group_id) {
  return LabelSegment(std::string(manufacturer) + "-" + std::string(group_id));
}

std::string MemoryQuantity(uint64_t mib) {
  if (mib < 1024) return std::to_string(mib) + "Mi";
  const uint64_t gib = (mib + 512) / 1024;
  if (gib % 1024 == 0) return std::to_string(gib / 1024) + "Ti";
  return std::to_string(gib) + "Gi";
}

}  // namespace gpustack::node_profile
