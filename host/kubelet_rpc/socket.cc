#include "host/kubelet_rpc/socket.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace gpustack::kubelet_rpc {
namespace {

Result<sockaddr_un> AddressOf(const std::filesystem::path& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const std::string& text = path.native();
  if (text.empty() || text.size() >= sizeof(address.sun_path)) {
    return Error{fmt::format("{:?}: a unix socket's path is 1 to {} bytes", text,
                             sizeof(address.sun_path) - 1),
                 Code::kInvalidArgument};
  }
  std::memcpy(address.sun_path, text.c_str(), text.size() + 1);
  return address;
}

Error SystemError(std::string_view what, const std::filesystem::path& path) {
  const int number = errno;
  return Error{fmt::format("{} {}: {}", what, path.string(), std::strerror(number)),
               number == ENOENT || number == ECONNREFUSED ? Code::kUnavailable : Code::kInternal};
}

}  // namespace

FileDescriptor& FileDescriptor::operator=(FileDescriptor&& other) noexcept {
  if (this != &other) {
    Reset();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

void FileDescriptor::Reset() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

Waker::Waker() : fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

void Waker::Wake() {
  if (fd_) (void)eventfd_write(fd_.get(), 1);
}

void Waker::Drain() {
  eventfd_t ignored = 0;
  if (fd_) (void)eventfd_read(fd_.get(), &ignored);
}

Result<FileDescriptor> ListenUnix(const std::filesystem::path& path) {
  auto address = AddressOf(path);
  if (!address) return address.failure();
  FileDescriptor fd(socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return SystemError("socket for", path);
  std::error_code ignored;
  std::filesystem::remove(path, ignored);  // a stale socket from an earlier life
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&*address), sizeof(*address)) != 0)
    return SystemError("bind", path);
  if (listen(fd.get(), 64) != 0) return SystemError("listen on", path);
  return fd;
}

Result<FileDescriptor> ConnectUnix(const std::filesystem::path& path) {
  auto address = AddressOf(path);
  if (!address) return address.failure();
  // Connected blocking (a unix socket's connect does not wait on a network), then non-blocking.
  FileDescriptor fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return SystemError("socket for", path);
  int result;
  do {
    result = connect(fd.get(), reinterpret_cast<const sockaddr*>(&*address), sizeof(*address));
  } while (result != 0 && errno == EINTR);
  if (result != 0) return SystemError("connect to", path);
  const int flags = fcntl(fd.get(), F_GETFL);
  if (flags < 0 || fcntl(fd.get(), F_SETFL, flags | O_NONBLOCK) != 0)
    return SystemError("fcntl on", path);
  return fd;
}

}  // namespace gpustack::kubelet_rpc
