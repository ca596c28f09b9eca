#include "recorder/clock.h"

#include <time.h>

#include <cmath>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define CUTRACE_HAVE_TSC 1
#endif

namespace cutrace::recorder {

uint64_t monotonic_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return uint64_t(t.tv_sec) * 1000000000ull + uint64_t(t.tv_nsec);
}

uint64_t realtime_ns() {
  timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return uint64_t(t.tv_sec) * 1000000000ull + uint64_t(t.tv_nsec);
}

ClockAnchor take_clock_anchor() {
  ClockAnchor best;
  uint64_t best_width = UINT64_MAX;
  for (int i = 0; i < kAnchorTries; ++i) {
    const uint64_t m0 = monotonic_ns();
    const uint64_t real = realtime_ns();
    const uint64_t m1 = monotonic_ns();
    if (m1 - m0 >= best_width) continue;
    best_width = m1 - m0;
    best = {real, m0 + best_width / 2, (best_width + 1) / 2 + 1};
  }
  return best;
}

TimestampConverter::Pair TimestampConverter::take_pair() {
  Pair best;
#ifdef CUTRACE_HAVE_TSC
  uint64_t best_width = UINT64_MAX;
  for (int i = 0; i < kPairTries; ++i) {
    // lfence keeps rdtsc from executing early; rdtscp waits for clock_gettime's loads to complete.
    _mm_lfence();
    const uint64_t t0 = __rdtsc();
    _mm_lfence();
    const uint64_t ns = monotonic_ns();
    unsigned aux;
    const uint64_t t1 = __rdtscp(&aux);
    if (t1 < t0) continue;  // migrated between CPUs whose TSCs disagree: useless try
    if (t1 - t0 < best_width) {
      best_width = t1 - t0;
      best = {t0 + (t1 - t0) / 2, ns, (t1 - t0 + 1) / 2};
    }
  }
#endif
  return best;
}

bool TimestampConverter::init(abi::ClockKind kind, uint64_t recalibration_interval_ns, std::string* error) {
  interval_ns_ = recalibration_interval_ns;
  tsc_ = kind == abi::ClockKind::kTsc;
  if (!tsc_) return true;
#ifndef CUTRACE_HAVE_TSC
  *error = "the session uses TSC timestamps but this machine has no TSC; set CUTRACE_CLOCK=monotonic";
  tsc_ = false;
  return false;
#else
  (void)error;
  first_ = take_pair();
  const timespec wait{0, long(kInitialBaselineNs)};
  do {
    nanosleep(&wait, nullptr);
    latest_ = take_pair();
  } while (latest_.ns - first_.ns < kInitialBaselineNs || latest_.tsc <= first_.tsc);
  update_rate();
  return true;
#endif
}

void TimestampConverter::recalibrate() {
  Pair next = take_pair();
  // A TSC that went backwards (a VM migrated to another host without TSC scaling) would make the rate
  // meaningless; keep converting with the last good calibration instead.
  if (next.tsc <= latest_.tsc || next.ns <= latest_.ns) return;
  latest_ = next;
  update_rate();
}

void TimestampConverter::update_rate() {
  const double rate = double(latest_.ns - first_.ns) / double(latest_.tsc - first_.tsc);
  mult_ = int64_t(std::llround(std::ldexp(rate, kShift)));
}

double TimestampConverter::tsc_hz() const {
  if (!tsc_) return 0;
  return double(latest_.tsc - first_.tsc) * 1e9 / double(latest_.ns - first_.ns);
}

double TimestampConverter::error_bound_ns(double distance_ns) const {
  if (!tsc_) return 0;
  const double ns_per_tick = std::ldexp(double(mult_), -kShift);
  const double rate_error =
      double(first_.half_width_ticks + latest_.half_width_ticks) / double(latest_.tsc - first_.tsc);
  return double(latest_.half_width_ticks) * ns_per_tick + 1.0 + distance_ns * rate_error;
}

}  // namespace cutrace::recorder
