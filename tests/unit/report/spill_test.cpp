// Bounded-memory sorting and selection give exactly what the in-memory versions give, however many
// times the data spilled to temporary files.
#include "model/spill.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace cutrace::model {
namespace {

struct Row {
  uint64_t key, order;
};
struct ByKeyThenOrder {
  bool operator()(const Row& a, const Row& b) const { return a.key != b.key ? a.key < b.key : a.order < b.order; }
};

TEST(SpillSorter, MergedRunsGiveTheStableOrderAndCanBeReplayed) {
  std::mt19937_64 random(7);
  // 1,024 rows per run at this budget (the floor): 100,000 rows make 97 runs plus the rows in memory.
  SpillSorter<Row, ByKeyThenOrder> sorter(1);
  std::vector<Row> expected;
  for (uint64_t i = 0; i < 100000; ++i) {
    // Few distinct keys, so ties are common and the order field decides.
    const Row r{random() % 5000, i};
    sorter.push(r);
    expected.push_back(r);
  }
  std::stable_sort(expected.begin(), expected.end(), [](const Row& a, const Row& b) { return a.key < b.key; });
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<Row> got;
    ASSERT_TRUE(sorter.for_each([&](const Row& r) { got.push_back(r); }));
    ASSERT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].key, expected[i].key) << i;
      ASSERT_EQ(got[i].order, expected[i].order) << i;
    }
  }
  EXPECT_EQ(sorter.size(), 100000u);
}

// Runs are stored as differences between neighbouring rows: any values, extremes included, read back
// exactly, frame after frame; a sorted run of call-like rows takes a fraction of its size.
TEST(RunFile, RoundTripsAnyValuesAndShrinksSortedRuns) {
  std::mt19937_64 random(11);
  std::vector<Row> rows;
  for (size_t i = 0; i < RunFile<Row>::kFrameRows * 2 + 17; ++i) {
    switch (i % 4) {
      case 0: rows.push_back({random(), random()}); break;
      case 1: rows.push_back({~uint64_t(0), 0}); break;
      case 2: rows.push_back({0, ~uint64_t(0)}); break;
      default: rows.push_back({uint64_t(1) << 63, (uint64_t(1) << 63) - 1}); break;
    }
  }
  RunFile<Row> file;
  ASSERT_TRUE(file.write(rows.data(), rows.size()));
  ASSERT_TRUE(file.rewind());
  std::vector<Row> got, frame;
  while (file.read_frame(frame)) got.insert(got.end(), frame.begin(), frame.end());
  ASSERT_EQ(got.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    ASSERT_EQ(got[i].key, rows[i].key) << i;
    ASSERT_EQ(got[i].order, rows[i].order) << i;
  }

  RunFile<Row> sorted;
  std::vector<Row> calls;
  for (uint64_t i = 0; i < 100000; ++i) calls.push_back({1'000'000'000 + i * 2'000 + random() % 100, i});
  ASSERT_TRUE(sorted.write(calls.data(), calls.size()));
  EXPECT_LT(sorted.bytes(), calls.size() * 4);  // 16 bytes a row in memory
}

TEST(SpillSorter, FewRowsNeverTouchAFile) {
  SpillSorter<Row, ByKeyThenOrder> sorter;
  for (uint64_t i = 0; i < 10; ++i) sorter.push({10 - i, i});
  std::vector<uint64_t> keys;
  ASSERT_TRUE(sorter.for_each([&](const Row& r) { keys.push_back(r.key); }));
  EXPECT_EQ(keys, (std::vector<uint64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
}

// The k-th smallest of values that spilled, with a final pass small enough to need several histogram
// passes, equals nth_element over all of them.
TEST(SpillingValues, ExactOrderStatisticsAfterSpilling) {
  for (uint64_t spread : {uint64_t(3), uint64_t(1000), uint64_t(1) << 40}) {
    std::mt19937_64 random(spread);
    SpillingValues values(/*final_pass_pairs=*/64);
    std::vector<uint64_t> all;
    uint64_t lo = ~uint64_t(0), hi = 0;
    for (int i = 0; i < 200001; ++i) {
      // Skewed, like call durations: most small, a long tail.
      const uint64_t v = 10 + (random() % spread) * (i % 97 == 0 ? 1000 : 1) / (1 + random() % 8);
      values.add(v);
      all.push_back(v);
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      if (i % 50000 == 0) {
        ASSERT_TRUE(values.spill());
      }
    }
    for (uint64_t k : {uint64_t(0), uint64_t(1), uint64_t(100000), uint64_t(100001), uint64_t(200000)}) {
      std::vector<uint64_t> copy = all;
      std::nth_element(copy.begin(), copy.begin() + long(k), copy.end());
      bool ok = true;
      EXPECT_EQ(values.select(k, lo, hi, &ok), copy[k]) << "spread " << spread << " k " << k;
      EXPECT_TRUE(ok);
    }
  }
}

// Durations repeat: the table holds each distinct value once with its count, and the k-th value is
// found across the counts, both in memory and after spills that hold the same value more than once.
TEST(SpillingValues, RepeatedValuesAreCountedNotStored) {
  for (bool spill : {false, true}) {
    SpillingValues values(/*final_pass_pairs=*/4);
    std::vector<uint64_t> all;
    for (int i = 0; i < 100000; ++i) {
      const uint64_t v = 700 + uint64_t(i % 7) * 13;
      values.add(v);
      all.push_back(v);
      if (spill && i % 10000 == 9999) {
        ASSERT_TRUE(values.spill());
      }
    }
    if (!spill) {
      EXPECT_EQ(values.held(), 7u);
    }
    std::sort(all.begin(), all.end());
    for (uint64_t k : {uint64_t(0), uint64_t(14285), uint64_t(14286), uint64_t(50000), uint64_t(99999)}) {
      bool ok = true;
      EXPECT_EQ(values.select(k, 700, 778, &ok), all[k]) << "spill " << spill << " k " << k;
      EXPECT_TRUE(ok);
    }
  }
}

TEST(SpillingValues, InMemoryWhenNothingSpilled) {
  SpillingValues values;
  for (uint64_t v : {5, 1, 4, 2, 3}) values.add(v);
  bool ok = true;
  EXPECT_EQ(values.select(2, 1, 5, &ok), 3u);
  EXPECT_TRUE(ok);
}

}  // namespace
}  // namespace cutrace::model
