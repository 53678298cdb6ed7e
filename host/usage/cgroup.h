// Which Pod a host process belongs to, from its /proc/<pid>/cgroup (docs/behaviour.md §8.1): the
// kubelet puts every container in a cgroup under the Pod's, named after the Pod's uid. Both
// hierarchies (v1 lines `N:controllers:path`, the v2 line `0::path`), both cgroup drivers
// (cgroupfs `.../pod<uid>/<id>`, systemd `...-pod<uid_with_underscores>.slice/<rt>-<id>.scope`)
// and the runtimes' scope names (containerd `cri-containerd-`, CRI-O `crio-`, `docker-`). A path
// seen through a cgroup namespace (`/../../kubepods/...`) is read the same. Pure.
#ifndef GPUSTACK_HOST_USAGE_CGROUP_H_
#define GPUSTACK_HOST_USAGE_CGROUP_H_

#include <string>
#include <string_view>

#include "host/common/result.h"

namespace gpustack::usage {

struct ContainerRef {
  std::string pod_uid;       // with dashes, as metadata.uid writes it
  std::string container_id;  // the runtime's id (hex); empty when the process is in the Pod's own
                             // cgroup (its sandbox, or a runtime helper)
};

// Why a process could not be placed in a Pod: the attribution reasons the node daemon logs.
inline constexpr const char* kNoPodComponent = "no_pod_component";  // not in any Pod's cgroup
inline constexpr const char* kExited = "exited";                    // gone before it was read
inline constexpr const char* kUnknownPod = "unknown_pod";           // a Pod the node does not run
inline constexpr const char* kMediated = "mediated";  // a Pod without a grant on that card

// The Pod and container a /proc/<pid>/cgroup text names; an error with reason kNoPodComponent
// when no line does.
Result<ContainerRef> ContainerOfCgroup(std::string_view proc_cgroup);

}  // namespace gpustack::usage

#endif  // GPUSTACK_HOST_USAGE_CGROUP_H_
