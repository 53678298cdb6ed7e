#include "host/common/file_trust.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace gpustack {
namespace {

struct stat Stat(uid_t uid, mode_t mode) {
  struct stat info {};
  info.st_uid = uid;
  info.st_mode = S_IFREG | mode;
  return info;
}

TEST(FileTrust, RootOwnedAndNotWritableByOthersIsTrusted) {
  EXPECT_FALSE(TrustProblem(Stat(0, 0755), 1000));
  EXPECT_FALSE(TrustProblem(Stat(0, 0644), 0));
  EXPECT_FALSE(TrustProblem(Stat(1000, 0755), 1000)) << "the host's own user may own plugins";
}

TEST(FileTrust, WritableByGroupOrOthersIsRefused) {
  EXPECT_EQ(TrustProblem(Stat(0, 0775), 0).value(), "writable by its group (mode 0775)");
  EXPECT_EQ(TrustProblem(Stat(0, 0757), 0).value(), "writable by others (mode 0757)");
}

TEST(FileTrust, OwnedByAnotherUserIsRefused) {
  EXPECT_EQ(TrustProblem(Stat(1234, 0755), 0).value(),
            "owned by uid 1234, not root or the host's user");
}

TEST(FileTrust, StickyRootDirectoriesMayBeWorldWritable) {
  struct stat tmp = Stat(0, 01777);
  tmp.st_mode = S_IFDIR | 01777;
  EXPECT_FALSE(AncestorTrustProblem(tmp, 0));
  struct stat open_dir = Stat(0, 0777);
  open_dir.st_mode = S_IFDIR | 0777;
  EXPECT_TRUE(AncestorTrustProblem(open_dir, 0));
  struct stat foreign_sticky = Stat(1234, 01777);
  EXPECT_TRUE(AncestorTrustProblem(foreign_sticky, 0));
}

TEST(FileTrust, AWritableAncestorDirectoryIsRefused) {
  namespace fs = std::filesystem;
  const fs::path top = fs::temp_directory_path() / ("gpustack-anc-" + std::to_string(::getpid()));
  fs::create_directories(top / "plugins");
  fs::permissions(top, fs::perms(0777));
  fs::permissions(top / "plugins", fs::perms(0755));
  std::ofstream(top / "plugins/x.json") << "{}";
  fs::permissions(top / "plugins/x.json", fs::perms(0644));
  auto refused = CheckTrusted(top / "plugins/x.json", ::geteuid());
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("its directory " + top.string() + " is writable by others"),
            std::string::npos)
      << refused.error();
  fs::permissions(top, fs::perms(0755));
  EXPECT_TRUE(CheckTrusted(top / "plugins/x.json", ::geteuid()));
  fs::remove_all(top);
}

TEST(FileTrust, ChecksTheRealFile) {
  const auto file =
      std::filesystem::temp_directory_path() / ("gpustack-trust-" + std::to_string(::getpid()));
  std::ofstream(file) << "x";
  std::filesystem::permissions(file, std::filesystem::perms(0644));
  EXPECT_TRUE(CheckTrusted(file, ::geteuid()));
  std::filesystem::permissions(file, std::filesystem::perms(0666));
  auto refused = CheckTrusted(file, ::geteuid());
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("writable by others"), std::string::npos) << refused.error();
  std::filesystem::remove(file);
  auto missing = CheckTrusted(file, ::geteuid());
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().find("No such file"), std::string::npos) << missing.error();
}

}  // namespace
}  // namespace gpustack
