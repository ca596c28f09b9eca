#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <tuple>

#include "reader/decode.h"
#include "reader/trace_reader.h"
#include "trace_builder.h"


// The damage tests read a trace thousands of times on one thread: under TSan, which finds races between
// threads, they find none and cost a minute of the suite; the ASan/UBSan build runs them.
#if defined(__SANITIZE_THREAD__)
#define CUTRACE_SKIP_UNDER_TSAN() GTEST_SKIP() << "one thread: the ASan/UBSan build runs it"
#else
#define CUTRACE_SKIP_UNDER_TSAN() (void)0
#endif

namespace cutrace::testing {
namespace {

using reader::Event;
using reader::KernelName;
using reader::EventKind;
using reader::TraceReader;
using reader::TraceState;

struct ReadResult {
  bool opened = false;
  std::string error;
  reader::Status status;
  uint64_t events = 0;              // record events
  std::vector<uint64_t> per_chunk;  // record events by chunk sequence
  std::vector<EventKind> kinds;
};

ReadResult read_all(const std::string& path) {
  ReadResult r;
  TraceReader t;
  r.opened = t.open(path);
  r.error = t.error();
  if (!r.opened) return r;
  Event ev;
  while (t.next(ev)) {
    r.kinds.push_back(ev.kind);
    if (ev.kind == EventKind::kApiCall || ev.kind == EventKind::kString || ev.kind == EventKind::kThreadStart ||
        ev.kind == EventKind::kRecord) {
      ++r.events;
      if (r.per_chunk.size() <= ev.chunk) r.per_chunk.resize(ev.chunk + 1);
      ++r.per_chunk[ev.chunk];
    }
  }
  r.status = t.status();
  return r;
}

// The first damage the reader noted: a chunk it passed over, or the one it stopped at.
std::string damage(const reader::Status& s) {
  if (s.damaged_chunks) return s.first_damage_reason;
  return s.state == TraceState::kCorrupt ? s.reason : std::string();
}

// Records in the first n chunks of the small trace.
uint64_t events_before(const std::vector<uint64_t>& per_chunk, uint64_t n) {
  uint64_t sum = 0;
  for (uint64_t i = 0; i < n && i < per_chunk.size(); ++i) sum += per_chunk[i];
  return sum;
}

class SmallTraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = temp_path("small.cutrace");
    expected_ = write_small_trace(path_);
    bytes_ = read_file(path_);
    full_ = read_all(path_);
    ASSERT_TRUE(full_.opened) << full_.error;
  }
  std::string path_;
  SmallTrace expected_;
  std::vector<uint8_t> bytes_;
  ReadResult full_;
};

TEST_F(SmallTraceTest, ReadsEverythingOfACompleteTrace) {
  EXPECT_EQ(full_.status.state, TraceState::kComplete);
  EXPECT_EQ(full_.status.intact_chunks, 7u);  // metadata, api table, 3 x events, names, end
  EXPECT_EQ(full_.events, expected_.events);
  EXPECT_EQ(full_.status.events, expected_.events);
  EXPECT_EQ(full_.status.trailing_bytes, 0u);
  ASSERT_GE(full_.kinds.size(), 3u);
  EXPECT_EQ(full_.kinds.front(), EventKind::kMetadata);
  EXPECT_EQ(full_.kinds[1], EventKind::kApiTable);
  EXPECT_EQ(full_.kinds.back(), EventKind::kEnd);
  EXPECT_EQ(full_.status.describe(), "complete: " + std::to_string(expected_.events) + " events in 7 chunks");
}

TEST_F(SmallTraceTest, DecodesTablesThreadsAndProcesses) {
  TraceReader t;
  ASSERT_TRUE(t.open(path_));
  Event ev;
  while (t.next(ev)) {
  }
  ASSERT_NE(t.metadata_value("host"), nullptr);
  EXPECT_EQ(*t.metadata_value("host"), "node01");
  EXPECT_EQ(*t.metadata_value("session.ring_bytes"), "4194304");
  EXPECT_EQ(t.metadata().size(), 5u);
  ASSERT_NE(t.summary_value("lost_no_slot"), nullptr);
  EXPECT_EQ(*t.summary_value("lost_no_slot"), "2");

  auto table = t.api_table();
  ASSERT_EQ(table.size(), size_t(kTestApiCount));
  for (uint32_t i = 0; i < kTestApiCount; ++i) {
    EXPECT_EQ(table[i]->id, i);
    EXPECT_EQ(table[i]->name, kTestApis[i].name);
    EXPECT_EQ(table[i]->domain, kTestApis[i].domain);
    EXPECT_EQ(table[i]->api_class, kTestApis[i].api_class);
    EXPECT_EQ(table[i]->result_kind, kTestApis[i].result_kind);
    ASSERT_EQ(table[i]->args.size(), kTestApis[i].arg_count);
    for (uint32_t a = 0; a < kTestApis[i].arg_count; ++a) {
      EXPECT_EQ(table[i]->args[a].name, kTestApis[i].args[a].name);
      EXPECT_EQ(table[i]->args[a].format, kTestApis[i].args[a].format);
    }
  }

  ASSERT_EQ(t.threads().size(), 3u);
  const reader::Thread* app = t.thread(0);
  const reader::Thread* worker = t.thread(1);
  const reader::Thread* python = t.thread(2);
  ASSERT_TRUE(app && worker && python);
  EXPECT_EQ(app->name, "app");
  EXPECT_EQ(worker->name, "worker");
  EXPECT_EQ(python->name, "python");
  EXPECT_EQ(worker->tid, 4243u);
  EXPECT_EQ(worker->pid, 4242u);
  EXPECT_EQ(worker->first_seen_ns, kT0 + 11000);
  EXPECT_EQ(app->records_read, 22u);
  EXPECT_EQ(worker->records_read, 7u);
  EXPECT_TRUE(worker->has_stats);
  EXPECT_EQ(worker->records_dropped, 3u);
  EXPECT_EQ(worker->records_written, 7u);
  EXPECT_EQ(python->records_malformed, 1u);

  ASSERT_EQ(t.processes().size(), 2u);
  const reader::Process& p0 = t.process_of(*app);
  EXPECT_EQ(&p0, &t.process_of(*worker));
  EXPECT_EQ(p0.pid, 4242u);
  EXPECT_EQ(p0.command, "./app --n 3");
  EXPECT_EQ(p0.exe, "/work/app");
  EXPECT_EQ(p0.cuda_runtime_version, 12080u);
  EXPECT_EQ(p0.cuda_runtime_path, "/venv/nvidia/cuda_runtime/lib/libcudart.so.12");
  EXPECT_EQ(p0.threads, (std::vector<uint32_t>{0, 1}));
  const reader::Process& p1 = t.process_of(*python);
  EXPECT_EQ(p1.pid, 4300u);
  EXPECT_EQ(p1.ppid, 4242u);
  EXPECT_EQ(p1.command, "python train.py");
}

TEST_F(SmallTraceTest, UndoesDeltaCodingAndDecodesArguments) {
  TraceReader t;
  ASSERT_TRUE(t.open(path_));
  Event ev;
  struct Call {
    std::string name;
    uint64_t begin, end, result;
    uint16_t depth;
    uint8_t flags;
    std::vector<uint64_t> args;
    uint32_t tid;
  };
  std::vector<Call> calls;
  std::vector<std::pair<uint16_t, uint32_t>> raw;
  uint64_t thread_starts = 0, strings = 0;
  while (t.next(ev)) {
    if (ev.kind == EventKind::kApiCall) {
      calls.push_back({ev.call.api->name, ev.call.begin_ns, ev.call.end_ns, ev.call.result, ev.call.depth, ev.call.flags,
                       std::vector<uint64_t>(ev.call.args, ev.call.args + ev.call.arg_count), ev.thread->tid});
    } else if (ev.kind == EventKind::kRecord) {
      raw.emplace_back(ev.record.kind, ev.record.size);
      EXPECT_EQ(ev.record.aux, 7u);
      EXPECT_EQ(ev.record.bytes[8 + 5], 5);  // the payload bytes count up from 0
    } else if (ev.kind == EventKind::kThreadStart) {
      ++thread_starts;
      EXPECT_EQ(ev.thread_start.tid, ev.thread->tid);
    } else if (ev.kind == EventKind::kString) {
      ++strings;
    }
  }
  ASSERT_EQ(calls.size(), expected_.api_calls);
  EXPECT_EQ(thread_starts, 3u);
  EXPECT_EQ(strings, 10u);
  ASSERT_EQ(raw.size(), 1u);
  EXPECT_EQ(raw[0].first, uint16_t(abi::RecordKind::kKindCount));
  EXPECT_EQ(raw[0].second, 24u);

  // The nested driver call comes first in ring order; the enclosing cudaMalloc starts before it.
  EXPECT_EQ(calls[2].name, "cuMemAlloc_v2");
  EXPECT_EQ(calls[2].begin, kT0 + 1500);
  EXPECT_EQ(calls[2].end, kT0 + 5500);
  EXPECT_EQ(calls[2].depth, 1);
  EXPECT_EQ(calls[3].name, "cudaMalloc");
  EXPECT_EQ(calls[3].begin, kT0 + 1000);
  EXPECT_EQ(calls[3].end, kT0 + 6000);
  EXPECT_EQ(calls[3].args, (std::vector<uint64_t>{1 << 20, 0x7f0000000000}));
  EXPECT_EQ(calls[0].flags, abi::kCallFlagOutsideCapture);
  EXPECT_EQ(calls[10].name, "cudaGetErrorString");
  EXPECT_EQ(calls[10].result, 0x7ffff000u);
  // The delta coding restarts with every block: the second chunk's first call is absolute again.
  EXPECT_EQ(calls[14].name, "cudaLaunchKernel");
  EXPECT_EQ(calls[14].begin, kT0 + 40000);
  EXPECT_EQ(calls[14].end, kT0 + 43000);
  EXPECT_EQ(calls[16].name, "cudaMalloc");
  EXPECT_EQ(calls[16].result, 2u);
  EXPECT_EQ(calls[18].begin, kT0 + 46500);
  EXPECT_EQ(calls[18].tid, 4243u);
  EXPECT_EQ(calls.back().name, "cuMemAlloc_v2");
  EXPECT_EQ(calls.back().begin, kT0 + 66000);
  EXPECT_EQ(calls.back().tid, 4300u);
}

