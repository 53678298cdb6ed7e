#include "host/runtime/crash_journal.h"

#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <ucontext.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <random>

#include "host/common/file_trust.h"

namespace gpustack::runtime {

// kCrashed: the thread running the slot's call took a fatal signal or called exit(); a slot left
// kInCall by a dead process was running when something else ended it (SIGKILL, another thread).
enum SlotState : uint32_t { kFree = 0, kIdle = 1, kInCall = 2, kHung = 3, kCrashed = 4 };

// Lives in the shared mapping: plain data and one lock-free atomic, readable after a crash.
struct CrashJournal::Slot {
  std::atomic<uint32_t> state;
  uint32_t hook;
  std::atomic<int32_t> tid;  // the thread running the call
  uint32_t reserved;
  uint64_t device;
  uint64_t inode;
  uint64_t size;
  int64_t mtime_ns;
  int64_t entered_unix_ns;
  char plugin[64];
  char library[440];
};

namespace {

constexpr char kMagic[8] = {'G', 'S', 'J', 'R', 'N', 'L', '2', '\0'};
constexpr uint32_t kSlots = 128;
static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(std::atomic<int32_t>::is_always_lock_free);

struct Header {
  char magic[8];
  int64_t pid;
  uint32_t slots;
  uint32_t slot_bytes;
  std::atomic<uint32_t> armed;  // 0 after Disarm: nothing running is a crash any more
  uint32_t reserved;
};

constexpr size_t kBytes = sizeof(Header) + kSlots * sizeof(CrashJournal::Slot);
// Slot::hook for a fault on a thread the plugin started itself.
constexpr uint32_t kOwnThread = 0xffff;

// Where each noted plugin library is mapped, for the signal reporter (lock-free reads).
struct CodeRange {
  std::atomic<uintptr_t> begin{0}, end{0};
  std::atomic<CrashJournal::Slot*> slot{nullptr};
};
constexpr size_t kMaxCodeRanges = 64;
std::array<CodeRange, kMaxCodeRanges> g_code{};
// An entry being filled in: its range is not yet its slot's.
CrashJournal::Slot* const kClaiming = reinterpret_cast<CrashJournal::Slot*>(alignof(uint64_t));

// The journals this process has open, for the signal and exit reporters (which may not lock).
constexpr size_t kMaxJournals = 8;
std::array<std::atomic<Header*>, kMaxJournals> g_journals{};
struct sigaction g_previous[NSIG];
constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGSYS};

CrashJournal::Slot* Slots(Header* header) {
  return reinterpret_cast<CrashJournal::Slot*>(reinterpret_cast<char*>(header) + sizeof(Header));
}

// Async-signal-safe output.
void Write(const char* text) {
  size_t left = std::strlen(text);
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, text, left);
    if (n <= 0) return;
    text += n;
    left -= static_cast<size_t>(n);
  }
}
void WriteNumber(int64_t value) {
  char digits[24];
  char* end = digits + sizeof digits - 1;
  *end = '\0';
  const bool negative = value < 0;
  uint64_t v = negative ? static_cast<uint64_t>(-value) : static_cast<uint64_t>(value);
  do {
    *--end = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  if (negative) *--end = '-';
  Write(end);
}
void WriteBounded(const char* text, size_t capacity) {
  char copy[sizeof(CrashJournal::Slot::library) + 1];
  const size_t n = strnlen(text, std::min(capacity, sizeof copy - 1));
  std::memcpy(copy, text, n);
  copy[n] = '\0';
  Write(copy);
}

// Marks crashed, and calls `report(slot)` for, every hook the calling thread is running now in an
// armed journal; true when there was one. Only the thread that faults (or calls exit()) inside a
// hook blames that hook's plugin: other plugins merely running at the time are not its cause.
template <class Report>
bool ForEachHookOfThisThread(Report report) {
  const pid_t self = ::gettid();
  bool any = false;
  for (auto& journal : g_journals) {
    Header* header = journal.load(std::memory_order_acquire);
    if (header == nullptr || header->armed.load(std::memory_order_acquire) == 0) continue;
    CrashJournal::Slot* slots = Slots(header);
    for (uint32_t i = 0; i < kSlots; ++i) {
      if (slots[i].state.load(std::memory_order_acquire) != kInCall ||
          slots[i].tid.load(std::memory_order_relaxed) != self) {
        continue;
      }
      slots[i].state.store(kCrashed, std::memory_order_release);
      any = true;
      report(slots[i]);
    }
  }
  return any;
}

void WriteHook(const CrashJournal::Slot& slot) {
  Write(" in plugin ");
  WriteBounded(slot.plugin, sizeof slot.plugin);
  if (slot.hook == kOwnThread) {
    Write(" on a thread it started (outside any hook) (");
  } else {
    Write(" during its ");
    Write(std::string_view(HookName(static_cast<Hook>(slot.hook))).data());
    Write(" hook (");
  }
  WriteBounded(slot.library, sizeof slot.library);
  Write("); it will be quarantined at the next start until that file changes\n");
}

// The faulting instruction's address, from the signal's saved context; 0 where unknown.
uintptr_t FaultingInstruction(void* context) {
  if (context == nullptr) return 0;
  [[maybe_unused]] const auto* uc = static_cast<const ucontext_t*>(context);
#if defined(__x86_64__)
  return static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
  return static_cast<uintptr_t>(uc->uc_mcontext.pc);
#else
  return 0;
#endif
}

// The slot of the noted plugin library whose code holds `pc`, marked crashed on a thread of its
// own; nullptr when `pc` is in no plugin's code.
// True when `slot` lies in a journal that is open and armed (a slot of a closed journal may be
// unmapped; one of a disarmed journal no longer reports crashes).
bool InArmedJournal(const CrashJournal::Slot* slot) {
  for (auto& journal : g_journals) {
    Header* header = journal.load(std::memory_order_acquire);
    if (header == nullptr || header->armed.load(std::memory_order_acquire) == 0) continue;
    const CrashJournal::Slot* first = Slots(header);
    if (slot >= first && slot < first + kSlots) return true;
  }
  return false;
}

// The slot of the noted plugin library whose code holds `pc`, marked crashed on a thread of its
// own; nullptr when `pc` is in no plugin's code.
CrashJournal::Slot* BlameCodeAt(uintptr_t pc) {
  if (pc == 0) return nullptr;
  for (CodeRange& range : g_code) {
    CrashJournal::Slot* slot = range.slot.load(std::memory_order_acquire);
    if (slot == nullptr || slot == kClaiming || pc < range.begin.load(std::memory_order_relaxed) ||
        pc >= range.end.load(std::memory_order_relaxed) || !InArmedJournal(slot)) {
      continue;
    }
    struct timespec now {};
    ::clock_gettime(CLOCK_REALTIME, &now);  // async-signal-safe
    slot->hook = kOwnThread;
    slot->entered_unix_ns = int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
    slot->state.store(kCrashed, std::memory_order_release);
    return slot;
  }
  return nullptr;
}

void WriteSignal(int signal) {
  Write("gpustack-operator: fatal signal ");
  WriteNumber(signal);
  if (const char* name = sigabbrev_np(signal)) {  // a constant table: no allocation
    Write(" (SIG");
    Write(name);
    Write(")");
  }
}

void ReportFatalSignal(int signal, siginfo_t* info, void* context) {
  const bool in_hook = ForEachHookOfThisThread([&](const CrashJournal::Slot& slot) {
    WriteSignal(signal);
    WriteHook(slot);
  });
  // Not inside a hook: a thread the plugin started faulted in the plugin's own code. Only a fault
  // the kernel raised on this thread (si_code > 0): a signal sent by a process or by kill() lands
  // on any thread, and would blame whatever code that thread happened to run.
  if (!in_hook && info != nullptr && info->si_code > 0) {
    if (const CrashJournal::Slot* slot = BlameCodeAt(FaultingInstruction(context))) {
      WriteSignal(signal);
      WriteHook(*slot);
    }
  }
  // Hand the signal to whoever had it before (the default action, or a sanitizer's reporter). A
  // fault raised by the kernel happens again when this handler returns; one sent by a process
  // or by abort() is raised again here.
  ::sigaction(signal, &g_previous[signal], nullptr);
  if (info == nullptr || info->si_code <= 0) ::raise(signal);
}

void ReportExitFromPlugin() {
  const bool from_plugin = ForEachHookOfThisThread([](const CrashJournal::Slot& slot) {
    Write("gpustack-operator: exit() was called");
    WriteHook(slot);
  });
  if (from_plugin) ::_exit(70);  // EX_SOFTWARE: never the plugin's chosen status
}

void InstallReporters() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int signal : kFatalSignals) {
      struct sigaction action {};
      action.sa_sigaction = &ReportFatalSignal;
      action.sa_flags = SA_SIGINFO | SA_ONSTACK;
      sigemptyset(&action.sa_mask);
      ::sigaction(signal, &action, &g_previous[signal]);
    }
    std::atexit(&ReportExitFromPlugin);
  });
}

