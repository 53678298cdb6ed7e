// Plugins are code the host runs with its own privileges, so a plugin file or directory that a
// less-privileged user could replace is refused: it must be owned by root (or by the user the host
// runs as) and not be writable by group or others.
#ifndef GPUSTACK_HOST_COMMON_FILE_TRUST_H_
#define GPUSTACK_HOST_COMMON_FILE_TRUST_H_

#include <sys/stat.h>
#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>

#include "host/common/result.h"

namespace gpustack {

// Why a file with this metadata is untrusted, or nullopt when it is trusted. Pure.
std::optional<std::string> TrustProblem(const struct stat& info, uid_t host_uid);

// Why a directory above a plugin is untrusted: as TrustProblem, except that a root-owned sticky
// directory (like /tmp) may be writable by all, since nobody else can replace its entries. Pure.
std::optional<std::string> AncestorTrustProblem(const struct stat& info, uid_t host_uid);

// Checks `path` (following symlinks, then the link itself) against TrustProblem, and every
// directory above its real path against AncestorTrustProblem: whoever can write to any of them
// could swap the plugin. A directory on a read-only mount passes whatever its mode (a ConfigMap
// or emptyDir volume mounted read-only into the node daemon's container), if its owner does.
Status CheckTrusted(const std::filesystem::path& path, uid_t host_uid);

}  // namespace gpustack

#endif  // GPUSTACK_HOST_COMMON_FILE_TRUST_H_
