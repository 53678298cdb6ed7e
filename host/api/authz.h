// Delegated authorization: every request is asked of the apiserver as a SubjectAccessReview for
// the user the front proxy named. Answers, refusals included, are kept briefly (k8s.io/apiserver's
// defaults: 10 s allowed, 10 s denied), so a kubectl session does not cost a review per call and
// a revoked permission takes effect within that time.
#ifndef GPUSTACK_HOST_API_AUTHZ_H_
#define GPUSTACK_HOST_API_AUTHZ_H_

#include <chrono>
#include <map>
#include <mutex>
#include <string>

#include "host/api/authn.h"
#include "host/api/request.h"
#include "host/kube/client.h"

namespace gpustack::api {

struct Decision {
  bool allowed = false;
  std::string reason;  // the authorizer's, when it gave one
};

// The SubjectAccessReview that asks whether `user` may do `info` (a resource request, or a
// non-resource path). Pure.
nlohmann::json AccessReviewFor(const UserInfo& user, const RequestInfo& info,
                               const std::string& path);

class Authorizer {
 public:
  struct Options {
    std::chrono::milliseconds allowed_ttl{10000};
    std::chrono::milliseconds denied_ttl{10000};
    size_t max_entries = 10000;
  };
  explicit Authorizer(kube::Client& client) : Authorizer(client, Options{}) {}
  Authorizer(kube::Client& client, Options options) : client_(client), options_(options) {}

  // An Error when the apiserver could not be asked (the caller answers 500/503, never allows).
  Result<Decision> Authorize(const UserInfo& user, const RequestInfo& info,
                             const std::string& path);
  uint64_t reviews() const { return reviews_; }

 private:
  kube::Client& client_;
  Options options_;
  std::mutex mutex_;
  std::map<std::string, std::pair<Decision, std::chrono::steady_clock::time_point>> cache_;
  uint64_t reviews_ = 0;
};

}  // namespace gpustack::api

#endif  // GPUSTACK_HOST_API_AUTHZ_H_
