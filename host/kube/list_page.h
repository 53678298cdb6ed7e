// Decodes one page of a list answer (`{"metadata":{...},"items":[...]}`), handing each item out
// as soon as it is parsed and keeping none, so that a page never holds more than one of its
// objects parsed at once. Pure, so it is fuzzed and unit-tested without a server.
#ifndef GPUSTACK_HOST_KUBE_LIST_PAGE_H_
#define GPUSTACK_HOST_KUBE_LIST_PAGE_H_

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "host/common/result.h"
#include "host/kube/resource.h"

namespace gpustack::kube {

struct ListPage {
  std::string resource_version;  // the list's, where a watch continues from
  std::string continue_token;    // empty on the last page
  size_t items = 0;              // how many went to `take`
};

// Calls `take` with each object of the page's `items`, in order, as it is parsed; `take` may
// move from it. An Error when `text` is not a list page; items already taken stay taken.
Result<ListPage> DecodeListPage(std::string_view text, const std::function<void(Json&)>& take);

}  // namespace gpustack::kube

#endif  // GPUSTACK_HOST_KUBE_LIST_PAGE_H_
