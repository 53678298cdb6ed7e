#include "host/ledger/ledger.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <stdexcept>

namespace gpustack::ledger {
namespace {

std::string CardName(const CardState& c) {
  return "[" + std::to_string(c.card->index) + "] " + c.card->id;
}

bool Compatible(Mode held, Mode wanted) { return held == Mode::kNone || held == wanted; }

// Unavailable's answer for a card held in another mode: the text names the mode only when an
// explanation is built, so the fast path stays free of string work.
constexpr const char* kHeld = "held";

// Why `c` cannot take a charge of `mode` at all (mode, health, partitioning), or nullptr.
// Static text: the fast path builds no strings.
const char* Unavailable(const CardState& c, Mode mode) {
  if (c.card->unhealthy) return "unhealthy";
  const bool partitions = mode == Mode::kPartitioned;
  if (c.card->partitioned() && !partitions) return "in partition mode (serves partitions only)";
  if (!c.card->partitioned() && partitions) return "not in partition mode";
  if (mode == Mode::kExclusive ? c.mode != Mode::kNone : !Compatible(c.mode, mode)) {
    return kHeld;
  }
  return nullptr;
}

// The first free placement of `profile` on `c`, if any.
// The lowest free placement of `profile` on the card; only `wanted` when given (gate 3 chose it).
const Placement* FreePlacement(const CardState& c, const PartitionProfile& profile,
                               const std::optional<Placement>& wanted = std::nullopt) {
  for (const Placement& candidate : profile.placements) {
    if (wanted && candidate != *wanted) continue;
    const bool taken = std::any_of(c.partitions.begin(), c.partitions.end(), [&](const auto& used) {
      return used.second.Overlaps(candidate);
    });
    if (!taken) return &candidate;
  }
  return nullptr;
}

// A partition charges its share of the card's memory slices, so legal, disjoint placements never
// add up past one card. (Folding the profile's nominal memory through the driver-reported card
// memory, as the webhook's Kueue units do, can exceed it: two 3g.40gb on an 81,559 MiB H100.)
int64_t PartitionCredits(const Accelerator& card, const Placement& placement) {
  uint64_t slices = 0;
  for (const PartitionProfile& p : card.profiles) {
    for (const Placement& pl : p.placements)
      slices = std::max<uint64_t>(slices, uint64_t{pl.start} + pl.length);
  }
  return slices == 0 ? 0
                     : static_cast<int64_t>(placement.length * static_cast<uint64_t>(kCardCredits) /
                                            slices);
}

uint32_t UsedMemorySlices(const CardState& c) {
  uint32_t used = 0;
  for (const auto& p : c.partitions) used += p.second.length;
  return used;
}

}  // namespace

uint32_t CardState::RemainingInstances(const PartitionProfile& profile) const {
  // Placements of one profile share a length, so taking them greedily by start is optimal.
  // Cards have at most a few dozen memory slices: a bit mask keeps this allocation-free.
  auto mask = [](const Placement& p) -> uint64_t {
    return p.length >= 64 ? ~uint64_t{0} : ((uint64_t{1} << p.length) - 1) << p.start;
  };
  auto within = [](const Placement& p) {  // in 64 bits: start + length may not wrap
    return uint64_t{p.start} + uint64_t{p.length} <= 64;
  };
  const bool fits_mask =
      std::all_of(profile.placements.begin(), profile.placements.end(), within) &&
      std::all_of(partitions.begin(), partitions.end(),
                  [&](const auto& p) { return within(p.second); });
  uint32_t count = 0;
  if (fits_mask) {
    uint64_t used = 0;
    for (const auto& p : partitions) used |= mask(p.second);
    for (const Placement& candidate : profile.placements) {
      if ((used & mask(candidate)) == 0) {
        used |= mask(candidate);
        ++count;
      }
    }
    return count;
  }
  std::vector<Placement> taken;
  for (const auto& p : partitions) taken.push_back(p.second);
  for (const Placement& candidate : profile.placements) {
    if (std::none_of(taken.begin(), taken.end(),
                     [&](const Placement& t) { return t.Overlaps(candidate); })) {
      taken.push_back(candidate);
      ++count;
    }
  }
  return count;
}

uint32_t CardState::AllocatedInstances(const std::string& profile) const {
  return static_cast<uint32_t>(std::count_if(partitions.begin(), partitions.end(),
                                             [&](const auto& p) { return p.first == profile; }));
}

NodeLedger::NodeLedger(std::string node, DevicesSpec spec)
    : node_(std::move(node)), spec_(std::move(spec)) {
  // A spec that breaks the ledger's assumptions is a programming error here: JSON input is
  // checked (with a message) by SpecFromJson first.
  if (auto valid = ValidateSpec(spec_); !valid) throw std::invalid_argument(valid.error());
  size_t count = 0;
  for (const Group& g : spec_.groups) count += g.accelerators.size();
  cards_.reserve(count);
  for (const Group& g : spec_.groups)
    for (const Accelerator& a : g.accelerators)
      cards_.push_back(CardState{&g, &a, Mode::kNone, 0, 0, 0, 0, {}});
  by_id_.resize(cards_.size());
  std::iota(by_id_.begin(), by_id_.end(), 0u);
  std::sort(by_id_.begin(), by_id_.end(),
            [&](uint32_t a, uint32_t b) { return cards_[a].card->id < cards_[b].card->id; });
}

NodeLedger::NodeLedger(const NodeLedger& other) : NodeLedger(other.node_, other.spec_) {
  for (const auto& [owner, allocation] : other.allocations_) {
    for (const Charge& c : allocation.charges) Apply(c, +1);
    allocations_.emplace(owner, allocation);
  }
}

CardState* NodeLedger::FindCard(const std::string& accelerator_id) {
  auto it = std::lower_bound(
      by_id_.begin(), by_id_.end(), accelerator_id,
      [&](uint32_t card, const std::string& id) { return cards_[card].card->id < id; });
  if (it == by_id_.end() || cards_[*it].card->id != accelerator_id) return nullptr;
  return &cards_[*it];
}

Result<std::vector<Charge>> NodeLedger::Fit(const Request& r) const {
  // The fast pass builds no text; only a request that does not fit pays for the explanation.
  auto fit = FitImpl(r, /*explain=*/false);
  return fit ? fit : FitImpl(r, /*explain=*/true);
}

namespace {

// Why no card took a request, gathered only when an explanation is asked for: the fast path
// builds no strings.
struct Explanation {
  bool explain = false;
  std::string why;  // per-card reasons

