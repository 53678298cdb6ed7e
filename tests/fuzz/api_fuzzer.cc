// The v1 API's request router, selectors and conversion on arbitrary input. Input: a method line,
// a target line (path?query), a label-selector line, then a JSON document. Nothing may crash;
// what the router accepts is well formed; the conversion is lossless both ways on its domains:
// a served object comes back from storage unchanged, and a stored one from serving.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "host/api/kinds.h"
#include "host/api/request.h"
#include "host/api/selectors.h"

namespace {

std::string_view Line(std::string_view& rest) {
  const size_t end = rest.find('\n');
  std::string_view line = rest.substr(0, end);
  rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
  return line;
}

void Check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpustack::api;
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  const std::string_view method = Line(rest);
  const std::string_view target = Line(rest);
  const std::string_view selector = Line(rest);

  const size_t question = target.find('?');
  const Query query = Query::Parse(question == std::string_view::npos ? std::string_view()
                                                                      : target.substr(question + 1));
  auto info = ParseRequestInfo(method, target.substr(0, question), query);
  if (info && info->resource_request) {
    Check(!info->group.empty() && !info->version.empty() && !info->resource.empty());
    Check(info->name.find('/') == std::string::npos && info->ns.find('/') == std::string::npos);
    Check(info->subresource.empty() || !info->name.empty());
  }

  const nlohmann::json json = nlohmann::json::parse(rest, nullptr, /*allow_exceptions=*/false);
  auto labels = Selector::ParseLabels(selector);
  auto fields = Selector::ParseFields(selector);
  if (!json.is_discarded()) {
    const Selectable selectable = Selectable::Of(json);
    if (labels) static_cast<void>(labels->Matches(selectable));
    if (fields) static_cast<void>(fields->Matches(selectable));
    const nlohmann::json served = ToServed(json);
    Check(ToServed(ToStorage(served)) == served);
    const nlohmann::json stored = ToStorage(json);
    Check(ToStorage(ToServed(stored)) == stored);
  }
  return 0;
}
