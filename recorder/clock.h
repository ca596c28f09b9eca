// Converts ring timestamps (abi::ClockKind units) to CLOCK_MONOTONIC nanoseconds, the only time base a
// .cutrace file knows.
//
// For ClockKind::kTsc the recorder calibrates the TSC against CLOCK_MONOTONIC itself:
//
//  * A calibration pair (tsc, ns) is read as tsc0 = rdtsc; ns = clock_gettime(MONOTONIC); tsc1 = rdtscp,
//    repeated kPairTries times, keeping the try with the narrowest bracket w = tsc1 - tsc0 and
//    tsc = tsc0 + w/2. The pair is then exact to within e = w/2 ticks (plus the 1 ns resolution of the
//    clock); the narrowest of 16 tries is one that was not interrupted (measured on a 2 GHz KVM guest:
//    e = 75-80 ticks, about 40 ns).
//  * One pair is taken at start, a second at least kInitialBaselineNs later, then one every
//    `recalibration_interval_ns`. The rate (ns per tick) is estimated over the longest baseline, first
//    pair to latest, so its error shrinks as the run goes on: |dr/r| <= (e_first + e_latest) / B for
//    a baseline of B ticks (3e-5 after the initial 2 ms, 4e-7 after 200 ms, 1e-9 after a minute).
//  * A timestamp t is converted relative to the most recent pair: ns = ns_L + (t - tsc_L) * rate.
//    Its error is bounded by e_L + |t - tsc_L| * |dr/r| + |t - tsc_L| * s, where s is the difference
//    between the NTP slew currently applied to CLOCK_MONOTONIC and its average over the baseline.
//    Records are drained within milliseconds of being written and pairs are at most one interval old,
//    so |t - tsc_L| stays below about a second: with s = 0 the bound is e_L plus 6 us per second of
//    distance right after start, falling below 1 us per second within the first second (measured
//    error after 200 ms: 1 ns); a change of NTP slew adds at most s per second of distance (the kernel
//    limits slew to 500 ppm, NTP in steady state moves it by well under 1 ppm).
// The conversion is monotonic for a fixed pair, so end >= begin in ticks gives end >= begin in ns.
#pragma once

#include <cstdint>
#include <string>

#include "cutrace/abi.h"

namespace cutrace::recorder {

uint64_t monotonic_ns();
uint64_t realtime_ns();

// A wall-clock anchor: a CLOCK_REALTIME reading paired with the CLOCK_MONOTONIC instant it was taken
// at, which maps the trace's monotonic times to wall-clock time (realtime - monotonic is the offset),
// so that traces of ranks on different hosts share one timeline. The realtime read is bracketed by two
// monotonic reads, kAnchorTries times, and the try with the narrowest bracket [m0, m1] is kept (the
// others were interrupted or migrated): monotonic_ns is its middle, and error_ns bounds how far that
// is from the instant realtime was read: half the bracket, rounded up, plus 1 ns for the clocks'
// resolution (measured on a busy 2-core KVM guest: the narrowest of 16 brackets 52-94 ns wide, a
// single try's up to 922 ns). The error of the wall clock itself (NTP's or PTP's offset from true
// time) is not in it: nothing on one host can see it.
struct ClockAnchor {
  uint64_t realtime_ns = 0;
  uint64_t monotonic_ns = 0;
  uint64_t error_ns = 0;
};
inline constexpr int kAnchorTries = 16;
ClockAnchor take_clock_anchor();

class TimestampConverter {
 public:
  struct Pair {
    uint64_t tsc = 0;
    uint64_t ns = 0;
    uint64_t half_width_ticks = 0;  // the pair's uncertainty in ticks
  };

  // Short, because the launcher waits for it before starting the program; the early pairs follow
  // quickly instead (see maybe_recalibrate).
  static constexpr uint64_t kInitialBaselineNs = 2'000'000;
  static constexpr int kPairTries = 16;

  // For kTsc, takes the first two calibration pairs (blocks for kInitialBaselineNs). Fails only when
  // the session asks for TSC timestamps on a machine without a TSC.
  bool init(abi::ClockKind kind, uint64_t recalibration_interval_ns, std::string* error);

  // Takes a new pair when the last one is older than the recalibration interval, or than the
  // baseline while the baseline is still shorter: pairs at 2, 4, 8, ... ms keep every timestamp
  // within one baseline of its pair, so the rate error times the distance stays near the pair error
  // from the first milliseconds on.
  void maybe_recalibrate(uint64_t now_ns) {
    if (!tsc_) return;
    uint64_t interval = baseline_ns() < interval_ns_ ? baseline_ns() : interval_ns_;
    if (interval < kInitialBaselineNs) interval = kInitialBaselineNs;
    if (now_ns - latest_.ns >= interval) recalibrate();
  }
  void recalibrate();

  uint64_t to_ns(uint64_t ticks) const {
    if (!tsc_) return ticks;
    // Signed distance: records written before the latest pair are converted backwards from it.
    const int64_t delta = int64_t(ticks - latest_.tsc);
    return latest_.ns + uint64_t(int64_t((__int128(delta) * mult_) >> kShift));
  }

  bool is_tsc() const { return tsc_; }
  double tsc_hz() const;
  // Worst-case conversion error, in ns, of a timestamp `distance_ns` away from the latest pair,
  // leaving out NTP slew changes (see above).
  double error_bound_ns(double distance_ns) const;
  uint64_t baseline_ns() const { return latest_.ns - first_.ns; }

  static Pair take_pair();

 private:
  void update_rate();
  static constexpr int kShift = 32;
  bool tsc_ = false;
  uint64_t interval_ns_ = 0;
  Pair first_, latest_;
  int64_t mult_ = int64_t(1) << kShift;  // ns per tick in 32.32 fixed point
};

}  // namespace cutrace::recorder
