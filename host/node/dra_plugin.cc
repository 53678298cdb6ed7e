#include "host/node/dra_plugin.h"

#include <fmt/ranges.h>

#include <chrono>
#include <set>

#include "host/common/files.h"
#include "host/common/logging.h"
#include "host/dra/cdi_spec.h"
#include "host/dra/slices.h"
#include "host/kubelet_rpc/message.h"
#include "host/kubelet_rpc/server.h"
#include "proto/dra.pb.h"
#include "proto/pluginregistration.pb.h"

namespace gpustack::node {

namespace drapb = k8s::io::kubelet::pkg::apis::dra::v1;

namespace {

constexpr size_t kRecordLimit = 16 << 20;
// The gRPC service this driver implements, as the registration names it.
constexpr const char* kDraService = "v1.DRAPlugin";

dra::ClaimRef RefOf(const drapb::Claim& claim) {
  return {claim.namespace_(), claim.name(), claim.uid()};
}

// A unary method of `Request` to `Response`: parse, answer, serialize.
template <class Request, class Response>
kubelet_rpc::UnaryHandler Method(std::function<void(const Request&, Response&)> answer) {
  return [answer = std::move(answer)](std::string_view bytes) -> Result<std::string> {
    auto request = kubelet_rpc::ParseMessage<Request>(bytes);
    if (!request) return request.failure();
    Response response;
    answer(*request, response);
    return response.SerializeAsString();
  };
}

// v1.DRAPlugin on the driver's socket: the kubelet's prepare and unprepare calls.
std::shared_ptr<kubelet_rpc::Service> PluginService(DraFrontEnd& front) {
  auto service = std::make_shared<kubelet_rpc::Service>();
  const std::string prefix = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/";  // proto/dra.proto
  service->unary[prefix + "NodePrepareResources"] =
      Method<drapb::NodePrepareResourcesRequest, drapb::NodePrepareResourcesResponse>(
          [&front](const auto& request, auto& out) {
            for (const drapb::Claim& claim : request.claims()) {
              const PrepareOutcome outcome = front.Prepare(RefOf(claim));
              drapb::NodePrepareResourceResponse& answer = (*out.mutable_claims())[claim.uid()];
              if (!outcome.error.empty()) {
                answer.set_error(outcome.error);
                continue;
              }
              for (size_t i = 0; i < outcome.devices.size(); ++i) {
                const dra::AllocatedDevice& d = outcome.devices[i];
                drapb::Device* device = answer.add_devices();
                device->add_request_names(d.request);
                device->set_pool_name(d.pool);
                device->set_device_name(d.device);
                for (const std::string& id : outcome.cdi_devices[i]) device->add_cdi_device_ids(id);
              }
            }
          });
  service->unary[prefix + "NodeUnprepareResources"] =
      Method<drapb::NodeUnprepareResourcesRequest, drapb::NodeUnprepareResourcesResponse>(
          [&front](const auto& request, auto& out) {
            for (const drapb::Claim& claim : request.claims()) {
              (*out.mutable_claims())[claim.uid()].set_error(front.Unprepare(RefOf(claim)));
            }
          });
  return service;
}

// pluginregistration.Registration on the registry socket: how the kubelet finds the driver.
std::shared_ptr<kubelet_rpc::Service> RegistrationService(DraFrontEnd& front) {
  auto service = std::make_shared<kubelet_rpc::Service>();
  const std::string prefix = "/pluginregistration.Registration/";  // proto/pluginregistration.proto
  service->unary[prefix + "GetInfo"] =
      Method<pluginregistration::InfoRequest, pluginregistration::PluginInfo>(
          [&front](const auto&, auto& out) {
            out.set_type("DRAPlugin");
            out.set_name(dra::kDriverName);
            out.set_endpoint(front.socket_path().string());
            out.add_supported_versions(kDraService);
          });
  service->unary[prefix + "NotifyRegistrationStatus"] =
      Method<pluginregistration::RegistrationStatus,
             pluginregistration::RegistrationStatusResponse>([&front](const auto& status, auto&) {
        front.set_registered(status.plugin_registered());
        if (status.plugin_registered()) {
          Logger("dra")->info("the kubelet registered DRA driver {}", dra::kDriverName);
        } else {
          Logger("dra")->error("the kubelet refused DRA driver {}: {}", dra::kDriverName,
                               status.error());
        }
      });
  return service;
}

}  // namespace

DraFrontEnd::DraFrontEnd(runtime::NodeRuntime& runtime, Allocator& allocator,
                         ClaimReader read_claim, std::string node_name, DraOptions options)
    : runtime_(runtime),
      allocator_(allocator),
      read_claim_(std::move(read_claim)),
      node_name_(std::move(node_name)),
      options_(std::move(options)) {}

DraFrontEnd::~DraFrontEnd() { Stop(); }

std::filesystem::path DraFrontEnd::socket_path() const {
  return options_.plugins_dir / dra::kDriverName / "dra.sock";
}

std::filesystem::path DraFrontEnd::registration_socket_path() const {
  return options_.registry_dir / (std::string(dra::kDriverName) + "-reg.sock");
}

size_t DraFrontEnd::prepared_claims() const {
  std::lock_guard lock(mutex_);
  return claims_.size();
}

Result<size_t> DraFrontEnd::Restore() {
  std::lock_guard lock(mutex_);
  auto log = Logger("dra");
  auto text = ReadSmallFile(options_.record, kRecordLimit, "record of prepared claims");
  if (!text && text.code() != Code::kNotFound) return text.failure();
  if (text) {
    std::vector<std::string> problems;
    auto read = dra::ReadRecord(*text, &problems);
    if (!read) {
      return Error{"the record of prepared claims " + options_.record.string() +
                       " cannot be read: " + read.error(),
                   Code::kDataLoss};
    }
    for (const std::string& problem : problems) log->error("not restored: {}", problem);
    claims_ = std::move(*read);
  }
  size_t restored = 0;
  for (const auto& [uid, claim] : claims_) {
    if (Status s = allocator_.RestoreClaim(claim.allocation); !s) {
      // Kept, so the kubelet's unprepare still ends it; its card is not charged meanwhile.
      log->error("claim {} ({}): its recorded allocation no longer fits: {}", claim.ref.Key(), uid,
                 s.error());
      continue;
    }
    ++restored;
  }
  // A crash between a spec and the record leaves a spec nobody will remove.
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(options_.cdi_dir, ec)) {
    auto uid = dra::ClaimOfCdiSpecFile(entry.path().filename().string());
    if (uid && !claims_.contains(*uid)) std::filesystem::remove(entry.path(), ec);
  }
  return restored;
}

