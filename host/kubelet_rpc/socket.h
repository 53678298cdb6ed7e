// The descriptors the kubelet RPC server and client hold: an owned descriptor, an eventfd that
// wakes a poll() from another thread, and unix-socket listen and connect.
#ifndef GPUSTACK_HOST_KUBELET_RPC_SOCKET_H_
#define GPUSTACK_HOST_KUBELET_RPC_SOCKET_H_

#include <chrono>
#include <filesystem>

#include "host/common/result.h"

namespace gpustack::kubelet_rpc {

class FileDescriptor {
 public:
  FileDescriptor() = default;
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() { Reset(); }
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  FileDescriptor& operator=(FileDescriptor&& other) noexcept;
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  void Reset();

 private:
  int fd_ = -1;
};

// An eventfd: Wake() from any thread makes it readable until Drain().
class Waker {
 public:
  Waker();
  bool valid() const { return static_cast<bool>(fd_); }
  int fd() const { return fd_.get(); }
  void Wake();
  void Drain();

 private:
  FileDescriptor fd_;
};

// A non-blocking listening socket at `path` (a stale file there is replaced).
Result<FileDescriptor> ListenUnix(const std::filesystem::path& path);
// A non-blocking connected socket to `path`.
Result<FileDescriptor> ConnectUnix(const std::filesystem::path& path);

}  // namespace gpustack::kubelet_rpc

#endif  // GPUSTACK_HOST_KUBELET_RPC_SOCKET_H_
