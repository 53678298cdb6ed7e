#include "host/api/backend.h"

#include "host/api/documents.h"
#include "host/common/logging.h"
#include "host/kube/informer.h"

namespace gpustack::api {

https::Response Backend::NotFound(const Call& call) const {
  return StatusResponse(404, "NotFound",
                        kind_.resource + "." + kind_.group + " \"" + call.info.name + "\" not found",
                        Json{{"name", call.info.name}, {"group", kind_.group}, {"kind", kind_.resource}});
}

https::Response Backend::Miss(const Call& call) { return NotFound(call); }

ServedPtr Backend::Recent(const std::string& key, ServedPtr cached) {
  std::lock_guard lock(recent_mutex_);
  auto written = recent_.find(key);
  if (written == recent_.end()) return cached;
  // The cache caught up: it holds this write or a later state, or it has seen past the write and
  // the object is gone (deleted since; the write must not bring it back).
  const uint64_t version = written->second->resource_version;
  if ((cached && cached->resource_version >= version) ||
      (!cached && cache_.resource_version() >= version)) {
    recent_.erase(written);
    return cached;
  }
  return written->second;
}

void Backend::Remember(const Json& served) {
  std::lock_guard lock(recent_mutex_);
  if (recent_.size() > 10000) recent_.clear();  // bounded: the cache serves them soon anyway
  recent_[KeyOf(served)] = std::make_shared<const ServedObject>(ServedObjectOf(served));
}

https::Response Relay(kube::Client& client, kube::HttpRequest request,
                      const std::function<Json(Json)>& convert) {
  auto answer = client.Send(request);
  if (!answer)
    return StatusResponse(503, "ServiceUnavailable",
                          "the apiserver did not answer " + request.method + " " +
                              request.target.substr(0, request.target.find('?')) + ": " +
                              answer.error());
  Json parsed = Json::parse(answer->body, nullptr, false);
  if (parsed.is_discarded()) return {answer->status, answer->body, "application/json"};
  if (parsed.value("kind", "") == "Status") {
    if (parsed.contains("message") && parsed["message"].is_string()) {
      // The storage names its own version ("conflict with kubectl using .../v1alpha1").
      std::string message = parsed["message"];
      const std::string from = std::string(kGroup) + "/" + kStorageVersion;
      const std::string to = std::string(kGroup) + "/" + kServedVersion;
      for (size_t at = message.find(from); at != std::string::npos; at = message.find(from, at))
        message.replace(at, from.size(), to);
      parsed["message"] = message;
    }
    return {answer->status, parsed.dump()};
  }
  return {answer->status, convert(std::move(parsed)).dump()};
}

namespace {

// An informer that keeps each object as the v1 API serves it: converted to the served form as it
// comes in, then kept as its text and what selectors read (cache.h), shared with the served
// cache. Neither keeps a parsed copy (docs/footprint.md).
using ServedInformer = kube::BasicInformer<ServedObject>;

std::unique_ptr<ServedInformer> MakeServedInformer(kube::Client& client,
                                                   const kube::ResourceType& type) {
  kube::InformerOptions options;
  options.transform = [](Json& object) { object = ToServed(std::move(object)); };
  return std::make_unique<ServedInformer>(client, type, "", std::move(options),
                                          [](Json&& served) { return ServedObjectOf(served); });
}

// The informer's events into the cache.
void Feed(ServedInformer& informer, ServedCache& cache) {
  informer.AddEventHandler(
      {.on_add = [&cache](const ServedPtr& o) { cache.Upsert(o); },
       .on_update = [&cache](const ServedPtr&, const ServedPtr& o) { cache.Upsert(o); },
       .on_delete = [&cache](const ServedPtr& o) { cache.Remove(o); }});
}

uint64_t InformerVersion(const kube::InformerBase& informer) {
  return std::strtoull(informer.Stats().resource_version.c_str(), nullptr, 10);
}

class ProxyBackend : public Backend {
 public:
  ProxyBackend(kube::Client& client, Kind kind, size_t kept, MetricsHandler metrics)
      : Backend(std::move(kind), kept),
        client_(client),
        informer_(MakeServedInformer(client, kind_.storage)),
        metrics_(std::move(metrics)) {
    Feed(*informer_, cache_);
  }
  void Start() override { informer_->Start(); }
  void Stop() override { informer_->Stop(); }
  void Tick() override {
    if (!cache_.synced()) {
      if (informer_->HasSynced()) cache_.MarkSynced(InformerVersion(*informer_));
      return;
    }
    cache_.Advance(InformerVersion(*informer_));
  }