  template <class Reason>
  void Note(const CardState& c, Reason&& reason) {
    if (explain) why += (why.empty() ? "" : "; ") + CardName(c) + ": " + std::string(reason());
  }
};

using Charges = std::vector<Charge>;
using Eligible = std::vector<const CardState*>;

// The first `count` eligible cards, whole; nullopt when there are fewer.
std::optional<Charges> FitExclusive(const Eligible& eligible, const Request& r, Explanation& e) {
  if (eligible.size() < r.count) {
    for (const CardState* c : eligible) e.Note(*c, [] { return "free"; });
    return std::nullopt;
  }
  Charges charges;
  for (size_t i = 0; i < r.count; ++i)
    charges.push_back({eligible[i]->card->id, Mode::kExclusive, kCardCredits, 0, 0, {}, {}});
  return charges;
}

// N slots of the fullest card that has them (ties keep spec order).
std::optional<Charges> FitShared(const Eligible& eligible, const Request& r, Explanation& e) {
  const CardState* best = nullptr;
  for (const CardState* c : eligible) {
    const uint32_t free = kSharedSlots - c->shared_slots;
    if (free < r.count) {
      e.Note(*c, [&] {
        return std::to_string(free) + " free ownership slot(s) < " + std::to_string(r.count);
      });
    } else if (best == nullptr || c->shared_slots > best->shared_slots) {
      best = c;
    }
  }
  if (best == nullptr) return std::nullopt;
  return Charges{{best->card->id,
                  Mode::kShared,
                  static_cast<int64_t>(r.count) * kSharedSlotCredits,
                  r.count,
                  0,
                  {},
                  {}}};
}

// The fullest card with the units, a free slice slot and (without overcommit) the compute.
std::optional<Charges> FitSliced(const Eligible& eligible, const Request& r, Explanation& e) {
  const CardState* best = nullptr;
  for (const CardState* c : eligible) {
    if (!c->card->sliceable()) {
      e.Note(*c, [] { return "offers no logical slices"; });
    } else if (c->remaining() < r.units) {
      e.Note(*c, [&] {
        return std::to_string(c->remaining()) + " credits remaining < " + std::to_string(r.units);
      });
    } else if (c->slices >= c->card->logical_count) {
      e.Note(*c, [&] {
        return "no free slice slot (" + std::to_string(c->slices) + "/" +
               std::to_string(c->card->logical_count) + ")";
      });
    } else if (!c->card->cores_percentage_overcommit &&
               c->cores_percentage + r.cores_percentage > 100) {
      e.Note(*c, [&] {
        return std::to_string(100 - c->cores_percentage) + "% compute left < " +
               std::to_string(r.cores_percentage) + "% (no overcommit)";
      });
    } else if (best == nullptr || c->remaining() < best->remaining()) {
      best = c;
    }
  }
  if (best == nullptr) return std::nullopt;
  return Charges{{best->card->id, Mode::kSliced, r.units, 0, r.cores_percentage, {}, {}}};
}

// The most occupied card with a free placement of the profile (only the asked one, if any).
std::optional<Charges> FitPartitioned(const Eligible& eligible, const Request& r, Explanation& e) {
  const CardState* best = nullptr;
  const Placement* best_placement = nullptr;
  for (const CardState* c : eligible) {
    const PartitionProfile* profile = c->card->FindProfile(r.profile);
    const Placement* placement = profile ? FreePlacement(*c, *profile, r.placement) : nullptr;
    if (profile == nullptr) {
      e.Note(*c, [&] { return "does not offer " + r.profile; });
    } else if (placement == nullptr) {
      e.Note(*c, [&] {
        return r.placement
                   ? "placement " + std::to_string(r.placement->start) + "+" +
                         std::to_string(r.placement->length) + " for " + r.profile + " is not free"
                   : "no free placement for " + r.profile;
      });
    } else if (best == nullptr || UsedMemorySlices(*c) > UsedMemorySlices(*best)) {
      best = c;
      best_placement = placement;
    }
  }
  if (best == nullptr) return std::nullopt;
  return Charges{{best->card->id, Mode::kPartitioned,
                  PartitionCredits(*best->card, *best_placement), 0, 0, r.profile,
                  *best_placement}};
}

// What a refusal adds after "fits a sliced request": the size that did not fit.
std::string Asked(const Request& r) {
  switch (r.mode) {
    case Mode::kExclusive:
      return " for " + std::to_string(r.count) + " card(s)";
    case Mode::kShared:
      return " for " + std::to_string(r.count) + " slot(s)";
    case Mode::kSliced:
      return " of " + std::to_string(r.units) + " units";
    case Mode::kPartitioned:
      return " for " + r.profile;
    case Mode::kNone:
      break;
  }
  return {};
}

}  // namespace

Result<std::vector<Charge>> NodeLedger::FitImpl(const Request& r, bool explain) const {
  Explanation e{explain, {}};
  Eligible eligible;
  for (const CardState& c : cards_) {
    if (c.group->manufacturer != r.manufacturer) continue;
    if (!r.group_id.empty() && c.group->id != r.group_id) continue;  // units fold per model
    if (!r.cards.empty() &&
        std::find(r.cards.begin(), r.cards.end(), c.card->id) == r.cards.end()) {
      continue;
    }
    if (const char* reason = Unavailable(c, r.mode)) {
      e.Note(c, [&] {
        return reason == kHeld ? std::string(kHeld) + " " + ModeName(c.mode) : reason;
      });
      continue;
    }
    eligible.push_back(&c);
  }
  std::optional<Charges> charges;
  switch (r.mode) {
    case Mode::kExclusive:
      charges = FitExclusive(eligible, r, e);
      break;
    case Mode::kShared:
      charges = FitShared(eligible, r, e);
      break;
    case Mode::kSliced:
      charges = FitSliced(eligible, r, e);
      break;
    case Mode::kPartitioned:
      charges = FitPartitioned(eligible, r, e);
      break;
    case Mode::kNone:
      return Error{"a request needs a mode"};
  }
  if (charges) return *charges;
  if (!explain) return Error{};  // the caller asks again with explain = true
  std::string detail = Asked(r);
  if (r.mode == Mode::kExclusive) detail += " (" + std::to_string(eligible.size()) + " free)";
  const std::string what =
      std::string(r.mode == Mode::kExclusive ? "an " : "a ") + ModeKey(r.mode) + " request";
  return Error{"no " + r.manufacturer + " card on node " + node_ + " fits " + what + detail +
               (e.why.empty() ? std::string(": the node has no ") + r.manufacturer + " card"
                              : ": " + e.why)};
}

Status NodeLedger::Check(const Charge& charge, const CardState& c) const {
  const std::string where = "card " + CardName(c) + " on node " + node_;
  if (charge.mode == Mode::kNone) return Error{where + ": a charge needs a mode"};
  if (!Compatible(c.mode, charge.mode) ||
      (charge.mode == Mode::kExclusive && c.mode != Mode::kNone)) {
    return Error{where + " is held " + ModeName(c.mode) + ", cannot add " + ModeName(charge.mode)};
  }
  if ((charge.mode == Mode::kPartitioned) != c.card->partitioned()) {
    return Error{where +
                 (c.card->partitioned() ? " is in partition mode" : " is not in partition mode")};
  }
  if (charge.credits <= 0 || c.allocated + charge.credits > kCardCredits) {
    return Error{where + ": " + std::to_string(charge.credits) + " credits do not fit the " +
                 std::to_string(c.remaining()) + " remaining"};
  }
  switch (charge.mode) {
    case Mode::kExclusive:
      if (charge.credits != kCardCredits)
        return Error{where + ": an exclusive charge is a whole card"};
      break;
    case Mode::kShared:
      if (charge.credits != charge.shared_slots * kSharedSlotCredits) {
        return Error{where + ": a shared charge is 160000 credits per slot"};
      }
      if (charge.shared_slots == 0 || c.shared_slots + charge.shared_slots > kSharedSlots) {
        return Error{where + ": " + std::to_string(charge.shared_slots) +
                     " shared slot(s) do not fit"};
      }
      break;
    case Mode::kSliced:
      if (!c.card->sliceable() || c.slices >= c.card->logical_count) {
        return Error{where + ": no free logical slice slot"};
      }
      if (charge.cores_percentage == 0 || charge.cores_percentage > 100) {
        return Error{where + ": a slice's compute budget must be 1..100%"};
      }
      if (!c.card->cores_percentage_overcommit &&
          int64_t{c.cores_percentage} + charge.cores_percentage > 100) {
        return Error{where + ": compute budgets would exceed 100%"};
      }
      break;
    case Mode::kPartitioned: {
      const PartitionProfile* profile = c.card->FindProfile(charge.profile);
      if (profile == nullptr) return Error{where + " does not offer profile " + charge.profile};
      if (std::find(profile->placements.begin(), profile->placements.end(), charge.placement) ==
          profile->placements.end()) {
        return Error{where + ": placement " + std::to_string(charge.placement.start) + "+" +
                     std::to_string(charge.placement.length) + " is not legal for " +
                     charge.profile};
      }
      if (charge.credits != PartitionCredits(*c.card, charge.placement)) {
        return Error{where + ": a " + charge.profile + " partition charges " +
                     std::to_string(PartitionCredits(*c.card, charge.placement)) +
                     " credits, not " + std::to_string(charge.credits)};
      }
      for (const auto& used : c.partitions) {
        if (used.second.Overlaps(charge.placement)) {
          return Error{where + ": placement overlaps an existing " + used.first};
        }
      }
      break;
    }
    default:
      break;
  }
  return Ok{};
}

void NodeLedger::Apply(const Charge& charge, int sign) {
  CardState& c = *FindCard(charge.accelerator_id);
  c.allocated += sign * charge.credits;
  switch (charge.mode) {
    case Mode::kShared:
      c.shared_slots =
          static_cast<uint32_t>(int64_t{c.shared_slots} + sign * int64_t{charge.shared_slots});
      break;
    case Mode::kSliced:
      c.slices += sign;
      c.cores_percentage = static_cast<uint32_t>(int64_t{c.cores_percentage} +
                                                 sign * int64_t{charge.cores_percentage});
      break;
    case Mode::kPartitioned:
      if (sign > 0) {
        c.partitions.emplace_back(charge.profile, charge.placement);
      } else {
        auto it = std::find(c.partitions.begin(), c.partitions.end(),
                            std::make_pair(charge.profile, charge.placement));
        if (it != c.partitions.end()) c.partitions.erase(it);
      }
      break;
    default:
      break;
  }
  c.mode = c.allocated == 0 ? Mode::kNone : charge.mode;
}

Result<Allocation> NodeLedger::Reserve(const Owner& owner, const Request& request) {
  if (auto held = allocations_.find(owner); held != allocations_.end()) return held->second;
  auto charges = Fit(request);
  if (!charges) return std::move(charges).failure();
  if (charges->empty()) {
    // An owner recorded with nothing would have its later, real request answered with nothing.
    return Error{"pod " + owner.pod_uid + " container " + owner.container +
                     ": the request asks for no accelerator; nothing reserved",
                 Code::kInvalidArgument};
  }
  Allocation allocation{owner, std::move(charges).value()};
  for (const Charge& c : allocation.charges) Apply(c, +1);
  allocations_.emplace(owner, allocation);
  return allocation;
}

Status NodeLedger::Restore(const Allocation& allocation) {
  if (allocations_.count(allocation.owner)) {
    if (allocations_.at(allocation.owner) == allocation) return Ok{};
    return Error{"pod " + allocation.owner.pod_uid + " container " + allocation.owner.container +
                 " already holds a different allocation on node " + node_};
  }
  // Check on a scratch copy so a refused allocation leaves nothing behind.
  NodeLedger scratch(*this);
  for (const Charge& charge : allocation.charges) {
    CardState* card = scratch.FindCard(charge.accelerator_id);
    if (card == nullptr) {
      return Error{"allocation of pod " + allocation.owner.pod_uid + " names card " +
                   charge.accelerator_id + ", which node " + node_ + " does not have"};
    }
    if (auto ok = scratch.Check(charge, *card); !ok) return ok;
    scratch.Apply(charge, +1);
  }
  for (const Charge& c : allocation.charges) Apply(c, +1);
  allocations_.emplace(allocation.owner, allocation);
  return Ok{};
}

bool NodeLedger::Release(const Owner& owner) {
  auto it = allocations_.find(owner);
  if (it == allocations_.end()) return false;
  for (const Charge& c : it->second.charges) Apply(c, -1);
  allocations_.erase(it);
  return true;
}

void NodeLedger::ReleaseTerminated(
    const Owner& owner, const std::function<bool(const std::string&)>& slices_are_objects) {
  auto it = allocations_.find(owner);
  if (it == allocations_.end()) return;
  std::vector<Charge>& charges = it->second.charges;
  auto durable = [&](const Charge& c) {
    if (c.mode == Mode::kPartitioned) return true;
    if (c.mode != Mode::kSliced) return false;
    return slices_are_objects &&
           slices_are_objects(FindCard(c.accelerator_id)->group->manufacturer);
  };
  for (auto c = charges.begin(); c != charges.end();) {
    if (durable(*c)) {
      ++c;
    } else {
      Apply(*c, -1);
      c = charges.erase(c);
    }
  }
  if (charges.empty()) allocations_.erase(it);
}

DevicesStatus NodeLedger::ToStatus() const {
  DevicesStatus status;
  for (const CardState& c : cards_) {
    if (status.groups.empty() || status.groups.back().id != c.group->id ||
        status.groups.back().manufacturer != c.group->manufacturer) {
      status.groups.push_back({c.group->id, c.group->manufacturer, {}});
    }
    AcceleratorAllocation a;
    a.id = c.card->id;
    a.index = c.card->index;
    a.mode = c.mode;
    a.allocated = c.allocated;
    a.remaining = c.remaining();
    a.allocated_slices = c.slices;
    for (const PartitionProfile& p : c.card->profiles) {
      if (const uint32_t n = c.AllocatedInstances(p.name); n > 0)
        a.allocated_profiles.push_back({p.name, n});
      a.remaining_profiles.push_back({p.name, c.RemainingInstances(p)});
    }
    status.groups.back().accelerators.push_back(std::move(a));
  }
  return status;
}

Result<NodeFit> FitOnNodes(const std::vector<const NodeLedger*>& nodes, const Request& request) {
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (auto fit = nodes[i]->FitImpl(request, /*explain=*/false))
      return NodeFit{i, std::move(*fit)};
  }
  constexpr size_t kExplained = 3;
  std::string why;
  for (size_t i = 0; i < nodes.size() && i < kExplained; ++i) {
    why += (why.empty() ? "" : " | ") + nodes[i]->Fit(request).error();
  }
  if (nodes.size() > kExplained)
    why += " | and " + std::to_string(nodes.size() - kExplained) + " more node(s)";
  return Error{"none of " + std::to_string(nodes.size()) + " node(s) fits the request" +
               (why.empty() ? "" : ": " + why)};
}

