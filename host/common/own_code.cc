#include "host/common/own_code.h"

#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21  // Linux 5.4; glibc 2.36's headers have it, older ones do not
#endif

namespace gpustack {
namespace {

struct Segments {
  size_t advised = 0;
  int error = 0;
};

// The first object dl_iterate_phdr reports is the executable itself.
int PageOutExecutable(dl_phdr_info* info, size_t, void* data) {
  auto* out = static_cast<Segments*>(data);
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& segment = info->dlpi_phdr[i];
    if (segment.p_type != PT_LOAD || (segment.p_flags & PF_W) != 0) continue;
    const uintptr_t start = (info->dlpi_addr + segment.p_vaddr) & ~(page - 1);
    const uintptr_t end =
        (info->dlpi_addr + segment.p_vaddr + segment.p_memsz + page - 1) & ~(page - 1);
    if (madvise(reinterpret_cast<void*>(start), end - start, MADV_PAGEOUT) != 0) {
      out->error = errno;
      return 1;
    }
    out->advised += end - start;
  }
  return 1;  // the executable only
}

}  // namespace

Result<size_t> PageOutOwnCode() {
  Segments segments;
  dl_iterate_phdr(PageOutExecutable, &segments);
  if (segments.error != 0) {
    return Error{std::string("madvise(MADV_PAGEOUT): ") + std::strerror(segments.error),
                 segments.error == EINVAL ? Code::kUnimplemented : Code::kInternal};
  }
  return segments.advised;
}

}  // namespace gpustack