Status DraFrontEnd::Start() {
  std::error_code ec;
  std::filesystem::create_directories(socket_path().parent_path(), ec);
  std::filesystem::create_directories(options_.registry_dir, ec);
  std::filesystem::create_directories(options_.cdi_dir, ec);
  for (const auto& socket : {socket_path(), registration_socket_path()}) {
    std::filesystem::remove(socket, ec);  // a stale one from an earlier life
  }
  // Both sockets on one server, one thread for the driver.
  auto server = std::make_unique<kubelet_rpc::Server>();
  Status serving = server->Listen(socket_path(), PluginService(*this));
  if (serving) serving = server->Listen(registration_socket_path(), RegistrationService(*this));
  if (serving) serving = server->Start("dra-plugin");
  if (!serving) {
    return serving.failure().WithContext("cannot serve DRA driver " +
                                         std::string(dra::kDriverName) + ": ");
  }
  server_ = std::move(server);
  Logger("dra")->info("DRA driver {} serving on {}, registration at {}", dra::kDriverName,
                      socket_path().string(), registration_socket_path().string());
  return Ok{};
}

void DraFrontEnd::Stop() {
  if (!server_) return;
  server_->Stop();
  server_.reset();
  std::error_code ec;
  // The registration socket first: the kubelet then deregisters the driver.
  std::filesystem::remove(registration_socket_path(), ec);
  std::filesystem::remove(socket_path(), ec);
}

PrepareOutcome DraFrontEnd::OutcomeOf(const dra::PreparedClaim& claim) const {
  PrepareOutcome outcome;
  std::set<std::string> requests;
  for (const dra::AllocatedDevice& d : claim.devices) {
    outcome.devices.push_back(d);
    // One CDI device carries the whole claim: named once per request, so a container that uses
    // one request of the claim gets it, and none gets it twice.
    outcome.cdi_devices.push_back(requests.insert(d.request).second ? claim.cdi_devices
                                                                    : std::vector<std::string>{});
  }
  return outcome;
}

Status DraFrontEnd::WriteRecordLocked() {
  return WriteFileAtomically(options_.record, dra::WriteRecord(claims_),
                             std::filesystem::perms(0600), /*durable=*/true);
}

