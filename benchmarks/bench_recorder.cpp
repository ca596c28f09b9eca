// Google Benchmark cases for the recorder: how fast it drains one busy producer's ring into a trace
// file (records/s, with validation, time conversion, delta coding and zstd), and how many bytes a
// record costs in the file for a repetitive launch/copy/sync pattern.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <random>
#include <stdexcept>
#include <thread>
#include <string>
#include <sys/stat.h>

#include "cutrace/api_table.h"
#include "cutrace/ring.h"
#include "recorder/recorder.h"
#include "recorder/trace_writer.h"
#include "cutrace/session.h"

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
    r->outer_domains = 0;
    r->depth = 0;
    r->arg_count = uint8_t(args);
    r->flags = 0;
    r->reserved = 0;
    r->correlation = 0;
    for (uint32_t i = 0; i < args; ++i) r->args[i] = 0x7f0000001000ull + i * 64;  // stub, dims, stream
    if (phase == 1) r->args[0] = 1 << 20;  // bytes of the copy
    producer.commit(bytes);
    clock = begin + duration;
    ++step;
    return true;
  }
};

// One ring of the default size, claimed as the shim leaves it, a trace writer and a recorder attached
// to them, writing a throwaway file.
struct Rig {
  session::Session session;
  std::string path;
  trace::TraceWriter writer;
  recorder::Recorder rec;
  PatternProducer producer;

  Rig(const std::string& name, int level, unsigned compression_threads) {
    session::Options o;
    o.slot_count = 1;
    o.ring_bytes = abi::kDefaultRingBytes;
    o.clock = abi::ClockKind::kMonotonicNs;
    std::string error;
    if (!session.create(o, &error)) throw std::runtime_error(error);
    path = "/tmp/" + name + "_" + std::to_string(getpid()) + ".cutrace";
    writer.set_compression_threads(compression_threads);
    if (!writer.open(path, level)) throw std::runtime_error(writer.error());
    if (!rec.attach(session.header(), session.bytes(), &writer, &error)) throw std::runtime_error(error);
    // As cutrace-recorder does: the per-call work that depends on the table (domains called, kernel
    // handles learned) is part of what is measured.
    rec.set_api_table(kApiTable, kApiTableSize);
    abi::RingHeader* ring = session.slot(0);
    ring->pid = uint32_t(getpid());
    ring->tid = uint32_t(gettid());
    ring->ppid = uint32_t(getppid());
    ring->claim_serial = 1;
    ring->state.store(uint32_t(abi::SlotState::kActive), std::memory_order_release);
    producer.producer.attach(ring, session.data(0), o.ring_bytes);
  }
  // Final drain and end chunk; returns the file's size and removes it.
  uint64_t finish() {
    rec.final_drain();
    if (!writer.finish(rec.summary(), rec.thread_stats())) throw std::runtime_error(writer.error());
    struct stat st{};
    stat(path.c_str(), &st);
    unlink(path.c_str());
    return uint64_t(st.st_size);
  }
};

void BM_RecorderDrainAndCompress(benchmark::State& state) {
  // Compression on the draining thread (0) or on a thread of its own (1, what cutrace-recorder does
  // on a 2-core machine). The recorder's default level is 1; 3 shows what a slower, tighter setting buys.
  Rig rig("bench_recorder", int(state.range(0)), unsigned(state.range(1)));
  PatternProducer& producer = rig.producer;
  recorder::Recorder& rec = rig.rec;

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
  const uint64_t file_bytes = rig.finish();
  // Records per second of wall time spent draining (filling the ring is excluded).
  state.SetItemsProcessed(int64_t(records));
  state.counters["file_bytes_per_record"] = records ? double(file_bytes) / double(records) : 0;
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

// What the recorder sustains against a producer on another core, as cutrace-recorder runs it: run()'s
// loop on one thread, compression on it or on a thread of its own, a producer pushing the launch/copy/launch/sync pattern
// for one second, either as fast as it can (rate 0: everything beyond the recorder's capacity is
// dropped, so records_per_s is that capacity) or paced at `rate` million records per second (dropped
// says whether the recorder kept up). The time runs until the last record is compressed and written.
// On a 2-core machine a compression thread makes three busy threads on two cores.
void BM_RecorderBusyProducer(benchmark::State& state) {
  const double rate = double(state.range(0)) * 1e6;
  const unsigned compression_threads = unsigned(state.range(1));
  for (auto _ : state) {
    Rig rig("bench_recorder_busy", 1, compression_threads);
    PatternProducer& producer = rig.producer;
    recorder::Recorder& rec = rig.rec;

    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    std::atomic<bool> stop{false};
    std::thread drainer([&] { rec.run([&] { return stop.load(std::memory_order_relaxed); }); });
    const auto deadline = start + std::chrono::seconds(1);
    uint64_t attempts = 0;
    for (auto now = start; now < deadline; now = Clock::now()) {
      // Pushes in groups of 64 between clock reads, so the clock costs little next to the pushes.
      const uint64_t due = rate > 0 ? uint64_t(std::chrono::duration<double>(now - start).count() * rate) : attempts + 64;
      while (attempts < due) {
        producer.push_one();
        ++attempts;
        if ((attempts & 63) == 0) break;
      }
    }
    stop.store(true, std::memory_order_relaxed);
    drainer.join();
    const uint64_t file_bytes = rig.finish();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    state.SetIterationTime(seconds);
    const recorder::Totals totals = rec.totals();
    state.counters["attempted"] = double(attempts);
    state.counters["stored"] = double(totals.events);
    state.counters["dropped"] = double(totals.dropped);
    state.counters["records_per_s"] = double(totals.events) / seconds;
    state.counters["file_bytes_per_record"] = totals.events ? double(file_bytes) / double(totals.events) : 0;
  }
}
BENCHMARK(BM_RecorderBusyProducer)
    ->ArgNames({"million_records_per_s", "compression_threads"})
    ->ArgsProduct({{0, 10, 20}, {0, 1}})
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
