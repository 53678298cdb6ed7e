// The kubelet RPC's framing on arbitrary bytes (what a client on a device-plugin socket sends):
// never a crash, never an allocation beyond the limit, and whatever is taken frames back to the
// bytes it came from, however the body is cut into pieces. Percent-encoding round-trips.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "host/kubelet_rpc/framing.h"

using gpustack::kubelet_rpc::FrameMessage;
using gpustack::kubelet_rpc::PercentDecode;
using gpustack::kubelet_rpc::PercentEncode;
using gpustack::kubelet_rpc::TakeMessages;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  constexpr size_t kLimit = 1024;

  // Fed whole, and fed in two pieces at a cut the first byte chooses: the same messages.
  std::string whole(input);
  auto at_once = TakeMessages(whole, kLimit);
  const size_t cut = size == 0 ? 0 : data[0] % (size + 1);
  std::string pieces(input.substr(0, cut));
  auto first = TakeMessages(pieces, kLimit);
  std::string taken;
  if (first) {
    for (const std::string& m : *first) taken += FrameMessage(m);
    pieces.append(input.substr(cut));
    auto second = TakeMessages(pieces, kLimit);
    if (second) {
      for (const std::string& m : *second) taken += FrameMessage(m);
      if (!at_once) std::abort();  // refused whole, accepted in pieces
      std::string again;
      for (const std::string& m : *at_once) again += FrameMessage(m);
      if (again != taken || whole != pieces) std::abort();
      // What was taken is exactly the front of the input.
      if (input.substr(0, taken.size()) != taken) std::abort();
      for (const std::string& m : *at_once) {
        if (m.size() > kLimit) std::abort();
      }
    }
  }

  if (PercentDecode(PercentEncode(input)) != input) std::abort();
  (void)PercentDecode(input);
  return 0;
}
