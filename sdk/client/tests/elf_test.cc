// The bounded ELF export reader: a real library's exports, and crafted or hostile files refused
// quickly, without reading what they claim to hold.
#include <gpustack/client/elf.hpp>

#include <elf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

namespace gpustack::client {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

class ElfTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gpustack-elf-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    library_ = ReadAll(GPUSTACK_ELF_FIXTURE);
    ASSERT_GT(library_.size(), sizeof(Elf64_Ehdr));
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path Write(const std::string& name, const std::string& bytes) {
    const fs::path path = dir_ / name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  // The library with its dynamic symbol table's section header changed by `edit`.
  std::string WithDynsym(void (*edit)(Elf64_Shdr&)) {
    std::string bytes = library_;
    Elf64_Ehdr header;
    std::memcpy(&header, bytes.data(), sizeof header);
    for (unsigned i = 0; i < header.e_shnum; ++i) {
      const size_t at = header.e_shoff + i * sizeof(Elf64_Shdr);
      Elf64_Shdr section;
      std::memcpy(&section, bytes.data() + at, sizeof section);
      if (section.sh_type != SHT_DYNSYM) continue;
      edit(section);
      std::memcpy(bytes.data() + at, &section, sizeof section);
    }
    return bytes;
  }

  fs::path dir_;
  std::string library_;
};

TEST_F(ElfTest, ListsWhatALibraryExportsAndNothingHidden) {
  auto symbols = ExportedSymbols(GPUSTACK_ELF_FIXTURE);
  ASSERT_TRUE(symbols) << symbols.error();
  const std::set<std::string> found(symbols->begin(), symbols->end());
  EXPECT_TRUE(found.count("gpustack_plugin_negotiate"));
  EXPECT_TRUE(found.count("another_export"));
  EXPECT_TRUE(found.count("uses_local"));
  EXPECT_FALSE(found.count("hidden_helper"));
  EXPECT_FALSE(found.count("file_local"));
  EXPECT_FALSE(found.count("strlen")) << "imports are not exports";
}

TEST_F(ElfTest, ACraftedSymbolCountIsRefusedWithoutReadingIt) {
  // 2^40 entries claimed: read as claimed, this is the 3 GB the issue measured, or worse.
  const fs::path crafted =
      Write("huge-table.so", WithDynsym([](Elf64_Shdr& s) { s.sh_size = uint64_t{1} << 40; }));
  auto symbols = ExportedSymbols(crafted);
  ASSERT_FALSE(symbols);
  EXPECT_NE(symbols.error().find("entries (at most 65536 are read)"), std::string::npos)
      << symbols.error();
  EXPECT_EQ(symbols.code(), Code::kInvalidArgument);

  const fs::path outside =
      Write("outside.so", WithDynsym([](Elf64_Shdr& s) { s.sh_offset = uint64_t{1} << 50; }));
  auto out = ExportedSymbols(outside);
  ASSERT_FALSE(out);
  EXPECT_NE(out.error().find("lies outside the file"), std::string::npos) << out.error();

  const fs::path link = Write("bad-link.so", WithDynsym([](Elf64_Shdr& s) { s.sh_link = 9999; }));
  EXPECT_FALSE(ExportedSymbols(link));
}

TEST_F(ElfTest, TruncatedOrForeignFilesAreRefused) {
  auto truncated = ExportedSymbols(Write("truncated.so", library_.substr(0, 200)));
  ASSERT_FALSE(truncated);
  EXPECT_NE(truncated.error().find("outside the file"), std::string::npos) << truncated.error();
  auto text = ExportedSymbols(Write("text.so", "#!/bin/sh\necho not a library\n"));
  ASSERT_FALSE(text);
  EXPECT_NE(text.error().find("not a readable shared library"), std::string::npos);
  auto empty = ExportedSymbols(Write("empty.so", ""));
  EXPECT_FALSE(empty);
  auto missing = ExportedSymbols(dir_ / "missing.so");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.code(), Code::kNotFound);
}

TEST_F(ElfTest, AFifoOrADeviceIsNeverRead) {
  ASSERT_EQ(::mkfifo((dir_ / "fifo.so").c_str(), 0600), 0);
  auto fifo = ExportedSymbols(dir_ / "fifo.so");  // would block forever if opened plain
  ASSERT_FALSE(fifo);
  EXPECT_NE(fifo.error().find("not a regular file"), std::string::npos) << fifo.error();
  EXPECT_FALSE(ExportedSymbols("/dev/zero"));
}

TEST_F(ElfTest, AFileLargerThanTheLimitIsRefused) {
  ElfLimits small;
  small.max_file_bytes = 1024;
  auto symbols = ExportedSymbols(GPUSTACK_ELF_FIXTURE, small);
  ASSERT_FALSE(symbols);
  EXPECT_NE(symbols.error().find("larger than 1024 bytes"), std::string::npos) << symbols.error();
}

}  // namespace
}  // namespace gpustack::client
