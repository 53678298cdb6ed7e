#include "host/dra/claims.h"

#include "host/common/json_path.h"

namespace gpustack::dra {
namespace {

constexpr std::string_view kClaimPrefix = "claim:";

std::string Text(const Json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
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
  const Json* results = nullptr;
  if (auto s = claim.find("status"); s != claim.end() && s->is_object()) {
    if (auto a = s->find("allocation"); a != s->end() && a->is_object()) {
      if (auto d = a->find("devices"); d != a->end() && d->is_object()) {
        if (auto r = d->find("results"); r != d->end() && r->is_array()) results = &*r;
      }
    }
  }
  if (results == nullptr) {
    return Error{name + " has no device allocation yet", Code::kFailedPrecondition};
  }
  std::vector<AllocatedDevice> devices;
  for (const Json& result : *results) {
    if (!result.is_object() || Text(result, "driver") != driver) continue;
    if (result.value("adminAccess", false)) {
      return Error{name + " asks for admin access to " + Text(result, "device") +
                       ", which this driver does not serve",
                   Code::kInvalidArgument};
    }
    AllocatedDevice device{Text(result, "request"), Text(result, "pool"), Text(result, "device")};
    device.share_id = Text(result, "shareID");
    if (auto c = result.find("consumedCapacity"); c != result.end() && c->is_object()) {
      for (const auto& [capacity, quantity] : c->items()) {
        device.consumed[capacity] =
            quantity.is_string() ? quantity.get<std::string>() : quantity.dump();
      }
    }
    if (device.request.empty() || device.pool.empty() || device.device.empty()) {
      return Error{
          name + " has an allocation result without request, pool or device: " + result.dump(),
          Code::kInvalidArgument};
    }
    devices.push_back(std::move(device));
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
    for (const AllocatedDevice& d : claim.devices) {
      Json device = {{"request", d.request}, {"pool", d.pool}, {"device", d.device}};
      if (!d.share_id.empty()) device["shareID"] = d.share_id;
      if (!d.consumed.empty()) device["consumedCapacity"] = d.consumed;
      devices.push_back(std::move(device));
    }
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
  if (!record.is_object() || record.value("version", 0) != 1 || !record.contains("claims") ||
      !record["claims"].is_object()) {
    return Error{"not a version 1 record of prepared claims", Code::kDataLoss};
  }
  std::map<std::string, PreparedClaim> claims;
  for (const auto& [uid, entry] : record["claims"].items()) {
    auto refuse = [&, uid = uid](const std::string& why) {
      if (problems != nullptr) problems->push_back("claim " + uid + ": " + why);
    };
    if (!entry.is_object()) {
      refuse("not an object");
      continue;
    }
    PreparedClaim claim{.ref = {Text(entry, "namespace"), Text(entry, "name"), uid},
                        .devices = {},
                        .allocation = {},
                        .cdi_devices = {}};
    auto allocation = ledger::AllocationFromJson(entry.value("allocation", Json()));
    if (!allocation) {
      refuse(allocation.error());
      continue;
    }
    if (allocation->owner != ClaimOwner(uid)) {
      refuse("its allocation names another owner (" + allocation->owner.pod_uid + ")");
      continue;
    }
    claim.allocation = std::move(*allocation);
    bool readable = entry.contains("devices") && entry["devices"].is_array();
    for (const Json& d : readable ? entry["devices"] : Json::array()) {
      AllocatedDevice device{Text(d, "request"), Text(d, "pool"), Text(d, "device")};
      device.share_id = Text(d, "shareID");
      const Json consumed = d.value("consumedCapacity", Json::object());
      for (const auto& [capacity, quantity] : consumed.items()) {
        if (quantity.is_string()) device.consumed[capacity] = quantity.get<std::string>();
      }
      readable =
          readable && !device.request.empty() && !device.pool.empty() && !device.device.empty();
      claim.devices.push_back(std::move(device));
    }
    for (const Json& id : entry.value("cdiDevices", Json::array())) {
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
