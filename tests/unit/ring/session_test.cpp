// Session objects are private to the user, carry unguessable names, and vanish with their owner.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <set>
#include <string>

#include "cutrace/session.h"

namespace cutrace {
namespace {

std::string shm_path(const std::string& name) { return "/dev/shm" + name; }

TEST(Session, ObjectIsPrivateToTheUserAndRemovedWithItsOwner) {
  std::string name;
  {
    session::Session s;
    std::string error;
    session::Options o;
    o.slot_count = 2;
    o.ring_bytes = abi::kMinRingBytes;
    ASSERT_TRUE(s.create(o, &error)) << error;
    name = s.name();
    struct stat st;
    ASSERT_EQ(stat(shm_path(name).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    EXPECT_EQ(st.st_uid, getuid());
    EXPECT_EQ(uint64_t(st.st_size), abi::session_bytes(2, abi::kMinRingBytes));
    EXPECT_TRUE(abi::session_layout_valid(s.header(), s.bytes()));

    session::Session other;
    ASSERT_TRUE(other.open(name, &error)) << error;
    EXPECT_EQ(other.header()->slot_count, 2u);
  }
  struct stat st;
  EXPECT_NE(stat(shm_path(name).c_str(), &st), 0) << name << " outlived its session";
}

TEST(Session, NamesCarry128RandomBits) {
  std::set<std::string> names;
  for (int i = 0; i < 20; ++i) {
    session::Session s;
    std::string error;
    session::Options o;
    o.slot_count = 1;
    o.ring_bytes = abi::kMinRingBytes;
    ASSERT_TRUE(s.create(o, &error)) << error;
    const std::string suffix = s.name().substr(s.name().rfind('-') + 1);
    EXPECT_EQ(suffix.size(), 32u);
    EXPECT_EQ(suffix.find_first_not_of("0123456789abcdef"), std::string::npos);
    names.insert(s.name());
  }
  EXPECT_EQ(names.size(), 20u);
}

TEST(Session, BadGeometryAndForeignObjectsAreRefusedWithASentence) {
  session::Session s;
  std::string error;
  session::Options o;
  o.ring_bytes = 5000;  // not a power of two
  EXPECT_FALSE(s.create(o, &error));
  EXPECT_NE(error.find("power of two"), std::string::npos);
  EXPECT_FALSE(s.open("/cutrace-does-not-exist", &error));
  EXPECT_NE(error.find("cannot open session"), std::string::npos);
}

}  // namespace
}  // namespace cutrace

namespace cutrace {
namespace {

// A session never reserves more than half of /dev/shm's free space: more would let a busy program die
// of SIGBUS on a page the filesystem cannot supply, or leave the program's own use of /dev/shm short.
// It is fitted or refused instead.
TEST(Session, NeverReservesMoreThanItsShareOfDevShm) {
  struct statvfs shm;
  ASSERT_EQ(statvfs("/dev/shm", &shm), 0);
  const uint64_t free_bytes = uint64_t(shm.f_bavail) * shm.f_frsize;
  const uint32_t ring = 1u << 20;
  const uint64_t too_many = free_bytes / ring + 100;
  ASSERT_LT(too_many, uint64_t(UINT32_MAX));

  session::Options o;
  o.ring_bytes = ring;
  o.slot_count = uint32_t(too_many);
  std::string error;
  {
    session::Session fitted;
    ASSERT_TRUE(fitted.create(o, &error)) << error;
    EXPECT_LT(fitted.header()->slot_count, o.slot_count);
    EXPECT_LE(fitted.bytes(), free_bytes / session::kShmShareDivisor + (1u << 20));
    EXPECT_LE(fitted.bytes(), fitted.shm_budget());
    EXPECT_TRUE(abi::session_layout_valid(fitted.header(), fitted.bytes()));
  }
  o.fit_to_free_space = false;
  session::Session refused;
  EXPECT_FALSE(refused.create(o, &error));
  EXPECT_NE(error.find("/dev/shm has"), std::string::npos) << error;
}

session::Options asked(uint32_t slots, uint32_t ring, bool size_chosen) {
  session::Options o;
  o.slot_count = slots;
  o.ring_bytes = ring;
  o.min_ring_bytes = size_chosen ? 0 : session::kSmallestFittedRingBytes;
  return o;
}

constexpr uint64_t kMiB = 1u << 20;

// A container's default /dev/shm: the default rings are made smaller, then fewer, within half of it.
TEST(RingPlan, AContainersSixtyFourMiBKeepHalfForTheProgram) {
  session::RingPlan plan;
  std::string error;
  ASSERT_TRUE(session::plan_rings(asked(abi::kDefaultSlotCount, abi::kDefaultRingBytes, false), 64 * kMiB, &plan,
                                  &error)) << error;
  EXPECT_EQ(plan.budget, 32 * kMiB);
  // 16 rings of 2 MiB would need the header pages beyond 32 MiB: 1 MiB rings, as many as fit.
  EXPECT_EQ(plan.ring_bytes, 1u << 20);
  EXPECT_EQ(plan.slot_count, 31u);
  EXPECT_LE(abi::session_bytes(plan.slot_count, plan.ring_bytes), plan.budget);
  EXPECT_GT(abi::session_bytes(plan.slot_count + 1, plan.ring_bytes), plan.budget);
}

TEST(RingPlan, SmallDevShmsGetSmallRingsRatherThanARefusal) {
  session::RingPlan plan;
  std::string error;
  ASSERT_TRUE(session::plan_rings(asked(256, 16u << 20, false), 8 * kMiB, &plan, &error)) << error;
  EXPECT_EQ(plan.ring_bytes, 128u << 10);  // 16 rings of 256 KiB and their headers exceed 4 MiB
  EXPECT_LE(abi::session_bytes(plan.slot_count, plan.ring_bytes), 4 * kMiB);
  EXPECT_GE(plan.slot_count, 16u);
  ASSERT_TRUE(session::plan_rings(asked(256, 16u << 20, false), 1 * kMiB, &plan, &error)) << error;
  EXPECT_EQ(plan.ring_bytes, session::kSmallestFittedRingBytes);
  EXPECT_GE(plan.slot_count, 4u);
  EXPECT_LE(abi::session_bytes(plan.slot_count, plan.ring_bytes), 512u << 10);
  // Nothing fits in 64 KiB's half: refused in one sentence that says what would help.
  EXPECT_FALSE(session::plan_rings(asked(256, 16u << 20, false), 64u << 10, &plan, &error));
  EXPECT_NE(error.find("cutrace takes at most half of it (32 KiB)"), std::string::npos) << error;
  EXPECT_NE(error.find("docker run --shm-size"), std::string::npos) << error;
}

TEST(RingPlan, AChosenRingSizeIsKeptAndFewerRingsTaken) {
  session::RingPlan plan;
  std::string error;
  ASSERT_TRUE(session::plan_rings(asked(256, 4u << 20, true), 64 * kMiB, &plan, &error)) << error;
  EXPECT_EQ(plan.ring_bytes, 4u << 20);
  EXPECT_EQ(plan.slot_count, 7u);  // 8 would need the header pages beyond 32 MiB
  EXPECT_FALSE(session::plan_rings(asked(256, 64u << 20, true), 64 * kMiB, &plan, &error));
  EXPECT_NE(error.find("pass a smaller --ring-size"), std::string::npos) << error;
}

TEST(RingPlan, WhatFitsIsTakenAsAsked) {
  session::RingPlan plan;
  std::string error;
  ASSERT_TRUE(session::plan_rings(asked(256, 16u << 20, false), uint64_t(12) << 30, &plan, &error)) << error;
  EXPECT_EQ(plan.slot_count, 256u);
  EXPECT_EQ(plan.ring_bytes, 16u << 20);
}

}  // namespace
}  // namespace cutrace