TEST_F(SmallTraceTest, ResolvesKernelNamesPerProcess) {
  TraceReader t;
  ASSERT_TRUE(t.open(path_));
  Event ev;
  std::vector<std::string> launched;
  std::vector<std::string> decoded;
  while (t.next(ev)) {
    if (ev.kind != EventKind::kApiCall || ev.call.outside_capture()) continue;
    const std::string& name = ev.call.api->name;
    if (name != "cudaLaunchKernel" && name != "__cudaLaunchKernel") continue;
    const reader::KernelName* k = t.kernel_of(ev.call, *ev.thread);
    ASSERT_NE(k, nullptr) << name;
    launched.push_back(k->demangled);
    auto grid = reader::decode_arg(t, *ev.thread, abi::ArgFormat::kDim3, ev.call.args[1]);
    decoded.push_back(grid.text + " " + reader::decode_arg(t, *ev.thread, ev.call.api->args[0].format, ev.call.args[0]).text);
  }
  EXPECT_EQ(launched, (std::vector<std::string>{"void ns::axpy<float>(float, float*, float*, int)",
                                                "reduce(float const*, float*, int)",
                                                "void ns::axpy<float>(float, float*, float*, int)",
                                                "reduce(float const*, float*, int)", "other_fn()"}));
  EXPECT_EQ(decoded[1], "(64,2,1) reduce(float const*, float*, int)");
  EXPECT_EQ(decoded[4], "(1,1,1) other_fn()");
  const reader::Process& p0 = t.processes()[0];
  EXPECT_EQ(p0.kernel_names.at(kStubAxpy).mangled, kMangledAxpy);
  EXPECT_EQ(p0.kernel_aliases.at(kHandleReduce), kStubReduce);
  // An address no registration names stays an address.
  EXPECT_EQ(t.kernel(*t.thread(0), abi::ArgFormat::kKernelStub, 0x1234), nullptr);
  EXPECT_EQ(reader::decode_arg(t, *t.thread(0), abi::ArgFormat::kKernelHandle, 0x1234).text, "0x1234");
}

TEST_F(SmallTraceTest, EveryChunkBoundaryCutIsReportedAsIncomplete) {
  const auto offsets = chunk_offsets(bytes_);
  ASSERT_EQ(offsets.size(), 7u);
  for (size_t k = 0; k < offsets.size(); ++k) {
    SCOPED_TRACE("cut before chunk " + std::to_string(k));
    std::string cut = temp_path("cut.cutrace");
    write_file(cut, std::vector<uint8_t>(bytes_.begin(), bytes_.begin() + offsets[k]));
    ReadResult r = read_all(cut);
    ASSERT_TRUE(r.opened) << r.error;
    EXPECT_EQ(r.status.state, TraceState::kIncomplete);
    EXPECT_EQ(r.status.intact_chunks, k);
    EXPECT_EQ(r.events, events_before(full_.per_chunk, k));
    EXPECT_EQ(r.status.describe(), "incomplete: the recorder did not finish (killed or crashed); " +
                                       reader::thousands(r.events) + " events in " + std::to_string(k) +
                                       (k == 1 ? " intact chunk" : " intact chunks") + " are shown");
  }
}

TEST_F(SmallTraceTest, EveryMidChunkCutIsReportedAsTruncated) {
  const auto offsets = chunk_offsets(bytes_);
  for (size_t k = 0; k < offsets.size(); ++k) {
    const uint64_t end = k + 1 < offsets.size() ? offsets[k + 1] : bytes_.size();
    // Inside the header, right after it, in the middle of the frame, one byte short of the end.
    for (uint64_t cut_at : {offsets[k] + 1, offsets[k] + 31, offsets[k] + 32, (offsets[k] + end) / 2, end - 1}) {
      SCOPED_TRACE("chunk " + std::to_string(k) + " cut at byte " + std::to_string(cut_at));
      std::string cut = temp_path("cut.cutrace");
      write_file(cut, std::vector<uint8_t>(bytes_.begin(), bytes_.begin() + cut_at));
      ReadResult r = read_all(cut);
      ASSERT_TRUE(r.opened) << r.error;
      EXPECT_EQ(r.status.state, TraceState::kTruncated);
      EXPECT_EQ(r.status.intact_chunks, k);
      EXPECT_EQ(r.status.bad_chunk, k);
      EXPECT_EQ(r.status.offset, cut_at);
      EXPECT_EQ(r.events, events_before(full_.per_chunk, k));
      EXPECT_NE(r.status.describe().find("truncated at byte " + reader::thousands(cut_at)), std::string::npos)
          << r.status.describe();
    }
  }
}

TEST(Reader, ATraceWithoutEndChunkIsIncompleteWithEverythingShown) {
  std::string path = temp_path("crashed.cutrace");
  SmallTrace st = write_small_trace(path, /*finish=*/false);
  TraceReader t;
  ASSERT_TRUE(t.open(path));
  Event ev;
  uint64_t calls = 0;
  while (t.next(ev)) calls += ev.kind == EventKind::kApiCall;
  EXPECT_EQ(calls, st.api_calls);
  EXPECT_EQ(t.status().state, TraceState::kIncomplete);
  EXPECT_EQ(t.status().describe(), "incomplete: the recorder did not finish (killed or crashed); " +
                                       std::to_string(st.events) + " events in 5 intact chunks are shown");
  for (const auto& th : t.threads()) EXPECT_FALSE(th.has_stats);
  EXPECT_TRUE(t.summary().empty());
}

TEST_F(SmallTraceTest, FlippedBytesNeverCrashAndCostOnlyTheChunkTheyHit) {
  CUTRACE_SKIP_UNDER_TSAN();
  const auto offsets = chunk_offsets(bytes_);
  auto chunk_of = [&](uint64_t pos) {
    size_t k = 0;
    while (k + 1 < offsets.size() && offsets[k + 1] <= pos) ++k;
    return k;
  };
  std::string path = temp_path("flipped.cutrace");
  uint64_t detected = 0;
  for (uint8_t mask : {uint8_t(0x01), uint8_t(0x80), uint8_t(0xff)}) {
    for (size_t pos = 0; pos < bytes_.size(); ++pos) {
      std::vector<uint8_t> b = bytes_;
      b[pos] ^= mask;
      write_file(path, b);
      ReadResult r = read_all(path);
      SCOPED_TRACE("byte " + std::to_string(pos) + " ^ " + std::to_string(mask));
      if (!r.opened) {
        ASSERT_LT(pos, sizeof(format::FileHeader));  // only a damaged file header makes a trace unreadable
        EXPECT_FALSE(r.error.empty());
        ++detected;
        continue;
      }
      if (r.status.complete()) {
        // Fields no check covers (reserved bytes, creation times) may change without harm.
        EXPECT_EQ(r.events, full_.events);
        continue;
      }
      ++detected;
      if (pos < sizeof(format::FileHeader)) {
        // A damaged header_bytes sends the reader into the middle of the file: it resumes at the
        // next sound chunk header, and what lies before that is lost.
        EXPECT_LE(r.events, full_.events);
        continue;
      }
      const size_t k = chunk_of(pos);
      auto at = [](const std::vector<uint64_t>& v, size_t i) { return i < v.size() ? v[i] : 0; };
      EXPECT_EQ(at(r.per_chunk, k), 0u);
      EXPECT_EQ(r.events, full_.events - at(full_.per_chunk, k));
      if (r.status.state == TraceState::kCorrupt) {
        // Only when no sound chunk header follows the damage: the last chunk's own header was hit.
        EXPECT_EQ(k + 1, offsets.size());
        EXPECT_EQ(r.status.bad_chunk, k);
        EXPECT_FALSE(r.status.reason.empty());
        continue;
      }
      // Otherwise the damaged chunk is passed over and every other chunk is read, the end summary
      // included unless the damage is in it.
      EXPECT_EQ(r.status.damaged_chunks, 1u);
      EXPECT_EQ(r.status.first_damage_chunk, k);
      EXPECT_FALSE(r.status.first_damage_reason.empty());
      EXPECT_EQ(r.status.intact_chunks, offsets.size() - 1);
      EXPECT_EQ(r.status.state, k + 1 == offsets.size() ? TraceState::kIncomplete : TraceState::kComplete);
    }
  }
  // Everything but the few unchecked header fields is covered by a check.
  EXPECT_GT(detected, 3 * (bytes_.size() - 200));
}

