#include "host/loader/loader.h"

#include <boost/dll/library_info.hpp>
#include <boost/dll/shared_library.hpp>

#include <dlfcn.h>

#include <algorithm>
#include <exception>
#include <set>
#include <system_error>

#include "host/common/logging.h"
#include "host/loader/file_trust.h"

namespace gpustack::loader {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxIdentityString = 4096;
constexpr size_t kMaxVendorIds = 64;

bool IsValidResourceName(const std::string& name) {
  // <domain>/<name>: a DNS subdomain, then a name segment of [A-Za-z0-9._-].
  const size_t slash = name.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == name.size()) return false;
  if (name.find('/', slash + 1) != std::string::npos) return false;
  const std::string domain = name.substr(0, slash);
  if (domain.find('.') == std::string::npos) return false;
  for (char c : domain) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.')) return false;
  }
  for (char c : name.substr(slash + 1)) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      return false;
    }
  }
  return true;
}

// Checks what identify reported against the manifest and the ABI's rules.
Result<PluginIdentity> ReadIdentity(const gpustack_plugin_api& api, const Manifest& manifest) {
  const std::string where = manifest.library_path.string();
  gpustack_plugin_identity raw{};
  raw.struct_size = sizeof(raw);
  const gpustack_status status = api.identify(&raw);
  if (status != GPUSTACK_STATUS_OK) {
    const gpustack_str message = api.last_error_message();
    const bool readable = message.data != nullptr && message.size <= kMaxIdentityString;
    return Error{where + ": identify failed: " + sdk::StatusName(status) + ": " +
                 (readable ? std::string(sdk::View(message)) : "(unreadable message)")};
  }
  for (const gpustack_str* s : {&raw.manufacturer, &raw.display_name, &raw.base_resource_name,
                                &raw.plugin_version, &raw.partition_kind}) {
    if ((s->size > 0 && s->data == nullptr) || s->size > kMaxIdentityString) {
      return Error{where + ": identify returned a string with no data or of " +
                   std::to_string(s->size) + " bytes"};
    }
  }
  if ((raw.pci_vendor_id_count > 0 && raw.pci_vendor_ids == nullptr) ||
      raw.pci_vendor_id_count > kMaxVendorIds) {
    return Error{where + ": identify returned pci_vendor_id_count " +
                 std::to_string(raw.pci_vendor_id_count) + " with no array or above " +
                 std::to_string(kMaxVendorIds)};
  }
  PluginIdentity id;
  id.manufacturer = sdk::View(raw.manufacturer);
  id.display_name = sdk::View(raw.display_name);
  id.base_resource_name = sdk::View(raw.base_resource_name);
  id.plugin_version = sdk::View(raw.plugin_version);
  id.pci_vendor_ids.assign(raw.pci_vendor_ids, raw.pci_vendor_ids + raw.pci_vendor_id_count);
  id.capabilities = raw.capabilities;
  id.partition_kind = sdk::View(raw.partition_kind);

  if (id.manufacturer != manifest.name) {
    return Error{where + ": identify says manufacturer \"" + id.manufacturer +
                 "\" but its manifest says \"" + manifest.name + "\""};
  }
  if (!IsValidResourceName(id.base_resource_name)) {
    return Error{where + ": base resource name \"" + id.base_resource_name +
                 "\" is not <domain>/<name> (e.g. nvidia.com/gpu)"};
  }
  if (id.display_name.empty()) return Error{where + ": identify returned an empty display name"};
  auto sorted = [](std::vector<uint16_t> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  if (sorted(id.pci_vendor_ids) != sorted(manifest.pci_vendor_ids)) {
    return Error{where + ": identify's PCI vendor ids differ from its manifest's"};
  }
  const bool partitions = (id.capabilities & GPUSTACK_CAP_PARTITIONING) != 0;
  if (partitions == id.partition_kind.empty()) {
    return Error{where + (partitions ? ": claims partitioning but names no partition kind"
                                     : ": names a partition kind but does not claim partitioning")};
  }
  return id;
}

}  // namespace

