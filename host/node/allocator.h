// Gate 5 (docs/behaviour.md §6.2): which container an Allocate serves, whether its request fits the
// cards the kubelet offered, the charge in the node ledger, the plugin's grant, the partition it
// needs, and the durable record on the Pod. One allocator serves every resource of every
// manufacturer on the node; the kubelet front end (device_plugin.h) only translates.
//
// Safety: identify -> fit -> reserve run under one mutex with the ledger's, so two Allocates can
// never take the same room; the Pod annotation is written before the kubelet gets an answer, and
// a failure after reserving gives the charge back, so nothing is held that no record names.
#ifndef GPUSTACK_HOST_NODE_ALLOCATOR_H_
#define GPUSTACK_HOST_NODE_ALLOCATOR_H_

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "host/cdi/cdi.h"
#include "host/common/result.h"
#include "host/enforcement/enforcement.h"
#include "host/ledger/ledger.h"
#include "host/node/tokens.h"
#include "host/runtime/node_runtime.h"

namespace gpustack::node {

using Json = nlohmann::json;

// Where the allocator learns about Pods, and where it records them (the apiserver, the kubelet's
// pod-resources API; an in-memory table in tests).
class PodDirectory {
 public:
  virtual ~PodDirectory() = default;
  // The Pods bound to this node, fresh (not from a cache that may lag the kubelet).
  virtual Result<std::vector<Json>> PodsOnNode() = 0;
  // The same from a watch cache, when there is one: tried first, and a fresh list whenever that
  // does not succeed (the Pod may be newer than the cache).
  virtual std::optional<std::vector<Json>> CachedPods() { return std::nullopt; }
  // "<namespace>/<name>/<container>" of every container the kubelet holds without a device of
  // `resource` yet; nullopt when the kubelet cannot be asked.
  virtual std::optional<std::set<std::string>> KubeletWaiting(const std::string& resource) = 0;
  // Writes the allocation annotation `value` on the Pod (only this incarnation of it).
  virtual Status Record(const Json& pod, const std::string& value) = 0;
};

struct AllocatorOptions {
  bool identify_by_kubelet = true;  // GPUSTACK_DEVICE_PLUGIN_IDENTIFY_BY_KUBELET
  bool release_terminated = true;   // GPUSTACK_LEDGER_RELEASE_TERMINATED_PODS
};

// One container's answer: the edits for the kubelet, and who got them.
struct AllocateResult {
  ledger::Owner owner;
  std::string pod;  // "<namespace>/<name>"
  std::vector<sdk::ContainerEdit> edits;
};

// The owner string a partition's ownership record carries: "<pod uid>/<container>".
std::string OwnerTag(const ledger::Owner& owner);

// The VRAM budget of a slice in MiB (docs/decisions.md D6): floor(card MiB x P / 100) from a
// percentage, else the MiB asked for, capped at the card.
uint64_t SliceBudgetMib(const ledger::Request& request, uint64_t card_memory_mib);

// Which of `pods` a kubelet Allocate of `count` devices of `resource` serves: containers asking
// for exactly that many, not already holding an allocation, narrowed to those the kubelet says
// it is waiting on (when it says), oldest Pod first, init containers before app containers.
struct Candidate {
  const Json* pod = nullptr;
  std::string container;
};
std::vector<Candidate> Candidates(const std::vector<Json>& pods, const ServedResource& resource,
                                  int64_t count, const ledger::NodeLedger& ledger,
                                  const std::optional<std::set<std::string>>& kubelet_waiting);

class Allocator {
 public:
  Allocator(runtime::NodeRuntime& runtime, PodDirectory& pods, AllocatorOptions options);

  // The devices the kubelet should pick (GetPreferredAllocation): those the ledger would charge
  // for the container this serves (gate 3's cards while they fit); the card with the most room
  // when no waiting container is found, from the watch cache nor a fresh list. N shared slots are
  // always N tokens of one card the kubelet offered.
  std::vector<std::string> Prefer(const ServedResource& resource,
                                  const std::vector<std::string>& available,
                                  const std::vector<std::string>& must_include, size_t size);

