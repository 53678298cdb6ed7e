#include "host/common/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <gpustack/small_file.hpp>

#include <cerrno>
#include <cstring>
#include <fstream>

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

Status WriteFileAtomically(const std::filesystem::path& path, std::string_view text,
                           std::filesystem::perms perms, bool durable) {
  const std::filesystem::path fresh = path.string() + ".new";
  const int fd = ::open(fresh.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
                        static_cast<mode_t>(perms));
  if (fd < 0) return Error{"cannot create " + fresh.string() + ": " + std::strerror(errno)};
  auto fail = [&](const char* what) -> Error {
    const int error = errno;
    ::close(fd);
    ::unlink(fresh.c_str());
    return Error{std::string("cannot ") + what + " " + fresh.string() + ": " +
                 std::strerror(error)};
  };
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail("write");
    done += static_cast<size_t>(n);
  }
  // The mode asked for, whatever the umask took away.
  if (::fchmod(fd, static_cast<mode_t>(perms)) != 0) return fail("set the mode of");
  if (durable && ::fsync(fd) != 0) return fail("sync");
  if (::close(fd) != 0) {
    ::unlink(fresh.c_str());
    return Error{"cannot write " + fresh.string() + ": " + std::strerror(errno)};
  }
  if (::rename(fresh.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(fresh.c_str());
    return Error{"cannot replace " + path.string() + ": " + std::strerror(error)};
  }
  if (durable) {
    const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : ".";
    const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    const bool synced = dir_fd >= 0 && ::fsync(dir_fd) == 0;
    if (dir_fd >= 0) ::close(dir_fd);
    if (!synced) return Error{"cannot sync " + dir.string() + ": " + std::strerror(errno)};
  }
  return Ok{};
}

long ProcStatusField(std::string_view pid, std::string_view field) {
  std::ifstream status("/proc/" + std::string(pid) + "/status");
  const std::string wanted = std::string(field) + ":";
  std::string key;
  long value = -1;
  while (status >> key) {
    if (key == wanted) return status >> value ? value : -1;
    status.ignore(4096, '\n');
  }
  return -1;
}

}  // namespace gpustack
