// Text kept compressed in memory (zstd at its fastest level), for caches that hold many JSON
// texts and read each one rarely: an object's JSON repeats its keys and shrinks about fivefold.
// Unpacking costs microseconds at the sizes these caches hold (tests/bench/served_bench.cc).
#ifndef GPUSTACK_HOST_COMMON_PACKED_TEXT_H_
#define GPUSTACK_HOST_COMMON_PACKED_TEXT_H_

#include <cstddef>
#include <string>

namespace gpustack {

class PackedText {
 public:
  PackedText() = default;
  // Compressed, or kept as it is where that is not smaller (a short text).
  static PackedText Of(std::string text);

  size_t size() const { return size_; }  // of the text
  size_t kept_bytes() const { return bytes_.size(); }
  bool compressed() const { return compressed_; }
  std::string Text() const;
  void AppendTo(std::string& out) const;

 private:
  std::string bytes_;
  size_t size_ = 0;
  bool compressed_ = false;
};

}  // namespace gpustack

#endif  // GPUSTACK_HOST_COMMON_PACKED_TEXT_H_