PrepareOutcome DraFrontEnd::Prepare(const dra::ClaimRef& ref) {
  auto log = Logger("dra");
  const auto began = std::chrono::steady_clock::now();
  std::lock_guard lock(mutex_);
  auto fail = [&](const std::string& why) {
    log->warn("prepare of ResourceClaim {} refused: {}", ref.Key(), why);
    return PrepareOutcome{.devices = {}, .cdi_devices = {}, .error = why};
  };
  if (auto it = claims_.find(ref.uid); it != claims_.end()) {
    // Prepared before: the same answer, while the ledger holds it (a record that could not be
    // restored at start, its cards taken by a Pod, must not be handed out again).
    if (Status held = allocator_.RestoreClaim(it->second.allocation); !held) {
      return fail("ResourceClaim " + ref.Key() +
                  " was prepared, but its cards are not free: " + held.error());
    }
    return OutcomeOf(it->second);
  }
  auto object = read_claim_(ref.ns, ref.name);
  if (!object) return fail("cannot read ResourceClaim " + ref.Key() + ": " + object.error());
  auto devices = dra::AllocatedDevices(*object, ref, dra::kDriverName);
  if (!devices) return fail(devices.error());
  // What the devices ask of the ledger: whole cards, one slice of one card, or one partition.
  const ledger::DevicesSpec spec =
      runtime_.WithLedger([](ledger::NodeLedger& ledger) { return ledger.spec(); });
  auto asked = dra::LedgerRequestFor(*devices, spec, node_name_, ref);
  if (!asked) return fail(asked.error());
  const ledger::Owner owner = dra::ClaimOwner(ref.uid);
  auto grant =
      allocator_.GrantClaim(owner, asked->manufacturer, asked->request, asked->card_memory_mib);
  if (!grant) return fail("ResourceClaim " + ref.Key() + ": " + grant.error());
  // The container edits as a CDI spec, and any CDI device the plugin names itself.
  std::vector<std::string> dropped;
  const Json cdi_spec = dra::ClaimCdiSpec(ref.uid, grant->edits, &dropped);
  for (const std::string& d : dropped) log->warn("claim {}: {} has no CDI form", ref.Key(), d);
  dra::PreparedClaim prepared{.ref = ref,
                              .devices = *devices,
                              .allocation = grant->allocation,
                              .cdi_devices = {dra::CdiDeviceName(ref.uid)}};
  for (const sdk::ContainerEdit& e : grant->edits) {
    if (e.kind == GPUSTACK_EDIT_CDI_DEVICE)
      prepared.cdi_devices.push_back(e.value.empty() ? e.key : e.value);
  }
  const std::filesystem::path spec_file = options_.cdi_dir / dra::CdiSpecFileName(ref.uid);
  Status written = WriteFileAtomically(spec_file, cdi_spec.dump(2), std::filesystem::perms(0644));
  if (written) {
    claims_[ref.uid] = prepared;
    written = WriteRecordLocked();
    if (!written) claims_.erase(ref.uid);
  }
  if (!written) {
    // No record, no devices: nothing stays charged that no record names.
    allocator_.ReleaseClaim(owner);
    std::error_code ec;
    std::filesystem::remove(spec_file, ec);
    return fail("cannot record the preparation: " + written.error());
  }
  log->info(
      "claim {} prepared in {:.1f} ms: {} {} on {}", ref.Key(),
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - began).count(),
      asked->manufacturer, ledger::ModeKey(asked->request.mode),
      fmt::join(asked->request.cards, ","));
  return OutcomeOf(prepared);
}

std::string DraFrontEnd::Unprepare(const dra::ClaimRef& ref) {
  std::lock_guard lock(mutex_);
  auto it = claims_.find(ref.uid);
  if (it == claims_.end()) return "";  // never prepared here, or already undone
  dra::PreparedClaim prepared = std::move(it->second);
  claims_.erase(it);
  // The record first: a card given back while the record still names the claim would be
  // charged again at the next start, and never released.
  if (Status written = WriteRecordLocked(); !written) {
    claims_[ref.uid] = std::move(prepared);
    return "cannot record the unprepare of " + ref.Key() + ": " + written.error();
  }
  allocator_.ReleaseClaim(dra::ClaimOwner(ref.uid));
  std::error_code ec;
  std::filesystem::remove(options_.cdi_dir / dra::CdiSpecFileName(ref.uid), ec);
  Logger("dra")->info("claim {} unprepared", ref.Key());
  return "";
}

}  // namespace gpustack::node