TEST_F(SmallTraceTest, RandomDamageNeverCrashes) {
  CUTRACE_SKIP_UNDER_TSAN();
  std::mt19937_64 rng(12345);
  std::string path = temp_path("damaged.cutrace");
  for (int iter = 0; iter < 400; ++iter) {
    std::vector<uint8_t> b = bytes_;
    const int edits = 1 + int(rng() % 8);
    for (int e = 0; e < edits; ++e) b[rng() % b.size()] = uint8_t(rng());
    if (rng() % 3 == 0) b.resize(rng() % b.size());
    write_file(path, b);
    ReadResult r = read_all(path);
    if (r.opened) {
      EXPECT_LE(r.events, full_.events);
    }
  }
}

// Decompressed payloads of the small trace, so tests can re-frame damaged payloads with valid checksums
// and reach the payload parsers themselves.
std::vector<std::pair<format::ChunkType, std::vector<uint8_t>>> payloads(const std::vector<uint8_t>& file) {
  std::vector<std::pair<format::ChunkType, std::vector<uint8_t>>> out;
  for (uint64_t at : chunk_offsets(file)) {
    format::ChunkHeader h;
    std::memcpy(&h, file.data() + at, sizeof h);
    std::vector<uint8_t> raw(h.raw_bytes);
    size_t n = ZSTD_decompress(raw.data(), raw.size(), file.data() + at + sizeof h, h.stored_bytes);
    EXPECT_EQ(n, h.raw_bytes);
    out.emplace_back(format::ChunkType(h.type), std::move(raw));
  }
  return out;
}

TEST_F(SmallTraceTest, ReframedPayloadsReadBackIdentically) {
  std::string path = temp_path("reframed.cutrace");
  write_file(path, frame_chunks(payloads(bytes_)));
  ReadResult r = read_all(path);
  EXPECT_EQ(r.status.state, TraceState::kComplete);
  EXPECT_EQ(r.events, full_.events);
}

TEST_F(SmallTraceTest, DamagedPayloadsWithValidChecksumsAreRejectedCleanly) {
  CUTRACE_SKIP_UNDER_TSAN();
  const auto good = payloads(bytes_);
  std::mt19937_64 rng(777);
  std::string path = temp_path("payload.cutrace");
  uint64_t rejected = 0;
  for (size_t k = 0; k < good.size(); ++k) {
    for (int iter = 0; iter < 300; ++iter) {
      auto chunks = good;
      auto& p = chunks[k].second;
      switch (iter % 4) {
        case 0:  // a few random bytes
          for (int e = 0; e < 1 + int(rng() % 4) && !p.empty(); ++e) p[rng() % p.size()] = uint8_t(rng());
          break;
        case 1:  // a length-like field set to something huge
          if (p.size() >= 4) {
            uint32_t big = uint32_t(rng()) | 0x80000000u;
            std::memcpy(p.data() + (rng() % (p.size() - 3)), &big, 4);
          }
          break;
        case 2:  // cut short
          p.resize(p.empty() ? 0 : rng() % p.size());
          break;
        case 3:  // extended with garbage
          for (int e = 0; e < 1 + int(rng() % 40); ++e) p.push_back(uint8_t(rng()));
          break;
      }
      write_file(path, frame_chunks(chunks));
      ReadResult r = read_all(path);
      ASSERT_TRUE(r.opened);
      EXPECT_LE(r.status.intact_chunks, good.size());
      // Every chunk header is sound, so a rejected payload costs its own chunk and the reader goes on.
      EXPECT_NE(r.status.state, TraceState::kCorrupt);
      if (r.status.damaged_chunks > 0) {
        ++rejected;
        EXPECT_EQ(r.status.damaged_chunks, 1u);
        // A damaged thread definition can also surface in a later chunk, as records of an unknown thread.
        EXPECT_GE(r.status.first_damage_chunk, k);
        EXPECT_NE(r.status.first_damage_reason.find("malformed"), std::string::npos) << r.status.first_damage_reason;
        EXPECT_EQ(r.status.intact_chunks, good.size() - 1);
        if (r.status.first_damage_chunk == k) {
          EXPECT_EQ(r.events, full_.events - (k < full_.per_chunk.size() ? full_.per_chunk[k] : 0));
        }
      }
    }
  }
  EXPECT_GT(rejected, good.size() * 50);
}

