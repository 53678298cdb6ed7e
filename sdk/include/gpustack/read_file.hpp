// Optional header-only helper (NOT part of the ABI): reading a small file that something else
// controls (sysfs, /proc, a manifest, a config) without trusting what is at the path.
#ifndef GPUSTACK_READ_FILE_HPP_
#define GPUSTACK_READ_FILE_HPP_

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>

namespace gpustack::sdk {

// The contents of a regular file of at most `max_bytes`, or nullopt with the reason in `error`
// (when given): missing or unreadable, not a regular file (a FIFO, socket, device or directory is
// never opened, since opening some devices acts, e.g. arms a watchdog; and never read, so a
// planted FIFO cannot stall the caller nor /dev/zero flood it), or larger than `max_bytes`.
// sysfs and /proc attributes are regular files.
inline std::optional<std::string> ReadSmallFile(const std::string& path, size_t max_bytes,
                                                std::string* error = nullptr) {
  auto fail = [&](const std::string& why) -> std::optional<std::string> {
    if (error != nullptr) *error = why;
    return std::nullopt;
  };
  struct stat before {};
  if (::stat(path.c_str(), &before) != 0) return fail(std::strerror(errno));
  if (!S_ISREG(before.st_mode)) return fail("not a regular file");
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return fail(std::strerror(errno));
  struct stat info {};
  // Swapped between the two looks: refused, whatever it is now.
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode) || info.st_dev != before.st_dev ||
      info.st_ino != before.st_ino) {
    ::close(fd);
    return fail("not a regular file");
  }
  std::string text;
  char buffer[4096];
  ssize_t got = 0;
  while (text.size() <= max_bytes && (got = ::read(fd, buffer, sizeof buffer)) != 0) {
    if (got < 0) {
      if (errno == EINTR) continue;
      const int read_errno = errno;
      ::close(fd);
      return fail(std::strerror(read_errno));
    }
    text.append(buffer, static_cast<size_t>(got));
  }
  ::close(fd);
  if (text.size() > max_bytes) {
    return fail("larger than " + std::to_string(max_bytes) + " bytes");
  }
  return text;
}

}  // namespace gpustack::sdk

#endif  // GPUSTACK_READ_FILE_HPP_
