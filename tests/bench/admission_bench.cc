// Gate 3 measured (figures only, nothing asserts):
//  1. decision time of the gpustack-node-devices check per Workload on a 1,000-node fleet of
//     8 x H100, the ledgers filling and emptying as the decisions land;
//  2. packing: a random trace of mixed shapes against a fixed fleet, admitted in arrival order
//     (what the check does), against an offline best-fit-decreasing packing of the same requests
//     and the plain capacity bound;
//  3. gate 5 agreement: the admitted Pods allocated by per-node ledgers in a shuffled order, once
//     with gate 3's chosen cards (what the node allocator does) and once without: how often
//     gate 5 refuses what gate 3 let through.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <random>

#include "host/ledger/ledger.h"
#include "host/operator/admission.h"
#include "host/operator/node_check.h"
#include "tests/bench/report.h"

using namespace gpustack;
using op::Json;

namespace {

const op::ManufacturerTable kTable = {{"nvidia", {"nvidia", "nvidia.com/gpu", "mig", "bench"}}};

Json Spec(const std::string& fixture) {
  std::ifstream in(std::string(GPUSTACK_NODES_DIR) + "/expected/" + fixture + ".devices.json");
  return Json::parse(in);
}

op::Fleet MakeFleet(int nodes, const Json& spec) {
  std::vector<op::NodeFacts> facts;
  for (int i = 0; i < nodes; ++i) {
    const std::string name = "node-" + std::to_string(i);
    const Json node = {
        {"metadata",
         {{"name", name},
          {"labels",
           {{"kubernetes.io/os", "linux"},
            {"kubernetes.io/arch", "amd64"},
            {op::kCpuVendorLabel, "Intel"},
            {op::kManagedLabel, "true"}}},
          {"annotations", {{op::kCpuNameAnnotation, "Intel(R) Xeon(R) Platinum 8480+"}}}}},
        {"status", {{"capacity", {{"cpu", "224"}}}}}};
    const Json devices = {{"metadata", {{"name", name}}}, {"spec", spec}};
    facts.push_back(op::NodeFactsOf(node, &devices));
  }
  return op::Fleet(std::move(facts), op::Settings{}, kTable);
}

std::string AcceleratedFlavor(const op::Fleet& fleet) {
  for (const auto& [name, f] : fleet.flavors())
    if (!f.akey.empty()) return name;
  return {};
}

// One random request, as the containers' limits of a Pod.
struct Shape {
  Json limits;
  int64_t credits = 0;  // what Kueue would charge
};
Shape RandomShape(std::mt19937& random, bool partitions) {
  auto pick = [&](int n) { return static_cast<int>(random() % static_cast<unsigned>(n)); };
  const int kind = pick(partitions ? 10 : 7);
  if (kind == 0) {
    const int n = 1 + pick(2);
    return {{{"nvidia.com/gpu", std::to_string(n)}}, n * ledger::kCardCredits};
  }
  if (kind <= 2) {
    const int n = 1 + pick(5);
    return {{{"nvidia.com/gpu.shared", std::to_string(n)}}, n * ledger::kSharedSlotCredits};
  }
  if (kind <= 6) {
    const int p = 10 * (1 + pick(7));
    return {{{"nvidia.com/gpu.sliced", "1"},
             {"nvidia.com/gpu.sliced.memory-percentage", std::to_string(p)}},
            p * ledger::kCreditsPerPercent};
  }
  static const char* kProfiles[] = {"1g.10gb", "2g.20gb", "3g.40gb"};
  static const int64_t kCredits[] = {200000, 400000, 800000};
  const int i = pick(3);
  return {{{"nvidia.com/gpu.partitioned", "1"},
           {std::string("nvidia.com/gpu.partitioned.mig-") + kProfiles[i], "1"}},
          kCredits[i]};
}

Json WorkloadFor(const std::string& uid, const Json& limits, const std::string& flavor) {
  return {
      {"metadata", {{"name", uid}, {"uid", uid}}},
      {"spec",
       {{"podSets",
         {{{"name", "main"},
           {"count", 1},
           {"template",
            {{"spec",
              {{"containers", {{{"name", "main"}, {"resources", {{"limits", limits}}}}}}}}}}}}}}},
      {"status",
       {{"admission",
         {{"clusterQueue", "h100"},
          {"podSetAssignments",
           {{{"name", "main"}, {"flavors", {{"credits.gpustack.ai/nvidia", flavor}}}}}}}}}}};
}

// The H100 pool's InstanceType status detail: what the Pod webhook folds partitions with.
Json TypeFor(const ledger::DevicesSpec& spec) {
  Json profiles = Json::array();
  for (const ledger::Accelerator& a : spec.groups[0].accelerators) {
    for (const ledger::PartitionProfile& p : a.profiles)
      profiles.push_back({{"name", p.name}, {"memoryMib", p.memory_mib}});
    if (!a.profiles.empty()) break;
  }
  return {{"status",
           {{"detail",
             {{"memory", spec.groups[0].memory},
              {"slicedDetail", {{"physical", {{"profiles", profiles}}}}}}}}}};
}

using Ledgers = std::map<std::string, std::unique_ptr<ledger::NodeLedger>>;

Ledgers LedgersOf(const op::Fleet& fleet) {
  Ledgers out;
  for (const op::NodePtr& n : fleet.nodes())
    out[n->name] = std::make_unique<ledger::NodeLedger>(n->name, n->ledger->spec());
  return out;
}

// Charges a Ready verdict to the ledgers (what the check counts as in flight).
void Charge(Ledgers& ledgers, const std::string& uid, const op::CheckVerdict& v) {
  for (const op::PodSetPlacement& p : v.placements) {
    for (const auto& [container, charges] : p.pods.at(0)) {
      if (!ledgers.at(p.node)->Restore({{uid, container}, charges}))
        std::fprintf(stderr, "BUG: a Ready verdict does not restore\n");
    }
  }
}

void DecisionTime() {
  const op::Fleet fleet = MakeFleet(1000, Spec("nvidia-h100x8-mig-off"));
  const std::string flavor = AcceleratedFlavor(fleet);
  Ledgers ledgers = LedgersOf(fleet);
  const Json type = TypeFor(fleet.nodes()[0]->ledger->spec());
  std::mt19937 random(7);
  std::vector<std::string> held;
  std::vector<double> ready_ms, retry_ms;
  auto ledger_of = [&](const std::string& n) -> const ledger::NodeLedger* {
    return ledgers.at(n).get();
  };
  for (int i = 0; i < 20000; ++i) {
    const std::string uid = "w" + std::to_string(i);
    const Json workload = WorkloadFor(uid, RandomShape(random, false).limits, flavor);
    const auto started = std::chrono::steady_clock::now();
    const op::CheckVerdict v = op::DecideWith(workload, fleet, &type, ledger_of);
    const double ms = bench::Ms(std::chrono::steady_clock::now() - started);
    (v.ready ? ready_ms : retry_ms).push_back(ms);
    if (v.ready) {
      Charge(ledgers, uid, v);
      held.emplace_back(v.placements[0].node + "/" + uid);
    }
    // Work finishes at random, more slowly than it comes: the fleet fills, then stays full.
    if (!held.empty() && (!v.ready || random() % 8 == 0)) {
      const size_t at = random() % held.size();
      const std::string node = held[at].substr(0, held[at].find('/'));
      ledgers.at(node)->Release({held[at].substr(held[at].find('/') + 1), "main"});
      held.erase(held.begin() + static_cast<std::ptrdiff_t>(at));
    }
  }
  std::printf("decision, 1,000 nodes x 8 H100, %zu Workloads held at the end\n", held.size());
  bench::Percentiles("  Ready (a card found)", ready_ms);
  bench::Percentiles("  Retry (every node explained)", retry_ms);
  std::vector<double> all = ready_ms;
  all.insert(all.end(), retry_ms.begin(), retry_ms.end());
  bench::Percentiles("  all decisions", all);
}

void PackingAndAgreement() {
  const Json spec = Spec("nvidia-h100x8-mig-mixed");
  const op::Fleet fleet = MakeFleet(16, spec);
  const std::string flavor = AcceleratedFlavor(fleet);
  const Json type = TypeFor(fleet.nodes()[0]->ledger->spec());
  int64_t capacity = 0;
  for (const op::NodePtr& n : fleet.nodes())
    for (const ledger::Group& g : n->ledger->spec().groups)
      capacity += static_cast<int64_t>(g.accelerators.size()) * ledger::kCardCredits;

  std::mt19937 random(20261203);
  std::vector<Shape> trace;
  int64_t asked = 0;
  for (int i = 0; i < 600; ++i) {
    trace.push_back(RandomShape(random, true));
    asked += trace.back().credits;
  }
  struct Outcome {
    int admitted = 0;
    int64_t credits = 0;
    std::vector<std::pair<std::string, op::CheckVerdict>> ready;  // in admission order
  };
  auto run = [&](const std::vector<size_t>& order) {
    Ledgers ledgers = LedgersOf(fleet);
    auto ledger_of = [&](const std::string& n) -> const ledger::NodeLedger* {
      return ledgers.at(n).get();
    };
    Outcome o;
    for (size_t i : order) {
      const std::string uid = "w" + std::to_string(i);
      const op::CheckVerdict v =
          op::DecideWith(WorkloadFor(uid, trace[i].limits, flavor), fleet, &type, ledger_of);
      if (!v.ready) continue;
      Charge(ledgers, uid, v);
      ++o.admitted;
      o.credits += trace[i].credits;
      o.ready.emplace_back(uid, v);
    }
    return o;
  };
  std::vector<size_t> arrival(trace.size());
  for (size_t i = 0; i < arrival.size(); ++i) arrival[i] = i;
  std::vector<size_t> decreasing = arrival;
  std::stable_sort(decreasing.begin(), decreasing.end(),
                   [&](size_t a, size_t b) { return trace[a].credits > trace[b].credits; });
  const Outcome online = run(arrival), offline = run(decreasing);
  std::printf(
      "packing, 16 nodes x 8 H100 (GPUs 0-2 in MIG mode), %zu mixed requests asking "
      "%.1f cards of %.0f\n",
      trace.size(), static_cast<double>(asked) / ledger::kCardCredits,
      static_cast<double>(capacity) / ledger::kCardCredits);
  auto line = [&](const char* what, const Outcome& o) {
    std::printf("  %-44s admitted %d requests, %.1f cards = %.1f %% of the fleet\n", what,
                o.admitted, static_cast<double>(o.credits) / ledger::kCardCredits,
                100.0 * static_cast<double>(o.credits) / static_cast<double>(capacity));
  };
  line("gate 3, arrival order (best fit)", online);
  line("offline best-fit-decreasing, same requests", offline);
  std::printf("  %-44s %.1f %% of the offline packing's cards\n", "online / offline",
              100.0 * static_cast<double>(online.credits) / static_cast<double>(offline.credits));

  // Gate 5: each admitted Pod allocated on its node in a shuffled order (Pods start when their
  // kubelet gets to them), with and without the chosen cards.
  std::vector<size_t> order(online.ready.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), random);
  for (bool honour : {true, false}) {
    Ledgers nodes = LedgersOf(fleet);
    int refused = 0;
    for (size_t i : order) {
      const auto& [uid, v] = online.ready[i];
      const op::PodSetPlacement& p = v.placements[0];
      const Json workload = WorkloadFor(uid, trace[std::stoul(uid.substr(1))].limits, flavor);
      auto demands =
          op::DemandsOf(workload, {kTable.at("nvidia").Kind()}, op::FoldContextOf(&type));
      ledger::Request request = demands->at(0).containers[0].request;
      if (honour) {
        // What the node allocator takes from the chosen-cards annotation: the cards, and a
        // partition's placement.
        for (const ledger::Charge& c : p.pods.at(0).at("main")) {
          request.cards.push_back(c.accelerator_id);
          if (c.mode == ledger::Mode::kPartitioned) request.placement = c.placement;
        }
      }
      auto reserved = nodes.at(p.node)->Reserve({uid, "main"}, request);
      if (!reserved) {
        ++refused;
        if (std::getenv("GPUSTACK_BENCH_EXPLAIN"))
          std::printf("    %s (pinned %d %u+%u)\n", reserved.error().c_str(),
                      request.placement.has_value(),
                      request.placement ? request.placement->start : 0,
                      request.placement ? request.placement->length : 0);
      }
    }
    std::printf("  gate 5 %-37s refused %d of %zu admitted Pods\n",
                honour ? "with gate 3's chosen cards:" : "choosing cards itself:", refused,
                order.size());
  }
}

}  // namespace

int main() {
  DecisionTime();
  PackingAndAgreement();
  return 0;
}