TEST(Reader, RefusesWhatIsNotAReadableTrace) {
  TraceReader missing;
  EXPECT_FALSE(missing.open("/nonexistent/dir/x.cutrace"));
  EXPECT_NE(missing.error().find("no such file"), std::string::npos) << missing.error();

  std::string text = temp_path("notes.txt");
  write_file(text, std::vector<uint8_t>{'h', 'e', 'l', 'l', 'o', '\n'});
  TraceReader t1;
  EXPECT_FALSE(t1.open(text));
  EXPECT_NE(t1.error().find("not a cutrace trace"), std::string::npos) << t1.error();

  std::string empty = temp_path("empty.cutrace");
  write_file(empty, {});
  TraceReader t2;
  EXPECT_FALSE(t2.open(empty));
  EXPECT_NE(t2.error().find("empty"), std::string::npos) << t2.error();

  auto file = frame_chunks({});
  std::string short_header = temp_path("short.cutrace");
  write_file(short_header, std::vector<uint8_t>(file.begin(), file.begin() + 20));
  TraceReader t3;
  EXPECT_FALSE(t3.open(short_header));
  EXPECT_NE(t3.error().find("header"), std::string::npos) << t3.error();

  format::FileHeader fh;
  std::memcpy(&fh, file.data(), sizeof fh);
  fh.format_version = format::kFormatVersion + 1;
  std::memcpy(file.data(), &fh, sizeof fh);
  std::string newer = temp_path("newer.cutrace");
  write_file(newer, file);
  TraceReader t4;
  EXPECT_FALSE(t4.open(newer));
  EXPECT_NE(t4.error().find("newer"), std::string::npos) << t4.error();
  EXPECT_NE(t4.error().find("upgrade cutrace"), std::string::npos) << t4.error();

  // Before the oldest version every cutrace reads: the development builds of versions 1 to 6.
  fh.format_version = format::kOldestReadableFormatVersion - 1;
  std::memcpy(file.data(), &fh, sizeof fh);
  std::string older = temp_path("older.cutrace");
  write_file(older, file);
  TraceReader t5;
  EXPECT_FALSE(t5.open(older));
  EXPECT_NE(t5.error().find("written in trace format version 6 by a development build of cutrace from before "
                            "version 7, the oldest this cutrace reads; record the trace again."),
            std::string::npos)
      << t5.error();

  TraceReader dir;
  EXPECT_FALSE(dir.open(::testing::TempDir()));
  EXPECT_NE(dir.error().find("is a directory, not a trace file"), std::string::npos) << dir.error();

  // A FIFO, and a link to one, are refused at once: opening one for reading would wait for a writer.
  const std::string fifo = temp_path("pipe.cutrace"), link = temp_path("link_to_pipe.cutrace");
  ::unlink(fifo.c_str());
  ::unlink(link.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ASSERT_EQ(::symlink(fifo.c_str(), link.c_str()), 0);
  for (const std::string& path : {fifo, link}) {
    TraceReader pipe;
    EXPECT_FALSE(pipe.open(path));
    EXPECT_EQ(pipe.error(), path + ": is a FIFO (named pipe), not a trace file; give the path of a .cutrace trace "
                                   "that `cutrace profile` wrote.");
  }
  TraceReader device;
  EXPECT_FALSE(device.open("/dev/null"));
  EXPECT_NE(device.error().find("/dev/null: is a character device, not a trace file"), std::string::npos)
      << device.error();
  ::unlink(link.c_str());
  ::unlink(fifo.c_str());
}

TEST_F(SmallTraceTest, AMissingChunkIsReportedAndTheChunksAfterItRead) {
  const auto offsets = chunk_offsets(bytes_);
  std::vector<uint8_t> b(bytes_.begin(), bytes_.begin() + offsets[3]);
  b.insert(b.end(), bytes_.begin() + offsets[4], bytes_.end());
  std::string path = temp_path("gap.cutrace");
  write_file(path, b);
  ReadResult r = read_all(path);
  EXPECT_FALSE(r.status.complete());
  EXPECT_EQ(r.status.state, TraceState::kComplete);  // the end chunk was reached
  EXPECT_EQ(r.status.damaged_chunks, 1u);
  EXPECT_EQ(r.status.first_damage_chunk, 3u);
  EXPECT_EQ(r.status.first_damage_offset, offsets[3]);
  EXPECT_NE(damage(r.status).find("chunks are missing"), std::string::npos) << damage(r.status);
  EXPECT_EQ(r.events, full_.events - full_.per_chunk[3]);
  EXPECT_EQ(r.status.describe(), "damaged: 1 damaged chunk was skipped (the first, chunk 3 at byte " +
                                     reader::thousands(offsets[3]) +
                                     ": chunk number 4 found where 3 was expected (chunks are missing)); " +
                                     std::to_string(r.events) + " events in the other 6 intact chunks are shown");
}

TEST_F(SmallTraceTest, BytesAfterTheEndChunkAreIgnoredAndCounted) {
  std::vector<uint8_t> b = bytes_;
  b.insert(b.end(), 100, 0xab);
  std::string path = temp_path("trailing.cutrace");
  write_file(path, b);
  ReadResult r = read_all(path);
  EXPECT_EQ(r.status.state, TraceState::kComplete);
  EXPECT_EQ(r.status.trailing_bytes, 100u);
  EXPECT_EQ(r.events, full_.events);
  EXPECT_NE(r.status.describe().find("100 bytes after the end chunk were ignored"), std::string::npos);
}

TEST_F(SmallTraceTest, AZeroFilledTailIsATruncation) {
  const auto offsets = chunk_offsets(bytes_);
  std::vector<uint8_t> b(bytes_.begin(), bytes_.begin() + offsets[4]);
  b.resize(b.size() + 4096, 0);
  std::string path = temp_path("zeros.cutrace");
  write_file(path, b);
  ReadResult r = read_all(path);
  EXPECT_EQ(r.status.state, TraceState::kTruncated);
  EXPECT_EQ(r.status.offset, offsets[4]);
  EXPECT_EQ(r.status.intact_chunks, 4u);
}

TEST_F(SmallTraceTest, UnknownChunkTypesAreSkipped) {
  auto chunks = payloads(bytes_);
  chunks.insert(chunks.begin() + 2, {format::ChunkType(77), std::vector<uint8_t>{1, 2, 3}});
  std::string path = temp_path("future.cutrace");
  write_file(path, frame_chunks(chunks));
  ReadResult r = read_all(path);
  EXPECT_EQ(r.status.state, TraceState::kComplete);
  EXPECT_EQ(r.status.skipped_chunks, 1u);
  EXPECT_EQ(r.events, full_.events);
}

std::vector<uint8_t> block(format::BlockType type, uint32_t thread, const std::vector<uint8_t>& payload,
                           uint32_t records) {
  format::BlockHeader h{uint32_t(type), uint32_t(payload.size()), thread, records};
  // Sized once and filled by copies: growing a 16-byte vector by insert() trips a false
  // -Warray-bounds in gcc 12.
  std::vector<uint8_t> out(sizeof h + payload.size());
  std::memcpy(out.data(), &h, sizeof h);
  if (!payload.empty()) std::memcpy(out.data() + sizeof h, payload.data(), payload.size());
  return out;
}

std::vector<uint8_t> def_bytes(const format::ThreadDef& d) {
  std::vector<uint8_t> out(sizeof d);
  std::memcpy(out.data(), &d, sizeof d);
  return out;
}

TEST(Reader, RecordsBeforeTheirThreadDefinitionAreCorrupt) {
  Records r;
  r.call(kCudaMalloc, 10, 20, 0, {1, 2});
  auto events = block(format::BlockType::kRecords, 5, r.encoded(), r.count());
  std::string path = temp_path("orphan.cutrace");
  write_file(path, frame_chunks({{format::ChunkType::kEvents, events}}));
  ReadResult res = read_all(path);
  EXPECT_FALSE(res.status.complete());
  EXPECT_NE(damage(res.status).find("precede its definition"), std::string::npos) << damage(res.status);
  EXPECT_EQ(res.events, 0u);
}

TEST(Reader, RecordsWhoseThreadWasDefinedInADamagedChunkAreShownUnderAnUnknownProcess) {
  Records first, second;
  first.call(kCudaMalloc, 10, 20, 0, {1, 2});
  second.call(kCudaMalloc, 30, 45, 0, {3, 4});
  auto damaged = block(format::BlockType::kThreadDef, 5, def_bytes(thread_def(5, 10, 11)), 0);
  auto recs = block(format::BlockType::kRecords, 5, first.encoded(), first.count() + 1);  // miscounted
  damaged.insert(damaged.end(), recs.begin(), recs.end());
  auto later = block(format::BlockType::kRecords, 5, second.encoded(), second.count());
  std::string path = temp_path("lost-def.cutrace");
  write_file(path, frame_chunks({{format::ChunkType::kEvents, damaged}, {format::ChunkType::kEvents, later}}));
  TraceReader t;
  ASSERT_TRUE(t.open(path)) << t.error();
  Event ev;
  std::vector<std::pair<uint32_t, uint64_t>> calls;  // (pid, begin)
  while (t.next(ev))
    if (ev.kind == EventKind::kApiCall) calls.emplace_back(ev.thread->pid, ev.call.begin_ns);
  EXPECT_EQ(calls, (std::vector<std::pair<uint32_t, uint64_t>>{{0, 30}}));
  EXPECT_EQ(t.status().damaged_chunks, 1u);
  EXPECT_EQ(t.status().first_damage_chunk, 0u);
  EXPECT_EQ(t.status().intact_chunks, 1u);
}

// A record whose counts disagree with its size is named by its kind's row of abi::kRecordKinds; a
// kind of a later build, or a record longer than its counts need, passes as it is.
TEST(Reader, DamagedRecordsAreNamedByTheirKind) {
  auto damage_of = [](const Records& r) {
    auto events = block(format::BlockType::kThreadDef, 5, def_bytes(thread_def(5, 10, 11)), 0);
    auto recs = block(format::BlockType::kRecords, 5, r.encoded(), r.count());
    events.insert(events.end(), recs.begin(), recs.end());
    const std::string path = temp_path("damaged_record.cutrace");
    write_file(path, frame_chunks({{format::ChunkType::kEvents, events}}));
    return damage(read_all(path).status);
  };
  EXPECT_EQ(damage_of(Records().raw(abi::RecordKind::kModuleMap, 9, sizeof(abi::ModuleRecord) - 8)),
            "the events chunk is malformed: a module record is of an unknown kind");
  EXPECT_EQ(damage_of(Records().raw(abi::RecordKind::kCpuSample, 3, sizeof(abi::CpuSampleRecord) - 8 + 16)),
            "the events chunk is malformed: a CPU sample record is shorter than its frames");
  EXPECT_EQ(damage_of(Records().raw(abi::RecordKind::kCaptureState, 1, 8)), "the events chunk is malformed: a capture range record is too short");
  EXPECT_EQ(damage_of(Records().raw(abi::RecordKind::kGpuActivity, 99, 48)), "the events chunk is malformed: a GPU activity record is of an unknown kind");
  EXPECT_EQ(damage_of(Records().raw(abi::RecordKind::kInvalid, 0, 8)), "the events chunk is malformed: a record has kind 0");
  EXPECT_EQ(damage_of(Records().raw(abi::RecordKind::kCpuSample, 2, sizeof(abi::CpuSampleRecord) - 8 + 24)), "");
  EXPECT_EQ(damage_of(Records().raw(abi::RecordKind::kKindCount, 7, 16)), "");
}

// A GPU device record (CUPTI's description of a device) is applied to its process before the chunk's
// events are delivered, once per device id (a later one of the same id replaces it), with its name;
// a name longer than its record is damage, named by the kind's row.
TEST(Reader, EachProcessKnowsTheGpusCuptiDescribedToIt) {
  auto device = [](uint32_t id, uint32_t sms, std::string_view name) {
    std::vector<uint8_t> bytes(abi::align_record(uint32_t(sizeof(abi::GpuDeviceRecord) + name.size())));
    abi::GpuDeviceRecord r{};
    r.header = {uint16_t(abi::RecordKind::kGpuDevice), uint16_t(bytes.size()), 0};
    r.device = id;
    r.sm_count = sms;
    r.compute_major = 9;
    r.global_memory_bytes = 16ull << 30;
    r.name_bytes = uint32_t(name.size());
    for (int i = 0; i < 16; ++i) r.uuid[i] = uint8_t(i * 17 + id);
    std::memcpy(bytes.data(), &r, sizeof r);
    std::memcpy(bytes.data() + sizeof r, name.data(), name.size());
    return bytes;
  };
  Records r;
  r.thread_start(10, 700, 700, 1, abi::kThreadFlagFirstInProcess);
  for (const auto& d : {device(0, 132, "Device Zero"), device(1, 66, "Device One"), device(0, 100, "Zero Again")})
    r.bytes_of(d.data(), uint32_t(d.size()));
  auto events = block(format::BlockType::kThreadDef, 0, def_bytes(thread_def(0, 700, 700)), 0);
  auto recs = block(format::BlockType::kRecords, 0, r.encoded(), r.count());
  events.insert(events.end(), recs.begin(), recs.end());
  const std::string path = temp_path("gpu_devices.cutrace");
  write_file(path, frame_chunks({{format::ChunkType::kEvents, events}}));
  TraceReader t;
  ASSERT_TRUE(t.open(path)) << t.error();
  Event ev;
  uint64_t raw = 0;
  while (t.next(ev)) raw += ev.kind == EventKind::kRecord && ev.record.kind == uint16_t(abi::RecordKind::kGpuDevice);
  EXPECT_EQ(t.status().damaged_chunks, 0u) << t.status().describe();
  EXPECT_EQ(raw, 3u);
  ASSERT_EQ(t.processes().size(), 1u);
  const std::vector<reader::GpuDevice>& gpus = t.processes()[0].gpu_devices;
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[0].name, "Zero Again");
  EXPECT_EQ(gpus[0].record.sm_count, 100u);
  EXPECT_EQ(gpus[1].name, "Device One");
  EXPECT_EQ(gpus[1].record.device, 1u);
  EXPECT_EQ(gpus[1].record.compute_major, 9u);
  EXPECT_EQ(gpus[1].record.global_memory_bytes, 16ull << 30);
  EXPECT_EQ(reader::gpu_uuid_text(gpus[0].record.uuid), "GPU-00112233-4455-6677-8899-aabbccddeeff");

  // A name longer than the record that holds it.
  std::vector<uint8_t> cut = device(2, 1, "Short");
  uint32_t claimed = 4000;
  std::memcpy(cut.data() + offsetof(abi::GpuDeviceRecord, name_bytes), &claimed, sizeof claimed);
  Records bad;
  bad.bytes_of(cut.data(), uint32_t(cut.size()));
  auto events2 = block(format::BlockType::kThreadDef, 5, def_bytes(thread_def(5, 10, 11)), 0);
  auto recs2 = block(format::BlockType::kRecords, 5, bad.encoded(), bad.count());
  events2.insert(events2.end(), recs2.begin(), recs2.end());
  const std::string path2 = temp_path("gpu_device_cut.cutrace");
  write_file(path2, frame_chunks({{format::ChunkType::kEvents, events2}}));
  EXPECT_EQ(damage(read_all(path2).status), "the events chunk is malformed: a GPU device record is shorter than its name");
}

