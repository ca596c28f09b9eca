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

// A session larger than /dev/shm's free space would let a busy program die of SIGBUS on a page the
// filesystem cannot supply; it is fitted or refused instead.
TEST(Session, NeverReservesMoreThanDevShmHasFree) {
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
    EXPECT_LE(fitted.bytes(), free_bytes);
    EXPECT_TRUE(abi::session_layout_valid(fitted.header(), fitted.bytes()));
  }
  o.fit_to_free_space = false;
  session::Session refused;
  EXPECT_FALSE(refused.create(o, &error));
  EXPECT_NE(error.find("/dev/shm has"), std::string::npos) << error;
}

// With a ring size the user did not choose, rings are halved before any is given up.
TEST(Session, ShrinksRingsBeforeGivingUpSlotsWhenAllowed) {
  struct statvfs shm;
  ASSERT_EQ(statvfs("/dev/shm", &shm), 0);
  const uint64_t free_bytes = uint64_t(shm.f_bavail) * shm.f_frsize;
  const uint32_t ring = 1u << 30;
  const uint64_t slots = free_bytes / ring + 2;  // one more than fits at this size
  ASSERT_LT(slots, 100000u);

  session::Options o;
  o.ring_bytes = ring;
  o.slot_count = uint32_t(slots);
  o.min_ring_bytes = 1u << 20;
  std::string error;
  session::Session shrunk;
  ASSERT_TRUE(shrunk.create(o, &error)) << error;
  EXPECT_EQ(shrunk.header()->slot_count, o.slot_count);
  EXPECT_LT(shrunk.header()->ring_bytes, ring);
  EXPECT_TRUE(abi::is_power_of_two(shrunk.header()->ring_bytes));
  EXPECT_LE(shrunk.bytes(), free_bytes);
  // The largest halving that fits: twice the size would not have.
  EXPECT_GT(abi::session_bytes(o.slot_count, shrunk.header()->ring_bytes * 2), free_bytes);
  EXPECT_TRUE(abi::session_layout_valid(shrunk.header(), shrunk.bytes()));
}

}  // namespace
}  // namespace cutrace
