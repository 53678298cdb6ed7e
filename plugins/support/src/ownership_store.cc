#include "gpustack_support/ownership_store.h"

#include <fcntl.h>
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
    if (!(fields >> r.card_id >> r.instance >> r.profile >> r.start >> r.length >> r.owner) ||
        !ValidOwnerTag(r.owner)) {
      Fail(file_, "line " + std::to_string(number) + " is malformed");
    }
    records.push_back(std::move(r));
  }
  return records;
}

void OwnershipStore::Save(const std::vector<OwnershipRecord>& records) const {
  std::error_code ec;
  std::filesystem::create_directories(file_.parent_path(), ec);
  if (ec) Fail(file_, "cannot create its directory: " + ec.message());
  std::ostringstream out;
  out << kHeader << "\n";
  for (const OwnershipRecord& r : records) {
    out << r.card_id << ' ' << r.instance << ' ' << r.profile << ' ' << r.start << ' ' << r.length
        << ' ' << r.owner << "\n";
  }
  const std::string text = out.str();
  const std::string temp = file_.string() + ".tmp";
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) Fail(file_, std::string("cannot write: ") + std::strerror(errno));
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                       ::fsync(fd) == 0;
  const int saved = errno;
  ::close(fd);
  if (!written || ::rename(temp.c_str(), file_.c_str()) != 0) {
    ::unlink(temp.c_str());
    Fail(file_, std::string("cannot write: ") + std::strerror(written ? errno : saved));
  }
}

}  // namespace gpustack::support
