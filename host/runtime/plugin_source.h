// Where the node runtime's plugins come from: a source lists the plugins available to this node
// (without running any of their code) and loads the ones the runtime enables. The loader's
// source reads manifests from plugin directories and dlopens libraries; tests use in-memory ones.
#ifndef GPUSTACK_HOST_RUNTIME_PLUGIN_SOURCE_H_
#define GPUSTACK_HOST_RUNTIME_PLUGIN_SOURCE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "host/common/result.h"
#include "host/runtime/backend.h"

namespace gpustack::runtime {

struct PluginCandidate {
  std::string name;    // the manufacturer key; empty when even the manifest could not be read
  std::string origin;  // where it was found: the manifest's path
  std::string library_path;
  std::vector<uint16_t> pci_vendor_ids;
  // Why it cannot be used at all (an invalid or untrusted manifest, a conflicting name), decided
  // before any of its code is loaded.
  Status usable = Ok{};
};

// Something that kept a whole place from being searched, or a note about one.
struct SourceProblem {
  std::string message;
  bool fatal = true;  // false: a note (the default plugin directory does not exist)
};

class PluginSource {
 public:
  virtual ~PluginSource() = default;
  // The places searched, in order (for reports).
  virtual std::vector<std::string> Places() const = 0;
  // Every plugin available to this node, in precedence order.
  virtual std::vector<PluginCandidate> Find(std::vector<SourceProblem>* problems) = 0;
  // Loads one candidate (its library and identity; not yet initialized).
  virtual Result<std::unique_ptr<PluginBackend>> Load(const PluginCandidate& candidate) = 0;
};

}  // namespace gpustack::runtime

#endif  // GPUSTACK_HOST_RUNTIME_PLUGIN_SOURCE_H_
