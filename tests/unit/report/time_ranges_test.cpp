// nsys export's --times, as its documentation writes the values, ranges and boundaries.
#include "model/time_ranges.h"

#include <gtest/gtest.h>

namespace cutrace::model {
namespace {

int64_t value_of(const char* text) {
  int64_t ns = -1;
  std::string error;
  EXPECT_TRUE(parse_time_value(text, ns, error)) << text << ": " << error;
  return ns;
}

std::string refusal_of(const char* text) {
  int64_t ns = 0;
  std::string error;
  EXPECT_FALSE(parse_time_value(text, ns, error)) << text;
  return error;
}

TEST(TimeValue, UnitsAreSummedInAnyOrderAndABareNumberIsNanoseconds) {
  // The documentation's own examples.
  EXPECT_EQ(value_of("1s2ms3us4ns"), 1002003004);
  EXPECT_EQ(value_of("2ns5us2"), 5004);
  EXPECT_EQ(value_of("1500"), 1500);
  EXPECT_EQ(value_of("1nsec1usec1msec1sec"), 1001001001);
  EXPECT_EQ(value_of("2m"), 120000000000);
  EXPECT_EQ(value_of("1min1h"), 3660000000000);
  EXPECT_EQ(value_of("1hour"), 3600000000000);
  EXPECT_EQ(value_of("1s1s"), 2000000000);
}

TEST(TimeValue, FloatsSignsAndExponents) {
  EXPECT_EQ(value_of("1.5s"), 1500000000);
  EXPECT_EQ(value_of("2.5e9"), 2500000000);
  EXPECT_EQ(value_of("1e3ms"), 1000000000);
  EXPECT_EQ(value_of("-1s"), -1000000000);
  EXPECT_EQ(value_of("1s-1ms"), 999000000);
  EXPECT_EQ(value_of("+.5us"), 500);
  EXPECT_EQ(value_of("9223372036854775807"), INT64_MAX);
}

TEST(TimeValue, RefusesWhatIsNoTime) {
  EXPECT_EQ(refusal_of(""), "it is empty");
  EXPECT_EQ(refusal_of("s"), "a number is expected at 's'");
  EXPECT_EQ(refusal_of("1x"), "'x' is not a unit: ns, us, ms, s, m or h (or nsec, usec, msec, sec, min or hour)");
  EXPECT_EQ(refusal_of("0x10"), "'x' is not a unit: ns, us, ms, s, m or h (or nsec, usec, msec, sec, min or hour)");
  EXPECT_EQ(refusal_of("inf"), "a number is expected at 'inf'");
  EXPECT_EQ(refusal_of("1 s"), "a number is expected at ' s'");
  EXPECT_EQ(refusal_of("300y"), "'y' is not a unit: ns, us, ms, s, m or h (or nsec, usec, msec, sec, min or hour)");
  EXPECT_EQ(refusal_of("3000000h"), "it is beyond about 292 years");
  EXPECT_EQ(refusal_of("9223372036854775807ns1"), "it is beyond about 292 years");
  EXPECT_EQ(refusal_of("1e300"), "it is beyond about 292 years");
}

TEST(TimeRanges, BoundsLeftOutAreTheFarthestTimes) {
  std::vector<TimeRange> ranges;
  std::string error;
  ASSERT_TRUE(parse_time_ranges("1s/2s,:3s/,/4ms:", ranges, error)) << error;
  ASSERT_EQ(ranges.size(), 3u);
  EXPECT_EQ(ranges[0].start, 1000000000);
  EXPECT_EQ(ranges[0].end, 2000000000);
  EXPECT_FALSE(ranges[0].loose_start || ranges[0].loose_end);
  EXPECT_EQ(ranges[1].start, 3000000000);
  EXPECT_EQ(ranges[1].end, INT64_MAX);
  EXPECT_TRUE(ranges[1].loose_start);
  EXPECT_FALSE(ranges[1].loose_end);
  EXPECT_EQ(ranges[2].start, INT64_MIN);
  EXPECT_EQ(ranges[2].end, 4000000);
  EXPECT_TRUE(ranges[2].loose_end);
  // A second --times adds its ranges.
  ASSERT_TRUE(parse_time_ranges("5/5", ranges, error)) << error;
  EXPECT_EQ(ranges.size(), 4u);
}

TEST(TimeRanges, RefusesARangeItCannotRead) {
  for (const char* bad : {"", "/", "::", "1s", "1s/2s/3s", "2s/1s", "1s/2s,", ",1s/2s", "1x/2s", "1s/2x"}) {
    std::vector<TimeRange> ranges;
    std::string error;
    EXPECT_FALSE(parse_time_ranges(bad, ranges, error)) << bad;
    EXPECT_TRUE(ranges.empty()) << bad;
    EXPECT_EQ(error.rfind("--times: '", 0), 0u) << error;
  }
  std::vector<TimeRange> ranges;
  std::string error;
  EXPECT_FALSE(parse_time_ranges("1s/2s,2s/1s", ranges, error));
  EXPECT_TRUE(ranges.empty()) << "nothing of a refused value is kept";
  EXPECT_EQ(error, "--times: '2s/1s' (in '1s/2s,2s/1s') ends before it starts; a range is START/END, either left out "
                   "at will (e.g. 1s/2s, 1.5s/ or /200ms), with ':' before START or after END to keep the events that "
                   "cross that bound, several separated by commas");
}

// The documentation's table: a range from 100 to 200, and events inside it, crossing its start,
// crossing its end, spanning it, and outside it, under the four kinds of boundaries.
TEST(TimeRanges, StrictAndLooseBoundariesKeepWhatTheDocumentationsTableSays) {
  struct Case {
    int64_t begin, end;
    bool strict, loose_start, loose_end, loose_both;
  } cases[] = {
      {120, 180, true, true, true, true},     // within
      {80, 180, false, true, false, true},    // crosses the start
      {120, 220, false, false, true, true},   // crosses the end
      {80, 220, false, false, false, true},   // spans the range
      {20, 80, false, false, false, false},   // before it
      {220, 280, false, false, false, false}, // after it
  };
  for (const Case& c : cases) {
    const bool expected[4] = {c.strict, c.loose_start, c.loose_end, c.loose_both};
    for (int kind = 0; kind < 4; ++kind) {
      TimeRange r{100, 200, (kind & 1) != 0, (kind & 2) != 0};
      EXPECT_EQ(r.keeps(c.begin, c.end), expected[kind]) << c.begin << ".." << c.end << " kind " << kind;
    }
  }
  // An instant is an event whose end is its start; an end before the start counts as the start.
  EXPECT_TRUE((TimeRange{100, 200}).keeps(100, 100));
  EXPECT_TRUE((TimeRange{100, 200}).keeps(200, 150));
  EXPECT_FALSE((TimeRange{100, 200}).keeps(201, 150));
  EXPECT_TRUE(any_keeps({}, 5, 6));
  EXPECT_TRUE(any_keeps({TimeRange{0, 1}, TimeRange{5, 6}}, 5, 6));
}

}  // namespace
}  // namespace cutrace::model