// A process's job variables (kProcessJob) name its rank by cutrace/job.h's precedence; the text comes
// from the traced program's environment, so anything in it is read without harm.
TEST(Reader, EachProcessHasTheRankItsJobVariablesGive) {
  using namespace std::string_literals;
  const std::vector<std::string> texts = {
      "RANK=3\0LOCAL_RANK=1\0WORLD_SIZE=8"s,
      "SLURM_PROCID=9\0SLURM_NTASKS=16\0OMPI_COMM_WORLD_RANK=2\0OMPI_COMM_WORLD_SIZE=4"s,  // in any order
      "RANK=x\0LOCAL_RANK=1\0PMI_RANK=5\0PMI_SIZE=0"s,  // no count: the next family; no world of 0
      "RANK\0=3\0\0RANK=\0WORLD_SIZE=8\0LATER_BUILD_RANK=1\0"s,  // nothing that names a rank
      "RANK=1234567890\0SLURM_PROCID=7=7"s,
      "RANK=4\0RANK=5"s,  // the first of a name wins
  };
  std::vector<uint8_t> events;
  for (size_t k = 0; k < texts.size(); ++k) {
    const uint32_t pid = uint32_t(100 + k);
    auto def = block(format::BlockType::kThreadDef, uint32_t(k), def_bytes(thread_def(uint32_t(k), pid, pid)), 0);
    events.insert(events.end(), def.begin(), def.end());
  }
  for (size_t k = 0; k < texts.size(); ++k) {
    Records one;
    one.thread_start(10, uint32_t(100 + k), uint32_t(100 + k), 1, abi::kThreadFlagFirstInProcess)
        .string(abi::StringKind::kProcessJob, 0, texts[k]);
    if (k == 0) one.string(abi::StringKind(99), 0, "RANK=6");  // a string of a later build: skipped
    auto recs = block(format::BlockType::kRecords, uint32_t(k), one.encoded(), one.count());
    events.insert(events.end(), recs.begin(), recs.end());
  }
  const std::string path = temp_path("ranks.cutrace");
  write_file(path, frame_chunks({{format::ChunkType::kEvents, events}}));
  TraceReader t;
  ASSERT_TRUE(t.open(path)) << t.error();
  Event ev;
  while (t.next(ev)) {
  }
  EXPECT_EQ(t.status().damaged_chunks, 0u) << t.status().describe();
  std::vector<std::tuple<uint32_t, int64_t, int64_t, int64_t, std::string>> got;
  for (const reader::Process& p : t.processes())
    got.emplace_back(p.pid, p.rank, p.local_rank, p.world_size, p.rank_variable);
  using Row = std::tuple<uint32_t, int64_t, int64_t, int64_t, std::string>;
  EXPECT_EQ(got, (std::vector<Row>{Row{100, 3, 1, 8, "RANK"}, Row{101, 2, -1, 4, "OMPI_COMM_WORLD_RANK"},
                                   Row{102, 5, -1, -1, "PMI_RANK"}, Row{103, -1, -1, -1, ""},
                                   Row{104, -1, -1, -1, ""}, Row{105, 4, -1, -1, "RANK"}}));
}

TEST(Reader, ThreadDefinedTwiceIsCorruptAndAThreadDefinedInTheSameChunkIsFine) {
  Records r;
  r.call(kCudaMalloc, 10, 20, 0, {1, 2});
  auto events = block(format::BlockType::kThreadDef, 5, def_bytes(thread_def(5, 10, 11)), 0);
  auto recs = block(format::BlockType::kRecords, 5, r.encoded(), r.count());
  events.insert(events.end(), recs.begin(), recs.end());
  std::string ok = temp_path("ok.cutrace");
  write_file(ok, frame_chunks({{format::ChunkType::kEvents, events}}));
  ReadResult res = read_all(ok);
  EXPECT_EQ(res.status.state, TraceState::kIncomplete);
  EXPECT_EQ(res.events, 1u);

  auto twice = events;
  auto again = block(format::BlockType::kThreadDef, 5, def_bytes(thread_def(5, 10, 11)), 0);
  twice.insert(twice.end(), again.begin(), again.end());
  std::string bad = temp_path("twice.cutrace");
  write_file(bad, frame_chunks({{format::ChunkType::kEvents, twice}}));
  res = read_all(bad);
  EXPECT_FALSE(res.status.complete());
  EXPECT_NE(damage(res.status).find("defined twice"), std::string::npos) << damage(res.status);
  EXPECT_EQ(res.events, 0u);  // a chunk is delivered whole or not at all
}