std::vector<fs::path> PluginSearchPath(const std::vector<std::string>& extra,
                                       const std::string& env_path, const fs::path& default_dir) {
  std::vector<fs::path> dirs;
  auto add = [&](const std::string& dir) {
    if (dir.empty()) return;
    fs::path p = fs::path(dir).lexically_normal();
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

fs::path DefaultPluginDir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return fs::path("/usr/lib/gpustack/plugins");
  return (exe.parent_path() / ".." / "lib" / "gpustack" / "plugins").lexically_normal();
}

std::vector<ManifestCandidate> FindManifests(const std::vector<fs::path>& dirs,
                                             const LoaderOptions& options,
                                             std::vector<std::string>* problems) {
  std::vector<ManifestCandidate> candidates;
  std::set<std::string> taken;
  for (const fs::path& dir : dirs) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      problems->push_back("plugin directory " + dir.string() + " does not exist; skipped");
      continue;
    }
    if (auto trusted = CheckTrusted(dir, options.trusted_uid); !trusted) {
      problems->push_back("plugin directory refused: " + trusted.error());
      continue;
    }
    std::vector<fs::path> files;
    fs::directory_iterator it(dir, ec);
    for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
      if (it->path().extension() == ".json") files.push_back(it->path());
    }
    if (ec) {
      problems->push_back("plugin directory " + dir.string() +
                          " cannot be listed: " + ec.message());
      continue;
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& file : files) {
      if (auto trusted = CheckTrusted(file, options.trusted_uid); !trusted) {
        candidates.push_back({file, Error{"manifest refused: " + trusted.error()}});
        continue;
      }
      Result<Manifest> manifest = ReadManifest(file);
      if (manifest && !taken.insert(manifest->name).second) {
        candidates.push_back(
            {file, Error{file.string() + ": plugin \"" + manifest->name +
                         "\" is shadowed by one found earlier in the search path"}});
        continue;
      }
      candidates.push_back({file, std::move(manifest)});
    }
  }
  return candidates;
}

Result<AbiVersion> CheckNegotiation(AbiVersion host, uint32_t plugin_major, uint32_t plugin_minor,
                                    int32_t status) {
  const std::string versions = "host ABI " + std::to_string(host.major) + "." +
                               std::to_string(host.minor) + ", plugin ABI " +
                               std::to_string(plugin_major) + "." + std::to_string(plugin_minor);
  if (status == GPUSTACK_STATUS_INCOMPATIBLE_VERSION) {
    return Error{"the plugin refused the host's ABI (" + versions + ")"};
  }
  if (status != GPUSTACK_STATUS_OK) {
    return Error{"negotiation failed with " + sdk::StatusName(status) + " (" + versions + ")"};
  }
  if (plugin_major != host.major) {
    return Error{"the plugin answered a different ABI major (" + versions + ")"};
  }
  return AbiVersion{host.major, std::min(host.minor, plugin_minor)};
}

