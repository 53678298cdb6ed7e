// Files the host reads but does not control (a node config, a manifest, sysfs and /proc
// attributes, containerd's config): read only when they are regular files of bounded size, so a
// FIFO planted at the path never blocks the host and /dev/zero never floods it. And the identity
// of a file on disk, to tell whether a plugin library changed.
#ifndef GPUSTACK_HOST_COMMON_FILES_H_
#define GPUSTACK_HOST_COMMON_FILES_H_

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "host/common/result.h"

namespace gpustack {

// The contents of `path`, a regular file of at most `max_bytes`. `what` names the file in the
// error ("node config"): not found is kNotFound, anything else kInvalidArgument.
Result<std::string> ReadSmallFile(const std::filesystem::path& path, size_t max_bytes,
                                  std::string_view what);

// The number in a field of /proc/<pid>/status ("VmRSS" and the other sizes in KB, "Threads");
// -1 when the process or the field is not there. `pid` "self" is the calling process.
long ProcStatusField(std::string_view pid, std::string_view field);

// A file as it is on disk now: the same identity means the same file, unchanged.
struct FileIdentity {
  uint64_t device = 0;
  uint64_t inode = 0;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  bool operator==(const FileIdentity&) const = default;
};
Result<FileIdentity> IdentifyFile(const std::filesystem::path& path);

// Replaces `path` with `text` through a temporary file beside it and a rename: a reader sees the
// old file or the new one, never half of one. With `durable`, the data and the rename are on disk
// (fsync of the file and its directory) before it returns: a record a crash must not lose.
Status WriteFileAtomically(const std::filesystem::path& path, std::string_view text,
                           std::filesystem::perms perms, bool durable = false);

}  // namespace gpustack

#endif  // GPUSTACK_HOST_COMMON_FILES_H_
