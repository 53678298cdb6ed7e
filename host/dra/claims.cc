#include "host/dra/claims.h"

#include <optional>

#include "host/common/json_path.h"

namespace gpustack::dra {
namespace {

constexpr std::string_view kClaimPrefix = "claim:";

// A device as the scheduler writes it in a claim's results and the record keeps it (the same
// field names); nothing when its request, pool or device is missing.
std::optional<AllocatedDevice> DeviceFromJson(const Json& json) {
  AllocatedDevice device{StringAt(json, {"request"}), StringAt(json, {"pool"}),
                         StringAt(json, {"device"})};
  if (device.request.empty() || device.pool.empty() || device.device.empty()) return std::nullopt;
  device.share_id = StringAt(json, {"shareID"});
  if (const Json* consumed = ObjectAt(json, {"consumedCapacity"})) {
    for (const auto& [capacity, quantity] : consumed->items())
      device.consumed[capacity] =
          quantity.is_string() ? quantity.get<std::string>() : quantity.dump();
  }
  return device;
}

Json DeviceToJson(const AllocatedDevice& d) {
  Json device = {{"request", d.request}, {"pool", d.pool}, {"device", d.device}};
  if (!d.share_id.empty()) device["shareID"] = d.share_id;
  if (!d.consumed.empty()) device["consumedCapacity"] = d.consumed;
  return device;
}

}  // namespace

ledger::Owner ClaimOwner(const std::string& claim_uid) {
  return {std::string(kClaimPrefix) + claim_uid, "claim"};
}

bool IsClaimOwner(const ledger::Owner& owner) { return owner.pod_uid.starts_with(kClaimPrefix); }

Result<std::vector<AllocatedDevice>> AllocatedDevices(const Json& claim, const ClaimRef& ref,
                                                      std::string_view driver) {
  const std::string name = "ResourceClaim " + ref.Key();
  const std::string uid = StringAt(claim, {"metadata", "uid"});
  if (uid != ref.uid) {
    return Error{
        name + " is now another object (uid " + uid + ", the kubelet asks for " + ref.uid + ")",
        Code::kNotFound};
  }
  const Json& results = JsonAt(claim, {"status", "allocation", "devices", "results"});
  if (!results.is_array()) {
    return Error{name + " has no device allocation yet", Code::kFailedPrecondition};
  }
  std::vector<AllocatedDevice> devices;
  for (const Json& result : results) {
    if (StringAt(result, {"driver"}) != driver) continue;
    if (BoolAt(result, {"adminAccess"})) {
      return Error{name + " asks for admin access to " + StringAt(result, {"device"}) +
                       ", which this driver does not serve",
                   Code::kInvalidArgument};
    }
    auto device = DeviceFromJson(result);
    if (!device) {
      return Error{
          name + " has an allocation result without request, pool or device: " + result.dump(),
          Code::kInvalidArgument};
    }
    devices.push_back(std::move(*device));
  }
  if (devices.empty()) {
    return Error{name + " holds no device of driver " + std::string(driver),
                 Code::kFailedPrecondition};
  }
  return devices;
}

std::string WriteRecord(const std::map<std::string, PreparedClaim>& claims) {
  Json entries = Json::object();
  for (const auto& [uid, claim] : claims) {
    Json devices = Json::array();
    for (const AllocatedDevice& d : claim.devices) devices.push_back(DeviceToJson(d));
    entries[uid] = {{"namespace", claim.ref.ns},
                    {"name", claim.ref.name},
                    {"devices", devices},
                    {"allocation", ledger::ToJson(claim.allocation)},
                    {"cdiDevices", claim.cdi_devices}};
  }
  return Json{{"version", 1}, {"claims", entries}}.dump(2) + "\n";
}

Result<std::map<std::string, PreparedClaim>> ReadRecord(std::string_view text,
                                                        std::vector<std::string>* problems) {
  const Json record = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  const Json* entries = ObjectAt(record, {"claims"});
  if (IntAt(record, {"version"}) != 1 || entries == nullptr) {
    return Error{"not a version 1 record of prepared claims", Code::kDataLoss};
  }
  std::map<std::string, PreparedClaim> claims;
  for (const auto& [uid, entry] : entries->items()) {
    auto refuse = [&, uid = uid](const std::string& why) {
      if (problems != nullptr) problems->push_back("claim " + uid + ": " + why);
    };
    if (!entry.is_object()) {
      refuse("not an object");
      continue;
    }
    PreparedClaim claim{.ref = {StringAt(entry, {"namespace"}), StringAt(entry, {"name"}), uid},
                        .devices = {},
                        .allocation = {},
                        .cdi_devices = {}};
    auto allocation = ledger::AllocationFromJson(JsonAt(entry, {"allocation"}));
    if (!allocation) {
      refuse(allocation.error());
      continue;
    }
    if (allocation->owner != ClaimOwner(uid)) {
      refuse("its allocation names another owner (" + allocation->owner.pod_uid + ")");
      continue;
    }
    claim.allocation = std::move(*allocation);
    const Json& devices = JsonAt(entry, {"devices"});
    bool readable = devices.is_array();
    for (const Json& d : readable ? devices : Json::array()) {
      auto device = DeviceFromJson(d);
      readable = readable && device.has_value();
      if (device) claim.devices.push_back(std::move(*device));
    }
    if (const Json& ids = JsonAt(entry, {"cdiDevices"}); ids.is_array()) {
      for (const Json& id : ids)
        if (id.is_string()) claim.cdi_devices.push_back(id.get<std::string>());
    }
    if (!readable || claim.devices.empty() || claim.ref.ns.empty() || claim.ref.name.empty()) {
      refuse("its devices, namespace or name are missing");
      continue;
    }
    claims.emplace(uid, std::move(claim));
  }
  return claims;
}

}  // namespace gpustack::dra
