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

nlohmann::json PlainScalar(const std::string& s) {
  static const std::regex integer("^[-+]?[0-9]+$");
  static const std::regex floating("^[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?$");
  if (s == "null" || s == "Null" || s == "NULL" || s == "~" || s.empty()) return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  if (std::regex_match(s, integer)) {
    try {
      return std::stoll(s);
    } catch (const std::out_of_range&) {
      return s;
    }
  }
  if (std::regex_match(s, floating)) return std::strtod(s.c_str(), nullptr);
  return s;
}

nlohmann::json ToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      nlohmann::json out = nlohmann::json::object();
      for (const auto& entry : node) {
        out[entry.first.as<std::string>()] = ToJson(entry.second);
      }
      return out;
    }
    case YAML::NodeType::Sequence: {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& item : node) {
        out.push_back(ToJson(item));
      }
      return out;
    }
    case YAML::NodeType::Scalar:
      // yaml-cpp tags a quoted scalar "!" and a plain one "?".
      return node.Tag() == "!" ? nlohmann::json(node.Scalar()) : PlainScalar(node.Scalar());
    default:
      return nullptr;
  }
}

}  // namespace

Result<std::vector<nlohmann::json>> FromYaml(const std::string& text) {
  try {
    std::vector<nlohmann::json> documents;
    for (const YAML::Node& doc : YAML::LoadAll(text)) {
      if (doc.IsDefined() && !doc.IsNull()) {
        documents.push_back(ToJson(doc));
      }
    }
    return documents;
  } catch (const YAML::Exception& e) {
    return Error{std::string("YAML: ") + e.what()};
  }
}

std::string ToYaml(const nlohmann::json& value) {
  YAML::Emitter out;
  out.SetIndent(2);
  out.SetSeqFormat(YAML::Block);
  Emit(out, value);
  return std::string(out.c_str()) + "\n";
}

}  // namespace gpustack
