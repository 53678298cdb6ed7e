// The CDI spec the DRA front end writes for a prepared claim (docs/dra.md): one CDI device per
// claim, kind "gpustack.ai/claim", named by the claim's uid, whose container edits are the
// plugin's grant (its visible-devices variable, the slice budget's variables, device nodes,
// mounts). The kubelet hands its name to the container engine, which applies the edits. Pure.
#ifndef GPUSTACK_HOST_DRA_CDI_SPEC_H_
#define GPUSTACK_HOST_DRA_CDI_SPEC_H_

#include <gpustack/plugin_types.hpp>
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpustack::dra {

inline constexpr const char* kCdiKind = "gpustack.ai/claim";

// "gpustack.ai/claim=<uid>".
std::string CdiDeviceName(const std::string& claim_uid);
// The spec's file name in the CDI directory: "gpustack.ai-claim_<uid>.json"; and the claim uid
// of such a name (nothing for another file).
std::string CdiSpecFileName(const std::string& claim_uid);
std::optional<std::string> ClaimOfCdiSpecFile(std::string_view file_name);

// The spec for one claim. Edits that are CDI devices of their own (a vendor's spec) are not
// edits here: the caller names them beside this device. Annotation edits have no CDI form and
// are left out (in `dropped`, for the log).
nlohmann::json ClaimCdiSpec(const std::string& claim_uid,
                            const std::vector<sdk::ContainerEdit>& edits,
                            std::vector<std::string>* dropped = nullptr);

}  // namespace gpustack::dra

#endif  // GPUSTACK_HOST_DRA_CDI_SPEC_H_
