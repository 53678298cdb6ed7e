#include "gpustack_support/ownership_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace gpustack::support {
namespace {

constexpr std::string_view kHeader = "gpustack-partition-owners v1";

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
  std::ifstream in(file_);
  if (!in) {
    if (errno == ENOENT || !std::filesystem::exists(file_)) return records;
    Fail(file_, std::strerror(errno));
  }
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
  const std::string text = out.str();
  const std::string temp = file_.string() + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) Fail(file_, std::string("cannot write: ") + std::strerror(errno));
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                       ::fsync(fd) == 0;
  const int saved = errno;
  ::close(fd);
  if (!written || ::rename(temp.c_str(), file_.c_str()) != 0) {
    const int why = written ? errno : saved;
    ::unlink(temp.c_str());
    Fail(file_, std::string("cannot write: ") + std::strerror(why));
  }
  // The rename is durable only once the directory is: a power loss must not bring back a file
  // without a new partition's record.
  if (const int dir = ::open(file_.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

}  // namespace gpustack::support
