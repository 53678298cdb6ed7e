// The list page decoder on arbitrary bytes, against parsing the page whole: it never crashes,
// hands out exactly the page's items in order and reads the same metadata, and refuses what is
// not a list of objects.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "host/common/json_path.h"
#include "host/kube/list_page.h"

using gpustack::kube::Json;

namespace {

// What a page parsed whole says: whether it is a list of objects, and its items.
bool WholeIsAList(const Json& whole) {
  if (!whole.is_object()) return false;
  auto items = whole.find("items");
  if (items == whole.end() || items->is_null()) return true;
  if (!items->is_array()) return false;
  for (const Json& item : *items)
    if (!item.is_object()) return false;
  return true;
}

// How many `items` keys the page itself has (parsing whole keeps only the last).
int PageItemsKeys(std::string_view text) {
  int keys = 0;
  auto count = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::key && depth == 1 && parsed == "items") ++keys;
    return true;
  };
  (void)Json::parse(text, count, /*allow_exceptions=*/false);
  return keys;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<Json> taken;
  auto page = gpustack::kube::DecodeListPage(text, [&](Json& item) { taken.push_back(item); });
  Json whole = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!page) {
    // Refused: the page parsed whole is no list of objects, or it has two `items` keys (which
    // parsing whole hides by keeping the last).
    if (WholeIsAList(whole) && PageItemsKeys(text) <= 1) std::abort();
    return 0;
  }
  if (!WholeIsAList(whole)) std::abort();
  const Json items =
      whole.contains("items") && whole["items"].is_array() ? whole["items"] : Json::array();
  if (taken.size() != items.size() || page->items != items.size()) std::abort();
  for (size_t i = 0; i < taken.size(); ++i)
    if (taken[i] != items[i]) std::abort();
  if (page->resource_version != gpustack::StringAt(whole, {"metadata", "resourceVersion"}) ||
      page->continue_token != gpustack::StringAt(whole, {"metadata", "continue"}))
    std::abort();
  return 0;
}