// A launch on one thread can reach the file before the records of another thread that name its
// kernel (threads are drained one after another). The names chunk, read ahead at open(), names it
// anyway; without it the launch has no name until the naming records are read.
void write_launch_before_its_naming(const std::string& path, bool with_names_chunk) {
  trace::TraceWriter w;
  ASSERT_TRUE(w.open(path, 1));
  ASSERT_TRUE(w.write_api_table(kTestApis, kTestApiCount));
  w.add_thread_def(thread_def(0, 4242, 4242, 1, 1000));
  w.add_thread_def(thread_def(1, 4242, 4243, 1, 1000));
  Records launch;
  launch.call(kLaunchKernel13, kT0 + 5000, kT0 + 6000, 0, {kHandleReduce, 1, 1, 0, 0});
  launch.add_to(w, 1);
  ASSERT_TRUE(w.flush_events());
  Records naming;
  naming.string(abi::StringKind::kKernelName, kStubReduce, kMangledReduce)
      .call(kGetKernel, kT0 + 1000, kT0 + 1100, 0, {kHandleReduce, kStubReduce});
  naming.add_to(w, 0);
  ASSERT_TRUE(w.flush_events());
  if (with_names_chunk) {
    names::ProcessNames n;
    n.pid = 4242;
    n.start_ticks = 1000;
    n.kernels = {{kStubReduce, kMangledReduce}};
    n.handles = {{kHandleReduce, kStubReduce}};
    // Another process instance with the same pid (a reused pid) must not lend it names.
    names::ProcessNames other;
    other.pid = 4242;
    other.start_ticks = 999;
    other.kernels = {{kStubAxpy, kMangledAxpy}};
    ASSERT_TRUE(w.write_names(names::encode({n, other})));
  }
  ASSERT_TRUE(w.finish({}, {}));
}

TEST(Reader, LaunchesAreNamedEvenWhereTheNamingRecordsComeLater) {
  for (bool with_names : {true, false}) {
    const std::string path = temp_path(with_names ? "names-ahead.cutrace" : "no-names.cutrace");
    write_launch_before_its_naming(path, with_names);
    TraceReader t;
    ASSERT_TRUE(t.open(path)) << t.error();
    Event ev;
    int launches = 0;
    while (t.next(ev)) {
      if (ev.kind != EventKind::kApiCall || ev.call.api_id != kLaunchKernel13) continue;
      ++launches;
      const KernelName* k = t.kernel_of(ev.call, *ev.thread);
      if (with_names) {
        ASSERT_NE(k, nullptr);
        EXPECT_EQ(k->mangled, kMangledReduce);
        EXPECT_EQ(k->demangled, "reduce(float const*, float*, int)");
      } else {
        EXPECT_EQ(k, nullptr);
      }
    }
    EXPECT_EQ(launches, 1);
    EXPECT_EQ(t.status().state, TraceState::kComplete) << t.status().reason;
    // Once everything is read, the process knows the kernel either way, and only its own.
    ASSERT_EQ(t.processes().size(), 1u);
    EXPECT_EQ(t.processes()[0].kernel_names.count(kStubReduce), 1u);
    EXPECT_EQ(t.processes()[0].kernel_names.count(kStubAxpy), 0u);
  }
}

// dlclose, then a dlopen that maps another library at the same addresses: a frame is placed by the
// object that was there when its stack was taken.
TEST(Reader, AFrameIsPlacedByTheObjectLoadedAtItsAddressAtTheTime) {
  const std::string path = temp_path("reloaded.cutrace");
  {
    trace::TraceWriter w;
    ASSERT_TRUE(w.open(path, 1));
    ASSERT_TRUE(w.write_api_table(kTestApis, kTestApiCount));
    w.add_thread_def(thread_def(0, 4242, 4242, 1, 1000));
    Records r;
    r.module(abi::ModuleEvent::kLoaded, kT0, 0x400000, 0x401000, 0x402000, "/bin/app")
        .module(abi::ModuleEvent::kLoaded, kT0 + 100, 0x7f0000000000, 0x7f0000001000, 0x7f0000003000, "/lib/liba.so")
        .module(abi::ModuleEvent::kUnloaded, kT0 + 200, 0x7f0000000000, 0x7f0000001000, 0x7f0000003000, "")
        .module(abi::ModuleEvent::kLoaded, kT0 + 300, 0x7f0000000000, 0x7f0000001000, 0x7f0000003000, "/lib/libb.so")
        // An unload of an object the trace never loaded (its load was lost) changes nothing.
        .module(abi::ModuleEvent::kUnloaded, kT0 + 350, 0x7e0000000000, 0x7e0000001000, 0x7e0000003000, "")
        .call(kCudaMalloc, kT0 + 400, kT0 + 500, 0, {0, 16});
    r.add_to(w, 0);
    ASSERT_TRUE(w.flush_events());
    ASSERT_TRUE(w.finish({}, {}));
  }
  TraceReader t;
  ASSERT_TRUE(t.open(path)) << t.error();
  Event ev;
  std::vector<std::string> delivered;
  while (t.next(ev))
    if (ev.kind == EventKind::kModule) delivered.push_back(ev.module->path);
  EXPECT_EQ(t.status().state, TraceState::kComplete) << t.status().reason;
  // Loads are events; unloads end them and are none.
  EXPECT_EQ(delivered, (std::vector<std::string>{"/bin/app", "/lib/liba.so", "/lib/libb.so"}));
  const reader::Process& p = t.processes().at(0);
  ASSERT_EQ(p.modules.size(), 3u);
  EXPECT_EQ(p.modules[1].loaded_at, kT0 + 100);
  EXPECT_EQ(p.modules[1].unloaded_at, kT0 + 200);
  EXPECT_EQ(p.modules[2].unloaded_at, UINT64_MAX);
  auto at = [&](uint64_t address, uint64_t time) {
    const reader::Module* m = p.module_at(address, time);
    return m ? m->path : std::string("(none)");
  };
  EXPECT_EQ(at(0x7f0000001800, kT0 + 150), "/lib/liba.so");
  EXPECT_EQ(at(0x7f0000001800, kT0 + 400), "/lib/libb.so");
  // Between the unload and the load the shim found later: the object that was mapped there next.
  EXPECT_EQ(at(0x7f0000001800, kT0 + 250), "/lib/libb.so");
  // Before the shim first looked: the first object found there.
  EXPECT_EQ(at(0x7f0000001800, kT0 - 50), "/lib/liba.so");
  EXPECT_EQ(at(0x401800, kT0 + 400), "/bin/app");
  EXPECT_EQ(at(0x7f0000003000, kT0 + 400), "(none)");  // the end of a range is outside it
  EXPECT_EQ(at(0x500000, kT0 + 400), "(none)");
}

TEST(Reader, ADamagedNamesChunkIsReportedWhereTheStreamReachesIt) {
  const std::string path = temp_path("bad-names.cutrace");
  trace::TraceWriter w;
  ASSERT_TRUE(w.open(path, 1));
  std::vector<uint8_t> bad = names::encode({names::ProcessNames{4242, 1000, {{1, "x"}}, {}}});
  bad.pop_back();  // the name's only byte
  ASSERT_TRUE(w.write_names(bad));
  ASSERT_TRUE(w.finish({}, {}));
  TraceReader t;
  ASSERT_TRUE(t.open(path)) << t.error();
  Event ev;
  while (t.next(ev)) {
  }
  // Passed over: the end chunk after it is read.
  EXPECT_EQ(t.status().state, TraceState::kComplete);
  EXPECT_EQ(t.status().damaged_chunks, 1u);
  EXPECT_NE(damage(t.status()).find("names chunk"), std::string::npos) << damage(t.status());
}

TEST(Reader, ATraceCutOffWhileTheProgramRanIsWholeButNotComplete) {
  const std::string path = temp_path("cut-off.cutrace");
  trace::TraceWriter w;
  ASSERT_TRUE(w.open(path, 1));
  ASSERT_TRUE(w.write_metadata({{"start.monotonic_ns", "1000000000"}}));
  ASSERT_TRUE(w.finish({{"events", "0"},
                        {"launcher.died_ns", "2000000000"},
                        {"cut_off.reason", "the recorder was sent SIGTERM while traced processes were still running"},
                        {"cut_off.last_record_ns", "3500000000"}},
                       {}));
  TraceReader t;
  ASSERT_TRUE(t.open(path)) << t.error();
  Event ev;
  while (t.next(ev)) {
  }
  EXPECT_EQ(t.status().state, TraceState::kComplete) << "the file is whole";
  EXPECT_FALSE(t.status().complete()) << "the run is not";
  EXPECT_EQ(t.status().describe(),
            "cut off: the recorder was sent SIGTERM while traced processes were still running; the last record is "
            "2.500 s into the recording; 0 events in 2 chunks");
  EXPECT_EQ(t.time_into_recording(2000000000), "1.000 s into the recording");
}

