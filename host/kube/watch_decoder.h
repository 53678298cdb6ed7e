// Splits a watch response body (one JSON event per line, arriving in arbitrary pieces) into
// events. Pure, so it is fuzzed and unit-tested without a server.
#ifndef GPUSTACK_HOST_KUBE_WATCH_DECODER_H_
#define GPUSTACK_HOST_KUBE_WATCH_DECODER_H_

#include <functional>
#include <string>
#include <string_view>

#include "host/common/result.h"
#include "host/kube/resource.h"

namespace gpustack::kube {

enum class WatchEventType { kAdded, kModified, kDeleted, kBookmark, kError };

struct WatchEvent {
  WatchEventType type;
  Json object;  // the object; for kError the Status
};

class WatchDecoder {
 public:
  // Calls `on_event` for each complete event in `piece`; an Error for a line that is not a
  // watch event (the stream is then unusable). Stops early when `on_event` returns false.
  Status Feed(std::string_view piece, const std::function<bool(WatchEvent&)>& on_event);
  size_t buffered() const { return partial_.size(); }

 private:
  std::string partial_;  // the start of a line whose end has not arrived
  // How much of partial_ is known to hold no newline: a long event arriving in many small pieces
  // is searched once, not once per piece.
  size_t scanned_ = 0;
};

// The resourceVersion an event carries (bookmarks included); empty if none.
std::string EventResourceVersion(const WatchEvent& event);

}  // namespace gpustack::kube

#endif  // GPUSTACK_HOST_KUBE_WATCH_DECODER_H_
