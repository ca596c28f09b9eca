// Google Benchmark cases for the recorder: how fast it drains one busy producer's ring into a trace
// file (records/s, with validation, time conversion, delta coding and zstd), and how many bytes a
// record costs in the file for a repetitive launch/copy/sync pattern.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <random>
#include <stdexcept>
#include <string>
#include <sys/stat.h>

#include "cutrace/ring.h"
#include "recorder/recorder.h"
#include "recorder/trace_writer.h"
#include "session/session.h"

namespace {

using namespace cutrace;

// The call mix of a typical training step on one stream: launch, async copy, launch, synchronise.
struct PatternProducer {
  ring::Producer producer;
  std::mt19937_64 rng{7};
  uint64_t clock = 1'000'000'000;
  uint32_t step = 0;

  uint64_t jitter(uint64_t base, uint64_t spread) { return base + rng() % spread; }

  bool push_one() {
    static constexpr uint32_t kArgs[4] = {7, 4, 7, 1};
    const uint32_t phase = step % 4;
    const uint32_t args = kArgs[phase];
    const uint32_t bytes = uint32_t(sizeof(abi::ApiCallRecord)) + 8 * args;
    uint8_t* p = producer.reserve(bytes);
    if (!p) return false;
    auto* r = reinterpret_cast<abi::ApiCallRecord*>(p);
    const uint64_t begin = clock + jitter(300, 128);
    const uint64_t duration = phase == 3 ? jitter(20'000, 2'048) : jitter(2'000, 128);
    r->header = {uint16_t(abi::RecordKind::kApiCall), uint16_t(bytes), 10 + phase};
    r->begin = begin;
    r->end = begin + duration;
    r->result = 0;
    r->depth = 0;
    r->arg_count = uint8_t(args);
    r->flags = 0;
    r->correlation = 0;
    for (uint32_t i = 0; i < args; ++i) r->args[i] = 0x7f0000001000ull + i * 64;  // stub, dims, stream
    if (phase == 1) r->args[0] = 1 << 20;  // bytes of the copy
    producer.commit(bytes);
    clock = begin + duration;
    ++step;
    return true;
  }
};

void BM_RecorderDrainAndCompress(benchmark::State& state) {
  session::Session s;
  session::Options o;
  o.slot_count = 1;
  o.ring_bytes = abi::kDefaultRingBytes;
  o.clock = abi::ClockKind::kMonotonicNs;
  std::string error;
  if (!s.create(o, &error)) throw std::runtime_error(error);
  const std::string path = "/tmp/bench_recorder_" + std::to_string(getpid()) + ".cutrace";
  trace::TraceWriter writer;
  // Compression on the draining thread (0) or on a thread of its own (1, what cutrace-recorder does
  // on a 2-core machine).
  writer.set_compression_threads(unsigned(state.range(1)));
  // The recorder's default level is 1; 3 shows what a slower, tighter setting buys.
  if (!writer.open(path, int(state.range(0)))) throw std::runtime_error(writer.error());
  recorder::Recorder rec;
  if (!rec.attach(s.header(), s.bytes(), &writer, &error)) throw std::runtime_error(error);

  // A claimed slot, as the shim leaves it.
  abi::RingHeader* ring = s.slot(0);
  ring->pid = uint32_t(getpid());
  ring->tid = uint32_t(gettid());
  ring->ppid = uint32_t(getppid());
  ring->claim_serial = 1;
  ring->state.store(uint32_t(abi::SlotState::kActive), std::memory_order_release);
  PatternProducer producer;
  producer.producer.attach(ring, o.ring_bytes);

  uint64_t records = 0;
  for (auto _ : state) {
    state.PauseTiming();
    uint64_t filled = 0;
    while (producer.push_one()) ++filled;
    state.ResumeTiming();
    while (rec.poll() != 0) {
    }
    records += filled;
  }
  rec.final_drain();
  writer.finish(rec.summary(), rec.thread_stats());
  struct stat st{};
  stat(path.c_str(), &st);
  unlink(path.c_str());
  // Records per second of wall time spent draining (filling the ring is excluded).
  state.SetItemsProcessed(int64_t(records));
  state.counters["file_bytes_per_record"] = records ? double(st.st_size) / double(records) : 0;
  state.counters["records"] = double(records);
}
BENCHMARK(BM_RecorderDrainAndCompress)
    ->ArgNames({"level", "compression_threads"})
    ->Args({-1, 0})
    ->Args({1, 0})
    ->Args({3, 0})
    ->Args({1, 1})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);

}  // namespace

BENCHMARK_MAIN();
