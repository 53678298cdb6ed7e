#include "host/api/selectors.h"

#include <algorithm>

#include "host/common/json_path.h"

namespace gpustack::api {
namespace {

std::string Trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return std::string(s);
}

// Splits on commas outside parentheses.
Result<std::vector<std::string>> Terms(std::string_view text) {
  std::vector<std::string> out;
  int depth = 0;
  std::string current;
  for (char c : text) {
    if (c == '(') ++depth;
    if (c == ')' && --depth < 0) return Error{"unbalanced ')' in selector", Code::kInvalidArgument};
    if (c == ',' && depth == 0) {
      out.push_back(Trim(current));
      current.clear();
    } else {
      current += c;
    }
  }
  if (depth != 0) return Error{"unbalanced '(' in selector", Code::kInvalidArgument};
  out.push_back(Trim(current));
  return out;
}

bool ValidKey(const std::string& key) {
  return !key.empty() && key.size() <= 317 &&
         std::all_of(key.begin(), key.end(), [](unsigned char c) {
           return std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '/';
         });
}

}  // namespace

Result<Selector> Selector::ParseLabels(std::string_view text) {
  Selector selector;
  if (Trim(text).empty()) return selector;
  auto terms = Terms(text);
  if (!terms) return terms.failure();
  for (const std::string& term : *terms) {
    Requirement r;
    const auto bad = [&](const std::string& why) {
      return Error{"invalid selector term \"" + term + "\": " + why, Code::kInvalidArgument};
    };
    if (term.empty()) return bad("empty");
    size_t at;
    if (term.front() == '!') {
      r = {Trim(term.substr(1)), Op::kNotExists, {}};
    } else if ((at = term.find("!=")) != std::string::npos) {
      r = {Trim(term.substr(0, at)), Op::kNotEquals, {Trim(term.substr(at + 2))}};
    } else if ((at = term.find("==")) != std::string::npos) {
      r = {Trim(term.substr(0, at)), Op::kEquals, {Trim(term.substr(at + 2))}};
    } else if ((at = term.find('=')) != std::string::npos) {
      r = {Trim(term.substr(0, at)), Op::kEquals, {Trim(term.substr(at + 1))}};
    } else if (term.find('(') != std::string::npos) {
      const size_t open = term.find('(');
      if (term.back() != ')') return bad("a set must end with ')'");
      std::string head = Trim(term.substr(0, open));
      const size_t space = head.rfind(' ');
      if (space == std::string::npos) return bad("expected 'in' or 'notin'");
      const std::string word = head.substr(space + 1);
      if (word != "in" && word != "notin") return bad("expected 'in' or 'notin', not " + word);
      r.key = Trim(head.substr(0, space));
      r.op = word == "in" ? Op::kIn : Op::kNotIn;
      std::string inner = term.substr(open + 1, term.size() - open - 2);
      size_t from = 0;
      for (;;) {
        const size_t comma = inner.find(',', from);
        r.values.push_back(Trim(inner.substr(from, comma - from)));
        if (comma == std::string::npos) break;
        from = comma + 1;
      }
    } else {
      r = {term, Op::kExists, {}};
    }
    if (!ValidKey(r.key)) return bad("invalid key \"" + r.key + "\"");
    selector.requirements_.push_back(std::move(r));
  }
  return selector;
}

Result<Selector> Selector::ParseFields(std::string_view text) {
  auto parsed = ParseLabels(text);
  if (!parsed) return parsed.failure();
  for (const Requirement& r : parsed->requirements_) {
    if (r.key != "metadata.name" && r.key != "metadata.namespace")
      return Error{"field label not supported: " + r.key, Code::kInvalidArgument};
    if (r.op != Op::kEquals && r.op != Op::kNotEquals)
      return Error{"a field selector takes only =, == and !=", Code::kInvalidArgument};
  }
  parsed->fields_ = true;
  return parsed;
}

Selectable Selectable::Of(const nlohmann::json& object) {
  Selectable out{
      StringAt(object, {"metadata", "namespace"}), StringAt(object, {"metadata", "name"}), {}};
  if (const nlohmann::json* labels = ObjectAt(object, {"metadata", "labels"})) {
    for (const auto& [key, value] : labels->items())  // a JSON object's keys come sorted
      if (value.is_string()) out.labels.emplace_back(key, value.get<std::string>());
  }
  return out;
}

const std::string* Selectable::Label(std::string_view key) const {
  auto found =
      std::lower_bound(labels.begin(), labels.end(), key,
                       [](const auto& label, std::string_view k) { return label.first < k; });
  return found != labels.end() && found->first == key ? &found->second : nullptr;
}

bool Selector::Matches(const Selectable& object) const {
  for (const Requirement& r : requirements_) {
    const std::string* value = !fields_                   ? object.Label(r.key)
                               : r.key == "metadata.name" ? &object.name
                                                          : &object.ns;
    const bool present = value != nullptr;
    const bool listed =
        present && std::find(r.values.begin(), r.values.end(), *value) != r.values.end();
    switch (r.op) {
      case Op::kEquals:
      case Op::kIn:
        if (!present || !listed) return false;
        break;
      case Op::kNotEquals:
      case Op::kNotIn:
        if (present && listed) return false;
        break;
      case Op::kExists:
        if (!present) return false;
        break;
      case Op::kNotExists:
        if (present) return false;
        break;
    }
  }
  return true;
}

}  // namespace gpustack::api
