#include "host/api/request.h"

namespace gpustack::api {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::vector<std::string> Segments(std::string_view path) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < path.size()) {
    const size_t slash = path.find('/', at);
    const size_t end = slash == std::string_view::npos ? path.size() : slash;
    out.emplace_back(PercentDecode(path.substr(at, end - at)));
    at = end + 1;
  }
  return out;
}

}  // namespace

std::string PercentDecode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+') {
      out += ' ';
    } else if (text[i] == '%' && i + 2 < text.size() &&
               HexValue(text[i + 1]) >= 0 && HexValue(text[i + 2]) >= 0) {
      out += static_cast<char>(HexValue(text[i + 1]) * 16 + HexValue(text[i + 2]));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

Query Query::Parse(std::string_view query) {
  Query q;
  size_t at = 0;
  while (at <= query.size() && !query.empty()) {
    const size_t amp = query.find('&', at);
    const std::string_view pair =
        query.substr(at, amp == std::string_view::npos ? std::string_view::npos : amp - at);
    if (!pair.empty()) {
      const size_t eq = pair.find('=');
      std::string name = PercentDecode(pair.substr(0, eq));
      std::string value =
          eq == std::string_view::npos ? std::string() : PercentDecode(pair.substr(eq + 1));
      q.values_.emplace(std::move(name), std::move(value));
    }
    if (amp == std::string_view::npos) break;
    at = amp + 1;
  }
  return q;
}

std::string Query::Get(const std::string& name) const {
  auto found = values_.find(name);
  return found == values_.end() ? std::string() : found->second;
}

bool Query::IsTrue(const std::string& name) const {
  const std::string v = Get(name);
  return v == "true" || v == "1";
}

Result<RequestInfo> ParseRequestInfo(std::string_view method, std::string_view path,
                                     const Query& query) {
  RequestInfo info;
  std::string lower(method);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  info.verb = lower;
  if (path.empty() || path.front() != '/') return Error{"the path must start with /", Code::kInvalidArgument};
  std::string_view rest = path.substr(1);
  while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  const std::vector<std::string> parts = Segments(rest);
  // /apis/<group>/<version>/... is a resource request; anything shorter is discovery.
  if (parts.size() < 4 || parts[0] != "apis") return info;
  for (const std::string& p : parts) {
    if (p.empty() || p == "." || p == ".." || p.find('/') != std::string::npos)
      return Error{"malformed path segment in " + std::string(path), Code::kInvalidArgument};
  }
  info.resource_request = true;
  info.group = parts[1];
  info.version = parts[2];
  size_t at = 3;
  if (parts[at] == "namespaces") {
    if (parts.size() == at + 1) {
      return Error{"a namespace path needs a namespace", Code::kInvalidArgument};
    }
    info.ns = parts[at + 1];
    at += 2;
    if (parts.size() == at) {  // /namespaces/<name>: the namespace object itself
      info.resource = "namespaces";
      info.name = info.ns;
      info.ns.clear();
    }
  }
  if (info.resource.empty()) {
    if (parts.size() <= at) return Error{"no resource in " + std::string(path), Code::kInvalidArgument};
    info.resource = parts[at];
    if (parts.size() > at + 1) info.name = parts[at + 1];
    if (parts.size() > at + 2) info.subresource = parts[at + 2];
    if (parts.size() > at + 3)
      return Error{"too many segments in " + std::string(path), Code::kInvalidArgument};
  }
  if (lower == "get" || lower == "head") {
    info.verb = info.name.empty() ? (query.IsTrue("watch") ? "watch" : "list")
                                  : (query.IsTrue("watch") ? "watch" : "get");
  } else if (lower == "post") {
    info.verb = "create";
  } else if (lower == "put") {
    info.verb = "update";
  } else if (lower == "patch") {
    info.verb = "patch";
  } else if (lower == "delete") {
    info.verb = info.name.empty() ? "deletecollection" : "delete";
  }
  return info;
}

}  // namespace gpustack::api
