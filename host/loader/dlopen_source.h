// The plugins installed on this node: manifests in plugin directories (read before any library is
// opened), each library loaded with dlopen through the SDK's client. Whatever a directory, a
// manifest or a library does wrong is reported with the file and the reason, and the host goes on
// with the others.
#ifndef GPUSTACK_HOST_LOADER_DLOPEN_SOURCE_H_
#define GPUSTACK_HOST_LOADER_DLOPEN_SOURCE_H_

#include <sys/types.h>
#include <unistd.h>

#include <gpustack/client/manifest.hpp>
#include <gpustack/client/plugin.hpp>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "host/common/result.h"
#include "host/loader/loaded_plugin.h"
#include "host/runtime/plugin_source.h"

namespace gpustack::loader {

struct LoaderOptions {
  client::AbiVersion host_abi;      // tests override it to play an older or newer host
  uid_t trusted_uid = ::geteuid();  // besides root, the only owner a plugin file may have
};

// The directories to search, in order: `extra` (flags), then `env_path` (the GPUSTACK_PLUGIN_PATH
// value, colon-separated; may be empty), then `default_dir`. Duplicates are dropped.
std::vector<std::filesystem::path> PluginSearchPath(const std::vector<std::string>& extra,
                                                    const std::string& env_path,
                                                    const std::filesystem::path& default_dir);

// The install location relative to an executable: <exe>/../lib/gpustack/plugins.
std::filesystem::path DefaultPluginDir(const std::filesystem::path& executable);
// ... of the running executable (/usr/lib/gpustack/plugins when it cannot be told).
std::filesystem::path DefaultPluginDir();

class DlopenPluginSource final : public runtime::PluginSource {
 public:
  // `dirs` in search order. A missing directory among `required` (given by a flag or the
  // environment) is an error; a missing other one (the install default) only a note.
  DlopenPluginSource(std::vector<std::filesystem::path> dirs,
                     std::vector<std::filesystem::path> required, LoaderOptions options = {});

  std::vector<std::string> Places() const override;
  // Every <name>.json in the directories, in search order (by file name within one): a manifest
  // that is untrusted, invalid, or not named after its plugin is refused; a plugin name an
  // earlier directory already provides is shadowed (a note names both files).
  std::vector<runtime::PluginCandidate> Find(
      std::vector<runtime::SourceProblem>* problems) override;
  Result<std::unique_ptr<runtime::PluginBackend>> Load(
      const runtime::PluginCandidate& candidate) override;

 private:
  std::vector<std::filesystem::path> dirs_;
  std::vector<std::filesystem::path> required_;
  LoaderOptions options_;
  std::map<std::string, client::Manifest> manifests_;  // by origin, from the last Find
};

// Trust checks, then the client's Open, for a manifest named directly (tools and tests).
Result<std::unique_ptr<LoadedPlugin>> LoadFromManifest(const std::filesystem::path& manifest_path,
                                                       const LoaderOptions& options = {});

}  // namespace gpustack::loader

#endif  // GPUSTACK_HOST_LOADER_DLOPEN_SOURCE_H_
