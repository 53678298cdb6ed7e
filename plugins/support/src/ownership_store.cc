#include "gpustack_support/ownership_store.h"

#include <gpustack/small_file.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <sstream>
#include <stdexcept>

namespace gpustack::support {
namespace {

constexpr std::string_view kHeader = "gpustack-partition-owners v1";
constexpr size_t kMaxBytes = 16 << 20;  // a record per partition: far more than any node has

[[noreturn]] void Fail(const std::filesystem::path& path, std::string_view what) {
  throw std::runtime_error("partition ownership file " + path.string() + ": " + std::string(what));
}

}  // namespace

bool ValidOwnerTag(std::string_view owner) {
  if (owner.empty() || owner.size() > 253) return false;
  for (char c : owner) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == ':' || c == '/' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::vector<OwnershipRecord> OwnershipStore::Load() const {
  std::vector<OwnershipRecord> records;
  std::string why;
  int error_number = 0;
  const std::optional<std::string> text =
      sdk::ReadSmallFile(file_.string(), kMaxBytes, &why, &error_number);
  if (!text) {
    if (error_number == ENOENT) return records;
    Fail(file_, why);
  }
  std::istringstream in(*text);
  std::string line;
  if (!std::getline(in, line) || line != kHeader) Fail(file_, "not an ownership file (bad header)");
  int number = 1;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    std::istringstream fields(line);
    OwnershipRecord r;
    if (!(fields >> r.card_id >> r.instance >> r.partition_id >> r.profile >> r.start >> r.length >>
          r.owner) ||
        !ValidOwnerTag(r.owner)) {
      Fail(file_, "line " + std::to_string(number) + " is malformed");
    }
    records.push_back(std::move(r));
  }
  return records;
}

void OwnershipStore::Update(
    const std::function<void(std::vector<OwnershipRecord>&)>& change) const {
  std::error_code ec;
  std::filesystem::create_directories(file_.parent_path(), ec);
  if (ec) Fail(file_, "cannot create its directory: " + ec.message());
  const std::string lock_path = file_.string() + ".lock";
  const int lock = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock < 0 || ::flock(lock, LOCK_EX) != 0) {
    const int saved = errno;
    if (lock >= 0) ::close(lock);
    Fail(file_, std::string("cannot lock: ") + std::strerror(saved));
  }
  struct Unlock {
    int fd;
    ~Unlock() { ::close(fd); }  // closing releases the flock
  } unlock{lock};

  std::vector<OwnershipRecord> records = Load();
  change(records);
  for (const OwnershipRecord& r : records) {  // what Load could not read back is never written
    const bool token = [](std::initializer_list<const std::string*> fields) {
      for (const std::string* f : fields) {
        if (f->empty() || f->find_first_of(" \t\n") != std::string::npos) return false;
      }
      return true;
    }({&r.card_id, &r.partition_id, &r.profile});
    if (!token || !ValidOwnerTag(r.owner)) Fail(file_, "refusing to write a malformed record");
  }
  std::ostringstream out;
  out << kHeader << "\n";
  for (const OwnershipRecord& r : records) {
    out << r.card_id << ' ' << r.instance << ' ' << r.partition_id << ' ' << r.profile << ' '
        << r.start << ' ' << r.length << ' ' << r.owner << "\n";
  }
  // A power loss must not bring back a file without a new partition's record: flushed, renamed,
  // and the directory flushed.
  if (std::string why; !sdk::ReplaceSmallFile(file_.string(), out.str(), &why)) Fail(file_, why);
}

}  // namespace gpustack::support