TEST(Reader, CallsOfIdsMissingFromTheApiTableGetPlaceholderNames) {
  Records r;
  r.call(500, 10, 25, 0, {1, 2, 3});
  auto events = block(format::BlockType::kThreadDef, 0, def_bytes(thread_def(0, 10, 10)), 0);
  auto recs = block(format::BlockType::kRecords, 0, r.encoded(), r.count());
  events.insert(events.end(), recs.begin(), recs.end());
  std::string path = temp_path("unknown-api.cutrace");
  write_file(path, frame_chunks({{format::ChunkType::kEvents, events}}));
  TraceReader t;
  ASSERT_TRUE(t.open(path));
  Event ev;
  int calls = 0;
  while (t.next(ev)) {
    if (ev.kind != EventKind::kApiCall) continue;
    ++calls;
    EXPECT_EQ(ev.call.api->name, "api#500");
    EXPECT_FALSE(ev.call.api->known);
    EXPECT_EQ(ev.call.arg_count, 3);
    EXPECT_EQ(ev.call.duration_ns(), 15u);
    EXPECT_EQ(t.kernel_of(ev.call, *ev.thread), nullptr);
  }
  EXPECT_EQ(calls, 1);
}

TEST(Reader, ChunksWithoutChecksumOrWithWrongSizesAreCorrupt) {
  std::vector<uint8_t> payload(100, 7);
  std::vector<uint8_t> z(ZSTD_compressBound(payload.size()));
  size_t n = ZSTD_compress(z.data(), z.size(), payload.data(), payload.size(), 3);  // no checksum
  auto file = frame_chunks({});
  format::ChunkHeader h{};
  h.magic = format::kChunkMagic;
  h.type = uint16_t(format::ChunkType::kMetadata);
  h.codec = uint16_t(format::Codec::kZstd);
  h.stored_bytes = uint32_t(n);
  h.raw_bytes = 100;
  h.header_check = format::chunk_header_check(h);
  auto with = [&](const format::ChunkHeader& hdr) {
    auto f = file;
    f.resize(f.size() + sizeof hdr);
    std::memcpy(f.data() + f.size() - sizeof hdr, &hdr, sizeof hdr);
    f.insert(f.end(), z.begin(), z.begin() + n);
    std::string path = temp_path("nochecksum.cutrace");
    write_file(path, f);
    return read_all(path);
  };
  ReadResult r = with(h);
  EXPECT_FALSE(r.status.complete());
  EXPECT_NE(damage(r.status).find("checksum"), std::string::npos) << damage(r.status);

  format::ChunkHeader huge = h;
  huge.raw_bytes = format::kMaxChunkRawBytes + 1;
  huge.header_check = format::chunk_header_check(huge);
  r = with(huge);
  // A header that fails its own checks gives no next chunk, and none follows it.
  EXPECT_EQ(r.status.state, TraceState::kCorrupt);
  EXPECT_NE(r.status.reason.find("more than the format allows"), std::string::npos) << r.status.reason;
}

TEST(Reader, StreamsLargeTracesChunkByChunk) {
  std::string path = temp_path("large.cutrace");
  trace::TraceWriter w;
  ASSERT_TRUE(w.open(path, 1));
  w.set_events_chunk_bytes(4 << 10);
  ASSERT_TRUE(w.write_api_table(kTestApis, kTestApiCount));
  w.add_thread_def(thread_def(0, 1, 1));
  constexpr int kBlocks = 100, kPerBlock = 1000;
  uint64_t t = 0;
  for (int b = 0; b < kBlocks; ++b) {
    Records r;
    for (int i = 0; i < kPerBlock; ++i, t += 100) r.call(kCudaMemcpy, t, t + 40, 0, {1, 2, uint64_t(i), 1});
    r.add_to(w, 0);
  }
  ASSERT_TRUE(w.finish({}, {{0, 0, kBlocks * kPerBlock, 0, 0}}));
  TraceReader tr;
  ASSERT_TRUE(tr.open(path));
  Event ev;
  uint64_t calls = 0, last_begin = 0, bad_times = 0;
  while (tr.next(ev)) {
    if (ev.kind != EventKind::kApiCall) continue;
    if (calls && ev.call.begin_ns != last_begin + 100) ++bad_times;
    if (ev.call.duration_ns() != 40) ++bad_times;
    last_begin = ev.call.begin_ns;
    ++calls;
  }
  EXPECT_EQ(calls, uint64_t(kBlocks) * kPerBlock);
  EXPECT_EQ(bad_times, 0u);
  EXPECT_EQ(tr.status().state, TraceState::kComplete);
  EXPECT_GT(tr.status().intact_chunks, 50u);  // many chunks, each read and released in turn
}

TEST(Decode, NamesComeFromTheCudaHeaders) {
  EXPECT_EQ(reader::cuda_error_name(0), "cudaSuccess");
  EXPECT_EQ(reader::cuda_error_name(35), "cudaErrorInsufficientDriver");
  EXPECT_EQ(reader::cuda_error_name(2), "cudaErrorMemoryAllocation");
  EXPECT_EQ(reader::cuda_error_name(999), "cudaErrorUnknown");
  EXPECT_EQ(reader::cuda_error_name(123456), "");
  EXPECT_EQ(reader::cu_result_name(0), "CUDA_SUCCESS");
  EXPECT_EQ(reader::cu_result_name(999), "CUDA_ERROR_UNKNOWN");
  EXPECT_EQ(reader::memcpy_kind_name(1), "cudaMemcpyHostToDevice");
  EXPECT_EQ(reader::memcpy_kind_name(4), "cudaMemcpyDefault");
}

// Every domain of domains.def that names its errors gets them named, by the type the row gives.
TEST(Decode, ResultsAndDomainsAreNamedByTheirRow) {
  auto named = [](abi::ApiDomain domain, uint64_t result) {
    reader::ApiSpec api;
    api.domain = domain;
    api.result_kind = format::ResultKind::kErrorCode;
    return std::string(reader::result_name(api, result));
  };
  EXPECT_EQ(named(abi::ApiDomain::kCudaRuntime, 35), "cudaErrorInsufficientDriver");
  EXPECT_EQ(named(abi::ApiDomain::kCudaDriver, 100), "CUDA_ERROR_NO_DEVICE");
  EXPECT_EQ(named(abi::ApiDomain::kCublas, 3), "CUBLAS_STATUS_ALLOC_FAILED");
  EXPECT_EQ(named(abi::ApiDomain::kCublasLt, 1), "CUBLAS_STATUS_NOT_INITIALIZED");
  EXPECT_EQ(named(abi::ApiDomain::kCudnn, 0), "CUDNN_STATUS_SUCCESS");
  EXPECT_EQ(named(abi::ApiDomain::kCusolver, 7), "CUSOLVER_STATUS_INTERNAL_ERROR");
  EXPECT_EQ(named(abi::ApiDomain::kCusparse, 3), "CUSPARSE_STATUS_INVALID_VALUE");
  EXPECT_EQ(named(abi::ApiDomain::kOsRuntime, 0), "");
  EXPECT_EQ(named(abi::ApiDomain(63), 0), "");  // a domain of a newer build
  for (const abi::DomainInfo& d : abi::kDomains) EXPECT_EQ(reader::domain_name(d.domain), d.name);
  EXPECT_EQ(reader::domain_name(abi::ApiDomain(63)), "unknown");
  EXPECT_EQ(abi::domain_bit(abi::ApiDomain(64)), 0u);
}

