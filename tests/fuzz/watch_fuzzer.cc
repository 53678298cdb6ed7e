// The watch stream decoder on arbitrary bytes: it never crashes, and however the stream is cut
// into pieces it yields the same events (the server's chunking is not ours to choose).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "host/kube/watch_decoder.h"

namespace {

struct Outcome {
  std::vector<std::string> events;
  bool failed = false;
};

Outcome Decode(std::string_view stream, size_t cut) {
  gpustack::kube::WatchDecoder decoder;
  Outcome outcome;
  auto collect = [&](gpustack::kube::WatchEvent& e) {
    outcome.events.push_back(std::to_string(static_cast<int>(e.type)) + e.object.dump());
    return true;
  };
  for (std::string_view piece : {stream.substr(0, cut), stream.substr(cut)}) {
    if (outcome.failed) {
      break;
    }
    outcome.failed = !decoder.Feed(piece, collect).ok();
  }
  return outcome;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) {
    return 0;
  }
  std::string_view stream(reinterpret_cast<const char*>(data) + 1, size - 1);
  size_t cut = stream.empty() ? 0 : data[0] % (stream.size() + 1);
  Outcome whole = Decode(stream, stream.size());
  Outcome split = Decode(stream, cut);
  // A failure stops decoding where the bad line is, wherever the cut: the events before it match.
  if (whole.failed != split.failed || whole.events != split.events) {
    std::abort();
  }
  return 0;
}
