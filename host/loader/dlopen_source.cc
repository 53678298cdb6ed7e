#include "host/loader/dlopen_source.h"

#include <algorithm>
#include <system_error>

#include "host/common/file_trust.h"

namespace gpustack::loader {
namespace {

namespace fs = std::filesystem;

// Opens a manifest's library once its file passed the trust rules.
Result<std::unique_ptr<LoadedPlugin>> Open(const client::Manifest& manifest,
                                           const LoaderOptions& options) {
  if (auto trusted = CheckTrusted(manifest.library_path, options.trusted_uid); !trusted) {
    return Error{"plugin library refused: " + trusted.error(), Code::kFailedPrecondition};
  }
  client::OpenOptions open;
  open.host_abi = options.host_abi;
  auto plugin = client::Plugin::Open(manifest, open);
  if (!plugin) return std::move(plugin).failure();
  return std::make_unique<LoadedPlugin>(std::move(*plugin));
}

}  // namespace

std::vector<fs::path> PluginSearchPath(const std::vector<std::string>& extra,
                                       const std::string& env_path, const fs::path& default_dir) {
  std::vector<fs::path> dirs;
  auto add = [&](const std::string& dir) {
    if (dir.empty()) return;
    std::error_code ec;
    fs::path p = fs::absolute(fs::path(dir), ec).lexically_normal();
    if (ec) p = fs::path(dir).lexically_normal();
    if (std::find(dirs.begin(), dirs.end(), p) == dirs.end()) dirs.push_back(p);
  };
  for (const std::string& dir : extra) add(dir);
  size_t start = 0;
  while (start <= env_path.size()) {
    size_t colon = env_path.find(':', start);
    if (colon == std::string::npos) colon = env_path.size();
    add(env_path.substr(start, colon - start));
    start = colon + 1;
  }
  add(default_dir.string());
  return dirs;
}

fs::path DefaultPluginDir(const fs::path& executable) {
  return (executable.parent_path() / ".." / "lib" / "gpustack" / "plugins").lexically_normal();
}

fs::path DefaultPluginDir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path("/usr/lib/gpustack/plugins") : DefaultPluginDir(exe);
}

DlopenPluginSource::DlopenPluginSource(std::vector<fs::path> dirs, std::vector<fs::path> required,
                                       LoaderOptions options)
    : dirs_(std::move(dirs)), required_(std::move(required)), options_(options) {}

std::vector<std::string> DlopenPluginSource::Places() const {
  std::vector<std::string> out;
  for (const fs::path& dir : dirs_) out.push_back(dir.string());
  return out;
}

std::vector<runtime::PluginCandidate> DlopenPluginSource::Find(
    std::vector<runtime::SourceProblem>* problems) {
  std::vector<runtime::PluginCandidate> candidates;
  std::map<std::string, std::string> taken;  // plugin name -> the manifest that provides it
  manifests_.clear();
  for (const fs::path& dir : dirs_) {
    const bool required = std::find(required_.begin(), required_.end(), dir) != required_.end();
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      problems->push_back(
          {"plugin directory " + dir.string() + " does not exist" + (required ? "" : "; skipped"),
           required});
      continue;
    }
    if (auto trusted = CheckTrusted(dir, options_.trusted_uid); !trusted) {
      problems->push_back({"plugin directory refused: " + trusted.error(), true});
      continue;
    }
    std::vector<fs::path> files;
    fs::directory_iterator it(dir, ec);
    for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
      if (it->path().extension() == ".json") files.push_back(it->path());
    }
    if (ec) {
      problems->push_back(
          {"plugin directory " + dir.string() + " cannot be listed: " + ec.message(), true});
      continue;
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& file : files) {
      runtime::PluginCandidate candidate;
      candidate.origin = file.string();
      if (auto trusted = CheckTrusted(file, options_.trusted_uid); !trusted) {
        candidate.usable = Error{"manifest refused: " + trusted.error(), Code::kFailedPrecondition};
        candidates.push_back(std::move(candidate));
        continue;
      }
      auto manifest = client::ReadManifest(file);
      if (!manifest) {
        candidate.usable = manifest.failure();
        candidates.push_back(std::move(candidate));
        continue;
      }
      candidate.name = manifest->name;
      candidate.library_path = manifest->library_path.string();
      candidate.pci_vendor_ids = manifest->pci_vendor_ids;
      // One manifest per plugin name per directory, by construction: the file is <name>.json.
      if (file.stem() != manifest->name) {
        candidate.usable = Error{"manifest " + file.string() + " names plugin \"" + manifest->name +
                                     "\" but is not named " + manifest->name +
                                     ".json; a manifest is named after its plugin",
                                 Code::kInvalidArgument};
        candidates.push_back(std::move(candidate));
        continue;
      }
      if (auto [earlier, fresh] = taken.emplace(manifest->name, file.string()); !fresh) {
        problems->push_back({"plugin " + manifest->name + " at " + file.string() +
                                 " is shadowed by " + earlier->second +
                                 " (earlier in the search path); not loaded",
                             false});
        continue;
      }
      manifests_[candidate.origin] = std::move(*manifest);
      candidates.push_back(std::move(candidate));
    }
  }
  return candidates;
}

Result<std::unique_ptr<runtime::PluginBackend>> DlopenPluginSource::Load(
    const runtime::PluginCandidate& candidate) {
  auto manifest = manifests_.find(candidate.origin);
  if (manifest == manifests_.end()) {
    return Error{candidate.origin + ": not a manifest this source found", Code::kNotFound};
  }
  auto plugin = Open(manifest->second, options_);
  if (!plugin) return std::move(plugin).failure();
  return std::unique_ptr<runtime::PluginBackend>(std::move(*plugin));
}

Result<std::unique_ptr<LoadedPlugin>> LoadFromManifest(const fs::path& manifest_path,
                                                       const LoaderOptions& options) {
  for (const fs::path& p : {manifest_path.parent_path(), manifest_path}) {
    if (auto trusted = CheckTrusted(p.empty() ? fs::path(".") : p, options.trusted_uid); !trusted) {
      return Error{"plugin refused: " + trusted.error(), Code::kFailedPrecondition};
    }
  }
  auto manifest = client::ReadManifest(manifest_path);
  if (!manifest) return std::move(manifest).failure();
  return Open(*manifest, options);
}

}  // namespace gpustack::loader
