#include "host/kube/watch_decoder.h"

#include <algorithm>

namespace gpustack::kube {
namespace {

constexpr size_t kMaxEventBytes = 64u << 20;

Result<WatchEvent> ParseEvent(std::string_view line) {
  Json event = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!event.is_object() || !event.contains("type") || !event["type"].is_string() ||
      !event.contains("object") || !event["object"].is_object()) {
    return Error{"watch stream: not a watch event: " + std::string(line.substr(0, 200))};
  }
  const std::string& type = event["type"].get_ref<const std::string&>();
  WatchEventType kind;
  if (type == "ADDED") {
    kind = WatchEventType::kAdded;
  } else if (type == "MODIFIED") {
    kind = WatchEventType::kModified;
  } else if (type == "DELETED") {
    kind = WatchEventType::kDeleted;
  } else if (type == "BOOKMARK") {
    kind = WatchEventType::kBookmark;
  } else if (type == "ERROR") {
    kind = WatchEventType::kError;
  } else {
    return Error{"watch stream: unknown event type \"" + type + "\""};
  }
  return WatchEvent{kind, std::move(event["object"])};
}

}  // namespace

Status WatchDecoder::Feed(std::string_view piece,
                          const std::function<bool(WatchEvent&)>& on_event) {
  partial_.append(piece);
  size_t start = 0;  // the first byte of the line being decoded
  for (size_t newline;
       (newline = partial_.find('\n', std::max(start, scanned_))) != std::string::npos;
       start = newline + 1) {
    std::string_view line(partial_.data() + start, newline - start);
    if (line.find_first_not_of(" \r\t") == std::string_view::npos) {
      continue;
    }
    auto event = ParseEvent(line);
    if (!event) {
      partial_.clear();
      scanned_ = 0;
      return event.failure();
    }
    if (!on_event(*event)) {
      partial_.erase(0, newline + 1);
      scanned_ = 0;
      return Ok{};
    }
  }
  partial_.erase(0, start);
  scanned_ = partial_.size();
  if (partial_.size() > kMaxEventBytes) {
    partial_.clear();
    scanned_ = 0;
    return Error{"watch stream: an event larger than 64 MiB", Code::kResourceExhausted};
  }
  return Ok{};
}

std::string EventResourceVersion(const WatchEvent& event) {
  if (event.type == WatchEventType::kError) {
    return {};
  }
  const Json& object = event.object;
  if (!object.contains("metadata") || !object["metadata"].is_object()) {
    return {};
  }
  return object["metadata"].value("resourceVersion", "");
}

}  // namespace gpustack::kube
