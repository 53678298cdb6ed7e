#include "host/kubelet_rpc/framing.h"

#include <algorithm>
#include <cctype>
#include <cstdint>

#include <fmt/format.h>

namespace gpustack::kubelet_rpc {
namespace {

constexpr size_t kPrefixBytes = 5;

uint32_t ReadLength(std::string_view prefix) {
  uint32_t length = 0;
  for (size_t i = 1; i < kPrefixBytes; ++i)
    length = (length << 8) | static_cast<uint8_t>(prefix[i]);
  return length;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string FrameMessage(std::string_view message) {
  std::string framed;
  framed.reserve(kPrefixBytes + message.size());
  const auto length = static_cast<uint32_t>(message.size());
  framed.push_back('\0');
  for (int shift = 24; shift >= 0; shift -= 8) framed.push_back(static_cast<char>(length >> shift));
  framed.append(message);
  return framed;
}

Result<std::vector<std::string>> TakeMessages(std::string& buffer, size_t max_bytes) {
  std::vector<std::string> messages;
  size_t offset = 0;
  while (buffer.size() - offset >= kPrefixBytes) {
    const std::string_view prefix(buffer.data() + offset, kPrefixBytes);
    if (prefix[0] != '\0') {
      return Error{"a compressed message was sent, but no compression was negotiated",
                   Code::kUnimplemented};
    }
    const uint32_t length = ReadLength(prefix);
    if (length > max_bytes) {
      return Error{fmt::format("a message of {} bytes is over the limit of {}", length, max_bytes),
                   Code::kResourceExhausted};
    }
    if (buffer.size() - offset - kPrefixBytes < length) break;
    messages.emplace_back(buffer, offset + kPrefixBytes, length);
    offset += kPrefixBytes + length;
  }
  buffer.erase(0, offset);
  return messages;
}

Result<std::vector<std::string>> SplitMessages(std::string_view body, size_t max_bytes) {
  std::string buffer(body);
  auto messages = TakeMessages(buffer, max_bytes);
  if (messages && !buffer.empty()) {
    return Error{fmt::format("the body ends inside a message ({} bytes left over)", buffer.size()),
                 Code::kInternal};
  }
  return messages;
}

std::string PercentEncode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<uint8_t>(c);
    if (byte < 0x20 || byte > 0x7e || c == '%') {
      out += fmt::format("%{:02X}", byte);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string PercentDecode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && HexValue(text[i + 1]) >= 0 &&
        HexValue(text[i + 2]) >= 0) {
      out.push_back(static_cast<char>(HexValue(text[i + 1]) * 16 + HexValue(text[i + 2])));
      i += 2;
    } else {
      out.push_back(text[i]);  // a lone '%' stays as it is, as gRPC's decoders leave it
    }
  }
  return out;
}

std::string FormatTimeout(std::chrono::milliseconds timeout) {
  const int64_t ms = std::max<int64_t>(timeout.count(), 0);
  // Eight digits at most: beyond 99,999,999 ms, seconds.
  return ms <= 99'999'999 ? fmt::format("{}m", ms) : fmt::format("{}S", ms / 1000);
}

bool IsGrpcContentType(std::string_view value) {
  std::string lower(value);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower == "application/grpc" || lower.rfind("application/grpc+", 0) == 0 ||
         lower.rfind("application/grpc;", 0) == 0;
}

}  // namespace gpustack::kubelet_rpc
