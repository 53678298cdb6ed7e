#include "host/api/authz.h"

namespace gpustack::api {

nlohmann::json AccessReviewFor(const UserInfo& user, const RequestInfo& info,
                               const std::string& path) {
  nlohmann::json spec = {{"user", user.name}, {"groups", user.groups}};
  if (!user.uid.empty()) spec["uid"] = user.uid;
  if (!user.extra.empty()) spec["extra"] = user.extra;
  if (info.resource_request) {
    nlohmann::json attributes = {{"verb", info.verb},           {"group", info.group},
                                 {"version", info.version},     {"resource", info.resource},
                                 {"subresource", info.subresource}, {"namespace", info.ns},
                                 {"name", info.name}};
    spec["resourceAttributes"] = attributes;
  } else {
    spec["nonResourceAttributes"] = {{"path", path}, {"verb", info.verb}};
  }
  return {{"apiVersion", "authorization.k8s.io/v1"},
          {"kind", "SubjectAccessReview"},
          {"spec", spec}};
}

Result<Decision> Authorizer::Authorize(const UserInfo& user, const RequestInfo& info,
                                       const std::string& path) {
  const nlohmann::json review = AccessReviewFor(user, info, path);
  const std::string key = review["spec"].dump();
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mutex_);
    auto found = cache_.find(key);
    if (found != cache_.end() && found->second.second > now) return found->second.first;
  }
  auto answer = client_.Request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                                &review, "application/json", /*retry=*/true);
  if (!answer) return answer.failure().WithContext("cannot review the access: ");
  const nlohmann::json status = answer->value("status", nlohmann::json::object());
  Decision decision{status.value("allowed", false) && !status.value("denied", false),
                    status.value("reason", "")};
  std::lock_guard lock(mutex_);
  ++reviews_;
  if (cache_.size() >= options_.max_entries) {
    for (auto it = cache_.begin(); it != cache_.end();)
      it = it->second.second <= now ? cache_.erase(it) : std::next(it);
    if (cache_.size() >= options_.max_entries) cache_.clear();
  }
  cache_[key] = {decision, now + (decision.allowed ? options_.allowed_ttl : options_.denied_ttl)};
  return decision;
}

}  // namespace gpustack::api
