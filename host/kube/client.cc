#include "host/kube/client.h"

#include <random>
#include <thread>

#include "host/kube/list_page.h"

namespace gpustack::kube {
namespace {

std::string Namespace(const ResourceType& type, const Json& object) {
  if (!type.namespaced) {
    return {};
  }
  return object.contains("metadata") ? object["metadata"].value("namespace", "") : "";
}

std::string Name(const Json& object) {
  return object.contains("metadata") ? object["metadata"].value("name", "") : "";
}

void AddQuery(std::string& target, std::string_view key, std::string_view value) {
  target += target.find('?') == std::string::npos ? '?' : '&';
  target += key;
  target += '=';
  target += EscapeQueryValue(value);
}

bool Retryable(int status) { return status == 429 || (status >= 500 && status != 501); }

}  // namespace

Client::Client(std::unique_ptr<Transport> transport, ClientOptions options)
    : transport_(std::move(transport)),
      options_(std::move(options)),
      limiter_(options_.qps, options_.burst) {}

Result<std::unique_ptr<Client>> Client::Create(const ClientConfig& config, ClientOptions options) {
  auto transport = Transport::Create(config, options.user_agent);
  if (!transport) {
    return transport.failure();
  }
  return std::unique_ptr<Client>(new Client(std::move(*transport), std::move(options)));
}

Result<std::unique_ptr<Client>> Client::FromEnvironment(ClientOptions options) {
  auto config = LoadDefaultConfig();
  if (!config) {
    return config.failure();
  }
  return Create(*config, std::move(options));
}

void Client::WaitForRateLimit() {
  auto wait = limiter_.Reserve();
  if (wait > Clock::duration::zero()) {
    std::this_thread::sleep_for(wait);
  }
}

Result<HttpResponse> Client::Exchange(const HttpRequest& request, bool retry,
                                      std::chrono::milliseconds timeout) {
  static thread_local std::minstd_rand jitter(std::random_device{}());
  std::chrono::milliseconds backoff(200);
  for (int attempt = 0;; ++attempt) {
    WaitForRateLimit();
    auto response = transport_->Send(request, Clock::now() + timeout);
    bool again =
        retry && attempt < options_.max_retries && (!response || Retryable(response->status));
    if (!again) {
      return response;
    }
    // Honour Retry-After, else exponential backoff with jitter.
    auto wait = response && response->retry_after.count() > 0
                    ? std::chrono::duration_cast<std::chrono::milliseconds>(response->retry_after)
                    : backoff + std::chrono::milliseconds(jitter() % (backoff.count() / 2 + 1));
    std::this_thread::sleep_for(std::min(wait, std::chrono::milliseconds(10000)));
    backoff *= 2;
  }
}

Result<Json> Client::Request(std::string method, std::string target, const Json* body,
                             std::string content_type, bool retry,
                             std::chrono::milliseconds timeout) {
  HttpRequest request{std::move(method), std::move(target), body ? body->dump() : "",
                      body ? std::move(content_type) : ""};
  std::string what = request.method + " " + request.target;
  auto response = Exchange(request, retry, timeout.count() > 0 ? timeout : options_.timeout);
  if (!response) {
    return response.failure();
  }
  if (response->status < 200 || response->status >= 300) {
    return ApiError(response->status, response->body, what);
  }
  if (response->body.empty()) {
    return Json::object();
  }
  Json parsed = Json::parse(response->body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    return Error{what + ": the answer is not JSON", Code::kInternal, response->status};
  }
  return parsed;
}

Result<std::string> Client::GetText(std::string target) {
  HttpRequest request{"GET", std::move(target), "", ""};
  auto response = Exchange(request, true, options_.timeout);
  if (!response) {
    return response.failure();
  }
  if (response->status < 200 || response->status >= 300) {
    return ApiError(response->status, response->body, "GET " + request.target);
  }
  return std::move(response->body);
}

Result<Json> Client::Get(const ResourceType& type, std::string_view ns, std::string_view name,
                         std::string_view subresource) {
  return Request("GET", ObjectPath(type, ns, name, subresource), nullptr, "", true);
}

Result<ObjectList> Client::List(const ResourceType& type, std::string_view ns,
                                const ListOptions& options) {
  ObjectList list;
  std::string continue_token;
  do {
    std::string target = CollectionPath(type, ns);
    if (!options.label_selector.empty()) {
      AddQuery(target, "labelSelector", options.label_selector);
    }
    if (!options.field_selector.empty()) {
      AddQuery(target, "fieldSelector", options.field_selector);
    }
    if (options.page_size > 0) {
      AddQuery(target, "limit", std::to_string(options.page_size));
    }
    if (!continue_token.empty()) {
      AddQuery(target, "continue", continue_token);
    } else if (!options.resource_version.empty()) {
      AddQuery(target, "resourceVersion", options.resource_version);
    }
    auto text = GetText(std::move(target));
    if (!text) {
      return text.failure();  // an expired continue token is a 410 here: the caller lists again
    }
    auto page = DecodeListPage(*text, [&](Json& item) {
      if (options.each) {
        options.each(item);
      } else {
        list.items.push_back(std::move(item));
      }
    });
    if (!page) {
      return std::move(page).failure().WithContext("LIST " + type.plural + ": ");
    }
    continue_token = std::move(page->continue_token);
    list.resource_version = std::move(page->resource_version);
    ++list.pages;
  } while (!continue_token.empty());
  return list;
}

Result<Json> Client::Create(const ResourceType& type, const Json& object) {
  return Request("POST", CollectionPath(type, Namespace(type, object)), &object);
}

Result<Json> Client::Update(const ResourceType& type, const Json& object) {
  return Request("PUT", ObjectPath(type, Namespace(type, object), Name(object)), &object);
}

Result<Json> Client::UpdateStatus(const ResourceType& type, const Json& object) {
  return Request("PUT", ObjectPath(type, Namespace(type, object), Name(object), "status"), &object);
}

Result<Json> Client::Patch(const ResourceType& type, std::string_view ns, std::string_view name,
                           PatchType patch_type, const Json& patch, std::string_view subresource) {
  const char* content_type = patch_type == PatchType::kJson ? "application/json-patch+json"
                                                            : "application/merge-patch+json";
  return Request("PATCH", ObjectPath(type, ns, name, subresource), &patch, content_type);
}

Result<Json> Client::Apply(const ResourceType& type, const Json& object,
                           const ApplyOptions& options, std::string_view subresource) {
  if (options.field_manager.empty()) {
    return Error{"server-side apply needs a field manager", Code::kInvalidArgument};
  }
  std::string target = ObjectPath(type, Namespace(type, object), Name(object), subresource);
  AddQuery(target, "fieldManager", options.field_manager);
  if (options.force) {
    AddQuery(target, "force", "true");
  }
  // JSON is YAML, so the apply body is the JSON text. Apply is idempotent: retried.
  return Request("PATCH", target, &object, "application/apply-patch+yaml", true);
}

Status Client::Delete(const ResourceType& type, std::string_view ns, std::string_view name,
                      const DeleteOptions& options) {
  Json body = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}};
  if (!options.uid.empty()) {
    body["preconditions"]["uid"] = options.uid;
  }
  if (!options.resource_version.empty()) {
    body["preconditions"]["resourceVersion"] = options.resource_version;
  }
  if (!options.propagation_policy.empty()) {
    body["propagationPolicy"] = options.propagation_policy;
  }
  auto deleted = Request("DELETE", ObjectPath(type, ns, name), &body);
  if (!deleted) {
    return deleted.failure();
  }
  return Ok{};
}

