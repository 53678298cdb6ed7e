// What a ResourceClaim asks of this node's DRA front end (docs/dra.md), and the record of what
// was prepared for it. Pure: the claim arrives as the apiserver's JSON.
#ifndef GPUSTACK_HOST_DRA_CLAIMS_H_
#define GPUSTACK_HOST_DRA_CLAIMS_H_

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "host/common/result.h"
#include "host/ledger/model.h"

namespace gpustack::dra {

using Json = nlohmann::json;

// The kubelet's name for a claim.
struct ClaimRef {
  std::string ns;
  std::string name;
  std::string uid;
  std::string Key() const { return ns + "/" + name; }
};

// The ledger's owner for a claim, beside Pods' containers: {"claim:<uid>", "claim"}.
ledger::Owner ClaimOwner(const std::string& claim_uid);
bool IsClaimOwner(const ledger::Owner& owner);

// One device the scheduler allocated to the claim from this driver.
struct AllocatedDevice {
  std::string request;  // the claim's request name ("gpu", "gpus/a" in a prioritized list)
  std::string pool;
  std::string device;
  // A share of a device allocated more than once (consumable capacity): its id, and what it
  // consumes of each capacity as the scheduler wrote it ("memory": "3276Mi", "cores": "40").
  std::string share_id = {};
  std::map<std::string, std::string> consumed = {};
  bool operator==(const AllocatedDevice&) const = default;
};

// The devices of `claim` allocated from `driver`'s pools, in the claim's order. Errors, each
// naming the claim: another object than the kubelet means (its uid differs), no allocation yet,
// admin access (not served), no device of this driver.
Result<std::vector<AllocatedDevice>> AllocatedDevices(const Json& claim, const ClaimRef& ref,
                                                      std::string_view driver);

// What one prepared claim holds: the devices, the ledger's charge and the CDI device the
// containers get. The durable record the node keeps before it answers the kubelet.
struct PreparedClaim {
  ClaimRef ref;
  std::vector<AllocatedDevice> devices;
  ledger::Allocation allocation;
  std::vector<std::string> cdi_devices;  // fully qualified CDI names
};

// The record file's text and back: {"version": 1, "claims": {"<uid>": {...}}}. Reading refuses a
// file that is not such an object as a whole, and a claim entry it cannot read one by one (the
// others kept, each refusal in `problems`): never guess an allocation.
std::string WriteRecord(const std::map<std::string, PreparedClaim>& claims);
Result<std::map<std::string, PreparedClaim>> ReadRecord(std::string_view text,
                                                        std::vector<std::string>* problems);

}  // namespace gpustack::dra

#endif  // GPUSTACK_HOST_DRA_CLAIMS_H_
