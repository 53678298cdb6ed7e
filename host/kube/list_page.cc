#include "host/kube/list_page.h"

#include "host/common/json_path.h"

namespace gpustack::kube {

Result<ListPage> DecodeListPage(std::string_view text, const std::function<void(Json&)>& take) {
  // nlohmann's callback parser: an item of `items` (an object that ends at depth 2 under the
  // page's `items` key) goes to `take` and is then discarded, which also removes it from the
  // array, so the parsed page ends up as its metadata and an empty `items`.
  ListPage page;
  std::string page_key;      // the page's key being parsed (depth 1)
  bool items_array = false;  // whether that key's value is an array
  int items_keys = 0;  // a page with two `items` would hand out both: refused
  auto on_event = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::key && depth == 1) {
      page_key = parsed.get<std::string>();
      items_array = false;
      if (page_key == "items") ++items_keys;
    } else if (event == Json::parse_event_t::array_start && depth == 1 && page_key == "items") {
      items_array = true;
    } else if (event == Json::parse_event_t::object_end && depth == 2 && items_array) {
      take(parsed);
      ++page.items;
      return false;
    }
    return true;
  };
  Json rest = Json::parse(text, on_event, /*allow_exceptions=*/false);
  if (rest.is_discarded() || !rest.is_object()) {
    return Error{"not a list: " + std::string(text.substr(0, 200)), Code::kInternal};
  }
  if (items_keys > 1) return Error{"not a list: it has two items keys", Code::kInternal};
  if (auto items = rest.find("items");
      items != rest.end() && !items->is_null() && !(items->is_array() && items->empty())) {
    return Error{"not a list: its items are not all objects", Code::kInternal};
  }
  page.resource_version = StringAt(rest, {"metadata", "resourceVersion"});
  page.continue_token = StringAt(rest, {"metadata", "continue"});
  return page;
}

}  // namespace gpustack::kube
