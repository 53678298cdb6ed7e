#include "host/node/allocator.h"

#include <algorithm>

#include "host/common/json_path.h"
#include "host/common/logging.h"
#include "host/dra/claims.h"
#include "host/ledger/allocated.h"
#include "host/ledger/chosen.h"
#include "host/ledger/request.h"
#include "host/usage/grants.h"

namespace gpustack::node {
namespace {

using ledger::Mode;

std::string PodKey(const Json& pod) {
  const Json& m = pod["metadata"];
  return m.value("namespace", "") + "/" + m.value("name", "");
}

std::string PodUid(const Json& pod) { return pod["metadata"].value("uid", ""); }

bool Terminal(const Json& pod) {
  const std::string phase = pod.contains("status") ? pod["status"].value("phase", "") : "";
  return phase == "Succeeded" || phase == "Failed";
}

// A container's request for `resource` (limits, else requests), as a whole number; 0 when none.
int64_t CountOf(const Json& container, const std::string& resource) {
  for (const char* side : {"limits", "requests"}) {
    const Json& value = JsonAt(container, {"resources", side, resource});
    if (value.is_null()) continue;
    auto count = ledger::ParseCount(value, 1 << 20);
    return count ? *count : 0;
  }
  return 0;
}

const ledger::Group* GroupOf(const ledger::NodeLedger& ledger, const std::string& card_id) {
  for (const ledger::Group& g : ledger.spec().groups) {
    for (const ledger::Accelerator& a : g.accelerators) {
      if (a.id == card_id) return &g;
    }
  }
  return nullptr;
}

// The distinct cards the kubelet's device ids name, in the order first named.
Result<std::vector<std::string>> CardsNamed(const ledger::NodeLedger& ledger,
                                            const ServedResource& resource,
                                            const std::vector<std::string>& device_ids) {
  std::vector<std::string> cards;
  for (const std::string& id : device_ids) {
    auto token = ParseTokenId(id);
    if (!token) return token.failure();
    const ledger::Accelerator* card = CardOf(ledger, resource.manufacturer, *token);
    if (card == nullptr) {
      return Error{
          "device id \"" + id + "\" names no " + resource.manufacturer + " card on this node",
          Code::kInvalidArgument};
    }
    if (std::find(cards.begin(), cards.end(), card->id) == cards.end()) cards.push_back(card->id);
  }
  return cards;
}

Error Precondition(const std::string& message) { return Error{message, Code::kFailedPrecondition}; }

}  // namespace

std::string OwnerTag(const ledger::Owner& owner) { return owner.pod_uid + "/" + owner.container; }

uint64_t SliceBudgetMib(const ledger::Request& request, uint64_t card_memory_mib) {
  return usage::SliceBudgetMib(request.memory_percentage, request.memory_mib, card_memory_mib);
}

std::vector<Candidate> Candidates(const std::vector<Json>& pods, const ServedResource& resource,
                                  int64_t count, const ledger::NodeLedger& ledger,
                                  const std::optional<std::set<std::string>>& kubelet_waiting) {
  std::vector<const Json*> order;
  for (const Json& pod : pods) {
    if (!pod.is_object() || !pod.contains("metadata") || !pod.contains("spec")) continue;
    if (pod["metadata"].contains("deletionTimestamp") || Terminal(pod)) continue;
    order.push_back(&pod);
  }
  // Oldest first; RFC 3339 timestamps of one apiserver sort as strings.
  std::stable_sort(order.begin(), order.end(), [](const Json* a, const Json* b) {
    const std::string ta = (*a)["metadata"].value("creationTimestamp", "");
    const std::string tb = (*b)["metadata"].value("creationTimestamp", "");
    return ta != tb ? ta < tb : PodKey(*a) < PodKey(*b);
  });
  std::vector<Candidate> all, waiting;
  for (const Json* pod : order) {
    const std::string uid = PodUid(*pod);
    for (const char* list : {"initContainers", "containers"}) {
      auto it = (*pod)["spec"].find(list);
      if (it == (*pod)["spec"].end() || !it->is_array()) continue;
      for (const Json& c : *it) {
        if (!c.is_object() || !c.contains("name") || !c["name"].is_string()) continue;
        const std::string name = c["name"].get<std::string>();
        if (CountOf(c, resource.name) != count) continue;
        if (ledger.allocations().count({uid, name}) != 0) continue;
        Candidate candidate{pod, name};
        all.push_back(candidate);
        if (kubelet_waiting && kubelet_waiting->count(PodKey(*pod) + "/" + name) != 0)
          waiting.push_back(candidate);
      }
    }
  }
  // The kubelet's word narrows the choice; when it names none of them, the Pod list decides.
  return waiting.empty() ? all : waiting;
}

Allocator::Allocator(runtime::NodeRuntime& runtime, PodDirectory& pods, AllocatorOptions options)
    : runtime_(runtime), pods_(pods), options_(options) {
  // Read once: the ledger's lock is the runtime's, so nothing under it may ask the runtime.
  for (const runtime::PluginIdentity& id : runtime_.RunningIdentities()) {
    kinds_.push_back({id.manufacturer, id.base_resource_name, id.partition_kind});
    if (id.Has(GPUSTACK_CAP_SLICE_OBJECTS)) slice_objects_.insert(id.manufacturer);
    cdi_kinds_[id.manufacturer] = {id.base_resource_name, id.runtime_class};
  }
}

bool Allocator::slices_are_objects(const std::string& manufacturer) const {
  return slice_objects_.count(manufacturer) != 0;
}

Result<ledger::Request> Allocator::RequestFor(const Json& pod, const std::string& container,
                                              const ServedResource& resource,
                                              const ledger::NodeLedger& ledger) const {
  ledger::FoldContext fold;
  for (const ledger::Group& g : ledger.spec().groups) {
    if (g.manufacturer != resource.manufacturer) continue;
    if (fold.card_memory_mib == 0) fold.card_memory_mib = g.memory;
    for (const ledger::Accelerator& a : g.accelerators) {
      for (const ledger::PartitionProfile& p : a.profiles) {
        const bool known = std::any_of(fold.offered_profiles.begin(), fold.offered_profiles.end(),
                                       [&](const auto& o) { return o.name == p.name; });
        if (!known) fold.offered_profiles.push_back(p);
      }
    }
  }
  auto requests = ledger::ParsePodRequests(pod, kinds_, fold);
  if (!requests) {
    return Error{"pod " + PodKey(pod) + ": " + requests.error(), Code::kInvalidArgument};
  }
  for (const ledger::ContainerRequest& r : *requests) {
    if (r.container != container) continue;
    if (r.request.manufacturer != resource.manufacturer || r.request.mode != resource.mode) {
      return Error{"pod " + PodKey(pod) + " container " + container + " asks for a " +
                       ledger::ModeKey(r.request.mode) + " " + r.request.manufacturer +
                       " accelerator, not " + resource.name,
                   Code::kInvalidArgument};
    }
    return r.request;
  }
  return Error{"pod " + PodKey(pod) + " container " + container + " asks for no " + resource.name,
               Code::kInvalidArgument};
}

std::vector<ledger::Charge> Allocator::ChosenCharges(const Json& pod,
                                                     const std::string& container) const {
  const Json annotations =
      pod.value("metadata", Json::object()).value("annotations", Json::object());
  auto text = annotations.find(ledger::kChosenAnnotation);
  if (text == annotations.end() || !text->is_string()) return {};
  auto chosen = ledger::ChosenFromAnnotation(text->get<std::string>());
  if (!chosen) {
    Logger("allocator")->warn("pod {}: {}", PodKey(pod), chosen.error());
    return {};
  }
  std::vector<ledger::Charge> charges;
  for (const auto& p : chosen->pods) {
    auto it = p.find(container);
    if (it != p.end()) charges.insert(charges.end(), it->second.begin(), it->second.end());
  }
  return charges;
}

std::vector<std::string> Allocator::ChosenCards(const Json& pod, const std::string& container,
                                                const std::vector<std::string>& offered) const {
  std::vector<std::string> cards;
  for (const ledger::Charge& c : ChosenCharges(pod, container)) {
    if (std::find(offered.begin(), offered.end(), c.accelerator_id) != offered.end() &&
        std::find(cards.begin(), cards.end(), c.accelerator_id) == cards.end())
      cards.push_back(c.accelerator_id);
  }
  return cards;
}

std::string Allocator::AnnotationFor(const std::string& pod_uid) const {
  std::vector<ledger::Allocation> held;
  runtime_.WithLedger([&](ledger::NodeLedger& ledger) {
    for (const auto& [owner, allocation] : ledger.allocations()) {
      if (owner.pod_uid == pod_uid) held.push_back(allocation);
    }
  });
  return ledger::AllocatedAnnotation(held);
}

std::vector<std::string> Allocator::Prefer(const ServedResource& resource,
                                           const std::vector<std::string>& available,
                                           const std::vector<std::string>& must_include,
                                           size_t size) {
  std::vector<std::string> chosen(must_include.begin(), must_include.end());
  auto take = [&](const std::string& id) {
    if (chosen.size() < size && std::find(chosen.begin(), chosen.end(), id) == chosen.end())
      chosen.push_back(id);
  };
  if (!resource.visibility() && resource.mode != Mode::kPartitioned) {
    std::string why;
    const std::vector<std::string> cards = PreferredCards(resource, available, size, &why);
    // The preferred cards' tokens first, so the kubelet's choice is the ledger's.
    std::map<std::string, std::vector<std::string>> tokens = TokensByCard(resource, available);
    for (const std::string& card : cards)
      for (const std::string& id : tokens[card]) take(id);
    std::lock_guard lock(mutex_);
    last_preference_[resource.name] = {
        std::chrono::steady_clock::now(),
        std::to_string(size) + " of " + std::to_string(available.size()) + " offered: " + why};
  }
  for (const std::string& id : available) take(id);
  return chosen;
}

std::string Allocator::ExplainOffer(const ServedResource& resource,
                                    const std::vector<std::string>& device_ids) {
  std::string offered;
  for (const auto& [card, tokens] : TokensByCard(resource, device_ids)) {
    std::string state = "not in the ledger";
    runtime_.WithLedger([&](ledger::NodeLedger& ledger) {
      for (const ledger::CardState& c : ledger.cards()) {
        if (c.card->id != card) continue;
        state = std::string(ledger::ModeKey(c.mode)) + ", " + std::to_string(c.remaining()) +
                " credits free, " + std::to_string(ledger::kSharedSlots - c.shared_slots) +
                " slots free" + (c.card->unhealthy ? ", unhealthy" : "");
      }
    });
    offered += (offered.empty() ? "" : "; ") + card + " x" + std::to_string(tokens.size()) + " (" +
               state + ")";
  }
  std::lock_guard lock(mutex_);
  auto preference = last_preference_.find(resource.name);
  const std::string preferred =
      preference == last_preference_.end()
          ? "the kubelet asked for no preference"
          : "the last preference, " +
                std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::steady_clock::now() - preference->second.at)
                                   .count()) +
                " ms before: " + preference->second.what;
  return "offered " + (offered.empty() ? std::string("no card of ours") : offered) + "; " +
         preferred;
}

