// Finding and loading plugins. A plugin that is missing, untrusted, of the wrong ABI, or that
// misbehaves during negotiation or identify is refused with a message naming the file and the
// reason; the caller keeps going with the others.
#ifndef GPUSTACK_HOST_LOADER_LOADER_H_
#define GPUSTACK_HOST_LOADER_LOADER_H_

#include <sys/types.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "host/common/result.h"
#include "host/loader/manifest.h"
#include "host/loader/plugin.h"

namespace gpustack::loader {

struct LoaderOptions {
  AbiVersion host_abi;              // tests override it to play an older or newer host
  uid_t trusted_uid = ::geteuid();  // besides root, the only owner a plugin file may have
};

// The directories to search, in order: `extra` (flags), then `env_path` (the GPUSTACK_PLUGIN_PATH
// value, colon-separated; may be empty), then `default_dir`. Duplicates are dropped.
std::vector<std::filesystem::path> PluginSearchPath(const std::vector<std::string>& extra,
                                                    const std::string& env_path,
                                                    const std::filesystem::path& default_dir);

// The install location relative to the running executable: <exe>/../lib/gpustack/plugins.
std::filesystem::path DefaultPluginDir();

struct ManifestCandidate {
  std::filesystem::path path;
  Result<Manifest> manifest;  // an error when the file is unreadable, invalid or untrusted
};

// Every *.json in the directories, in search order; within a directory by file name. A missing
// directory adds a problem and is skipped. A manifest whose name an earlier one already took is
// reported as shadowed.
std::vector<ManifestCandidate> FindManifests(const std::vector<std::filesystem::path>& dirs,
                                             const LoaderOptions& options,
                                             std::vector<std::string>* problems);

// Checks the version a plugin answered against the host's; returns the version both will use.
Result<AbiVersion> CheckNegotiation(AbiVersion host, uint32_t plugin_major, uint32_t plugin_minor,
                                    int32_t status);

// Loads the library named by `manifest`, negotiates, and identifies. The library must be trusted,
// export the entry symbol, and agree with its manifest.
Result<std::unique_ptr<Plugin>> Load(const Manifest& manifest, const LoaderOptions& options);

// ReadManifest + trust checks + Load, for tools that take a manifest path.
Result<std::unique_ptr<Plugin>> LoadFromManifest(const std::filesystem::path& manifest_path,
                                                 const LoaderOptions& options);

}  // namespace gpustack::loader

#endif  // GPUSTACK_HOST_LOADER_LOADER_H_
