// What a shared library exports, read from the file before it is ever loaded: the host refuses a
// library without the plugin entry point without running its constructors, and the conformance
// suite checks that a plugin exports nothing else. Every count and offset in the file is checked
// against the file's size and the limits below, so a crafted symbol table costs at most what the
// limits allow (a few MiB), never what it claims.
#ifndef GPUSTACK_CLIENT_ELF_HPP_
#define GPUSTACK_CLIENT_ELF_HPP_

#include <gpustack/client/result.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace gpustack::client {

struct ElfLimits {
  uint64_t max_file_bytes = uint64_t{1} << 30;  // a plugin library larger than 1 GiB is refused
  uint64_t max_symbols = 1 << 16;               // dynamic symbols read
  uint64_t max_string_bytes = 4 << 20;          // the dynamic string table
  uint64_t max_sections = 4096;
};

// The names of the global or weak symbols a 64-bit little-endian ELF shared object defines with
// default or protected visibility in its dynamic symbol table, in table order.
Result<std::vector<std::string>> ExportedSymbols(const std::filesystem::path& path,
                                                 const ElfLimits& limits = {});

}  // namespace gpustack::client

#endif  // GPUSTACK_CLIENT_ELF_HPP_