std::map<std::string, std::vector<std::string>> Allocator::TokensByCard(
    const ServedResource& resource, const std::vector<std::string>& ids) const {
  std::map<std::string, std::vector<std::string>> out;
  runtime_.WithLedger([&](ledger::NodeLedger& ledger) {
    for (const std::string& id : ids) {
      auto token = ParseTokenId(id);
      const ledger::Accelerator* card =
          token ? CardOf(ledger, resource.manufacturer, *token) : nullptr;
      if (card != nullptr) out[card->id].push_back(id);
    }
  });
  return out;
}

std::vector<std::string> Allocator::PreferredCards(const ServedResource& resource,
                                                   const std::vector<std::string>& available,
                                                   size_t size, std::string* why) {
  // The cards whose offered tokens can serve the request: N shared slots are N tokens of one
  // card, and the kubelet's view of which are free may lag the ledger's.
  std::vector<std::string> usable;
  for (const auto& [card, tokens] : TokensByCard(resource, available))
    if (resource.mode != Mode::kShared || tokens.size() >= size) usable.push_back(card);
  // The container this serves: from the watch cache, else a fresh list (the Pod may be newer
  // than the cache); the kubelet asks before it allocates, in the order it admits Pods.
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::optional<std::vector<Json>> pods = attempt == 0 ? pods_.CachedPods() : std::nullopt;
    if (attempt == 1) {
      auto listed = pods_.PodsOnNode();
      if (!listed) break;
      pods = std::move(*listed);
    }
    if (!pods) continue;
    if (auto cards = FitFor(resource, *pods, usable, size, why)) {
      if (!cards->empty()) return *cards;
      break;  // found, and nothing fits: a fresh list would say the same
    }
  }
  // Nobody identified: the card with the most room, so that whoever it is has the best chance.
  std::vector<std::string> cards;
  runtime_.WithLedger([&](ledger::NodeLedger& ledger) {
    const ledger::CardState* best = nullptr;
    for (const ledger::CardState& c : ledger.cards()) {
      if (std::find(usable.begin(), usable.end(), c.card->id) == usable.end()) continue;
      if (best == nullptr || c.remaining() > best->remaining()) best = &c;
    }
    if (best != nullptr) cards.push_back(best->card->id);
  });
  *why = (why->empty() ? std::string("no waiting container identified") : *why) +
         "; the card with the most room: " + (cards.empty() ? std::string("none") : cards.front());
  return cards;
}

