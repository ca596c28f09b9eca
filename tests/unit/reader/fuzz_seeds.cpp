// Writes the seed corpora of the fuzz targets (scripts/fuzz.sh): usage: fuzz_seeds DIR
//   DIR/reader:   the test suite's small trace, whole, cut off, and cut inside a chunk, and its NVTX
//                 trace, each behind the byte that tells reader_fuzz "a whole file";
//   DIR/recorder: ring images in recorder_fuzz's input layout holding well-formed records (a thread
//                 start, calls with arguments, a kernel-name string, an NVTX push, a capture range),
//                 once whole and once wrapped.
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cutrace/abi.h"
#include "trace_builder.h"

namespace {

using namespace cutrace;

bool write(const std::string& path, const std::vector<uint8_t>& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  return std::fclose(f) == 0 && ok;
}

template <class T>
void append(std::vector<uint8_t>& out, const T& v) {
  auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof v);
}

std::vector<uint8_t> ring_records() {
  std::vector<uint8_t> r;
  abi::ThreadStartRecord start{};
  start.header = {uint16_t(abi::RecordKind::kThreadStart), uint16_t(sizeof start), abi::kThreadPriorityKnown | 20};
  start.time = 1000;
  start.pid = 1;
  start.tid = 1;
  append(r, start);
  const std::string name = "_Z6kernelPfi";
  abi::StringRecord s{};
  const uint16_t string_size = uint16_t((sizeof s + name.size() + 7) / 8 * 8);
  s.header = {uint16_t(abi::RecordKind::kString), string_size, uint32_t(abi::StringKind::kKernelName)};
  s.key = 0x401000;
  s.length = uint32_t(name.size());
  append(r, s);
  r.insert(r.end(), name.begin(), name.end());
  r.resize(r.size() + (string_size - sizeof s - name.size()), 0);
  for (uint32_t i = 0; i < 8; ++i) {
    abi::ApiCallRecord c{};
    const uint8_t args = uint8_t(i % 4);
    c.header = {uint16_t(abi::RecordKind::kApiCall), uint16_t(sizeof c + 8 * args), i % 3};
    c.begin = 2000 + 100 * i;
    c.end = c.begin + 50;
    c.depth = uint8_t(i % 2);
    c.arg_count = args;
    append(r, c);
    for (uint8_t a = 0; a < args; ++a) append(r, uint64_t(0x401000 + a));
  }
  const std::string message = "train step";
  abi::NvtxRecord n{};
  const uint16_t nvtx_size = uint16_t((sizeof n + message.size() + 7) / 8 * 8);
  n.header = {uint16_t(abi::RecordKind::kNvtx), nvtx_size, uint32_t(abi::NvtxEvent::kPush)};
  n.time = 3000;
  n.text_bytes = uint32_t(message.size());
  n.message_type = uint8_t(abi::NvtxMessage::kText);
  append(r, n);
  r.insert(r.end(), message.begin(), message.end());
  r.resize(r.size() + (nvtx_size - sizeof n - message.size()), 0);
  abi::CaptureStateRecord c{};
  c.header = {uint16_t(abi::RecordKind::kCaptureState), uint16_t(sizeof c), uint32_t(abi::CaptureEvent::kBegin)};
  c.time = 3100;
  c.range = 1;
  c.reason = uint32_t(abi::CaptureReason::kProfilerApi);
  append(r, c);
  return r;
}

// recorder_fuzz's layout: slot, state, pid (odd: the fuzzer's own), head, tail, dropped, data.
std::vector<uint8_t> ring_image(const std::vector<uint8_t>& records, uint64_t tail) {
  std::vector<uint8_t> in;
  in.push_back(0);
  append(in, uint32_t(abi::SlotState::kActive));
  append(in, uint32_t(1));
  append(in, uint64_t(tail + records.size()));
  append(in, tail);
  append(in, uint64_t(0));
  std::vector<uint8_t> data(abi::kMinRingBytes, 0);
  for (size_t i = 0; i < records.size(); ++i) data[(tail + i) % data.size()] = records[i];
  in.insert(in.end(), data.begin(), data.end());
  return in;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_seeds DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  mkdir(dir.c_str(), 0755);
  mkdir((dir + "/reader").c_str(), 0755);
  mkdir((dir + "/recorder").c_str(), 0755);
  bool ok = true;

  const std::string trace = dir + "/small.cutrace";
  cutrace::testing::write_small_trace(trace, true);
  std::vector<uint8_t> whole = cutrace::testing::read_file(trace);
  cutrace::testing::write_small_trace(trace, false);
  std::vector<uint8_t> cut = cutrace::testing::read_file(trace);
  cutrace::testing::write_nvtx_trace(trace);
  std::vector<uint8_t> nvtx = cutrace::testing::read_file(trace);
  std::remove(trace.c_str());
  int n = 0;
  for (const std::vector<uint8_t>* file : {&whole, &cut, &nvtx}) {
    std::vector<uint8_t> seed = {0};
    seed.insert(seed.end(), file->begin(), file->end());
    ok &= write(dir + "/reader/seed" + std::to_string(n++), seed);
    seed.resize(seed.size() * 2 / 3);  // cut inside a chunk
    ok &= write(dir + "/reader/seed" + std::to_string(n++), seed);
  }

  const std::vector<uint8_t> records = ring_records();
  ok &= write(dir + "/recorder/whole", ring_image(records, 0));
  ok &= write(dir + "/recorder/wrapped", ring_image(records, abi::kMinRingBytes - 40));
  if (!ok) std::fprintf(stderr, "fuzz_seeds: cannot write the seeds under %s.\n", dir.c_str());
  return ok ? 0 : 1;
}
