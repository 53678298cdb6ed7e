// Which plugin hook was running when the process died. Before each hook call the runtime marks a
// slot in a small memory-mapped file (a few stores, no system call) and clears it afterwards. The
// file outlives a crash: the next process to collect the journal directory finds the slots left
// marked and names the plugin and hook that took the node down, so that plugin can be quarantined.
// A fatal signal, or an exit() called from inside a hook, is also reported at once on stderr.
//
// Only the thread that faults or calls exit() inside a hook blames that hook: a plugin whose hook
// merely was running when the process died (SIGKILL, the OOM killer, a crash elsewhere) is
// recorded, but not as the cause.
//
// One journal file per process (<dir>/<pid>-<random>.journal), held under an exclusive flock for
// the life of the process, so a collector never mistakes a live process's journal for a dead one's.
#ifndef GPUSTACK_HOST_RUNTIME_CRASH_JOURNAL_H_
#define GPUSTACK_HOST_RUNTIME_CRASH_JOURNAL_H_

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "host/common/files.h"
#include "host/common/result.h"
#include "host/runtime/types.h"

namespace gpustack::runtime {

// What a dead process's journal says was running.
struct CrashRecord {
  std::string plugin;
  std::string hook;    // "discover"; "thread" for a thread the plugin started itself
  std::string during;  // "during its discover hook", "on a thread it started (outside any hook)"
  std::string library;
  FileIdentity library_identity;
  int64_t pid = 0;
  int64_t entered_unix_ns = 0;  // when the hook was entered
  // The hook's own thread faulted or called exit(): the plugin ended the process. False: the
  // process ended some other way while the hook was running.
  bool attributed = false;
};

class CrashJournal {
 public:
  // A call site of one plugin (its call lane or its health-poll lane): what it is running now.
  struct Slot;

  // Creates this process's journal under `dir` (made 0700 when missing) and installs the
  // fatal-signal and exit reporters (once per process).
  static Result<std::unique_ptr<CrashJournal>> Open(const std::filesystem::path& dir);
  // Reads and removes the journals of processes that are gone: a record per hook that was
  // running when its process died (none when every process ended in order).
  static std::vector<CrashRecord> Collect(const std::filesystem::path& dir,
                                          std::vector<std::string>* problems);

  ~CrashJournal();  // an orderly end: the journal is removed
  CrashJournal(const CrashJournal&) = delete;
  CrashJournal& operator=(const CrashJournal&) = delete;

  // A slot for one call site of `plugin`; nullptr when all are taken (calls then go unrecorded).
  Slot* Claim(const std::string& plugin, const std::string& library, const FileIdentity& identity);
  void Release(Slot* slot);  // the call site is gone
  // Records where the slot's plugin library is mapped, so that a fault on a thread the plugin
  // started itself (outside any hook) is still attributed to it by the faulting instruction's
  // address. Released with the slot.
  void NoteCode(Slot* slot);
  void Enter(Slot* slot, Hook hook);
  void Leave(Slot* slot);
  // The call in the slot was abandoned as hung: neither a crash nor an exit() from a plugin.
  void MarkHung(Slot* slot);
  // From now on nothing running counts as a crash (the process is ending in order).
  void Disarm();
  // Disarms and removes the journal file; the mapping stays valid for calls still running.
  void Close();

  const std::filesystem::path& path() const { return path_; }

 private:
  CrashJournal(std::filesystem::path path, int fd, void* map, size_t bytes);

  std::filesystem::path path_;
  int fd_;
  void* map_;
  size_t bytes_;
};

}  // namespace gpustack::runtime

#endif  // GPUSTACK_HOST_RUNTIME_CRASH_JOURNAL_H_
