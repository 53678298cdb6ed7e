#include "host/ssh_enter/enter.h"

namespace gpustack::ssh_enter {

std::optional<int> MainProcess(const std::vector<Process>& processes,
                               const std::string& own_mount_namespace) {
  std::optional<int> found;
  for (const Process& p : processes) {
    if (p.pid <= 1 || p.mount_namespace.empty() || p.mount_namespace == own_mount_namespace)
      continue;
    if (!found || p.pid < *found) found = p.pid;
  }
  return found;
}

std::vector<std::string> SessionEnvironment(const std::string& environ, const char* term) {
  std::vector<std::string> out;
  bool has_term = false;
  for (size_t start = 0; start < environ.size();) {
    size_t end = environ.find('\0', start);
    if (end == std::string::npos) end = environ.size();
    std::string entry = environ.substr(start, end - start);
    if (entry.find('=') != std::string::npos) {
      if (entry.rfind("TERM=", 0) == 0) has_term = true;
      out.push_back(std::move(entry));
    }
    start = end + 1;
  }
  if (!has_term && term != nullptr && *term != '\0') out.push_back(std::string("TERM=") + term);
  return out;
}

std::vector<std::string> ShellArguments(const std::string& shell, const char* original_command) {
  if (original_command != nullptr && *original_command != '\0')
    return {shell, "-c", original_command};
  return {shell, "-l"};
}

}  // namespace gpustack::ssh_enter
