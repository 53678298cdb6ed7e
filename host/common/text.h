// Text for people from strings nobody vetted (names a vendor library reports, plugin messages):
// control characters shown escaped, so a terminal never runs what a driver or a plugin sent.
#ifndef GPUSTACK_HOST_COMMON_TEXT_H_
#define GPUSTACK_HOST_COMMON_TEXT_H_

#include <string>
#include <string_view>

namespace gpustack {

// `text` with every control character written escaped: C0 and DEL as \xNN, and C1 (U+0080 to
// U+009F, which some terminals obey as escape sequences) as \u00NN; everything else unchanged.
inline std::string Printable(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const auto next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0;
    if (byte < 0x20 || byte == 0x7f) {
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    } else if (byte == 0xc2 && next >= 0x80 && next <= 0x9f) {
      out += "\\u00";
      out += kHex[next >> 4];
      out += kHex[next & 0xf];
      ++i;
    } else {
      out += text[i];
    }
  }
  return out;
}

// A Prometheus label value as the text exposition format writes it between quotes: backslash,
// double quote and newline escaped.
inline std::string PrometheusLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace gpustack

#endif  // GPUSTACK_HOST_COMMON_TEXT_H_