Result<std::shared_ptr<const NodeLedger>> PublishedLedger(std::string node, DevicesSpec spec,
                                                          const DevicesStatus& status) {
  auto ledger = std::make_shared<NodeLedger>(std::move(node), std::move(spec));
  for (const AllocationGroup& g : status.groups) {
    for (const AcceleratorAllocation& a : g.accelerators) {
      if (a.mode == Mode::kNone) continue;
      const CardState* card = nullptr;
      for (const CardState& c : ledger->cards())
        if (c.card->id == a.id) card = &c;
      if (card == nullptr) {
        return Error{"status names card " + a.id + ", which the spec of node " + ledger->node() +
                     " does not have"};
      }
      std::vector<Allocation> held;
      const auto owner = [&](size_t n) {
        return Owner{"published", a.id + "/" + std::to_string(n)};
      };
      switch (a.mode) {
        case Mode::kExclusive: {
          Charge c;
          c.accelerator_id = a.id;
          c.mode = Mode::kExclusive;
          c.credits = kCardCredits;
          held.push_back({owner(0), {c}});
          break;
        }
        case Mode::kShared: {
          const auto slots = static_cast<uint32_t>(a.allocated / kSharedSlotCredits);
          Charge c;
          c.accelerator_id = a.id;
          c.mode = Mode::kShared;
          c.credits = slots * kSharedSlotCredits;
          c.shared_slots = slots;
          held.push_back({owner(0), {c}});
          break;
        }
        case Mode::kSliced: {
          // One charge per published slice, the credits split evenly (the first takes the rest).
          const int64_t n =
              std::clamp<int64_t>(a.allocated_slices, 1, std::max<int64_t>(a.allocated, 1));
          for (int64_t i = 0; i < n; ++i) {
            Charge c;
            c.accelerator_id = a.id;
            c.mode = Mode::kSliced;
            c.credits = a.allocated / n + (i == 0 ? a.allocated % n : 0);
            c.cores_percentage = 1;  // not published: the least a slice can hold
            held.push_back({owner(static_cast<size_t>(i)), {c}});
          }
          break;
        }
        case Mode::kPartitioned: {
          // Largest profiles first, each restored before the next is placed: the tightest
          // packing, as the lowest-free-start rule would have made it.
          std::vector<std::pair<const PartitionProfile*, uint32_t>> wanted;
          for (const ProfileCount& p : a.allocated_profiles) {
            const PartitionProfile* profile = card->card->FindProfile(p.name);
            if (profile == nullptr) {
              return Error{"status of node " + ledger->node() + " holds a " + p.name +
                           " instance on card " + a.id + ", which does not offer that profile"};
            }
            wanted.emplace_back(profile, p.count);
          }
          std::stable_sort(wanted.begin(), wanted.end(), [](const auto& x, const auto& y) {
            return x.first->memory_slices > y.first->memory_slices;
          });
          size_t n = 0;
          for (const auto& [profile, count] : wanted) {
            for (uint32_t i = 0; i < count; ++i) {
              Request r;
              r.manufacturer = g.manufacturer;
              r.group_id = g.id;
              r.mode = Mode::kPartitioned;
              r.profile = profile->name;
              r.cards = {a.id};
              auto fit = ledger->Fit(r);
              Status restored =
                  fit ? ledger->Restore({owner(n++), std::move(*fit)}) : Status(fit.failure());
              if (!restored) {
                return Error{"status of node " + ledger->node() + " holds more " + profile->name +
                             " instances on card " + a.id +
                             " than it can host: " + restored.error()};
              }
            }
          }
          break;
        }
        case Mode::kNone:
          break;
      }
      for (const Allocation& allocation : held) {
        if (auto ok = ledger->Restore(allocation); !ok) {
          return Error{"status of node " + ledger->node() + " over-charges card " + a.id + ": " +
                       ok.error()};
        }
      }
    }
  }
  return std::shared_ptr<const NodeLedger>(std::move(ledger));
}