TEST(Decode, LibrariesAreKnownByTheirFileNames) {
  EXPECT_EQ(abi::library_domain("libcudart.so.13"), abi::domain_bit(abi::ApiDomain::kCudaRuntime));
  EXPECT_EQ(abi::library_domain("libcuda.so.1"), abi::domain_bit(abi::ApiDomain::kCudaDriver));
  EXPECT_EQ(abi::library_domain("libcublasLt.so.13"), abi::domain_bit(abi::ApiDomain::kCublasLt));
  EXPECT_EQ(abi::library_domain("libcublas.so.12"), abi::domain_bit(abi::ApiDomain::kCublas));
  EXPECT_EQ(abi::library_domain("libcudnn_ops.so.9"), abi::domain_bit(abi::ApiDomain::kCudnn));
  EXPECT_EQ(abi::library_domain("libcudnn.so.9"), abi::domain_bit(abi::ApiDomain::kCudnn));
  EXPECT_EQ(abi::library_domain("libcusolver.so.12"), abi::domain_bit(abi::ApiDomain::kCusolver));
  EXPECT_EQ(abi::library_domain("libcusparse.so.12"), abi::domain_bit(abi::ApiDomain::kCusparse));
  EXPECT_EQ(abi::library_domain("libcufft.so.12"), abi::domain_bit(abi::ApiDomain::kCufft));
  EXPECT_EQ(abi::library_domain("libcufftw.so.12"), 0u);  // the FFTW interface is not cuFFT's API
  // cuSOLVERMg is cuSOLVER's, as -t cusolver records it.
  EXPECT_EQ(abi::library_domain("libcusolverMg.so.12"), abi::domain_bit(abi::ApiDomain::kCusolver));
  EXPECT_EQ(abi::library_domain("libcurand.so.10"), 0u);
  EXPECT_EQ(abi::library_domain(""), 0u);
  EXPECT_EQ(abi::trace_value_domains("cublas"), abi::kCublasDomains | abi::kCudaDomains);
  EXPECT_EQ(abi::trace_value_domains("cusolver"), abi::domain_bit(abi::ApiDomain::kCusolver) | abi::kCudaDomains);
  EXPECT_EQ(abi::kCudaLibraryDomains, abi::kCublasDomains | abi::kCudnnDomains |
                                          abi::domain_bit(abi::ApiDomain::kCusolver) |
                                          abi::domain_bit(abi::ApiDomain::kCusparse) |
                                          abi::domain_bit(abi::ApiDomain::kCufft));
  EXPECT_EQ(abi::trace_value_domains("osrt"), abi::domain_bit(abi::ApiDomain::kOsRuntime));
  // MPI: Open MPI's libmpi and MPICH's libmpich, traced without CUDA.
  EXPECT_EQ(abi::library_domain("libmpi.so.40"), abi::domain_bit(abi::ApiDomain::kMpi));
  EXPECT_EQ(abi::library_domain("libmpich.so.12"), abi::domain_bit(abi::ApiDomain::kMpi));
  EXPECT_EQ(abi::library_domain("libmpi_cxx.so.40"), 0u);
  EXPECT_EQ(abi::trace_value_domains("mpi"), abi::domain_bit(abi::ApiDomain::kMpi));
  EXPECT_EQ(abi::trace_value_domains("opengl"), 0u);
}

TEST(Decode, FormatsValuesForPeople) {
  EXPECT_EQ(reader::thousands(0), "0");
  EXPECT_EQ(reader::thousands(999), "999");
  EXPECT_EQ(reader::thousands(1000), "1,000");
  EXPECT_EQ(reader::thousands(1234567), "1,234,567");
  EXPECT_EQ(reader::hex(0x7f00), "0x7f00");
  EXPECT_EQ(reader::demangle("_ZN2ns4axpyIfEEvT_PS1_S2_i"), "void ns::axpy<float>(float, float*, float*, int)");
  EXPECT_EQ(reader::demangle("plain_c_kernel"), "plain_c_kernel");

  reader::ApiSpec runtime;
  runtime.domain = abi::ApiDomain::kCudaRuntime;
  EXPECT_EQ(reader::result_text(runtime, 35), "cudaErrorInsufficientDriver (35)");
  EXPECT_EQ(reader::result_text(runtime, uint64_t(-1)), "-1");
  reader::ApiSpec pointer;
  pointer.result_kind = format::ResultKind::kPointer;
  EXPECT_EQ(reader::result_text(pointer, 0x10), "0x10");
  reader::ApiSpec none;
  none.result_kind = format::ResultKind::kVoid;
  EXPECT_EQ(reader::result_text(none, 5), "");
}

TEST_F(SmallTraceTest, DecodesEveryArgumentFormat) {
  TraceReader t;
  ASSERT_TRUE(t.open(path_));
  Event ev;
  while (t.next(ev)) {
  }
  const reader::Thread& th = *t.thread(0);
  using F = abi::ArgFormat;
  EXPECT_EQ(reader::decode_arg(t, th, F::kBytes, 4096).to_string(), "4096");
  EXPECT_EQ(reader::decode_arg(t, th, F::kSigned, uint64_t(-3)).to_string(), "-3");
  EXPECT_EQ(reader::decode_arg(t, th, F::kPointer, 0xdead).to_string(), "0xdead");
  EXPECT_EQ(reader::decode_arg(t, th, F::kStream, 0).to_string(), "0x0");
  EXPECT_EQ(reader::decode_arg(t, th, F::kFlags, 3).to_string(), "0x3");
  EXPECT_EQ(reader::decode_arg(t, th, F::kDevice, 1).to_string(), "1");
  EXPECT_EQ(reader::decode_arg(t, th, F::kMemcpyKind, 2).to_string(), "cudaMemcpyDeviceToHost");
  EXPECT_EQ(reader::decode_arg(t, th, F::kMemcpyKind, 77).to_string(), "77");
  EXPECT_EQ(reader::decode_arg(t, th, F::kDim3, 7 | 65535ull << 32 | 3ull << 48).to_string(), "(7,65535,3)");
  EXPECT_EQ(reader::decode_arg(t, th, F::kKernelStub, kStubAxpy).to_string(),
            "void ns::axpy<float>(float, float*, float*, int)");
  EXPECT_EQ(reader::decode_arg(t, th, F::kKernelHandle, kHandleReduce).to_string(), "reduce(float const*, float*, int)");
  EXPECT_EQ(reader::decode_arg(t, th, F::kMpiRank, 3).to_string(), "3");
  EXPECT_EQ(reader::decode_arg(t, th, F::kMpiRank, uint64_t(abi::kMpiRankAnySource)).to_string(), "MPI_ANY_SOURCE");
  EXPECT_EQ(reader::decode_arg(t, th, F::kMpiRank, uint64_t(abi::kMpiRankProcNull)).to_string(), "MPI_PROC_NULL");
  EXPECT_EQ(reader::decode_arg(t, th, F::kMpiRank, uint64_t(abi::kMpiRankUnknown)).to_string(), "unknown");
  EXPECT_EQ(reader::decode_arg(t, th, F::kMpiDatatype, 8).to_string(), "MPI_INT");
  EXPECT_EQ(reader::decode_arg(t, th, F::kMpiDatatype, 0).to_string(), "other");
  EXPECT_EQ(reader::decode_arg(t, th, F::kMpiDatatype, 999).to_string(), "999");
  EXPECT_EQ(reader::decode_arg(t, th, F(200), 9).to_string(), "9");
}

// The Python reader in docs/trace-format.md is real code: it runs against the small trace here.
std::string shell_output(const std::string& command, int& status) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  status = pclose(p);
  return out;
}

TEST(Docs, ThePythonReaderInTheFormatDocumentWorks) {
  int status = 0;
  shell_output(std::string(PYTHON3) + " -c 'import zstandard' 2>/dev/null", status);
  if (status != 0) GTEST_SKIP() << "the zstandard Python package is missing (pip install zstandard==0.25.0)";

  std::ifstream doc(DOCS_TRACE_FORMAT);
  std::stringstream text;
  text << doc.rdbuf();
  const std::string md = text.str();
  const size_t start = md.find("```python\n");
  ASSERT_NE(start, std::string::npos) << "no python block in " << DOCS_TRACE_FORMAT;
  const size_t end = md.find("```\n", start + 10);
  ASSERT_NE(end, std::string::npos);
  const std::string script = temp_path("reader.py");
  {
    std::ofstream out(script);
    out << md.substr(start + 10, end - start - 10);
  }
  const std::string trace = temp_path("small.cutrace");
  write_small_trace(trace);
  std::string out = shell_output(std::string(PYTHON3) + " " + script + " " + trace + " 2>&1", status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(out,
            "launch cudaLaunchKernel _ZN2ns4axpyIfEEvT_PS1_S2_i at 1000000020000\n"
            "launch cudaLaunchKernel _Z6reducePKfPfi at 1000000012500\n"
            "launch cudaLaunchKernel _ZN2ns4axpyIfEEvT_PS1_S2_i at 1000000040000\n"
            "launch cudaLaunchKernel _Z6reducePKfPfi at 1000000045000\n"
            "launch cudaLaunchKernel _Z8other_fnv at 1000000061000\n"
            "__cudaGetKernel 1 300\n"
            "cuMemAlloc_v2 2 4400\n"
            "cublasSgemm_v2 1 10000\n"
            "cudaFree 1 500\n"
            "cudaGetErrorString 1 10\n"
            "cudaLaunchKernel 5 9000\n"
            "cudaMalloc 4 11000\n"
            "cudaMemcpy 3 18000\n"
            "cudaStreamSynchronize 2 8000\n"
            "state complete\n");

  // A cut file ends the same way in Python as in C++.
  auto bytes = read_file(trace);
  bytes.resize(chunk_offsets(bytes)[3] + 10);
  write_file(trace, bytes);
  out = shell_output(std::string(PYTHON3) + " " + script + " " + trace + " 2>&1", status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("state truncated\n"), std::string::npos) << out;
}

}  // namespace
}  // namespace cutrace::testing
