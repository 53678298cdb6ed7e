#include "host/node/allocator.h"

#include <algorithm>

#include "host/common/logging.h"
#include "host/ledger/chosen.h"
#include "host/ledger/request.h"

namespace gpustack::node {
namespace {

using ledger::Family;
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
int64_t Quantity(const Json& container, const std::string& resource) {
  const Json* resources = container.contains("resources") ? &container["resources"] : nullptr;
  if (resources == nullptr || !resources->is_object()) return 0;
  for (const char* side : {"limits", "requests"}) {
    auto it = resources->find(side);
    if (it == resources->end() || !it->is_object() || !it->contains(resource)) continue;
    auto count = ledger::ParseCount((*it)[resource], 1 << 20);
    return count ? *count : 0;
  }
  return 0;
}

Family LedgerFamily(ResourceFamily family) {
  switch (family) {
    case ResourceFamily::kShared:
      return Family::kShared;
    case ResourceFamily::kSliced:
      return Family::kSliced;
    case ResourceFamily::kPartitioned:
      return Family::kPartitioned;
    default:
      return Family::kExclusive;
  }
}

runtime::GrantMode GrantModeOf(Mode mode) {
  switch (mode) {
    case Mode::kShared:
      return runtime::GrantMode::kShared;
    case Mode::kSliced:
      return runtime::GrantMode::kSliced;
    case Mode::kPartitioned:
      return runtime::GrantMode::kPartitioned;
    default:
      return runtime::GrantMode::kExclusive;
  }
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
  if (request.memory_percentage > 0) return card_memory_mib * request.memory_percentage / 100;
  return std::min(request.memory_mib, card_memory_mib);
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
        if (Quantity(c, resource.name) != count) continue;
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
    if (id.capabilities.slice_objects) slice_objects_.insert(id.manufacturer);
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
    if (r.request.manufacturer != resource.manufacturer ||
        r.request.family != LedgerFamily(resource.family)) {
      return Error{"pod " + PodKey(pod) + " container " + container + " asks for a " +
                       ledger::FamilyName(r.request.family) + " " + r.request.manufacturer +
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
  Json record = Json::object();
  runtime_.WithLedger([&](ledger::NodeLedger& ledger) {
    for (const auto& [owner, allocation] : ledger.allocations()) {
      if (owner.pod_uid == pod_uid) record[owner.container] = ledger::ToJson(allocation);
    }
  });
  return record.dump();
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
  if (resource.family != ResourceFamily::kVisibility &&
      resource.family != ResourceFamily::kPartitioned) {
    // A hint only: the watch cache will do, a list only without one.
    std::optional<std::vector<Json>> pods = pods_.CachedPods();
    if (!pods) {
      if (auto listed = pods_.PodsOnNode()) pods = std::move(*listed);
    }
    if (pods) {
      std::lock_guard lock(mutex_);
      runtime_.WithLedger([&](ledger::NodeLedger& ledger) {
        auto offered = CardsNamed(ledger, resource, available);
        if (!offered) return;
        for (const Candidate& c :
             Candidates(*pods, resource, static_cast<int64_t>(size), ledger, std::nullopt)) {
          auto request = RequestFor(*c.pod, c.container, resource, ledger);
          if (!request) continue;
          request->cards = *offered;
          // Gate 3 counted this Pod on certain cards (ARCHITECTURE decision 6.3): those first,
          // so gate 5 settles where gate 3 counted; any offered card when they no longer fit.
          Result<std::vector<ledger::Charge>> charges = Error{""};
          if (auto chosen = ChosenCards(*c.pod, c.container, *offered); !chosen.empty()) {
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
          if (!charges) charges = ledger.Fit(*request);
          if (!charges) continue;
          // The charged cards' tokens first, so the kubelet's choice is the ledger's.
          for (const ledger::Charge& charge : *charges) {
            for (const std::string& id : available) {
              auto token = ParseTokenId(id);
              const ledger::Accelerator* card =
                  token ? CardOf(ledger, resource.manufacturer, *token) : nullptr;
              if (card != nullptr && card->id == charge.accelerator_id) take(id);
            }
          }
          return;
        }
      });
    }
  }
  for (const std::string& id : available) take(id);
  return chosen;
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
  auto pods = pods_.PodsOnNode();
  if (!pods) {
    return Error{"cannot list the Pods on this node: " + pods.error(), Code::kUnavailable};
  }
  return AllocateFrom(resource, device_ids, *pods, waiting);
}

Result<AllocateResult> Allocator::AllocateFrom(
    const ServedResource& resource, const std::vector<std::string>& device_ids,
    const std::vector<Json>& pods, const std::optional<std::set<std::string>>& waiting) {
  std::unique_lock lock(mutex_);
  if (resource.family == ResourceFamily::kVisibility) {
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
    runtime::GrantRequest grant{sidecar.pod_uid, sidecar.container, runtime::GrantMode::kExclusive};
    for (const ledger::Charge& charge : charges) grant.card_ids.push_back(charge.accelerator_id);
    if (charges.front().mode == Mode::kPartitioned) {
      auto partitions = (*backend)->ListPartitions(charges.front().accelerator_id);
      if (partitions) {
        for (const runtime::Partition& p : *partitions) {
          if (p.owner == OwnerTag(owner)) grant.partition_id = p.id;
        }
      }
      if (grant.partition_id.empty()) {  // fail closed: never show the whole card
        return Precondition("pod " + PodKey(*c.pod) + ": the partition of " + owner.container +
                            " is not live on card " + charges.front().accelerator_id);
      }
      grant.mode = runtime::GrantMode::kPartitioned;
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
  const int64_t count = static_cast<int64_t>(device_ids.size());
  // Identify -> fit -> reserve, all under the ledger's lock.
  struct Chosen {
    const Json* pod = nullptr;
    ledger::Owner owner;
    ledger::Request request;
    ledger::Allocation allocation;
  };
  auto reserved = runtime_.WithLedger([&](ledger::NodeLedger& ledger) -> Result<Chosen> {
    auto named = CardsNamed(ledger, resource, device_ids);
    if (!named) return named.failure();
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
      switch (resource.family) {
        case ResourceFamily::kExclusive:
          if (named->size() != device_ids.size()) {
            return Precondition("exclusive devices must be distinct cards");
          }
          request->cards = *named;
          break;
        case ResourceFamily::kShared:
          // ARCHITECTURE decision 1: N slots of ONE card.
          if (named->size() != 1) {
            return Precondition(std::to_string(count) + " " + resource.name +
                                " slots must be on one card, the kubelet offered " +
                                std::to_string(named->size()) + " cards");
          }
          request->cards = *named;
          break;
        case ResourceFamily::kSliced:
          request->cards = *named;
          break;
        default: {
          // Partitions: the kubelet's ids are a count; the ledger picks the card and placement,
          // gate 3's choice while it is still free (whatever order the Pods start in).
          const auto wanted = ChosenCharges(*c.pod, c.container);
          bool pinned = false;
          for (const ledger::Charge& want : wanted) {
            ledger::Request at = *request;
            at.cards = {want.accelerator_id};
            at.placement = want.placement;
            if (ledger.Fit(at)) {
              *request = std::move(at);
              pinned = true;
              break;
            }
          }
          if (!wanted.empty()) ++(pinned ? chosen_honoured_ : chosen_refused_);
          break;
        }
      }
      auto fit = ledger.Fit(*request);
      if (!fit) {
        if (!first_error) first_error = Precondition(fit.error());
        continue;
      }
      ledger::Owner owner{PodUid(*c.pod), c.container};
      auto allocation = ledger.Reserve(owner, *request);
      if (!allocation) return Precondition(allocation.error());
      return Chosen{c.pod, owner, *request, *allocation};
    }
    return *first_error;
  });
  if (!reserved) return reserved.failure();
  *pod_out = reserved->pod;
  reserved_at_[reserved->owner] = std::chrono::steady_clock::now();

  auto give_back = [&](const Error& why) -> Error {
    runtime_.WithLedger([&](ledger::NodeLedger& ledger) { ledger.Release(reserved->owner); });
    reserved_at_.erase(reserved->owner);
    return why;
  };
  auto backend = runtime_.BackendFor(resource.manufacturer);
  if (!backend) return give_back(backend.failure());

  runtime::GrantRequest grant;
  grant.pod_uid = reserved->owner.pod_uid;
  grant.container = reserved->owner.container;
  grant.mode = GrantModeOf(reserved->allocation.charges.front().mode);
  uint64_t card_memory = 0;
  runtime_.WithLedger([&](ledger::NodeLedger& ledger) {
    for (const ledger::Charge& charge : reserved->allocation.charges) {
      grant.card_ids.push_back(charge.accelerator_id);
      if (const ledger::Group* g = GroupOf(ledger, charge.accelerator_id)) card_memory = g->memory;
    }
  });
  if (grant.mode == runtime::GrantMode::kSliced) {
    grant.memory_limit_mib = SliceBudgetMib(reserved->request, card_memory);
    grant.cores_percentage = reserved->request.cores_percentage;
  }
  if (grant.mode == runtime::GrantMode::kPartitioned) {
    const ledger::Charge& charge = reserved->allocation.charges.front();
    auto partition = (*backend)->CreatePartition(
        {charge.accelerator_id, charge.profile, charge.placement, OwnerTag(reserved->owner)});
    if (!partition) {
      return give_back(Error{"cannot create a " + charge.profile + " partition on card " +
                                 charge.accelerator_id + ": " + partition.error(),
                             Code::kUnavailable});
    }
    grant.partition_id = partition->id;
  }
  auto edits = (*backend)->Grant(grant);
  if (!edits) {
    DestroyPartitions(reserved->allocation);
    return give_back(Error{resource.manufacturer + " plugin refused the grant: " + edits.error(),
                           Code::kInternal});
  }
  Logger("allocator")
      ->info("pod {} container {}: {} on {}", PodKey(*reserved->pod), reserved->owner.container,
             resource.name, grant.card_ids.front());
  return AllocateResult{reserved->owner, PodKey(*reserved->pod), std::move(*edits)};
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
                              : Result<std::vector<runtime::Partition>>(backend.failure());
    if (!partitions) {
      Logger("allocator")
          ->warn("cannot list partitions of {} (retrying): {}", charge.accelerator_id,
                 partitions.error());
      pending_destroy_.insert(charge.accelerator_id + "|" + tag);
      continue;
    }
    bool done = true;
    for (const runtime::Partition& p : *partitions) {
      if (p.owner != tag) continue;
      if (Status destroyed = (*backend)->DestroyPartition({p.card_id, p.id, p.owner}); !destroyed) {
        // In use, most often: retried on the next pass, never blocking other cards.
        Logger("allocator")
            ->warn("cannot destroy partition {} of {} (retrying): {}", p.id, p.card_id,
                   destroyed.error());
        done = false;
      } else {
        Logger("allocator")->info("destroyed partition {} of {} ({})", p.id, p.card_id, tag);
      }
    }
    if (done) {
      pending_destroy_.erase(charge.accelerator_id + "|" + tag);
    } else {
      pending_destroy_.insert(charge.accelerator_id + "|" + tag);
    }
  }
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
    const Json& annotations = pod["metadata"].value("annotations", Json::object());
    auto it = annotations.find(kAllocatedAnnotation);
    if (it == annotations.end() || !it->is_string()) continue;
    const Json record = Json::parse(it->get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (!record.is_object()) {
      Logger("allocator")
          ->error("pod {}: unreadable {} annotation: not restored", PodKey(pod),
                  kAllocatedAnnotation);
      continue;
    }
    for (const auto& [container, entry] : record.items()) {
      auto allocation = ledger::AllocationFromJson(entry);
      if (!allocation || allocation->owner.pod_uid != PodUid(pod) ||
          allocation->owner.container != container) {
        Logger("allocator")
            ->error("pod {} container {}: refusing its recorded allocation: {}", PodKey(pod),
                    container,
                    allocation ? "it names another pod or container" : allocation.error());
        continue;
      }
      runtime_.WithLedger([&](ledger::NodeLedger& ledger) {
        if (ledger.allocations().count(allocation->owner) != 0) return;
        if (Status s = ledger.Restore(*allocation); !s) {
          Logger("allocator")
              ->error("pod {} container {}: recorded allocation no longer fits: {}", PodKey(pod),
                      container, s.error());
          return;
        }
        ++restored;
        if (options_.release_terminated && Terminal(pod)) {
          ledger.ReleaseTerminated(allocation->owner,
                                   [this](const std::string& m) { return slices_are_objects(m); });
        }
      });
    }
  }
  return restored;
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