Status RestoreOrRefit(NodeLedger& ledger, const Allocation& promised) {
  Status restored = ledger.Restore(promised);
  if (restored || promised.charges.empty()) return restored;
  // The same request on any card of the promised card's model: whole cards as one request, any
  // other charge on its own (a container's second partition under a derived owner).
  auto request_of = [&](const Charge& charge, uint32_t cards) -> std::optional<Request> {
    Request request;
    for (const Group& g : ledger.spec().groups) {
      for (const Accelerator& a : g.accelerators) {
        if (a.id == charge.accelerator_id) {
          request.manufacturer = g.manufacturer;
          request.group_id = g.id;
        }
      }
    }
    if (request.manufacturer.empty() || charge.mode == Mode::kNone) return std::nullopt;
    request.mode = charge.mode;
    request.count = charge.mode == Mode::kExclusive ? cards
                    : charge.mode == Mode::kShared  ? charge.shared_slots
                                                    : 1;
    request.units = charge.credits;
    request.cores_percentage = charge.cores_percentage;
    request.profile = charge.profile;
    return request;
  };
  const bool whole = promised.charges.front().mode == Mode::kExclusive;
  const size_t requests = whole ? 1 : promised.charges.size();
  for (size_t i = 0; i < requests; ++i) {
    auto request = request_of(promised.charges[i], static_cast<uint32_t>(promised.charges.size()));
    if (!request) return restored;
    Owner owner = promised.owner;
    if (i > 0) owner.container += "/" + std::to_string(i);
    if (auto refit = ledger.Reserve(owner, *request); !refit) {
      for (size_t j = 0; j < i; ++j) {
        Owner taken = promised.owner;
        if (j > 0) taken.container += "/" + std::to_string(j);
        ledger.Release(taken);
      }
      return Error{restored.error() + "; nor elsewhere: " + refit.error()};
    }
  }
  return Ok{};
}

}  // namespace gpustack::ledger