  // Not cached yet (created by someone else a moment ago), or absent: the storage says which.
  https::Response Miss(const Call& call) override { return Forward(call); }

  https::Response Write(const Call& call) override {
    if (call.info.subresource == "metrics") {
      if (call.info.verb != "get")
        return StatusResponse(405, "MethodNotAllowed", "metrics can only be read (get)");
      if (!metrics_)
        return StatusResponse(503, "ServiceUnavailable", "this worker does not serve metrics");
      const std::string key = KeyOf(call.info.ns, call.info.name);
      ServedPtr object = Recent(key, cache_.Get(key));
      if (object == nullptr) return NotFound(call);
      return metrics_(object->Parse());
    }
    if (!call.info.subresource.empty() && call.info.verb != "get" && !kind_.Allows("update"))
      return StatusResponse(405, "MethodNotAllowed",
                            kind_.resource + "/" + call.info.subresource + " is read-only here");
    return Forward(call);
  }

 private:
  https::Response Forward(const Call& call) {
    const RequestInfo& info = call.info;
    const https::Request& r = call.request;
    kube::HttpRequest out;
    out.method = r.method;
    out.target = info.name.empty()
                     ? kube::CollectionPath(kind_.storage, info.ns)
                     : kube::ObjectPath(kind_.storage, info.ns, info.name, info.subresource);
    if (!r.query.empty()) out.target += "?" + r.query;
    const std::string content_type = r.Header("content-type");
    out.content_type = content_type;
    if (!r.body.empty()) {
      auto body = StorageBody(r.method, content_type, r.body);
      if (!body) return ErrorResponse(body.failure());
      out.body = std::move(*body);
    }
    const bool dry_run = !call.query.Get("dryRun").empty();
    https::Response answer = Relay(client_, out, [&](Json object) {
      Json served = ToServed(std::move(object));
      if (r.method != "GET" && !dry_run && served.value("kind", "") == kind_.kind)
        Remember(served);
      return served;
    });
    if (answer.status == 200 && r.method == "GET" && WantsTable(r)) {
      Json served = Json::parse(answer.body, nullptr, false);
      if (served.is_object() && served.contains("metadata"))
        return JsonResponse(TableOf(kind_, {served}, call.query.Get("includeObject"),
                                    std::to_string(VersionOf(served)), "",
                                    std::chrono::system_clock::now()));
    }
    return answer;
  }

  // The body in the storage's version. Merge and apply patches and whole objects name their
  // apiVersion; a JSON patch is a list of operations and passes as it is.
  Result<std::string> StorageBody(const std::string& method, const std::string& content_type,
                                  const std::string& body) {
    if (content_type.find("strategic-merge-patch") != std::string::npos ||
        content_type.find("json-patch") != std::string::npos) {
      if (content_type.find("json-patch") != std::string::npos) return body;
      return Patched(Json::object(), content_type, body).failure();  // the 415
    }
    auto parsed = ParseBody(content_type, body);
    if (!parsed) return parsed.failure();
    if (method != "PATCH" && parsed->is_object() && parsed->contains("apiVersion") &&
        parsed->value("kind", "") != "DeleteOptions") {
      const std::string v = parsed->value("apiVersion", "");
      if (v != kind_.ApiVersion())
        return Error{"the object's apiVersion is " + v + ", not " + kind_.ApiVersion()};
    }
    return ToStorage(std::move(*parsed)).dump();
  }

  kube::Client& client_;
  std::unique_ptr<ServedInformer> informer_;
  MetricsHandler metrics_;
};

class DerivedBackend : public Backend {
 public:
  DerivedBackend(kube::Client& client, Kind kind, DerivedKind derived, size_t kept)
      : Backend(std::move(kind), kept), client_(client), derived_(std::move(derived)) {
    for (const DerivedSource& s : derived_.sources) {
      kube::InformerOptions options;
      options.label_selector = s.label_selector;
      options.field_selector = s.field_selector;
      auto informer = std::make_unique<kube::Informer>(client, s.type, s.ns, options);
      informer->AddEventHandler(
          {.on_add = [this](const kube::ObjectPtr& o) { Changed(VersionOf(*o)); },
           .on_update = [this](const kube::ObjectPtr&,
                               const kube::ObjectPtr& o) { Changed(VersionOf(*o)); },
           .on_delete = [this](const kube::ObjectPtr& o) { Changed(VersionOf(*o)); }});
      informers_.push_back(std::move(informer));
    }
    absent_.assign(informers_.size(), false);
    asked_.assign(informers_.size(), std::chrono::steady_clock::time_point{});
  }
  void Start() override {
    for (auto& i : informers_) i->Start();
  }
  void Stop() override {
    for (auto& i : informers_) i->Stop();
  }
  bool RequiredForReadiness() const override { return derived_.required_for_readiness; }
  void Tick() override {
    uint64_t newest = 0;
    for (size_t n = 0; n < informers_.size(); ++n) {
      if (informers_[n]->HasSynced()) {
        SetAbsent(n, false);
        newest = std::max(newest, InformerVersion(*informers_[n]));
        continue;
      }
      if (!derived_.sources[n].optional) return;
      // Asked again now and then: the kind may be installed later.
      const auto now = std::chrono::steady_clock::now();
      if (now - asked_[n] > std::chrono::seconds(30)) {
        asked_[n] = now;
        auto served = client_.IsServed(derived_.sources[n].type);
        SetAbsent(n, served && !*served);
      }
      if (!Absent(n)) return;
    }
    if (!cache_.synced()) {
      Changed(newest);  // the objects of the first lists, at once
      cache_.MarkSynced(newest);
      return;
    }
    cache_.Advance(newest);
  }

