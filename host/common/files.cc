#include "host/common/files.h"

#include <sys/stat.h>
#include <gpustack/small_file.hpp>

#include <cerrno>
#include <cstring>

namespace gpustack {

Result<std::string> ReadSmallFile(const std::filesystem::path& path, size_t max_bytes,
                                  std::string_view what) {
  std::string why;
  int error_number = 0;
  auto text = sdk::ReadSmallFile(path.string(), max_bytes, &why, &error_number);
  if (text) return std::move(*text);
  const bool missing = error_number == ENOENT;
  return Error{std::string(what) + " " + path.string() + ": " + why,
               missing ? Code::kNotFound : Code::kInvalidArgument};
}

Result<FileIdentity> IdentifyFile(const std::filesystem::path& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    return Error{path.string() + ": " + std::strerror(errno),
                 errno == ENOENT ? Code::kNotFound : Code::kUnavailable};
  }
  return FileIdentity{
      static_cast<uint64_t>(info.st_dev), static_cast<uint64_t>(info.st_ino),
      static_cast<uint64_t>(info.st_size),
      static_cast<int64_t>(info.st_mtim.tv_sec) * 1'000'000'000 + info.st_mtim.tv_nsec};
}

}  // namespace gpustack
