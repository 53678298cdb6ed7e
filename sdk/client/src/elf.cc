#include <gpustack/client/elf.hpp>

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gpustack::client {
namespace {

// Reads exactly `size` bytes at `offset`, after checking the range lies inside the file.
class ElfFile {
 public:
  ElfFile(int fd, uint64_t size, std::string name) : fd_(fd), size_(size), name_(std::move(name)) {}

  Status Read(uint64_t offset, uint64_t size, void* out, const char* what) const {
    if (offset > size_ || size > size_ - offset) {
      return Fail(std::string(what) + " lies outside the file");
    }
    auto* bytes = static_cast<char*>(out);
    uint64_t done = 0;
    while (done < size) {
      const ssize_t got =
          ::pread(fd_, bytes + done, size - done, static_cast<off_t>(offset + done));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return Fail(std::string("cannot read ") + what + ": " + std::strerror(errno));
      done += static_cast<uint64_t>(got);
    }
    return Ok{};
  }

  Error Fail(const std::string& why) const {
    return Error{name_ + ": not a readable shared library: " + why, Code::kInvalidArgument};
  }

 private:
  int fd_;
  uint64_t size_;
  std::string name_;
};

Result<std::vector<std::string>> ReadExports(const ElfFile& file, uint64_t file_size,
                                             const ElfLimits& limits) {
  Elf64_Ehdr header{};
  if (auto read = file.Read(0, sizeof header, &header, "the ELF header"); !read) {
    return read.failure();
  }
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0) return file.Fail("no ELF magic");
  if (header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_ident[EI_DATA] != ELFDATA2LSB) {
    return file.Fail("not a 64-bit little-endian ELF file");
  }
  if (header.e_type != ET_DYN) return file.Fail("not a shared object");
  if (header.e_shentsize != sizeof(Elf64_Shdr)) return file.Fail("unexpected section header size");
  if (header.e_shnum == 0 || header.e_shnum > limits.max_sections) {
    return file.Fail("section count " + std::to_string(header.e_shnum) + " out of range");
  }
  std::vector<Elf64_Shdr> sections(header.e_shnum);
  if (auto read = file.Read(header.e_shoff, sections.size() * sizeof(Elf64_Shdr), sections.data(),
                            "the section headers");
      !read) {
    return read.failure();
  }
  const Elf64_Shdr* dynsym = nullptr;
  for (const Elf64_Shdr& section : sections) {
    if (section.sh_type == SHT_DYNSYM) dynsym = &section;
  }
  if (dynsym == nullptr) return std::vector<std::string>{};  // exports nothing
  if (dynsym->sh_entsize != sizeof(Elf64_Sym) || dynsym->sh_link >= sections.size()) {
    return file.Fail("malformed dynamic symbol table");
  }
  const uint64_t count = dynsym->sh_size / sizeof(Elf64_Sym);
  if (count > limits.max_symbols) {
    return file.Fail("dynamic symbol table of " + std::to_string(count) + " entries (at most " +
                     std::to_string(limits.max_symbols) + " are read)");
  }
  const Elf64_Shdr& strtab = sections[dynsym->sh_link];
  if (strtab.sh_type != SHT_STRTAB || strtab.sh_size > limits.max_string_bytes ||
      strtab.sh_size > file_size) {
    return file.Fail("dynamic string table missing or larger than " +
                     std::to_string(limits.max_string_bytes) + " bytes");
  }
  std::vector<Elf64_Sym> symbols(count);
  if (auto read = file.Read(dynsym->sh_offset, count * sizeof(Elf64_Sym), symbols.data(),
                            "the dynamic symbol table");
      !read) {
    return read.failure();
  }
  std::string strings(strtab.sh_size, '\0');
  if (auto read =
          file.Read(strtab.sh_offset, strings.size(), strings.data(), "the dynamic string table");
      !read) {
    return read.failure();
  }

  // Names may share bytes of the table (many symbols can point into one long string): what is
  // copied out is bounded by the table's own size limit, not by symbols times name length.
  std::vector<std::string> names;
  uint64_t copied = 0;
  for (const Elf64_Sym& symbol : symbols) {
    const unsigned binding = ELF64_ST_BIND(symbol.st_info);
    const unsigned visibility = ELF64_ST_VISIBILITY(symbol.st_other);
    // Undefined symbols are imports; absolute ones are the linker's version-node markers
    // (GPUSTACK_PLUGIN_1), not something a program can call or read.
    if (symbol.st_shndx == SHN_UNDEF || symbol.st_shndx == SHN_ABS ||
        (binding != STB_GLOBAL && binding != STB_WEAK) ||
        (visibility != STV_DEFAULT && visibility != STV_PROTECTED) || symbol.st_name == 0) {
      continue;
    }
    if (symbol.st_name >= strings.size()) return file.Fail("a symbol name lies outside its table");
    const size_t end = strings.find('\0', symbol.st_name);
    if (end == std::string::npos) return file.Fail("an unterminated symbol name");
    copied += end - symbol.st_name;
    if (copied > limits.max_string_bytes) {
      return file.Fail("its exported names add up to more than " +
                       std::to_string(limits.max_string_bytes) + " bytes");
    }
    names.emplace_back(strings, symbol.st_name, end - symbol.st_name);
  }
  return names;
}

}  // namespace

Result<std::vector<std::string>> ExportedSymbols(const std::filesystem::path& path,
                                                 const ElfLimits& limits) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    return Error{path.string() + ": cannot be opened: " + std::strerror(errno), Code::kNotFound};
  }
  struct stat info {};
  const bool regular = ::fstat(fd, &info) == 0 && S_ISREG(info.st_mode);
  const uint64_t size = regular ? static_cast<uint64_t>(info.st_size) : 0;
  const ElfFile file(fd, size, path.string());
  Result<std::vector<std::string>> out =
      !regular ? Result<std::vector<std::string>>(file.Fail("not a regular file"))
      : size > limits.max_file_bytes
          ? Result<std::vector<std::string>>(
                file.Fail("larger than " + std::to_string(limits.max_file_bytes) + " bytes"))
          : ReadExports(file, size, limits);
  ::close(fd);
  return out;
}

}  // namespace gpustack::client