  https::Response Write(const Call& call) override {
    if (!derived_.write)
      return StatusResponse(405, "MethodNotAllowed",
                            kind_.resource + " are read-only: " + call.info.verb + " is not served");
    const std::string key = KeyOf(call.info.ns, call.info.name);
    ServedPtr current = call.info.name.empty() ? nullptr : Recent(key, cache_.Get(key));
    https::Response answer = derived_.write(
        client_, call, current ? std::make_shared<const Json>(current->Parse()) : nullptr);
    if (answer.status / 100 == 2 && call.query.Get("dryRun").empty()) {
      Json written = Json::parse(answer.body, nullptr, false);
      if (written.is_object() && written.value("kind", "") == kind_.kind) Remember(written);
    }
    return answer;
  }

 private:
  void SetAbsent(size_t n, bool absent) {
    std::lock_guard lock(mutex_);
    absent_[n] = absent;
  }
  bool Absent(size_t n) {
    std::lock_guard lock(mutex_);
    return absent_[n];
  }

  // Derives every object again; the differences go into the cache at `version`.
  void Changed(uint64_t version) {
    std::lock_guard lock(mutex_);
    std::vector<std::vector<ObjectPtr>> sources;
    for (size_t n = 0; n < informers_.size(); ++n) {
      if (absent_[n]) {
        sources.emplace_back();
        continue;
      }
      // The first lists are not all in yet.
      if (!informers_[n]->HasSynced() && !cache_.synced()) return;
      sources.push_back(informers_[n]->List());
    }
    version = std::max(version, cache_.resource_version());
    std::map<std::string, Json> next;
    for (Json& o : derived_.derive(sources)) next.emplace(KeyOf(o), std::move(o));
    const std::string at_version = std::to_string(version);
    for (const ServedPtr& old : cache_.List().objects) {
      if (next.contains(old->key())) continue;
      Json gone = old->Parse();
      gone["metadata"]["resourceVersion"] = at_version;
      cache_.Remove(gone);
    }
    for (auto& [key, object] : next) {
      // A one-to-one wrapper keeps its object's own version; a derived object takes the
      // version of the change it was derived at.
      const bool own_version = object["metadata"].contains("resourceVersion");
      if (ServedPtr old = cache_.Get(key)) {
        // Unchanged but for its version: compared as the text it would be served as.
        Json same = object;
        same["metadata"]["resourceVersion"] = std::to_string(old->resource_version);
        // Sizes first: the kept text is unpacked only when they agree.
        const std::string text = same.dump();
        if (text.size() == old->text.size() && text == old->text.Text()) continue;
      }
      if (!own_version) object["metadata"]["resourceVersion"] = at_version;
      cache_.Upsert(object);
    }
  }

  kube::Client& client_;
  DerivedKind derived_;
  std::vector<std::unique_ptr<kube::Informer>> informers_;
  // Under mutex_: Tick (the server's timer thread) sets it, Changed (informers) reads it.
  std::vector<bool> absent_;
  std::vector<std::chrono::steady_clock::time_point> asked_;
  std::mutex mutex_;
};

}  // namespace

std::unique_ptr<Backend> MakeProxyBackend(kube::Client& client, Kind kind, size_t events_kept,
                                          MetricsHandler metrics) {
  return std::make_unique<ProxyBackend>(client, std::move(kind), events_kept, std::move(metrics));
}

std::unique_ptr<Backend> MakeDerivedBackend(kube::Client& client, Kind kind, DerivedKind derived,
                                            size_t events_kept) {
  return std::make_unique<DerivedBackend>(client, std::move(kind), std::move(derived),
                                          events_kept);
}

}  // namespace gpustack::api