Result<bool> Client::IsServed(const ResourceType& type) {
  std::string target =
      type.group.empty() ? "/api/" + type.version : "/apis/" + type.group + "/" + type.version;
  auto discovery = Request("GET", target, nullptr, "", true);
  if (!discovery) {
    if (IsNotFound(discovery.failure())) {
      return false;  // the group/version itself is not served
    }
    return discovery.failure();
  }
  const Json& listed = (*discovery)["resources"];
  if (listed.is_array()) {
    for (const Json& resource : listed) {
      if (resource.value("name", "") == type.plural) {
        return true;
      }
    }
  }
  return false;
}

Status Client::Watch(const ResourceType& type, std::string_view ns, const WatchOptions& options,
                     const std::function<bool(WatchEvent&)>& on_event, std::stop_token stop) {
  std::string target = CollectionPath(type, ns);
  AddQuery(target, "watch", "1");
  if (!options.resource_version.empty()) {
    AddQuery(target, "resourceVersion", options.resource_version);
  }
  if (options.allow_bookmarks) {
    AddQuery(target, "allowWatchBookmarks", "true");
  }
  if (!options.label_selector.empty()) {
    AddQuery(target, "labelSelector", options.label_selector);
  }
  if (!options.field_selector.empty()) {
    AddQuery(target, "fieldSelector", options.field_selector);
  }
  AddQuery(target, "timeoutSeconds", std::to_string(options.timeout_seconds));
  WaitForRateLimit();

  int status = 0;
  bool handler_done = false;
  WatchDecoder decoder;
  Status decode_failure = Ok{};
  std::optional<Error> stream_error;
  std::string error_body;
  // Bookmarks may be minutes apart and the server ends the watch at timeoutSeconds, so
  // silence is only suspicious well past that.
  auto idle = std::chrono::milliseconds(options.timeout_seconds * 1000LL + 30000);
  Status streamed = transport_->Stream(
      HttpRequest{"GET", target, "", ""}, Clock::now() + options_.timeout, idle,
      [&](int s) { status = s; },
      [&](std::string_view piece) {
        decode_failure = decoder.Feed(piece, [&](WatchEvent& event) {
          if (event.type == WatchEventType::kError) {
            int code = event.object.value("code", 0);
            stream_error = ApiError(code == 0 ? 500 : code, event.object.dump(), "watch " + target);
            return false;
          }
          handler_done = !on_event(event);
          return !handler_done;
        });
        return decode_failure.ok() && !stream_error && !handler_done;
      },
      &error_body, stop);
  if (!streamed) {
    return streamed;
  }
  if (status != 0 && status != 200) {
    return ApiError(status, error_body, "watch " + target);
  }
  if (stream_error) {
    return *stream_error;
  }
  return decode_failure;
}

}  // namespace gpustack::kube