std::optional<std::vector<std::string>> Allocator::FitFor(const ServedResource& resource,
                                                          const std::vector<Json>& pods,
                                                          const std::vector<std::string>& usable,
                                                          size_t size, std::string* why) {
  std::lock_guard lock(mutex_);
  return runtime_.WithLedger(
      [&](ledger::NodeLedger& ledger) -> std::optional<std::vector<std::string>> {
        bool found = false;  // a waiting container, whether or not it fits
        for (const Candidate& c :
             Candidates(pods, resource, static_cast<int64_t>(size), ledger, std::nullopt)) {
          found = true;
          auto request = RequestFor(*c.pod, c.container, resource, ledger);
          if (!request) {
            *why = "pod " + PodKey(*c.pod) + " container " + c.container + ": " + request.error();
            continue;
          }
          request->cards = usable;
          // Gate 3 counted this Pod on certain cards (docs/decisions.md D13): those first, so gate
          // 5 settles where gate 3 counted; any usable card when they no longer fit.
          Result<std::vector<ledger::Charge>> charges = Error{""};
          std::string how = "the cards gate 3 chose";
          if (auto chosen = ChosenCards(*c.pod, c.container, usable); !chosen.empty()) {
            ledger::Request pinned = *request;
            pinned.cards = chosen;
            charges = ledger.Fit(pinned);
            if (!charges) {
              ++chosen_refused_;
              Logger("allocator")
                  ->warn(
                      "pod {} container {}: the cards gate 3 chose do not fit any more ({}); "
                      "choosing others",
                      PodKey(*c.pod), c.container, charges.error());
            } else {
              ++chosen_honoured_;
            }
          }
          if (!charges) {
            how = "the ledger's fit";
            charges = ledger.Fit(*request);
          }
          if (!charges) {
            *why = "pod " + PodKey(*c.pod) + " container " + c.container + ": " + charges.error();
            continue;
          }
          std::vector<std::string> cards;
          for (const ledger::Charge& charge : *charges) cards.push_back(charge.accelerator_id);
          *why = "pod " + PodKey(*c.pod) + " container " + c.container + ": " + how + ": " +
                 cards.front();
          return cards;
        }
        if (found) return std::vector<std::string>{};
        return std::nullopt;
      });
}