int64_t UnixNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void CopyBounded(char* out, size_t capacity, const std::string& text) {
  const size_t n = std::min(capacity - 1, text.size());
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
}

// A journal whose process died between creating and publishing it; one being set up right now
// is locked, or younger than a minute.
void RemoveAbandonedNew(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return;
  struct stat info {};
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0 && ::fstat(fd, &info) == 0 &&
      std::time(nullptr) - info.st_mtime > 60) {
    ::unlink(path.c_str());
  }
  ::close(fd);
}

}  // namespace

Result<std::unique_ptr<CrashJournal>> CrashJournal::Open(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) {
    std::filesystem::create_directories(dir, ec);
    if (ec) return Error{"cannot create " + dir.string() + ": " + ec.message(), Code::kUnavailable};
    std::filesystem::permissions(dir, std::filesystem::perms::owner_all, ec);
  }
  // Whoever can write here can forge a crash and quarantine a plugin.
  if (auto trusted = CheckTrusted(dir, ::geteuid()); !trusted) {
    return Error{"state directory refused: " + trusted.error(), Code::kFailedPrecondition};
  }
  // A name no other process can hold (pids repeat across PID namespaces sharing this directory),
  // created under a name Collect ignores and renamed once locked and sized: a collector never
  // sees it unlocked or empty.
  std::random_device random;
  char unique[24];
  std::snprintf(unique, sizeof unique, "%08x%08x", random(), random());
  const std::string stem = std::to_string(::getpid()) + "-" + unique;
  const std::filesystem::path path = dir / (stem + ".journal");
  const std::filesystem::path fresh = dir / (stem + ".journal.new");
  const int fd = ::open(fresh.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    return Error{"cannot create " + fresh.string() + ": " + std::strerror(errno),
                 Code::kUnavailable};
  }
  auto fail = [&](const std::string& what) -> Error {
    const int error = errno;
    ::close(fd);
    ::unlink(fresh.c_str());
    return Error{"cannot " + what + " " + fresh.string() + ": " + std::strerror(error),
                 Code::kUnavailable};
  };
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) return fail("lock");
  if (::ftruncate(fd, static_cast<off_t>(kBytes)) != 0) return fail("size");
  void* map = ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) return fail("map");
  auto* header = static_cast<Header*>(map);
  std::memcpy(header->magic, kMagic, sizeof kMagic);
  header->pid = ::getpid();
  header->slots = kSlots;
  header->slot_bytes = sizeof(Slot);
  header->armed.store(1, std::memory_order_release);
  if (::rename(fresh.c_str(), path.c_str()) != 0) {
    ::munmap(map, kBytes);
    return fail("publish");
  }
  InstallReporters();
  for (auto& journal : g_journals) {
    Header* expected = nullptr;
    if (journal.compare_exchange_strong(expected, header)) break;
  }
  return std::unique_ptr<CrashJournal>(new CrashJournal(path, fd, map, kBytes));
}

