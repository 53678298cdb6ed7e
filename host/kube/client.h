// A Kubernetes API client: typed verbs over nlohmann::json objects, on the Transport. Every call
// has a deadline and passes the client-side rate limit; failures carry the HTTP status and the
// Status reason and message (see resource.h for IsNotFound, IsConflict, IsGone ...).
// Thread-safe: one Client serves a whole process.
#ifndef GPUSTACK_HOST_KUBE_CLIENT_H_
#define GPUSTACK_HOST_KUBE_CLIENT_H_

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "host/common/result.h"
#include "host/kube/config.h"
#include "host/kube/rate_limiter.h"
#include "host/kube/resource.h"
#include "host/kube/transport.h"
#include "host/kube/watch_decoder.h"

namespace gpustack::kube {

struct ClientOptions {
  double qps = 50;  // <= 0: unlimited
  int burst = 100;
  std::chrono::milliseconds timeout{30000};  // each request, each page of a list
  std::string user_agent = "gpustack-operator";
  int max_retries = 3;  // for 429 and 5xx answers to reads and idempotent writes
};

struct ListOptions {
  std::string label_selector = {};
  std::string field_selector = {};
  int64_t page_size = 500;  // 0: no pagination
  std::string resource_version = {};
  // When set, each item goes here as soon as it is parsed, and the list's `items` stay empty:
  // the caller keeps what it makes of them (an informer's projection), so a list never holds
  // more than one of its objects parsed (list_page.h).
  std::function<void(Json&)> each = {};
};

struct ObjectList {
  std::vector<Json> items;
  std::string resource_version = {};  // where a watch continues from
  int pages = 0;
};

struct WatchOptions {
  std::string resource_version = {};
  std::string label_selector = {};
  std::string field_selector = {};
  int timeout_seconds = 300;  // the server ends the watch after this; the caller resumes
  bool allow_bookmarks = true;
};

enum class PatchType { kJson, kMerge };

struct ApplyOptions {
  std::string field_manager = {};
  bool force = false;
};

struct DeleteOptions {
  std::string uid = {};               // precondition: only this incarnation
  std::string resource_version = {};  // precondition: only this version
  std::string propagation_policy =
      {};  // Foreground, Background, Orphan; empty: the server's default
};

class Client {
 public:
  static Result<std::unique_ptr<Client>> Create(const ClientConfig& config,
                                                ClientOptions options = {});
  // LoadDefaultConfig() then Create().
  static Result<std::unique_ptr<Client>> FromEnvironment(ClientOptions options = {});

  Result<Json> Get(const ResourceType& type, std::string_view ns, std::string_view name,
                   std::string_view subresource = {});
  // Follows `continue` tokens until the list is complete.
  Result<ObjectList> List(const ResourceType& type, std::string_view ns,
                          const ListOptions& options = {});
  Result<Json> Create(const ResourceType& type, const Json& object);
  // PUT: with metadata.resourceVersion set, a concurrent change is a 409 Conflict.
  Result<Json> Update(const ResourceType& type, const Json& object);
  Result<Json> UpdateStatus(const ResourceType& type, const Json& object);
  Result<Json> Patch(const ResourceType& type, std::string_view ns, std::string_view name,
                     PatchType patch_type, const Json& patch, std::string_view subresource = {});
  // Server-side apply of `object` (apiVersion, kind, metadata.name and the fields this manager
  // owns). A field another manager owns is a 409 Conflict unless `force`.
  Result<Json> Apply(const ResourceType& type, const Json& object, const ApplyOptions& options,
                     std::string_view subresource = {});
  Status Delete(const ResourceType& type, std::string_view ns, std::string_view name,
                const DeleteOptions& options = {});
  // Discovery: does the server serve this group/version/resource?
  Result<bool> IsServed(const ResourceType& type);

  // One watch request. `on_event` returning false ends it. Ok when the server ended the watch
  // (timeout) or `stop` was requested; an Error with code 410 when the resourceVersion is too
  // old (HTTP 410 or an ERROR event), so the caller must list again.
  Status Watch(const ResourceType& type, std::string_view ns, const WatchOptions& options,
               const std::function<bool(WatchEvent&)>& on_event, std::stop_token stop = {});

  // Any request, for what the typed verbs do not cover. Non-2xx answers become Errors.
  // `retry`: repeat on 429/5xx and transport failures (reads and idempotent writes only).
  // `timeout`: this request's deadline instead of the client's (0: the client's).
  Result<Json> Request(std::string method, std::string target, const Json* body = nullptr,
                       std::string content_type = "application/json", bool retry = false,
                       std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

  // One exchange whose answer is passed on as it came, whatever its status (the aggregated API
  // forwards writes to the storage this way). Not retried: a write may not be repeated blindly.
  Result<HttpResponse> Send(const HttpRequest& request) {
    return Exchange(request, /*retry=*/false, options_.timeout);
  }

  // A GET whose answer is not JSON (a Pod's log, /metrics): the body as it came.
  Result<std::string> GetText(std::string target);

  const ClientConfig& config() const { return transport_->config(); }
  const ClientOptions& options() const { return options_; }

 private:
  Client(std::unique_ptr<Transport> transport, ClientOptions options);
  Result<HttpResponse> Exchange(const HttpRequest& request, bool retry,
                                std::chrono::milliseconds timeout);
  void WaitForRateLimit();

  std::unique_ptr<Transport> transport_;
  ClientOptions options_;
  TokenBucket limiter_;
};

}  // namespace gpustack::kube

#endif  // GPUSTACK_HOST_KUBE_CLIENT_H_