Result<AllocateResult> Allocator::Allocate(const ServedResource& resource,
                                           const std::vector<std::string>& device_ids) {
  if (device_ids.empty()) return Error{"an Allocate names no device", Code::kInvalidArgument};
  // The kubelet is asked once; the cache may lack the Pod being admitted, or still show one the
  // kubelet has given up on: any answer but a success is asked again of a fresh list.
  std::optional<std::set<std::string>> waiting;
  if (options_.identify_by_kubelet) waiting = pods_.KubeletWaiting(resource.name);
  if (auto cached = pods_.CachedPods()) {
    if (auto result = AllocateFrom(resource, device_ids, *cached, waiting)) return result;
  }
  const auto listed_at = std::chrono::steady_clock::now();
  auto pods = pods_.PodsOnNode();
  if (!pods) {
    return Error{"cannot list the Pods on this node: " + pods.error(), Code::kUnavailable};
  }
  // Gate 3 counted this Pod against what the apiserver showed: a Pod gone or finished there may
  // still be charged here, its watch event not handled yet. The fresh list settles that first.
  Reconcile(*pods, listed_at);
  return AllocateFrom(resource, device_ids, *pods, waiting);
}

Result<AllocateResult> Allocator::AllocateFrom(
    const ServedResource& resource, const std::vector<std::string>& device_ids,
    const std::vector<Json>& pods, const std::optional<std::set<std::string>>& waiting) {
  std::unique_lock lock(mutex_);
  if (resource.visibility()) {
    return AllocateVisibility(resource, static_cast<int64_t>(device_ids.size()), pods, waiting);
  }
  const Json* pod = nullptr;
  auto result = AllocateLocked(resource, device_ids, pods, waiting, &pod);
  if (!result) return result;
  // The durable record comes before the kubelet's answer: no record, no devices.
  const std::string annotation = AnnotationFor(result->owner.pod_uid);
  if (Status recorded = pods_.Record(*pod, annotation); !recorded) {
    ledger::Allocation released;
    runtime_.WithLedger([&](ledger::NodeLedger& ledger) {
      released = ledger.allocations().at(result->owner);
      ledger.Release(result->owner);
    });
    reserved_at_.erase(result->owner);
    DestroyPartitions(released);
    lock.unlock();
    if (on_change_) on_change_();
    return Error{"cannot record the allocation on pod " + result->pod + ": " + recorded.error(),
                 Code::kUnavailable};
  }
  lock.unlock();
  if (on_change_) on_change_();
  return result;
}