CrashJournal::CrashJournal(std::filesystem::path path, int fd, void* map, size_t bytes)
    : path_(std::move(path)), fd_(fd), map_(map), bytes_(bytes) {}

void CrashJournal::Close() {
  Disarm();
  ::unlink(path_.c_str());
}

CrashJournal::~CrashJournal() {
  Close();
  // Code ranges noted for this journal's slots (an abandoned plugin's are never released).
  const auto* first = Slots(static_cast<Header*>(map_));
  for (CodeRange& range : g_code) {
    Slot* slot = range.slot.load(std::memory_order_acquire);
    if (slot >= first && slot < first + kSlots)
      range.slot.compare_exchange_strong(slot, nullptr, std::memory_order_acq_rel);
  }
  for (auto& journal : g_journals) {
    Header* expected = static_cast<Header*>(map_);
    journal.compare_exchange_strong(expected, nullptr);
  }
  ::munmap(map_, bytes_);
  ::close(fd_);
}

CrashJournal::Slot* CrashJournal::Claim(const std::string& plugin, const std::string& library,
                                        const FileIdentity& identity) {
  Slot* slots = Slots(static_cast<Header*>(map_));
  for (uint32_t i = 0; i < kSlots; ++i) {
    uint32_t expected = kFree;
    if (!slots[i].state.compare_exchange_strong(expected, kIdle)) continue;
    Slot& slot = slots[i];
    slot.device = identity.device;
    slot.inode = identity.inode;
    slot.size = identity.size;
    slot.mtime_ns = identity.mtime_ns;
    CopyBounded(slot.plugin, sizeof slot.plugin, plugin);
    CopyBounded(slot.library, sizeof slot.library, library);
    return &slot;
  }
  return nullptr;
}

void CrashJournal::Release(Slot* slot) {
  if (slot == nullptr) return;
  for (CodeRange& range : g_code) {
    Slot* expected = slot;
    range.slot.compare_exchange_strong(expected, nullptr, std::memory_order_acq_rel);
  }
  slot->state.store(kFree, std::memory_order_release);
}

