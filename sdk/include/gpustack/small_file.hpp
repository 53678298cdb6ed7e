// Optional header-only helpers (NOT part of the ABI) for small files: reading one that something
// else controls (sysfs, /proc, a manifest, a config) without trusting what is at the path, and
// replacing one (a plugin's or the host's state) so that a crash leaves the old or the new.
#ifndef GPUSTACK_SMALL_FILE_HPP_
#define GPUSTACK_SMALL_FILE_HPP_

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>

namespace gpustack::sdk {

// The contents of a regular file of at most `max_bytes`, or nullopt with the reason in `error`
// (when given; `error_number` gets the errno, 0 when there was none): missing or unreadable, not a
// regular file (a FIFO, socket, device or directory is never opened, since opening some devices
// acts, e.g. arms a watchdog; and never read, so a planted FIFO cannot stall the caller nor
// /dev/zero flood it), or larger than `max_bytes`. sysfs and /proc attributes are regular files.
inline std::optional<std::string> ReadSmallFile(const std::string& path, size_t max_bytes,
                                                std::string* error = nullptr,
                                                int* error_number = nullptr) {
  auto fail = [&](const std::string& why, int number = 0) -> std::optional<std::string> {
    if (error != nullptr) *error = why;
    if (error_number != nullptr) *error_number = number;
    return std::nullopt;
  };
  struct stat before {};
  if (::stat(path.c_str(), &before) != 0) return fail(std::strerror(errno), errno);
  if (!S_ISREG(before.st_mode)) return fail("not a regular file");
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return fail(std::strerror(errno), errno);
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
      return fail(std::strerror(read_errno), read_errno);
    }
    text.append(buffer, static_cast<size_t>(got));
  }
  ::close(fd);
  if (text.size() > max_bytes) {
    return fail("larger than " + std::to_string(max_bytes) + " bytes");
  }
  return text;
}

// Replaces `path` with `text`, mode 0600 whatever the umask: written to a temporary beside it,
// flushed, renamed over it, and the directory flushed, so a crash or power loss leaves the old
// file or the new one, never a mix or neither. False with the reason in `error` (when given).
inline bool ReplaceSmallFile(const std::string& path, const std::string& text,
                             std::string* error = nullptr) {
  auto fail = [&](const std::string& what, int number) {
    if (error != nullptr) *error = what + ": " + std::strerror(number);
    return false;
  };
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  const int fd =
      ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return fail("cannot create " + temporary, errno);
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  const bool written = done == text.size() && ::fsync(fd) == 0;
  const int saved = errno;
  ::close(fd);
  if (!written || ::rename(temporary.c_str(), path.c_str()) != 0) {
    const int why = written ? errno : saved;
    ::unlink(temporary.c_str());
    return fail("cannot write " + path, why);
  }
  const std::string dir = path.find('/') == std::string::npos
                              ? std::string(".")
                              : path.substr(0, std::max<size_t>(path.rfind('/'), 1));
  if (const int d = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); d >= 0) {
    ::fsync(d);
    ::close(d);
  }
  return true;
}

}  // namespace gpustack::sdk

#endif  // GPUSTACK_SMALL_FILE_HPP_