Result<AllocateResult> Allocator::AllocateVisibility(
    const ServedResource& resource, int64_t count, const std::vector<Json>& pods,
    const std::optional<std::set<std::string>>& waiting) {
  std::vector<Candidate> candidates;
  runtime_.WithLedger([&](ledger::NodeLedger& ledger) {
    candidates = Candidates(pods, resource, count, ledger, waiting);
  });
  std::optional<Error> why;
  for (const Candidate& c : candidates) {
    const ledger::Owner sidecar{PodUid(*c.pod), c.container};
    if (visibility_served_.count(sidecar) != 0) continue;
    // The owner: another container of the Pod holding cards of this manufacturer.
    std::vector<ledger::Charge> charges;
    ledger::Owner owner;
    runtime_.WithLedger([&](ledger::NodeLedger& ledger) {
      for (const auto& [o, allocation] : ledger.allocations()) {
        if (o.pod_uid != sidecar.pod_uid || o.container == sidecar.container) continue;
        for (const ledger::Charge& charge : allocation.charges) {
          const ledger::Group* g = GroupOf(ledger, charge.accelerator_id);
          if (g != nullptr && g->manufacturer == resource.manufacturer) {
            charges.push_back(charge);
            owner = o;
          }
        }
      }
    });
    if (charges.empty()) {
      why = Precondition("pod " + PodKey(*c.pod) + ": no other container holds a " +
                         resource.manufacturer + " card for " + c.container + " to see");
      continue;
    }
    auto backend = runtime_.BackendFor(resource.manufacturer);
    if (!backend) return backend.failure();
    // The plain view of the owner's cards: no budget, no charge; a partition by its own name.
    sdk::Grant grant{.pod_uid = sidecar.pod_uid,
                     .container_name = sidecar.container,
                     .mode = GPUSTACK_GRANT_EXCLUSIVE};
    for (const ledger::Charge& charge : charges)
      grant.accelerator_ids.push_back(charge.accelerator_id);
    if (charges.front().mode == Mode::kPartitioned) {
      auto partitions = (*backend)->ListPartitions(charges.front().accelerator_id);
      if (partitions) {
        for (const sdk::Partition& p : *partitions) {
          if (p.owner == OwnerTag(owner)) grant.partition_id = p.id;
        }
      }
      if (grant.partition_id.empty()) {  // fail closed: never show the whole card
        return Precondition("pod " + PodKey(*c.pod) + ": the partition of " + owner.container +
                            " is not live on card " + charges.front().accelerator_id);
      }
      grant.mode = GPUSTACK_GRANT_PARTITIONED;
    }
    auto edits = (*backend)->Grant(grant);
    if (!edits) return edits.failure();
    visibility_served_.insert(sidecar);
    return AllocateResult{sidecar, PodKey(*c.pod), std::move(*edits)};
  }
  if (why) return *why;
  return Error{"no Pod on this node waits for " + std::to_string(count) + " " + resource.name,
               Code::kNotFound};
}

Result<AllocateResult> Allocator::AllocateLocked(
    const ServedResource& resource, const std::vector<std::string>& device_ids,
    const std::vector<Json>& pods, const std::optional<std::set<std::string>>& waiting,
    const Json** pod_out) {
  auto reserved = Reserve(resource, device_ids, pods, waiting);
  if (!reserved) return reserved.failure();
  *pod_out = reserved->pod;
  reserved_at_[reserved->owner] = std::chrono::steady_clock::now();
  auto edits = GrantReserved(resource, *reserved);
  if (!edits) {
    GiveBack(reserved->owner);
    return edits.failure();
  }
  const ledger::Charge& first = reserved->allocation.charges.front();
  if (first.mode == Mode::kSliced && enforcement_ != nullptr) {
    const enforcement::SliceBudget budget{
        SliceBudgetMib(reserved->request, reserved->card_memory_mib),
        reserved->request.cores_percentage};
    auto enforced =
        enforcement_->EditsForSlice(resource.manufacturer, first.accelerator_id, *reserved->pod,
                                    reserved->owner.container, *edits, budget);
    if (!enforced) {
      GiveBack(reserved->owner);
      return enforced.failure();
    }
    edits->insert(edits->end(), enforced->begin(), enforced->end());
  }
  if (injector_ != nullptr) {
    // The cards as CDI devices, where the strategy and the node allow (docs/behaviour.md §6.3).
    const auto& [kind, runtime_class] = cdi_kinds_[resource.manufacturer];
    cdi::Grant grant{
        .kind = kind,
        .partition = first.mode == Mode::kPartitioned,
        .pod_names_runtime_class = !StringAt(*reserved->pod, {"spec", "runtimeClassName"}).empty(),
        .vendor_runtime = runtime_class};
    for (const ledger::Charge& charge : reserved->allocation.charges)
      grant.cards.push_back(charge.accelerator_id);
    auto outcome = injector_->ForGrant(resource.manufacturer, grant);
    if (outcome.annotation) {
      edits->push_back({.kind = GPUSTACK_EDIT_ANNOTATION,
                        .key = outcome.annotation->first,
                        .value = outcome.annotation->second});
    }
  }
  Logger("allocator")
      ->info("pod {} container {}: {} on {}", PodKey(*reserved->pod), reserved->owner.container,
             resource.name, reserved->allocation.charges.front().accelerator_id);
  return AllocateResult{reserved->owner, PodKey(*reserved->pod), std::move(*edits)};
}