  // One container's Allocate. Errors carry gRPC-compatible codes: FAILED_PRECONDITION for a card
  // held in another mode or a request that does not fit, INVALID_ARGUMENT for foreign ids,
  // NOT_FOUND when no Pod waits for these devices.
  Result<AllocateResult> Allocate(const ServedResource& resource,
                                  const std::vector<std::string>& device_ids);

  // Rebuilds the ledger's allocations from the Pods' annotations (after a restart); returns how
  // many were restored. Allocations that cannot be restored are logged, never guessed.
  size_t Restore(const std::vector<Json>& pods);

  // Releases what Pods that are gone hold and what finished Pods give back; destroys partitions
  // whose owner no longer holds them. `pods` is a fresh list started at `listed_at`: allocations
  // made after it are left alone (their Pods may be newer than the list). Without `listed_at` the
  // list is a cache that may lag the kubelet: a Pod absent from it is not taken for gone.
  // True when anything changed.
  bool Reconcile(const std::vector<Json>& pods,
                 std::optional<std::chrono::steady_clock::time_point> listed_at);
  // Whether a partition's destroy failed (in use) and waits for the next Reconcile to retry it.
  bool HasPendingDestroys();
  // Releases what the Pods with these uids held: the apiserver said they were deleted.
  bool ReleaseDeleted(const std::set<std::string>& pod_uids);

  // The DRA front end (dra_plugin.h): what a ResourceClaim holds (whole cards, or one slice of a
  // card; `request` as dra::LedgerRequestFor builds it), charged to its owner (dra::ClaimOwner)
  // under the mutex every Allocate takes, and the plugin's grant for it. Idempotent: an owner
  // already holding exactly these cards gets its allocation again. A card taken meanwhile (by a
  // device-plugin Pod, or held in another mode) is FAILED_PRECONDITION with the ledger's reason;
  // nothing stays charged when the grant fails.
  struct ClaimGrant {
    ledger::Allocation allocation;
    std::vector<sdk::ContainerEdit> edits;
  };
  Result<ClaimGrant> GrantClaim(const ledger::Owner& owner, const std::string& manufacturer,
                                ledger::Request request, uint64_t card_memory_mib);
  // Gives back what a claim holds; false when it holds nothing.
  bool ReleaseClaim(const ledger::Owner& owner);
  // Adopts a claim's recorded allocation after a restart, before the kubelet is served; refused
  // (with the reason) when it would over-charge a card or names an unknown one.
  Status RestoreClaim(const ledger::Allocation& allocation);

  // What explains a refused Allocate beyond its reason, for the log: the cards the kubelet
  // offered and their state in the ledger, and the last preference given for the resource.
  std::string ExplainOffer(const ServedResource& resource,
                           const std::vector<std::string>& device_ids);

  // How often a Pod came with gate 3's chosen cards and they still fitted, or no longer did.
  uint64_t chosen_honoured() const { return chosen_honoured_; }
  uint64_t chosen_refused() const { return chosen_refused_; }

  // What makes a slice's budgets bind in its container (the daemon's; none in most tests): its
  // edits join every sliced grant, and a slice it cannot serve is refused.
  void set_enforcement(enforcement::SliceEnforcement* enforcement) { enforcement_ = enforcement; }
  // How cards reach containers (the daemon's; none: the plugins' visible-devices variables).
  void set_injector(cdi::Injector* injector) { injector_ = injector; }

  // Called (outside every lock) after the ledger changed: tokens and status are stale.
  void set_on_change(std::function<void()> on_change) { on_change_ = std::move(on_change); }

