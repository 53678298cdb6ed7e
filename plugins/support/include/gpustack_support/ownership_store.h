// Who owns each partition a plugin created, kept on disk. Vendors whose partitions carry no name
// (NVML, HGML) give the plugin nowhere else to keep it, and kubelet never says when a Pod's
// device is released, so the record must outlive the process to let a reclaim loop find ours and
// leave an administrator's partitions alone.
#ifndef GPUSTACK_SUPPORT_OWNERSHIP_STORE_H_
#define GPUSTACK_SUPPORT_OWNERSHIP_STORE_H_

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace gpustack::support {

struct OwnershipRecord {
  std::string card_id;    // the parent card's UUID
  uint32_t instance = 0;  // the vendor's instance id on that card (GPU instance id)
  // What was created: a partition is ours only if all of these still match, so an id the
  // driver reuses for an administrator's partition is not mistaken for ours.
  std::string partition_id;  // the instance's own id (MIG-<uuid>), new on every creation
  std::string profile;
  uint32_t start = 0;
  uint32_t length = 0;
  std::string owner;
  bool operator==(const OwnershipRecord&) const = default;
};

// One file, rewritten whole through a temporary and rename(2), so a crash leaves the old or the
// new content, never a torn one; changes hold an exclusive lock (flock on <file>.lock), so two
// processes never lose each other's records.
class OwnershipStore {
 public:
  explicit OwnershipStore(std::filesystem::path file) : file_(std::move(file)) {}

  // Throws std::runtime_error when the file exists but cannot be read or parsed: a plugin that
  // cannot tell its partitions from an administrator's must not guess.
  std::vector<OwnershipRecord> Load() const;
  // Loads, applies `change` and saves, under the lock. Throws std::runtime_error (with the path
  // and errno text) when it cannot read, lock or write; the file is then unchanged.
  void Update(const std::function<void(std::vector<OwnershipRecord>&)>& change) const;

  const std::filesystem::path& file() const { return file_; }

 private:
  std::filesystem::path file_;
};

// An owner tag must be a single printable token: [A-Za-z0-9._:/-], 1..253 bytes.
bool ValidOwnerTag(std::string_view owner);

}  // namespace gpustack::support

#endif  // GPUSTACK_SUPPORT_OWNERSHIP_STORE_H_
