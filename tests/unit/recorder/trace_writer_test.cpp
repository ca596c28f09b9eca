// The trace writer checked at the byte level against format.h, with zstd used directly.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "recorder/trace_writer.h"
#include "test_support.h"

namespace cutrace {
namespace {

namespace fs = std::filesystem;
using test::Chunk;
using test::ParsedFile;

const ApiArgInfo kMallocArgs[] = {{"size", abi::ArgFormat::kBytes},
                                  {"devPtr", abi::ArgFormat::kPointer, format::kArgFlagOut, "void**"}};
const ApiInfo kTable[] = {
    {"cudaMalloc", "libcudart.so.13", abi::ApiDomain::kCudaRuntime, abi::ApiClass::kMemory,
     format::ResultKind::kErrorCode, 2, kMallocArgs},
    {"__cudaDeviceSynchronize", "libcudart.so.13", abi::ApiDomain::kCudaRuntime, abi::ApiClass::kSync,
     format::ResultKind::kErrorCode, 0, nullptr, "cudaDeviceSynchronize", format::kApiFlagInternal},
};

uint64_t now_ns(clockid_t id) {
  timespec t;
  clock_gettime(id, &t);
  return uint64_t(t.tv_sec) * 1000000000ull + uint64_t(t.tv_nsec);
}

template <class T>
void put(std::vector<uint8_t>& v, T x) {
  const auto* p = reinterpret_cast<const uint8_t*>(&x);
  v.insert(v.end(), p, p + sizeof x);
}
void put_str(std::vector<uint8_t>& v, const std::string& s) { v.insert(v.end(), s.begin(), s.end()); }

// A kApiCall record in the file's compact encoding, as the first record of its block (so its begin
// is stored as the delta to 0; a negative value gives a call before the previous one's begin).
std::vector<uint8_t> api_record(uint32_t api, uint64_t begin, uint64_t duration, std::vector<uint64_t> args) {
  std::vector<uint8_t> r(sizeof(abi::ApiCallRecord) + 8 * args.size());
  abi::ApiCallRecord a{};
  a.header = {uint16_t(abi::RecordKind::kApiCall), uint16_t(r.size()), api};
  a.begin = begin;
  a.end = begin + duration;
  a.arg_count = uint8_t(args.size());
  std::memcpy(r.data(), &a, sizeof a);
  if (!args.empty()) std::memcpy(r.data() + sizeof a, args.data(), 8 * args.size());
  return r;
}

// The block body holding `records` in the file encoding.
std::vector<uint8_t> block_of(std::initializer_list<std::vector<uint8_t>> records) {
  codec::BlockBuilder b;
  for (const auto& r : records) b.add(r.data(), uint32_t(r.size()));
  return b.body();
}

// Every test runs with compression on the calling thread and on background threads.
class TraceWriterTest : public ::testing::TestWithParam<unsigned> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("cutrace-writer-test-" + std::to_string(getpid()));
    fs::create_directories(dir_);
    path_ = (dir_ / "t.cutrace").string();
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  std::string path_;
};

TEST_P(TraceWriterTest, RoundTripAtTheByteLevel) {
  const uint64_t before_rt = now_ns(CLOCK_REALTIME), before_mono = now_ns(CLOCK_MONOTONIC);
  trace::TraceWriter w;
  w.set_compression_threads(GetParam());
  ASSERT_TRUE(w.open(path_, 5)) << w.error();
  const trace::KeyValues meta = {{"host.name", "box"}, {"command", "python train.py --epochs 3"}, {"empty", ""}};
  ASSERT_TRUE(w.write_metadata(meta));
  ASSERT_TRUE(w.write_api_table(kTable, 2));

  format::ThreadDef def{7, 100, 101, 1, 555, 9, 123456};
  w.add_thread_def(def);
  const std::vector<uint8_t> records =
      block_of({api_record(0, 1000, 50, {4096, 0xdead0000}), api_record(1, uint64_t(-20), 5, {})});
  w.add_records(7, records, 2);
  ASSERT_TRUE(w.flush_events());
  ASSERT_TRUE(w.flush_events()) << "flushing nothing must succeed and write nothing";

  const std::vector<format::ThreadStats> stats = {{7, 0, 2, 3, 1}};
  ASSERT_TRUE(w.finish({{"events", "2"}, {"dropped", "3"}}, stats)) << w.error();
  EXPECT_EQ(w.chunks_written(), 4u);
  EXPECT_EQ(w.bytes_written(), fs::file_size(path_));

  ParsedFile f;
  ASSERT_TRUE(test::parse_file(path_, &f));
  EXPECT_EQ(f.stop_reason, "");
  EXPECT_EQ(f.complete_bytes, f.file_bytes);
  EXPECT_EQ(f.header.format_version, format::kFormatVersion);
  EXPECT_EQ(f.header.header_bytes, sizeof(format::FileHeader));
  EXPECT_EQ(f.header.abi_version, abi::kAbiVersion);
  EXPECT_GE(f.header.created_realtime_ns, before_rt);
  EXPECT_LE(f.header.created_realtime_ns, now_ns(CLOCK_REALTIME));
  EXPECT_GE(f.header.created_monotonic_ns, before_mono);
  EXPECT_LE(f.header.created_monotonic_ns, now_ns(CLOCK_MONOTONIC));
  for (uint8_t b : f.header.reserved) EXPECT_EQ(b, 0);

  ASSERT_EQ(f.chunks.size(), 4u);
  const format::ChunkType types[] = {format::ChunkType::kMetadata, format::ChunkType::kApiTable,
                                     format::ChunkType::kEvents, format::ChunkType::kEnd};
  const std::vector<uint8_t> raw = test::read_file(path_);
  uint64_t pos = sizeof(format::FileHeader);
  for (size_t i = 0; i < 4; ++i) {
    const format::ChunkHeader& h = f.chunks[i].header;
    EXPECT_EQ(h.type, uint16_t(types[i]));
    EXPECT_EQ(h.codec, uint16_t(format::Codec::kZstd));
    EXPECT_EQ(h.sequence, i);
    EXPECT_EQ(h.reserved, 0u);
    // Every frame carries its content checksum (bit 2 of the frame header descriptor, RFC 8878) and size.
    const uint8_t* frame = raw.data() + pos + sizeof h;
    uint32_t frame_magic;
    std::memcpy(&frame_magic, frame, 4);
    EXPECT_EQ(frame_magic, 0xFD2FB528u);
    EXPECT_TRUE(frame[4] & 0x04) << "content checksum flag";
    EXPECT_EQ(ZSTD_getFrameContentSize(frame, h.stored_bytes), h.raw_bytes);
    EXPECT_EQ(ZSTD_findFrameCompressedSize(raw.data() + pos + sizeof h, h.stored_bytes), h.stored_bytes);
    pos += sizeof h + h.stored_bytes;
  }

  std::vector<uint8_t> expected_meta;
  for (auto& [k, v] : meta) {
    put(expected_meta, uint32_t(k.size()));
    put(expected_meta, uint32_t(v.size()));
    put_str(expected_meta, k);
    put_str(expected_meta, v);
  }
  EXPECT_EQ(f.chunks[0].payload, expected_meta);

  std::vector<uint8_t> expected_table;
  put(expected_table, uint32_t(2));
  put(expected_table, uint32_t(0));
  put(expected_table, uint16_t(abi::ApiDomain::kCudaRuntime));
  put(expected_table, uint8_t(abi::ApiClass::kMemory));
  put(expected_table, uint8_t(2));
  put(expected_table, uint8_t(format::ResultKind::kErrorCode));
  put(expected_table, uint8_t(0)), put(expected_table, uint16_t(0));
  put(expected_table, uint32_t(10));
  put_str(expected_table, "cudaMalloc");
  put(expected_table, uint32_t(0));  // no display name
  put(expected_table, uint8_t(abi::ArgFormat::kBytes)), put(expected_table, uint8_t(0));
  put(expected_table, uint16_t(4)), put_str(expected_table, "size");
  put(expected_table, uint16_t(0));  // no type name
  put(expected_table, uint8_t(abi::ArgFormat::kPointer)), put(expected_table, uint8_t(format::kArgFlagOut));
  put(expected_table, uint16_t(6)), put_str(expected_table, "devPtr");
  put(expected_table, uint16_t(6)), put_str(expected_table, "void**");
  put(expected_table, uint32_t(1));
  put(expected_table, uint16_t(abi::ApiDomain::kCudaRuntime));
  put(expected_table, uint8_t(abi::ApiClass::kSync));
  put(expected_table, uint8_t(0));
  put(expected_table, uint8_t(format::ResultKind::kErrorCode));
  put(expected_table, uint8_t(format::kApiFlagInternal)), put(expected_table, uint16_t(0));
  put(expected_table, uint32_t(23));
  put_str(expected_table, "__cudaDeviceSynchronize");
  put(expected_table, uint32_t(21));
  put_str(expected_table, "cudaDeviceSynchronize");
  EXPECT_EQ(f.chunks[1].payload, expected_table);

  std::vector<uint8_t> expected_events;
  put(expected_events, format::BlockHeader{uint32_t(format::BlockType::kThreadDef), 40, 7, 0});
  put(expected_events, def);
  put(expected_events, format::BlockHeader{uint32_t(format::BlockType::kRecords), uint32_t(records.size()), 7, 2});
  expected_events.insert(expected_events.end(), records.begin(), records.end());
  EXPECT_EQ(f.chunks[2].payload, expected_events);

  test::EndChunk end;
  ASSERT_TRUE(test::parse_end(f.chunks[3], &end));
  // The writer adds how many chunks it compressed at the fast backlog level: none here.
  EXPECT_EQ(end.summary,
            (test::KeyValueList{{"events", "2"}, {"dropped", "3"}, {"chunks.compressed_fast", "0"}}));
  ASSERT_EQ(end.threads.size(), 1u);
  EXPECT_EQ(end.threads[0].thread_index, 7u);
  EXPECT_EQ(end.threads[0].records_written, 2u);
  EXPECT_EQ(end.threads[0].records_dropped, 3u);
  EXPECT_EQ(end.threads[0].records_malformed, 1u);
}

TEST_P(TraceWriterTest, EventsChunkIsWrittenOnceItReachesItsSize) {
  trace::TraceWriter w;
  w.set_compression_threads(GetParam());
  ASSERT_TRUE(w.open(path_));
  w.set_events_chunk_bytes(1000);
  const std::vector<uint8_t> r = block_of({api_record(0, 10, 1, {1, 2, 3})});
  const uint32_t block = uint32_t(sizeof(format::BlockHeader) + r.size());
  // A chunk is cut at the first block that makes it reach 1000 bytes.
  const uint32_t per_chunk = (1000 + block - 1) / block;
  const uint32_t blocks = 3 * per_chunk + 1;
  uint64_t chunks_before = w.chunks_written();
  for (uint32_t i = 0; i < blocks; ++i) w.add_records(0, r, 1);
  EXPECT_EQ(w.chunks_written() - chunks_before, 3u);
  EXPECT_EQ(w.pending_event_bytes(), block);
  ASSERT_TRUE(w.finish({}, {}));

  ParsedFile f;
  ASSERT_TRUE(test::parse_file(path_, &f));
  ASSERT_EQ(f.chunks.size(), 5u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(f.chunks[i].header.raw_bytes, per_chunk * block);
  test::Events ev = test::decode_events(f.chunks);
  EXPECT_EQ(ev.error, "");
  EXPECT_EQ(ev.records.size(), blocks);
  EXPECT_EQ(ev.blocks, blocks);
}

TEST_P(TraceWriterTest, CloseWithoutFinishLeavesCompleteChunksAndNoEnd) {
  trace::TraceWriter w;
  w.set_compression_threads(GetParam());
  ASSERT_TRUE(w.open(path_));
  ASSERT_TRUE(w.write_metadata({{"a", "b"}}));
  const std::vector<uint8_t> r = block_of({api_record(0, 10, 1, {})});
  w.add_records(0, r, 1);
  ASSERT_TRUE(w.flush_events());
  w.add_records(0, r, 1);  // pending, lost like in a crash
  w.close();
  ParsedFile f;
  ASSERT_TRUE(test::parse_file(path_, &f));
  EXPECT_EQ(f.stop_reason, "");
  ASSERT_EQ(f.chunks.size(), 2u);
  EXPECT_EQ(f.chunks[1].header.type, uint16_t(format::ChunkType::kEvents));
  EXPECT_FALSE(w.flush_events());
  EXPECT_FALSE(w.finish({}, {}));
}

TEST_P(TraceWriterTest, OpenFailureNamesThePathAndCause) {
  trace::TraceWriter w;
  w.set_compression_threads(GetParam());
  const std::string bad = (dir_ / "missing" / "t.cutrace").string();
  EXPECT_FALSE(w.open(bad));
  EXPECT_NE(w.error().find(bad), std::string::npos) << w.error();
  EXPECT_NE(w.error().find("No such file or directory"), std::string::npos) << w.error();
  EXPECT_FALSE(w.write_metadata({{"a", "b"}}));
  EXPECT_FALSE(w.finish({}, {}));
}

TEST_P(TraceWriterTest, FullDiskIsReportedAndStopsTheWriter) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  trace::TraceWriter w;
  w.set_compression_threads(GetParam());
  EXPECT_FALSE(w.open("/dev/full"));
  EXPECT_NE(w.error().find("No space left on device"), std::string::npos) << w.error();
  EXPECT_FALSE(w.is_open());
  const std::vector<uint8_t> r = block_of({api_record(0, 10, 1, {})});
  w.add_records(0, r, 1);
  EXPECT_EQ(w.pending_event_bytes(), 0u);
}

TEST_P(TraceWriterTest, BatchLargerThanAChunkIsRefused) {
  trace::TraceWriter w;
  w.set_compression_threads(GetParam());
  ASSERT_TRUE(w.open(path_));
  const std::vector<uint8_t> r = api_record(0, 10, 1, {});
  // The size is checked before the bytes are read, so a short buffer is enough to exercise it.
  w.add_records(0, r.data(), format::kMaxChunkRawBytes / 2, r.data(), format::kMaxChunkRawBytes / 2, 1);
  EXPECT_FALSE(w.is_open());
  EXPECT_NE(w.error().find("exceeds the chunk limit"), std::string::npos) << w.error();
}

TEST_P(TraceWriterTest, ReopenStartsAFreshFile) {
  trace::TraceWriter w;
  w.set_compression_threads(GetParam());
  ASSERT_TRUE(w.open(path_));
  ASSERT_TRUE(w.write_metadata({{"a", "b"}}));
  ASSERT_TRUE(w.finish({}, {}));
  const std::string second = (dir_ / "second.cutrace").string();
  ASSERT_TRUE(w.open(second));
  ASSERT_TRUE(w.finish({}, {}));
  ParsedFile f;
  ASSERT_TRUE(test::parse_file(second, &f));
  ASSERT_EQ(f.chunks.size(), 1u);
  EXPECT_EQ(f.chunks[0].header.sequence, 0u);
  EXPECT_EQ(f.chunks[0].header.type, uint16_t(format::ChunkType::kEnd));
}

TEST_P(TraceWriterTest, WriteFailureAfterOpenIsReportedWithItsCause) {
  // A file size limit makes the chunk writes fail after the header; run it in a child so the limit
  // stays there.
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    signal(SIGXFSZ, SIG_IGN);
    rlimit limit{4096, 4096};
    setrlimit(RLIMIT_FSIZE, &limit);
    trace::TraceWriter w;
    w.set_compression_threads(GetParam());
    if (!w.open(path_)) _exit(2);
    std::vector<uint8_t> noise(8192);
    uint64_t x = 88172645463325252ull;
    for (auto& b : noise) b = uint8_t((x ^= x << 13, x ^= x >> 7, x ^= x << 17));  // incompressible
    // The writer does not look inside the streams.
    w.add_records(0, noise.data(), uint32_t(noise.size()), noise.data(), 0, 1);
    w.flush_events();
    const bool finished = w.finish({}, {});
    const bool named =
        w.error().find("File too large") != std::string::npos && w.error().find(path_) != std::string::npos;
    _exit(!finished && !w.good() && named ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST_P(TraceWriterTest, RecordsOnFileCountOnlyTheChunksThatReachedIt) {
  // As above: the first chunk fits under the limit, the second (incompressible) cannot.
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    signal(SIGXFSZ, SIG_IGN);
    rlimit limit{4096, 4096};
    setrlimit(RLIMIT_FSIZE, &limit);
    trace::TraceWriter w;
    w.set_compression_threads(GetParam());
    if (!w.open(path_)) _exit(2);
    const std::vector<uint8_t> r = block_of({api_record(0, 10, 1, {})});
    for (int i = 0; i < 3; ++i) w.add_records(0, r, 1);
    const bool first = w.flush_events();
    std::vector<uint8_t> noise(8192);
    uint64_t x = 88172645463325252ull;
    for (auto& b : noise) b = uint8_t((x ^= x << 13, x ^= x >> 7, x ^= x << 17));
    w.add_records(0, noise.data(), uint32_t(noise.size()), noise.data(), 0, 5);
    w.flush_events();
    const bool finished = w.finish({}, {});
    _exit(first && !finished && w.records_on_file() == 3 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

// The nice values of this process's other threads, from /proc/self/task/<tid>/stat (field 19).
std::vector<int> other_threads_nice_values() {
  std::vector<int> values;
  for (const auto& task : fs::directory_iterator("/proc/self/task")) {
    if (task.path().filename() == std::to_string(gettid())) continue;
    std::ifstream in(task.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t after_name = stat.rfind(')');
    if (after_name == std::string::npos) continue;
    std::istringstream fields(stat.substr(after_name + 2));
    std::string field;
    // The text after the name starts at field 3 (state); nice is field 19.
    for (int i = 3; i <= 19 && fields >> field; ++i)
      if (i == 19) values.push_back(std::stoi(field));
  }
  return values;
}

TEST(TraceWriterPriority, CompressionThreadsYieldTheCpuToTheDrainingThread) {
  // Already at the lowest priority (a test run under `nice -n 19`), there is nothing to yield.
  if (getpriority(PRIO_PROCESS, 0) > 14) GTEST_SKIP() << "the test runs at nice " << getpriority(PRIO_PROCESS, 0);
  const fs::path path = fs::temp_directory_path() / ("cutrace-writer-nice-" + std::to_string(getpid()) + ".cutrace");
  trace::TraceWriter w;
  w.set_compression_threads(1);
  ASSERT_TRUE(w.open(path.string()));
  const uint64_t before = w.bytes_written();
  ASSERT_TRUE(w.write_metadata({{"a", "b"}}));
  // Once that chunk reached the file, the compression thread has started its work.
  for (int i = 0; i < 5000 && w.bytes_written() == before; ++i) usleep(1000);
  ASSERT_GT(w.bytes_written(), before);
  const int own = getpriority(PRIO_PROCESS, 0);
  const std::vector<int> values = other_threads_nice_values();
  EXPECT_EQ(std::count(values.begin(), values.end(), std::min(own + 5, 19)), 1) << "own nice " << own;
  ASSERT_TRUE(w.finish({}, {}));
  fs::remove(path);
}

// Chunks handed on faster than one compression thread compresses them at a slow level: those taken
// while others wait behind them are compressed at the fast level instead, and the file is the same
// events either way.
TEST(TraceWriterBacklog, ChunksWaitingForCompressionGetTheFastLevelAndAreCounted) {
  const fs::path path = fs::temp_directory_path() / ("cutrace-writer-backlog-" + std::to_string(getpid()) + ".cutrace");
  trace::TraceWriter w;
  w.set_compression_threads(1);
  ASSERT_TRUE(w.open(path.string(), 12));
  w.set_events_chunk_bytes(256u << 10);
  codec::BlockBuilder b;
  uint64_t state = 88172645463325252ull, t = 0;
  for (int i = 0; i < 4000; ++i) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;  // xorshift: poorly compressible args
    t += 100 + state % 1000;
    const auto r = api_record(0, t, state % 500, {state, state >> 3});
    b.add(r.data(), uint32_t(r.size()));
  }
  const std::vector<uint8_t> body = b.body();
  const uint32_t chunks = 16;
  const uint32_t blocks_per_chunk = uint32_t((256u << 10) / body.size()) + 1;
  for (uint32_t i = 0; i < chunks * blocks_per_chunk; ++i) w.add_records(0, body, b.count());
  ASSERT_TRUE(w.finish({}, {})) << w.error();
  // The first chunk finds no other waiting; from then on the queue (two chunks beyond the one being
  // compressed) refills faster than a level-12 compression of 256 KiB ends.
  EXPECT_GE(w.chunks_compressed_fast(), 1u);
  EXPECT_LT(w.chunks_compressed_fast(), w.chunks_written());

  ParsedFile f;
  ASSERT_TRUE(test::parse_file(path.string(), &f));
  test::Events ev = test::decode_events(f.chunks);
  EXPECT_EQ(ev.error, "");
  EXPECT_EQ(ev.records.size(), size_t(chunks) * blocks_per_chunk * b.count());
  test::EndChunk end;
  ASSERT_TRUE(test::parse_end(f.chunks.back(), &end));
  EXPECT_EQ(test::lookup(end.summary, "chunks.compressed_fast"), std::to_string(w.chunks_compressed_fast()));
  fs::remove(path);
}

INSTANTIATE_TEST_SUITE_P(Compression, TraceWriterTest, ::testing::Values(0u, 2u), [](const auto& info) {
  return info.param ? "Background" + std::to_string(info.param) : std::string("InCaller");
});

}  // namespace
}  // namespace cutrace
