// Google Benchmark cases for the producer side of the ring: the cost of storing one call record while
// a consumer drains concurrently (the steady state of a traced program), and of the drop path when
// the ring is full.
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

#include "cutrace/ring.h"
#include "cutrace/session.h"

namespace {

using namespace cutrace;

session::Session make_session(uint32_t ring_bytes) {
  session::Session s;
  session::Options o;
  o.slot_count = 1;
  o.ring_bytes = ring_bytes;
  std::string error;
  if (!s.create(o, &error)) throw std::runtime_error(error);
  return s;
}

// What a generated wrapper writes for a call with `args` argument slots.
inline bool push_call(ring::Producer& p, uint64_t t0, uint64_t t1, uint32_t args) {
  const uint32_t bytes = uint32_t(sizeof(abi::ApiCallRecord)) + 8 * args;
  uint8_t* dst = p.reserve(bytes);
  if (!dst) return false;
  auto* r = reinterpret_cast<abi::ApiCallRecord*>(dst);
  r->header = {uint16_t(abi::RecordKind::kApiCall), uint16_t(bytes), 7};
  r->begin = t0;
  r->end = t1;
  r->result = 0;
  r->outer_domains = 0;
  r->depth = 0;
  r->arg_count = uint8_t(args);
  r->flags = 0;
  r->reserved = 0;
  r->correlation = 0;
  for (uint32_t i = 0; i < args; ++i) r->args[i] = t0 + i;
  p.commit(bytes);
  return true;
}

void BM_RingPushWithConcurrentDrain(benchmark::State& state) {
  const uint32_t args = uint32_t(state.range(0));
  const uint32_t ring_bytes = uint32_t(state.range(1)) << 20;
  auto s = make_session(ring_bytes);
  std::atomic<bool> stop{false};
  std::thread consumer([&] {
    std::vector<uint8_t> scratch(1 << 20);
    while (!stop.load(std::memory_order_relaxed))
      ring::drain(s.slot(0), s.data(0), ring_bytes, scratch.data(), uint32_t(scratch.size()), UINT64_MAX,
                  [](const uint8_t*, uint32_t) {});
  });
  ring::Producer p;
  p.attach(s.slot(0), s.data(0), ring_bytes);
  uint64_t t = 0, stored = 0;
  for (auto _ : state) {
    stored += push_call(p, t, t + 5, args);
    t += 10;
  }
  stop = true;
  consumer.join();
  state.counters["dropped"] = double(p.dropped);
  state.counters["stored"] = double(stored);
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * int64_t(sizeof(abi::ApiCallRecord) + 8 * args));
}
// The smallest default ring and the default (abi.h).
BENCHMARK(BM_RingPushWithConcurrentDrain)
    ->ArgNames({"args", "ring_mib"})
    ->ArgsProduct({{0, 2, 7}, {abi::kSmallestDefaultRingBytes >> 20, abi::kDefaultRingBytes >> 20}});

void BM_RingPushWhenFull(benchmark::State& state) {
  auto s = make_session(abi::kMinRingBytes);
  ring::Producer p;
  p.attach(s.slot(0), s.data(0), abi::kMinRingBytes);
  while (push_call(p, 0, 1, 2)) {
  }
  for (auto _ : state) benchmark::DoNotOptimize(push_call(p, 0, 1, 2));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RingPushWhenFull);

}  // namespace

BENCHMARK_MAIN();
