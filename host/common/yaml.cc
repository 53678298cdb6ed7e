#include "host/common/yaml.h"

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <regex>

namespace gpustack {
namespace {

// YAML 1.1/1.2 plain scalars that resolve to something other than a string.
bool NeedsQuotes(const std::string& s) {
  if (s.empty()) return true;
  static const std::regex special(
      "^(?:[-+]?(?:\\.[0-9]+|[0-9][0-9_]*(?:\\.[0-9_]*)?)(?:[eE][-+]?[0-9]+)?|0x[0-9a-fA-F_]+|"
      "0o?[0-7_]+|[-+]?\\.(?:inf|Inf|INF)|\\.(?:nan|NaN|NAN)|~|null|Null|NULL|true|True|TRUE|"
      "false|False|FALSE|yes|Yes|YES|no|No|NO|on|On|ON|off|Off|OFF|y|Y|n|N|[0-9:]+)$");
  return std::regex_match(s, special);
}

void Emit(YAML::Emitter& out, const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::object:
      if (v.empty()) {
        out << YAML::Flow << YAML::BeginMap << YAML::EndMap;
        return;
      }
      out << YAML::BeginMap;
      for (const auto& [key, item] : v.items()) {
        out << YAML::Key << key << YAML::Value;
        Emit(out, item);
      }
      out << YAML::EndMap;
      return;
    case nlohmann::json::value_t::array:
      if (v.empty()) {
        out << YAML::Flow << YAML::BeginSeq << YAML::EndSeq;
        return;
      }
      out << YAML::BeginSeq;
      for (const auto& item : v) Emit(out, item);
      out << YAML::EndSeq;
      return;
    case nlohmann::json::value_t::string: {
      const std::string& s = v.get_ref<const std::string&>();
      if (NeedsQuotes(s)) out << YAML::DoubleQuoted;
      out << s;
      return;
    }
    case nlohmann::json::value_t::null:
      out << YAML::Null;
      return;
    default:
      out << v.dump();  // numbers and booleans as JSON spells them
      return;
  }
}

}  // namespace

std::string ToYaml(const nlohmann::json& value) {
  YAML::Emitter out;
  out.SetIndent(2);
  out.SetSeqFormat(YAML::Block);
  Emit(out, value);
  return std::string(out.c_str()) + "\n";
}

}  // namespace gpustack
