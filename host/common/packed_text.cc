#include "host/common/packed_text.h"

#include <zstd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

namespace gpustack {
namespace {

// One context per thread for each direction, kept: a one-shot call would allocate (and for the
// decompressor, map) its own each time.
struct ContextDeleter {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
  void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};
ZSTD_CCtx* Compressor() {
  thread_local std::unique_ptr<ZSTD_CCtx, ContextDeleter> context(ZSTD_createCCtx());
  return context.get();
}
ZSTD_DCtx* Decompressor() {
  thread_local std::unique_ptr<ZSTD_DCtx, ContextDeleter> context(ZSTD_createDCtx());
  return context.get();
}
// zstd's fastest level: a cache packs an object at every change of it.
constexpr int kLevel = 1;

}  // namespace

PackedText PackedText::Of(std::string text) {
  PackedText out;
  out.size_ = text.size();
  std::string packed(ZSTD_compressBound(text.size()), '\0');
  const size_t n = ZSTD_compressCCtx(Compressor(), packed.data(), packed.size(), text.data(),
                                     text.size(), kLevel);
  if (!ZSTD_isError(n) && n < text.size()) {
    packed.resize(n);
    out.bytes_ = std::move(packed);
    out.compressed_ = true;
  } else {
    out.bytes_ = std::move(text);
  }
  // Either grew past what it holds (zstd's bound; a JSON dump by doubling).
  out.bytes_.shrink_to_fit();
  return out;
}

void PackedText::AppendTo(std::string& out) const {
  if (!compressed_) {
    out += bytes_;
    return;
  }
  const size_t at = out.size();
  out.resize(at + size_);
  const size_t n =
      ZSTD_decompressDCtx(Decompressor(), out.data() + at, size_, bytes_.data(), bytes_.size());
  // Packed by this process from size_ bytes: anything else is memory gone bad.
  if (ZSTD_isError(n) || n != size_) {
    std::fprintf(stderr, "a packed text does not unpack: %s\n",
                 ZSTD_isError(n) ? ZSTD_getErrorName(n) : "its size changed");
    std::abort();
  }
}

std::string PackedText::Text() const {
  std::string text;
  AppendTo(text);
  return text;
}

}  // namespace gpustack