void CrashJournal::NoteCode(Slot* slot) {
  if (slot == nullptr) return;
  // The loaded object whose file is the slot's library: the span of its loadable segments.
  struct Search {
    const Slot* slot;
    uintptr_t begin = 0, end = 0;
  } search{slot};
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        auto* s = static_cast<Search*>(data);
        struct stat file {};
        if (info->dlpi_name == nullptr || info->dlpi_name[0] == '\0' ||
            ::stat(info->dlpi_name, &file) != 0 || file.st_dev != s->slot->device ||
            file.st_ino != s->slot->inode) {
          return 0;
        }
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& segment = info->dlpi_phdr[i];
          if (segment.p_type != PT_LOAD) continue;
          const uintptr_t begin = info->dlpi_addr + segment.p_vaddr;
          const uintptr_t end = begin + segment.p_memsz;
          s->begin = s->begin == 0 ? begin : std::min(s->begin, begin);
          s->end = std::max(s->end, end);
        }
        return 1;
      },
      &search);
  if (search.begin == 0) return;
  for (CodeRange& range : g_code) {
    Slot* expected = nullptr;  // claim the entry first, so no other caller writes its range
    if (!range.slot.compare_exchange_strong(expected, kClaiming, std::memory_order_acq_rel))
      continue;
    range.begin.store(search.begin, std::memory_order_relaxed);
    range.end.store(search.end, std::memory_order_relaxed);
    range.slot.store(slot, std::memory_order_release);
    return;
  }
}

void CrashJournal::Enter(Slot* slot, Hook hook) {
  if (slot == nullptr) return;
  slot->hook = static_cast<uint32_t>(hook);
  slot->entered_unix_ns = UnixNowNs();
  slot->tid.store(::gettid(), std::memory_order_relaxed);  // not cached: a fork changes it
  uint32_t expected = kIdle;                               // a slot marked hung stays hung
  slot->state.compare_exchange_strong(expected, kInCall, std::memory_order_release);
}

void CrashJournal::Leave(Slot* slot) {
  if (slot == nullptr) return;
  uint32_t expected = kInCall;  // a hung mark stays
  slot->state.compare_exchange_strong(expected, kIdle, std::memory_order_release);
}

void CrashJournal::MarkHung(Slot* slot) {
  if (slot != nullptr) slot->state.store(kHung, std::memory_order_release);
}

void CrashJournal::Disarm() {
  static_cast<Header*>(map_)->armed.store(0, std::memory_order_release);
}

std::vector<CrashRecord> CrashJournal::Collect(const std::filesystem::path& dir,
                                               std::vector<std::string>* problems) {
  std::vector<CrashRecord> records;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::filesystem::path& path = entry.path();
    if (path.extension() == ".new" && path.stem().extension() == ".journal") {
      RemoveAbandonedNew(path);
      continue;
    }
    if (path.extension() != ".journal" || !entry.is_regular_file(ec)) continue;
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) continue;
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {  // its process is alive
      ::close(fd);
      continue;
    }
    std::vector<char> bytes(kBytes);
    const ssize_t got = ::pread(fd, bytes.data(), bytes.size(), 0);
    const auto* header = reinterpret_cast<const Header*>(bytes.data());
    if (got != static_cast<ssize_t>(kBytes) || std::memcmp(header->magic, kMagic, 8) != 0 ||
        header->slots != kSlots || header->slot_bytes != sizeof(Slot)) {
      problems->push_back("crash journal " + path.string() + " is not readable; removed");
    } else if (header->armed.load() != 0) {
      const auto* slots = reinterpret_cast<const Slot*>(bytes.data() + sizeof(Header));
      for (uint32_t i = 0; i < kSlots; ++i) {
        const Slot& s = slots[i];
        const uint32_t state = s.state.load();
        if (state != kInCall && state != kCrashed) continue;
        CrashRecord record;
        record.attributed = state == kCrashed;
        record.plugin.assign(s.plugin, strnlen(s.plugin, sizeof s.plugin));
        record.library.assign(s.library, strnlen(s.library, sizeof s.library));
        if (s.hook == kOwnThread) {
          record.hook = "thread";
          record.during = "on a thread it started (outside any hook)";
        } else {
          record.hook = std::string(HookName(static_cast<Hook>(s.hook)));
          record.during = "during its " + record.hook + " hook";
        }
        record.library_identity = {s.device, s.inode, s.size, s.mtime_ns};
        record.pid = header->pid;
        record.entered_unix_ns = s.entered_unix_ns;
        records.push_back(std::move(record));
      }
    }
    ::unlink(path.c_str());
    ::close(fd);
  }
  return records;
}

}  // namespace gpustack::runtime