 private:
  Result<AllocateResult> AllocateFrom(const ServedResource& resource,
                                      const std::vector<std::string>& device_ids,
                                      const std::vector<Json>& pods,
                                      const std::optional<std::set<std::string>>& waiting);
  // Identify -> fit -> reserve -> grant; nothing stays reserved when a step fails.
  Result<AllocateResult> AllocateLocked(const ServedResource& resource,
                                        const std::vector<std::string>& device_ids,
                                        const std::vector<Json>& pods,
                                        const std::optional<std::set<std::string>>& waiting,
                                        const Json** pod_out);
  // What Reserve charged, and what the grant needs of the card.
  struct Reservation {
    const Json* pod = nullptr;
    ledger::Owner owner;
    ledger::Request request;
    ledger::Allocation allocation;
    uint64_t card_memory_mib = 0;
  };
  // Identify, fit and reserve, under one hold of the ledger's lock.
  Result<Reservation> Reserve(const ServedResource& resource,
                              const std::vector<std::string>& device_ids,
                              const std::vector<Json>& pods,
                              const std::optional<std::set<std::string>>& waiting);
  // Narrows `request` to the cards the kubelet offered (a partition: to gate 3's choice while it
  // still fits); FAILED_PRECONDITION when the offer cannot serve the resource's mode.
  Status PlaceOnOffered(const ServedResource& resource, const Candidate& candidate,
                        const std::vector<std::string>& offered, size_t device_count,
                        const ledger::NodeLedger& ledger, ledger::Request& request);
  // The partition a reservation needs (created) and the plugin's container edits; a partition
  // made for a grant that then fails is destroyed again.
  Result<std::vector<sdk::ContainerEdit>> GrantReserved(const ServedResource& resource,
                                                        const Reservation& reserved);
  void GiveBack(const ledger::Owner& owner);
  // A sidecar's view of its Pod's cards (docs/behaviour.md §6.2 Visibility): no new card, no
  // charge.
  Result<AllocateResult> AllocateVisibility(const ServedResource& resource, int64_t count,
                                            const std::vector<Json>& pods,
                                            const std::optional<std::set<std::string>>& waiting);
  Result<ledger::Request> RequestFor(const Json& pod, const std::string& container,
                                     const ServedResource& resource,
                                     const ledger::NodeLedger& ledger) const;
  std::string AnnotationFor(const std::string& pod_uid) const;
  // The offered tokens by the card they name, in the kubelet's order.
  std::map<std::string, std::vector<std::string>> TokensByCard(
      const ServedResource& resource, const std::vector<std::string>& ids) const;
  // Prefer's cards, and in `why` how they were chosen (for the log of a later refusal).
  std::vector<std::string> PreferredCards(const ServedResource& resource,
                                          const std::vector<std::string>& available, size_t size,
                                          std::string* why);
  // The cards the ledger would charge for the first waiting container of `pods` that fits; none
  // when waiting containers were found but none fits, nullopt when none was found.
  std::optional<std::vector<std::string>> FitFor(const ServedResource& resource,
                                                 const std::vector<Json>& pods,
                                                 const std::vector<std::string>& usable,
                                                 size_t size, std::string* why);

  // What gate 3 counted `container` on (the Pod's chosen-cards annotation), and its cards among
  // `offered`.
  std::vector<ledger::Charge> ChosenCharges(const Json& pod, const std::string& container) const;
  std::vector<std::string> ChosenCards(const Json& pod, const std::string& container,
                                       const std::vector<std::string>& offered) const;
  void DestroyPartitions(const ledger::Allocation& allocation);
  bool slices_are_objects(const std::string& manufacturer) const;

  runtime::NodeRuntime& runtime_;
  PodDirectory& pods_;
  AllocatorOptions options_;
  std::vector<ledger::ResourceKind> kinds_;  // of the running plugins
  std::set<std::string> slice_objects_;      // manufacturers whose slices are driver objects
  std::atomic<uint64_t> chosen_honoured_{0}, chosen_refused_{0};
  std::function<void()> on_change_;
  enforcement::SliceEnforcement* enforcement_ = nullptr;
  cdi::Injector* injector_ = nullptr;
  // The CDI kind (base resource) and runtime handler of each running plugin.
  std::map<std::string, std::pair<std::string, std::string>> cdi_kinds_;

  std::mutex mutex_;  // identify -> fit -> reserve; the ledger's own mutex is taken inside
  std::map<ledger::Owner, std::chrono::steady_clock::time_point> reserved_at_;
  std::set<std::string> pending_destroy_;      // partition owners whose destroy failed: retried
  std::set<ledger::Owner> visibility_served_;  // sidecars answered (they hold no charge)
  struct Preference {
    std::chrono::steady_clock::time_point at;
    std::string what;
  };
  std::map<std::string, Preference> last_preference_;  // by resource name
};

}  // namespace gpustack::node

#endif  // GPUSTACK_HOST_NODE_ALLOCATOR_H_
