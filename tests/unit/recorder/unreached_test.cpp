// The recorder hears of processes that could not open the session through names they create and
// remove at once; the names are anyone's to make, so only well-formed ones for this session count.
#include "recorder/unreached.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <string>

namespace cutrace::recorder {
namespace {

class UnreachedWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("unreached_test." + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // As the shim does it: the name exists only for a moment.
  void announce(const std::string& name) {
    const std::string path = (dir_ / name).string();
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    ASSERT_GE(fd, 0) << path;
    close(fd);
    unlink(path.c_str());
  }
  std::filesystem::path dir_;
};

TEST_F(UnreachedWatchTest, CountsEachWellFormedAnnouncementOfItsSessionOnce) {
  UnreachedWatch watch;
  std::string error;
  ASSERT_TRUE(watch.start("/cutrace-0-abc", &error, dir_.string())) << error;
  // Pids above the kernel's largest (4194304): no process of this machine lends them its name.
  announce("cutrace-0-abc.unreached.4194341.65534.13");
  announce("cutrace-0-abc.unreached.4194342.65534.13");
  announce("cutrace-0-abc.unreached.4194343.1000.24");
  // Again for the first pid (a second image after exec), another session, malformed, out of range.
  announce("cutrace-0-abc.unreached.4194341.65534.13");
  announce("cutrace-0-abc.unreached.4194348.65534.13.");
  announce("cutrace-0-abd.unreached.4194344.65534.13");
  announce("cutrace-0-abc.unreached.4194345.65534");
  announce("cutrace-0-abc.unreached.x.65534.13");
  announce("cutrace-0-abc.unreached.4194346.99999999999.13");
  announce("cutrace-0-abc.unreached.4194347.65534.4096");
  announce("cutrace-0-abc.unreached..65534.13");
  watch.collect();
  ASSERT_EQ(watch.processes().size(), 3u);
  EXPECT_EQ(watch.processes()[0].pid, 4194341u);
  EXPECT_EQ(watch.processes()[2].uid, 1000u);
  EXPECT_EQ(watch.processes()[2].error, EMFILE);
  EXPECT_FALSE(watch.overflowed());
  const std::vector<std::string> warnings = watch.warnings();
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_EQ(warnings[0].rfind("process 4194343 ran as uid 1000 and could not open the session's shared memory (Too many "
                              "open files), so its calls were not recorded", 0),
            0u)
      << warnings[0];
  EXPECT_EQ(warnings[1].rfind("2 processes (4194341, 4194342) ran as uid 65534 and could not open the session's shared memory "
                              "(Permission denied), so their calls were not recorded: they had changed user",
                              0),
            0u)
      << warnings[1];
}

TEST_F(UnreachedWatchTest, NothingHeardIsNothingSaid) {
  UnreachedWatch watch;
  std::string error;
  ASSERT_TRUE(watch.start("/cutrace-0-abc", &error, dir_.string())) << error;
  announce("unrelated");
  watch.collect();
  EXPECT_TRUE(watch.processes().empty());
  EXPECT_TRUE(watch.warnings().empty());
}

TEST_F(UnreachedWatchTest, ADirectoryThatCannotBeWatchedIsOneSentence) {
  UnreachedWatch watch;
  std::string error;
  EXPECT_FALSE(watch.start("/cutrace-0-abc", &error, (dir_ / "missing").string()));
  EXPECT_NE(error.find("missing"), std::string::npos) << error;
  watch.collect();  // harmless
  EXPECT_TRUE(watch.warnings().empty());
}

}  // namespace
}  // namespace cutrace::recorder
