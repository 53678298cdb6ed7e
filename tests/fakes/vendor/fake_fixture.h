// Shared by the fake vendor management libraries: each loads its section of the JSON fixture
// named by GPUSTACK_FAKE_FIXTURE when the plugin initializes it, and can inject an error into any
// of its functions, from the first call or after N good ones:
//   "errors": {"DeviceGetUUID": {"code": 15, "after": 8}}
#ifndef GPUSTACK_TESTS_FAKES_VENDOR_FAKE_FIXTURE_H_
#define GPUSTACK_TESTS_FAKES_VENDOR_FAKE_FIXTURE_H_

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <string>

namespace fake {

// The fixture's `section`, or an empty object when the variable or the section is absent.
// Returns false when the file named cannot be read or parsed.
inline bool LoadSection(const char* section, nlohmann::json* out) {
  *out = nlohmann::json::object();
  const char* path = std::getenv("GPUSTACK_FAKE_FIXTURE");
  if (path == nullptr || *path == '\0') return true;
  std::ifstream in(path);
  if (!in) return false;
  const nlohmann::json all = nlohmann::json::parse(in, nullptr, false);
  if (all.is_discarded()) return false;
  if (all.contains(section)) *out = all[section];
  return true;
}

// What the fixture file holds now: a library that initializes once per process (DCMI, mxSml)
// re-reads its section when this changes, so one test process can run several scenarios.
inline std::string FixtureText() {
  const char* path = std::getenv("GPUSTACK_FAKE_FIXTURE");
  if (path == nullptr || *path == '\0') return {};
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The run-time file's entry for a card: its rows, or {"error": <code>}; null without one.
inline nlohmann::json RunTimeProcesses(const std::string& card_key) {
  const char* path = std::getenv("GPUSTACK_FAKE_PROCESSES");
  if (path == nullptr || *path == '\0') return nullptr;
  std::ifstream in(path);
  if (!in) return nullptr;
  const nlohmann::json all = nlohmann::json::parse(in, nullptr, false);
  if (!all.is_object() || !all.contains(card_key)) return nullptr;
  return all[card_key];
}

// The processes running on a card now. A test sets GPUSTACK_FAKE_PROCESSES to a JSON file of its
// own, {"<card key>": [rows]}, and rewrites it while the library is loaded (say, with the host pid
// of a container it started): it is read again at every call. Without it, or without the card's
// key, the fixture's own rows (`fallback`).
inline nlohmann::json ProcessRows(const std::string& card_key, const nlohmann::json& fallback) {
  nlohmann::json rows = RunTimeProcesses(card_key);
  return rows.is_array() ? rows : fallback;
}

// The code the card's process-listing call fails with when the run-time file says
// {"<card key>": {"error": <code>}} (a driver refusing, say, while the test watches); else 0.
inline int ProcessListingError(const std::string& card_key) {
  const nlohmann::json entry = RunTimeProcesses(card_key);
  return entry.is_object() ? entry.value("error", 0) : 0;
}

class Injector {
 public:
  void Reset(const nlohmann::json& section) {
    errors_ = section.value("errors", nlohmann::json::object());
    calls_.clear();
  }
  // The code to fail `function` with on this call, or 0.
  int Check(const std::string& function) {
    const int call = ++calls_[function];
    if (!errors_.contains(function)) return 0;
    const nlohmann::json& e = errors_[function];
    // "times" bounds the failing calls: a fault that clears, as a partition in use does.
    const int after = e.value("after", 0);
    const bool failing =
        call > after && (!e.contains("times") || call <= after + e["times"].get<int>());
    return failing ? e.value("code", 999) : 0;
  }

 private:
  nlohmann::json errors_ = nlohmann::json::object();
  std::map<std::string, int> calls_;
};

}  // namespace fake

#endif  // GPUSTACK_TESTS_FAKES_VENDOR_FAKE_FIXTURE_H_