Result<Allocator::Reservation> Allocator::Reserve(
    const ServedResource& resource, const std::vector<std::string>& device_ids,
    const std::vector<Json>& pods, const std::optional<std::set<std::string>>& waiting) {
  const int64_t count = static_cast<int64_t>(device_ids.size());
  return runtime_.WithLedger([&](ledger::NodeLedger& ledger) -> Result<Reservation> {
    auto offered = CardsNamed(ledger, resource, device_ids);
    if (!offered) return offered.failure();
    const auto candidates = Candidates(pods, resource, count, ledger, waiting);
    if (candidates.empty()) {
      return Error{"no Pod on this node waits for " + std::to_string(count) + " " + resource.name +
                       " (every container asking for it holds its devices)",
                   Code::kNotFound};
    }
    std::optional<Error> first_error;
    for (const Candidate& c : candidates) {
      auto request = RequestFor(*c.pod, c.container, resource, ledger);
      if (!request) {
        if (!first_error) first_error = request.failure();
        continue;
      }
      if (Status placed =
              PlaceOnOffered(resource, c, *offered, device_ids.size(), ledger, *request);
          !placed)
        return placed.failure();
      if (auto fit = ledger.Fit(*request); !fit) {
        if (!first_error) first_error = Precondition(fit.error());
        continue;
      }
      const ledger::Owner owner{PodUid(*c.pod), c.container};
      auto allocation = ledger.Reserve(owner, *request);
      if (!allocation) return Precondition(allocation.error());
      const ledger::Group* group = GroupOf(ledger, allocation->charges.front().accelerator_id);
      return Reservation{c.pod, owner, *request, std::move(*allocation),
                         group != nullptr ? group->memory : 0};
    }
    return *first_error;
  });
}

Status Allocator::PlaceOnOffered(const ServedResource& resource, const Candidate& candidate,
                                 const std::vector<std::string>& offered, size_t device_count,
                                 const ledger::NodeLedger& ledger, ledger::Request& request) {
  switch (resource.mode) {
    case Mode::kExclusive:
      if (offered.size() != device_count)
        return Precondition("exclusive devices must be distinct cards");
      break;
    case Mode::kShared:
      // N slots of ONE card (docs/decisions.md D1).
      if (offered.size() != 1) {
        return Precondition(std::to_string(device_count) + " " + resource.name +
                            " slots must be on one card, the kubelet offered " +
                            std::to_string(offered.size()) + " cards");
      }
      break;
    case Mode::kSliced:
      break;
    default: {
      // Partitions: the kubelet's ids are a count; the ledger picks the card and placement,
      // gate 3's choice while it is still free (whatever order the Pods start in).
      const auto wanted = ChosenCharges(*candidate.pod, candidate.container);
      bool pinned = false;
      for (const ledger::Charge& want : wanted) {
        ledger::Request at = request;
        at.cards = {want.accelerator_id};
        at.placement = want.placement;
        if (ledger.Fit(at)) {
          request = std::move(at);
          pinned = true;
          break;
        }
      }
      if (!wanted.empty()) ++(pinned ? chosen_honoured_ : chosen_refused_);
      return Ok{};
    }
  }
  request.cards = offered;
  return Ok{};
}

Result<std::vector<sdk::ContainerEdit>> Allocator::GrantReserved(const ServedResource& resource,
                                                                 const Reservation& reserved) {
  auto backend = runtime_.BackendFor(resource.manufacturer);
  if (!backend) return backend.failure();
  const ledger::Charge& first = reserved.allocation.charges.front();
  sdk::Grant grant{.pod_uid = reserved.owner.pod_uid,
                   .container_name = reserved.owner.container,
                   .mode = runtime::ToGrantMode(first.mode)};
  for (const ledger::Charge& charge : reserved.allocation.charges)
    grant.accelerator_ids.push_back(charge.accelerator_id);
  if (first.mode == Mode::kSliced) {
    grant.memory_limit_mib = SliceBudgetMib(reserved.request, reserved.card_memory_mib);
    grant.cores_percentage = reserved.request.cores_percentage;
  }
  if (first.mode == Mode::kPartitioned) {
    auto partition = (*backend)->CreatePartition({first.accelerator_id,
                                                  first.profile,
                                                  {first.placement.start, first.placement.length},
                                                  OwnerTag(reserved.owner)});
    if (!partition) {
      return Error{"cannot create a " + first.profile + " partition on card " +
                       first.accelerator_id + ": " + partition.error(),
                   Code::kUnavailable};
    }
    grant.partition_id = partition->id;
  }
  auto edits = (*backend)->Grant(grant);
  if (!edits) {
    DestroyPartitions(reserved.allocation);
    return Error{resource.manufacturer + " plugin refused the grant: " + edits.error(),
                 Code::kInternal};
  }
  return edits;
}

void Allocator::GiveBack(const ledger::Owner& owner) {
  runtime_.WithLedger([&](ledger::NodeLedger& ledger) { ledger.Release(owner); });
  reserved_at_.erase(owner);
}

