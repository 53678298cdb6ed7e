#include "host/common/file_trust.h"

#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>

namespace gpustack {

std::optional<std::string> TrustProblem(const struct stat& info, uid_t host_uid) {
  if (info.st_uid != 0 && info.st_uid != host_uid) {
    return "owned by uid " + std::to_string(info.st_uid) + ", not root or the host's user";
  }
  if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return std::string("writable by ") + ((info.st_mode & S_IWOTH) != 0 ? "others" : "its group") +
           " (mode " +
           [&] {
             char mode[8];
             std::snprintf(mode, sizeof mode, "%04o", info.st_mode & 07777);
             return std::string(mode);
           }() +
           ")";
  }
  return std::nullopt;
}

std::optional<std::string> AncestorTrustProblem(const struct stat& info, uid_t host_uid) {
  if (info.st_uid == 0 && (info.st_mode & S_ISVTX) != 0) return std::nullopt;
  return TrustProblem(info, host_uid);
}

namespace {

// Nobody can replace a directory's entries through a read-only mount, whatever its mode: the
// kubelet makes ConfigMap and emptyDir volumes 0777, and mounts them read-only where asked.
bool OnReadOnlyMount(const std::filesystem::path& dir) {
  struct statvfs fs {};
  return ::statvfs(dir.c_str(), &fs) == 0 && (fs.f_flag & ST_RDONLY) != 0;
}

}  // namespace

Status CheckTrusted(const std::filesystem::path& path, uid_t host_uid) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    return Error{path.string() + ": " + std::strerror(errno)};
  }
  if (auto problem = TrustProblem(info, host_uid)) {
    return Error{path.string() + " is not trusted: " + *problem};
  }
  // A symlink itself can be swapped by whoever owns it.
  if (::lstat(path.c_str(), &info) == 0 && S_ISLNK(info.st_mode) && info.st_uid != 0 &&
      info.st_uid != host_uid) {
    return Error{path.string() + " is not trusted: a symlink owned by uid " +
                 std::to_string(info.st_uid)};
  }
  std::error_code ec;
  const std::filesystem::path real = std::filesystem::canonical(path, ec);
  if (ec) return Error{path.string() + ": " + ec.message()};
  for (std::filesystem::path dir = real.parent_path();; dir = dir.parent_path()) {
    if (::stat(dir.c_str(), &info) != 0) return Error{dir.string() + ": " + std::strerror(errno)};
    if (auto problem = AncestorTrustProblem(info, host_uid);
        problem && !((info.st_uid == 0 || info.st_uid == host_uid) && OnReadOnlyMount(dir))) {
      return Error{path.string() + " is not trusted: its directory " + dir.string() + " is " +
                   *problem};
    }
    if (dir == dir.root_path()) break;
  }
  return Ok{};
}

}  // namespace gpustack
