// libFuzzer target for the recorder's validation of ring contents: whatever a producer (or any process
// of the user) writes into a ring and its header, the recorder must count it as malformed or lost and
// write only well-formed records, never crash or hang.
//
// Input: byte 0 picks the slot; bytes 1..40 are the slot's header fields (state, pid, head, tail, and
// the drop and push counters); the rest is copied into the ring's data. Every 4,096 inputs the trace
// is finished and started again, so the end-of-trace paths run too.
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "recorder/recorder.h"
#include "recorder/trace_writer.h"
#include "cutrace/session.h"

namespace {

using namespace cutrace;

struct Harness {
  session::Session session;
  std::unique_ptr<trace::TraceWriter> writer;
  std::unique_ptr<recorder::Recorder> recorder;
  std::string path;
  uint64_t inputs = 0;

  Harness() {
    path = "/tmp/cutrace-recorder-fuzz-" + std::to_string(getpid()) + ".cutrace";
    session::Options options;
    options.slot_count = 4;
    options.ring_bytes = abi::kMinRingBytes;
    std::string error;
    if (!session.create(options, &error)) __builtin_trap();
    restart();
  }
  ~Harness() { unlink(path.c_str()); }

  void restart() {
    if (recorder) {
      recorder->final_drain();
      writer->finish(recorder->summary(), recorder->thread_stats());
    }
    writer = std::make_unique<trace::TraceWriter>();
    if (!writer->open(path, 1)) __builtin_trap();
    recorder::RecorderOptions options;
    options.process_check_interval_ns = 0;
    options.scratch_bytes = abi::kMaxRecordBytes;
    recorder = std::make_unique<recorder::Recorder>(options);
    std::string error;
    if (!recorder->attach(session.header(), session.bytes(), writer.get(), &error)) __builtin_trap();
  }
};

template <class T>
T take(const uint8_t*& p, const uint8_t* end) {
  T v{};
  const size_t n = std::min<size_t>(sizeof v, size_t(end - p));
  std::memcpy(&v, p, n);
  p += n;
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Harness h;
  if (size == 0) return 0;
  const uint8_t* p = data;
  const uint8_t* end = data + size;
  abi::SessionHeader* session = h.session.header();
  const uint32_t slot = take<uint8_t>(p, end) % session->slot_count;
  abi::RingHeader* ring = abi::slot_header(session, slot);
  ring->state.store(take<uint32_t>(p, end) % 5);
  // The fuzzer's own pid as often as not, so that live-process paths run.
  const uint32_t pid = take<uint32_t>(p, end);
  ring->pid = pid & 1 ? uint32_t(getpid()) : pid;
  ring->head.store(take<uint64_t>(p, end));
  ring->tail.store(take<uint64_t>(p, end));
  ring->dropped_records.store(take<uint64_t>(p, end));
  uint8_t* ring_data = abi::slot_data(session, slot);
  std::memcpy(ring_data, p, std::min<size_t>(size_t(end - p), session->ring_bytes));
  h.recorder->poll();
  if (++h.inputs % 4096 == 0) h.restart();
  return 0;
}