void Allocator::DestroyPartitions(const ledger::Allocation& allocation) {
  const std::string tag = OwnerTag(allocation.owner);
  for (const ledger::Charge& charge : allocation.charges) {
    if (charge.mode != Mode::kPartitioned) continue;
    std::string manufacturer;
    runtime_.WithLedger([&](ledger::NodeLedger& ledger) {
      if (const ledger::Group* g = GroupOf(ledger, charge.accelerator_id))
        manufacturer = g->manufacturer;
    });
    auto backend = runtime_.BackendFor(manufacturer);
    auto partitions = backend ? (*backend)->ListPartitions(charge.accelerator_id)
                              : Result<std::vector<sdk::Partition>>(backend.failure());
    if (!partitions) {
      Logger("allocator")
          ->warn("cannot list partitions of {} (retrying): {}", charge.accelerator_id,
                 partitions.error());
      pending_destroy_.insert(charge.accelerator_id + "|" + tag);
      continue;
    }
    bool done = true;
    for (const sdk::Partition& p : *partitions) {
      if (p.owner != tag) continue;
      if (Status destroyed = (*backend)->DestroyPartition({p.accelerator_id, p.id, p.owner});
          !destroyed) {
        // In use, most often: retried on the next pass, never blocking other cards.
        Logger("allocator")
            ->warn("cannot destroy partition {} of {} (retrying): {}", p.id, p.accelerator_id,
                   destroyed.error());
        done = false;
      } else {
        Logger("allocator")->info("destroyed partition {} of {} ({})", p.id, p.accelerator_id, tag);
      }
    }
    if (done) {
      pending_destroy_.erase(charge.accelerator_id + "|" + tag);
    } else {
      pending_destroy_.insert(charge.accelerator_id + "|" + tag);
    }
  }
}

Result<Allocator::ClaimGrant> Allocator::GrantClaim(const ledger::Owner& owner,
                                                    const std::string& manufacturer,
                                                    ledger::Request request,
                                                    uint64_t card_memory_mib) {
  std::unique_lock lock(mutex_);
  request.manufacturer = manufacturer;
  for (const ledger::ResourceKind& kind : kinds_) {
    if (kind.manufacturer == manufacturer) request.base = kind.base;
  }
  if (request.base.empty()) {
    return Error{"no running plugin serves " + manufacturer + " cards on this node",
                 Code::kFailedPrecondition};
  }
  bool fresh = false;
  auto reserved =
      runtime_.WithLedger([&](ledger::NodeLedger& ledger) -> Result<ledger::Allocation> {
        if (auto held = ledger.allocations().find(owner); held != ledger.allocations().end()) {
          std::set<std::string> holds, asked(request.cards.begin(), request.cards.end());
          for (const ledger::Charge& c : held->second.charges) holds.insert(c.accelerator_id);
          if (holds != asked) {
            return Error{"already holds other cards than those it asks for now",
                         Code::kFailedPrecondition};
          }
          return held->second;
        }
        fresh = true;
        return ledger.Reserve(owner, request);
      });
  if (!reserved) return Error{reserved.error(), Code::kFailedPrecondition};
  // The grant (and a partition) as for a Pod's container; the resource only names the plugin.
  const ServedResource resource{.name = request.base,
                                .manufacturer = manufacturer,
                                .base = request.base,
                                .partition_kind = {},
                                .mode = request.mode};
  auto edits = GrantReserved(resource, {.pod = nullptr,
                                        .owner = owner,
                                        .request = request,
                                        .allocation = *reserved,
                                        .card_memory_mib = card_memory_mib});
  if (!edits) {
    if (fresh) GiveBack(owner);
    return edits.failure();
  }
  lock.unlock();
  if (fresh && on_change_) on_change_();
  return ClaimGrant{std::move(*reserved), std::move(*edits)};
}

bool Allocator::ReleaseClaim(const ledger::Owner& owner) {
  std::unique_lock lock(mutex_);
  std::optional<ledger::Allocation> held;
  runtime_.WithLedger([&](ledger::NodeLedger& ledger) {
    if (auto it = ledger.allocations().find(owner); it != ledger.allocations().end()) {
      held = it->second;
      ledger.Release(owner);
    }
  });
  const bool released = held.has_value();
  if (held) DestroyPartitions(*held);
  lock.unlock();
  if (released && on_change_) on_change_();
  return released;
}

Status Allocator::RestoreClaim(const ledger::Allocation& allocation) {
  std::lock_guard lock(mutex_);
  return runtime_.WithLedger([&](ledger::NodeLedger& ledger) -> Status {
    if (ledger.allocations().count(allocation.owner) != 0) return Ok{};
    return ledger.Restore(allocation);
  });
}