namespace {

Result<std::unique_ptr<Plugin>> LoadUnguarded(const Manifest& manifest,
                                              const LoaderOptions& options) {
  const std::string where = manifest.library_path.string();
  if (manifest.abi_major != options.host_abi.major) {
    // Refused from the manifest alone: the library is never opened.
    return Error{manifest.manifest_path.string() + ": manifest declares ABI major " +
                 std::to_string(manifest.abi_major) + ", this host speaks " +
                 std::to_string(options.host_abi.major) + "; rebuild the plugin against SDK " +
                 std::to_string(options.host_abi.major) + ".x"};
  }
  std::error_code ec;
  if (!fs::is_regular_file(manifest.library_path, ec)) {
    return Error{where + ": plugin library not found (named by " + manifest.manifest_path.string() +
                 ")"};
  }
  if (auto trusted = CheckTrusted(manifest.library_path, options.trusted_uid); !trusted) {
    return Error{"plugin library refused: " + trusted.error()};
  }

  // Read the ELF symbol table before dlopen, so a library without the entry point never gets to
  // run its constructors.
  try {
    boost::dll::library_info info(manifest.library_path);
    const std::vector<std::string> symbols = info.symbols();
    if (std::find(symbols.begin(), symbols.end(), GPUSTACK_PLUGIN_ENTRY_SYMBOL) == symbols.end()) {
      return Error{where + ": does not export " GPUSTACK_PLUGIN_ENTRY_SYMBOL
                           " (not a GPUStack plugin, or built without the SDK's export map)"};
    }
  } catch (const std::exception& e) {
    return Error{where + ": not a readable shared library: " + e.what()};
  }

  boost::dll::shared_library library;
  try {
    // RTLD_NOW: a missing symbol fails here, not mid-call. RTLD_LOCAL: plugins cannot see or
    // interpose each other's symbols.
    library.load(manifest.library_path,
                 boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  } catch (const std::exception& e) {
    return Error{where + ": cannot be loaded: " + e.what()};
  }
  // Pin the library for the life of the process: a plugin's code must never vanish under a thread
  // or a thread_local destructor it left behind. Loading the same plugin again is then only a
  // reference count.
  if (void* pinned =
          ::dlopen(manifest.library_path.c_str(), RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE)) {
    ::dlclose(pinned);
  }
  auto& negotiate =
      library.get<gpustack_status(gpustack_negotiate_args*)>(GPUSTACK_PLUGIN_ENTRY_SYMBOL);

  gpustack_negotiate_args args{};
  args.struct_size = sizeof(args);
  args.host_abi_major = options.host_abi.major;
  args.host_abi_minor = options.host_abi.minor;
  const gpustack_status status = negotiate(&args);
  auto negotiated =
      CheckNegotiation(options.host_abi, args.plugin_abi_major, args.plugin_abi_minor, status);
  if (!negotiated) return Error{where + ": " + negotiated.error()};

  gpustack_plugin_api api;
  if (!sdk::CopyPrefix(args.api, GPUSTACK_PLUGIN_API_STRUCT_SIZE_V1_0, &api)) {
    return Error{where + ": " +
                 (args.api == nullptr
                      ? std::string("negotiation succeeded but returned no function table")
                      : "function table struct_size " + std::to_string(args.api->struct_size) +
                            " is smaller than the ABI 1.0 minimum " +
                            std::to_string(GPUSTACK_PLUGIN_API_STRUCT_SIZE_V1_0))};
  }
  if (args.api->struct_size > sizeof(api)) {
    Logger("loader")->debug("{}: function table is {} bytes, this host knows {}; using the prefix",
                            where, args.api->struct_size, sizeof(api));
  }
  if (api.abi_major != args.plugin_abi_major) {
    return Error{where + ": function table says ABI major " + std::to_string(api.abi_major) +
                 " but negotiation answered " + std::to_string(args.plugin_abi_major)};
  }
  if (api.last_error_message == nullptr || api.identify == nullptr || api.init == nullptr ||
      api.shutdown == nullptr) {
    return Error{where +
                 ": function table lacks a required function "
                 "(last_error_message, identify, init and shutdown are required)"};
  }

  auto identity = ReadIdentity(api, manifest);
  if (!identity) return Error{identity.error()};
  if ((identity->capabilities & GPUSTACK_CAP_PARTITIONING) != 0 &&
      (api.list_partitions == nullptr || api.create_partition == nullptr ||
       api.destroy_partition == nullptr)) {
    return Error{where + ": claims partitioning but lacks the partition functions"};
  }
  return std::make_unique<Plugin>(manifest, std::move(library), api, *negotiated,
                                  std::move(identity).value());
}

}  // namespace

Result<std::unique_ptr<Plugin>> Load(const Manifest& manifest, const LoaderOptions& options) {
  // Whatever a plugin does wrong while loading, the host reports it and goes on.
  try {
    return LoadUnguarded(manifest, options);
  } catch (const std::exception& e) {
    return Error{manifest.library_path.string() + ": loading failed: " + e.what()};
  }
}

Result<std::unique_ptr<Plugin>> LoadFromManifest(const fs::path& manifest_path,
                                                 const LoaderOptions& options) {
  for (const fs::path& p : {manifest_path.parent_path(), manifest_path}) {
    if (auto trusted = CheckTrusted(p.empty() ? fs::path(".") : p, options.trusted_uid); !trusted) {
      return Error{"plugin refused: " + trusted.error()};
    }
  }
  auto manifest = ReadManifest(manifest_path);
  if (!manifest) return Error{manifest.error()};
  return Load(*manifest, options);
}

}  // namespace gpustack::loader
