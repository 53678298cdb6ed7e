// Bounded, regular-file-only reads, and the result type's lossless failure passing.
#include "host/common/files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>

namespace gpustack {
namespace {

namespace fs = std::filesystem;

class FilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gpustack-files-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(FilesTest, ReadsARegularFileWithinTheCap) {
  std::ofstream(dir_ / "config.json") << "{\"a\": 1}";
  auto text = ReadSmallFile(dir_ / "config.json", 64, "node config");
  ASSERT_TRUE(text) << text.error();
  EXPECT_EQ(*text, "{\"a\": 1}");
}

TEST_F(FilesTest, RefusesALargerFile) {
  std::ofstream(dir_ / "big") << std::string(65, 'x');
  auto text = ReadSmallFile(dir_ / "big", 64, "node config");
  ASSERT_FALSE(text);
  EXPECT_EQ(text.error(), "node config " + (dir_ / "big").string() + ": larger than 64 bytes");
  EXPECT_EQ(text.code(), Code::kInvalidArgument);
}

TEST_F(FilesTest, NeverBlocksOnAFifoNorReadsADevice) {
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  auto fifo = ReadSmallFile(dir_ / "fifo", 64, "manifest");  // would block forever if opened plain
  ASSERT_FALSE(fifo);
  EXPECT_NE(fifo.error().find("not a regular file"), std::string::npos) << fifo.error();
  auto zero = ReadSmallFile("/dev/zero", 64, "sysfs attribute");
  ASSERT_FALSE(zero);
  EXPECT_NE(zero.error().find("not a regular file"), std::string::npos) << zero.error();
  auto directory = ReadSmallFile(dir_, 64, "manifest");
  EXPECT_FALSE(directory);
}

TEST_F(FilesTest, AMissingFileIsNotFound) {
  auto missing = ReadSmallFile(dir_ / "missing", 64, "node config");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.code(), Code::kNotFound);
}

TEST_F(FilesTest, IdentityChangesWhenTheFileDoes) {
  std::ofstream(dir_ / "lib.so") << "one";
  auto before = IdentifyFile(dir_ / "lib.so");
  ASSERT_TRUE(before);
  EXPECT_EQ(*before, *IdentifyFile(dir_ / "lib.so"));
  std::ofstream(dir_ / "lib.so", std::ios::app) << "two";
  EXPECT_NE(*before, *IdentifyFile(dir_ / "lib.so"));
  EXPECT_EQ(IdentifyFile(dir_ / "missing").code(), Code::kNotFound);
}

TEST_F(FilesTest, AnAtomicWriteReplacesTheWholeFileWithTheModeAskedFor) {
  const fs::path path = dir_ / "record.json";
  std::ofstream(path) << "an older, longer content";
  ::umask(077);
  ASSERT_TRUE(WriteFileAtomically(path, "new", fs::perms(0644), /*durable=*/true).ok());
  EXPECT_EQ(*ReadSmallFile(path, 64, "record"), "new");
  EXPECT_EQ(fs::status(path).permissions(), fs::perms(0644));  // whatever the umask
  EXPECT_FALSE(fs::exists(dir_ / "record.json.new"));
  ::umask(022);
  // Nothing is left behind where it cannot be written.
  auto failed = WriteFileAtomically(dir_ / "missing" / "x", "y", fs::perms(0600));
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.error().find("missing/x.new"), std::string::npos) << failed.error();
  EXPECT_FALSE(fs::exists(dir_ / "missing"));
}

TEST(ProcStatusTest, ReadsANumberAndSaysWhenThereIsNone) {
  EXPECT_GE(ProcStatusField("self", "Threads"), 1);
  EXPECT_EQ(ProcStatusField("self", "Pid"), getpid());
  EXPECT_GT(ProcStatusField(std::to_string(getpid()), "VmRSS"), 0);  // KB
  EXPECT_EQ(ProcStatusField("self", "NoSuchField"), -1);
  EXPECT_EQ(ProcStatusField("self", "Name"), -1);  // not a number
  EXPECT_EQ(ProcStatusField("0", "VmRSS"), -1);    // no such process
}

TEST(ResultTest, AFailurePassesBetweenResultTypesWithEveryField) {
  const Result<int> inner = Error{"the apiserver said no", Code::kNotFound, 404, "NotFound"};
  const Result<std::string> outer = inner.failure().WithContext("reading Devices: ");
  ASSERT_FALSE(outer);
  EXPECT_EQ(outer.error(), "reading Devices: the apiserver said no");
  EXPECT_EQ(outer.code(), Code::kNotFound);
  EXPECT_EQ(outer.failure().http_status, 404);
  EXPECT_EQ(outer.failure().reason, "NotFound");
  EXPECT_EQ(CodeName(Code::kFailedPrecondition), "FAILED_PRECONDITION");
  EXPECT_EQ(CodeFromNumber(99), Code::kUnknown);
  EXPECT_EQ(Result<int>(7).code(), Code::kOk);
}

}  // namespace
}  // namespace gpustack