size_t Allocator::Restore(const std::vector<Json>& pods) {
  std::lock_guard lock(mutex_);
  size_t restored = 0;
  // Running Pods first: a finished Pod's record must never crowd out a live one's.
  std::vector<const Json*> order;
  for (const Json& pod : pods) order.push_back(&pod);
  std::stable_partition(order.begin(), order.end(), [](const Json* p) { return !Terminal(*p); });
  for (const Json* pod_pointer : order) {
    const Json& pod = *pod_pointer;
    auto record = ledger::AllocatedRecordOf(pod);
    if (!record) {
      Logger("allocator")->error("pod {}: {}: not restored", PodKey(pod), record.error());
      continue;
    }
    for (const ledger::RecordedAllocation& entry : *record) {
      if (!entry.allocation) {
        Logger("allocator")
            ->error("pod {} container {}: refusing its recorded allocation: {}", PodKey(pod),
                    entry.container, entry.allocation.error());
        continue;
      }
      const ledger::Allocation& allocation = *entry.allocation;
      runtime_.WithLedger([&](ledger::NodeLedger& ledger) {
        if (ledger.allocations().count(allocation.owner) != 0) return;
        if (Status s = ledger.Restore(allocation); !s) {
          Logger("allocator")
              ->error("pod {} container {}: recorded allocation no longer fits: {}", PodKey(pod),
                      entry.container, s.error());
          return;
        }
        ++restored;
        if (options_.release_terminated && Terminal(pod)) {
          ledger.ReleaseTerminated(allocation.owner,
                                   [this](const std::string& m) { return slices_are_objects(m); });
        }
      });
    }
  }
  return restored;
}

bool Allocator::HasPendingDestroys() {
  std::lock_guard lock(mutex_);
  return !pending_destroy_.empty();
}

bool Allocator::ReleaseDeleted(const std::set<std::string>& pod_uids) {
  if (pod_uids.empty()) return false;
  std::unique_lock lock(mutex_);
  std::vector<ledger::Allocation> gone;
  runtime_.WithLedger([&](ledger::NodeLedger& ledger) {
    for (const auto& [owner, allocation] : ledger.allocations()) {
      if (pod_uids.count(owner.pod_uid) != 0) gone.push_back(allocation);
    }
    for (const ledger::Allocation& a : gone) ledger.Release(a.owner);
  });
  std::erase_if(visibility_served_,
                [&](const ledger::Owner& o) { return pod_uids.count(o.pod_uid) != 0; });
  for (const ledger::Allocation& allocation : gone) {
    reserved_at_.erase(allocation.owner);
    Logger("allocator")
        ->info("pod {} was deleted: released container {}", allocation.owner.pod_uid,
               allocation.owner.container);
    DestroyPartitions(allocation);
  }
  lock.unlock();
  if (!gone.empty() && on_change_) on_change_();
  return !gone.empty();
}

bool Allocator::Reconcile(const std::vector<Json>& pods,
                          std::optional<std::chrono::steady_clock::time_point> listed_at) {
  std::unique_lock lock(mutex_);
  std::map<std::string, const Json*> live;
  for (const Json& pod : pods) live[PodUid(pod)] = &pod;
  std::vector<ledger::Allocation> gone;
  bool changed = false;
  runtime_.WithLedger([&](ledger::NodeLedger& ledger) {
    std::vector<ledger::Owner> owners;
    for (const auto& [owner, allocation] : ledger.allocations()) owners.push_back(owner);
    for (const ledger::Owner& owner : owners) {
      if (dra::IsClaimOwner(owner)) continue;  // its claim ends it, through the kubelet
      auto reserved = reserved_at_.find(owner);
      auto pod = live.find(owner.pod_uid);
      if (pod == live.end()) {
        if (!listed_at) continue;  // a cache: absent may only mean not seen yet
        if (reserved != reserved_at_.end() && reserved->second >= *listed_at) continue;
        gone.push_back(ledger.allocations().at(owner));
        ledger.Release(owner);
        reserved_at_.erase(owner);
        changed = true;
      } else if (options_.release_terminated && Terminal(*pod->second)) {
        const auto before = ledger.allocations().at(owner);
        ledger.ReleaseTerminated(owner,
                                 [this](const std::string& m) { return slices_are_objects(m); });
        auto after = ledger.allocations().find(owner);
        changed = changed || after == ledger.allocations().end() || !(after->second == before);
      }
    }
  });
  for (const ledger::Allocation& allocation : gone) {
    Logger("allocator")
        ->info("pod {} is gone: released container {}", allocation.owner.pod_uid,
               allocation.owner.container);
    DestroyPartitions(allocation);
  }
  // Destroys that failed earlier (a partition in use), bounded by the pass period.
  for (const std::string& pending : std::set<std::string>(pending_destroy_)) {
    const size_t bar = pending.find('|');
    const size_t slash = pending.find('/', bar);
    ledger::Allocation retry{{pending.substr(bar + 1, slash - bar - 1), pending.substr(slash + 1)},
                             {{pending.substr(0, bar), Mode::kPartitioned, 0, 0, 0, {}, {}}}};
    DestroyPartitions(retry);
  }
  lock.unlock();
  if (changed && on_change_) on_change_();
  return changed;
}

}  // namespace gpustack::node
