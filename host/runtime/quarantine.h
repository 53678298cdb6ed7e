// Plugins that crashed the device manager, kept out until their file changes. A plugin whose
// hook was running when the process died (crash_journal.h) is recorded here with the identity of
// its library file; while the file on disk is that same file the plugin is not loaded again, and
// the report says why and how to clear it. Replacing or updating the file lifts the quarantine.
#ifndef GPUSTACK_HOST_RUNTIME_QUARANTINE_H_
#define GPUSTACK_HOST_RUNTIME_QUARANTINE_H_

#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "host/common/files.h"
#include "host/common/result.h"

namespace gpustack::runtime {

struct QuarantineEntry {
  std::string plugin;
  std::string library;
  FileIdentity identity;
  std::string hook;    // what it was doing
  std::string reason;  // "crashed the device manager (pid 4242) during discover"
  std::string since;   // RFC 3339, UTC
};

class QuarantineStore {
 public:
  explicit QuarantineStore(std::filesystem::path file) : file_(std::move(file)) {}

  // Reads the store; a missing file is an empty store. A file that cannot be read or parsed is
  // an error, and the store starts empty (it is rewritten on the next Save).
  Status Load();
  Status Save() const;  // atomically: a temporary file renamed over the old one

  const QuarantineEntry* Find(const std::string& plugin) const;
  void Put(QuarantineEntry entry);
  bool Remove(const std::string& plugin);
  const std::filesystem::path& file() const { return file_; }

 private:
  std::filesystem::path file_;
  std::map<std::string, QuarantineEntry> entries_;
};

}  // namespace gpustack::runtime

#endif  // GPUSTACK_HOST_RUNTIME_QUARANTINE_H_
