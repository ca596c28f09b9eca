// The claim protocol on a trace name: one holder at a time, shared with a child that inherits the
// descriptor, gone with its last holder, and the lock file removed without a window for a double claim.
#include "reader/trace_claim.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace cutrace::reader {
namespace {

class TraceClaimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cutrace-claim-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    trace_ = dir_ + "/run.cutrace";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  bool exists(const std::string& path) const { return access(path.c_str(), F_OK) == 0; }

  std::string dir_, trace_;
};

TEST_F(TraceClaimTest, OneHolderAtATime) {
  TraceClaim first, second;
  ASSERT_EQ(first.acquire(trace_), TraceClaim::Result::kClaimed) << first.error();
  EXPECT_TRUE(first.held());
  EXPECT_EQ(first.path(), trace_ + ".lock");
  EXPECT_TRUE(claim_is_held(trace_));

  std::string holder;
  EXPECT_TRUE(claim_is_held(trace_, &holder));
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  EXPECT_EQ(holder, "cutrace run " + std::to_string(getpid()) + " on host " + host);

  EXPECT_EQ(second.acquire(trace_), TraceClaim::Result::kHeld);
  EXPECT_EQ(second.holder(), holder);
  EXPECT_FALSE(second.held());

  first.release();
  EXPECT_FALSE(exists(trace_ + ".lock"));
  EXPECT_FALSE(claim_is_held(trace_));
  EXPECT_EQ(second.acquire(trace_), TraceClaim::Result::kClaimed);
}

// Asking never takes the lock, so it cannot make a run that claims at the same moment fail.
TEST_F(TraceClaimTest, AskingDoesNotBlockClaiming) {
  TraceClaim stale;
  ASSERT_EQ(stale.acquire(trace_), TraceClaim::Result::kClaimed);
  stale.abandon();  // the file stays, unlocked, as after a killed run
  ASSERT_TRUE(exists(trace_ + ".lock"));
  for (int i = 0; i < 100; ++i) {
    EXPECT_FALSE(claim_is_held(trace_));
    TraceClaim claim;
    ASSERT_EQ(claim.acquire(trace_), TraceClaim::Result::kClaimed) << i;
    EXPECT_TRUE(claim_is_held(trace_));
  }
}

// A child given the descriptor keeps the claim after the parent closed its copy, and the claim ends
// with the child, however the child ends.
TEST_F(TraceClaimTest, InheritedDescriptorHoldsTheClaimUntilTheLastHolderIsGone) {
  TraceClaim claim;
  ASSERT_EQ(claim.acquire(trace_), TraceClaim::Result::kClaimed);
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(go[1]);
    char c;
    (void)!read(go[0], &c, 1);  // holds the inherited descriptor until told to die
    _exit(0);
  }
  close(go[0]);
  claim.abandon();
  EXPECT_TRUE(claim_is_held(trace_));
  TraceClaim other;
  EXPECT_EQ(other.acquire(trace_), TraceClaim::Result::kHeld);
  kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  close(go[1]);
  EXPECT_FALSE(claim_is_held(trace_));
  EXPECT_EQ(other.acquire(trace_), TraceClaim::Result::kClaimed);
}

// A holder that opened the lock file just before the previous holder removed it must not believe it
// holds the name: it opens the name again.
TEST_F(TraceClaimTest, RemovedLockFileIsNeverHeldTwice) {
  for (int i = 0; i < 200; ++i) {
    TraceClaim a;
    ASSERT_EQ(a.acquire(trace_), TraceClaim::Result::kClaimed);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      TraceClaim b;
      // While `a` holds the name, b can only be refused; once a released, b may hold it, and then
      // nobody else can.
      const TraceClaim::Result r = b.acquire(trace_);
      if (r == TraceClaim::Result::kClaimed) {
        TraceClaim c;
        _exit(c.acquire(trace_) == TraceClaim::Result::kHeld ? 0 : 1);
      }
      _exit(r == TraceClaim::Result::kHeld ? 0 : 2);
    }
    a.release();
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "round " << i << ": " << status;
  }
}

TEST_F(TraceClaimTest, UnwritableDirectoryFailsWithTheReason) {
  TraceClaim claim;
  EXPECT_EQ(claim.acquire("/proc/cutrace-claim-test.cutrace"), TraceClaim::Result::kFailed);
  EXPECT_EQ(claim.error().rfind("cannot write /proc/cutrace-claim-test.cutrace.lock (", 0), 0u) << claim.error();
}

TEST(TraceOfPartial, NamesTheTraceAPartialFileBelongsTo) {
  EXPECT_EQ(trace_of_partial("/d/run.cutrace.Ab12xZ.part"), "/d/run.cutrace");
  EXPECT_EQ(trace_of_partial("/d/run.cutrace.part"), "/d/run.cutrace");
  EXPECT_EQ(trace_of_partial("/d/run.cutrace"), "");
  EXPECT_EQ(trace_of_partial("/d/run.part"), "");
  EXPECT_EQ(trace_of_partial("/d/run.x.part"), "");
  EXPECT_EQ(trace_of_partial(".part"), "");
}

}  // namespace
}  // namespace cutrace::reader
