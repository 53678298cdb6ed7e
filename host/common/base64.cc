#include "host/common/base64.h"

#include <openssl/evp.h>

namespace gpustack {

Result<std::string> DecodeBase64(std::string_view text, std::string_view what) {
  std::string compact;
  for (char c : text) {
    if (c != '\n' && c != '\r' && c != ' ') {
      compact.push_back(c);
    }
  }
  if (compact.size() % 4 != 0) {
    return Error{std::string(what) + " is not valid base64"};
  }
  std::string out(compact.size() / 4 * 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(compact.data()),
                          static_cast<int>(compact.size()));
  if (n < 0) {
    return Error{std::string(what) + " is not valid base64"};
  }
  // EVP_DecodeBlock counts the padding as zero bytes.
  size_t padding = 0;
  for (size_t i = compact.size(); i > 0 && compact[i - 1] == '=' && padding < 2; --i) {
    ++padding;
  }
  out.resize(static_cast<size_t>(n) - padding);
  return out;
}

std::string EncodeBase64(std::string_view bytes) {
  std::string out((bytes.size() + 2) / 3 * 4 + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

}  // namespace gpustack
