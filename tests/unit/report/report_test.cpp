// `cutrace info|stats|export` run as a program over synthetic traces. Golden outputs live in golden/;
// CUTRACE_UPDATE_GOLDEN=1 rewrites them from the current output (review the diff before committing).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "reader/decode.h"
#include "report/cli.h"
#include "trace_builder.h"

namespace cutrace::testing {
namespace {

struct Result {
  int exit = -1;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Result run(const std::vector<std::string>& argv) {
  const std::string out_path = temp_path("stdout"), err_path = temp_path("stderr");
  pid_t pid = fork();
  if (pid == 0) {
    int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (out < 0 || err < 0) _exit(126);
    dup2(out, 1);
    dup2(err, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  Result r;
  int status = 0;
  if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status)) r.exit = WEXITSTATUS(status);
  r.out = slurp(out_path);
  r.err = slurp(err_path);
  unlink(out_path.c_str());
  unlink(err_path.c_str());
  return r;
}

Result cli(std::vector<std::string> args) {
  args.insert(args.begin(), REPORT_CLI);
  return run(args);
}

void expect_golden(const std::string& name, const std::string& actual) {
  const std::string path = std::string(GOLDEN_DIR) + "/" + name;
  if (std::getenv("CUTRACE_UPDATE_GOLDEN")) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << actual;
    return;
  }
  EXPECT_EQ(actual, slurp(path)) << "golden file " << path << " differs; CUTRACE_UPDATE_GOLDEN=1 rewrites it";
}

size_t count_lines(const std::string& s) { return size_t(std::count(s.begin(), s.end(), '\n')); }

bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

class ReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    trace_ = temp_path("small.cutrace");
    expected_ = write_small_trace(trace_);
  }
  std::string trace_;
  SmallTrace expected_;
};

// Drops for want of /dev/shm space are told apart from drops in full rings: the remedies differ.
TEST(LossSentence, NamesEachKindOfLoss) {
  report::LossCounts loss;
  loss.dropped = 5;
  loss.dropped_no_memory = 2;
  loss.lost_no_slot = 1;
  EXPECT_EQ(report::loss_sentence(loss),
            "3 records dropped (ring full), 2 records dropped (no room in /dev/shm), 1 record lost (no free ring)");
  loss.dropped_no_memory = 5;
  loss.lost_no_slot = 0;
  EXPECT_EQ(report::loss_sentence(loss), "5 records dropped (no room in /dev/shm)");
}

TEST_F(ReportTest, CudaApiSumColumnMatchesGolden) {
  Result r = cli({"stats", trace_});
  ASSERT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.err, "");
  expect_golden("cuda_api_sum.txt", r.out);
  // Loss heads the table, so nobody reads undercounted numbers unawares.
  EXPECT_EQ(r.out.rfind("Note: 3 records dropped (ring full), 1 record malformed, 2 records lost (no free ring)", 0), 0u)
      << r.out;
  // The default report is cuda_api_sum, and naming it changes nothing.
  EXPECT_EQ(cli({"stats", "--report", "cuda_api_sum", "--format", "column", trace_}).out, r.out);
}

TEST_F(ReportTest, CudaApiSumCsvMatchesGolden) {
  Result r = cli({"stats", "-f", "csv", trace_});
  ASSERT_EQ(r.exit, 0) << r.err;
  expect_golden("cuda_api_sum.csv", r.out);
  // csv stays pure data; the loss goes to stderr.
  EXPECT_TRUE(contains(r.err, "3 records dropped (ring full)")) << r.err;
  // Header plus one row per API name counted (9: cuBLAS, nested driver and capture-off calls are not).
  EXPECT_EQ(count_lines(r.out), 10u) << r.out;
}

TEST_F(ReportTest, CudaApiSumJsonMatchesGoldenAndParses) {
  const std::string out = temp_path("sum.json");
  Result r = cli({"stats", "--format=json", "-o", out, trace_});
  ASSERT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.out, "");
  expect_golden("cuda_api_sum.json", slurp(out));
  const std::string check =
      "import json,sys; rows=json.load(open(sys.argv[1])); "
      "assert sum(r['Num Calls'] for r in rows)==int(sys.argv[2]), rows; "
      "assert abs(sum(r['Time (%)'] for r in rows)-100)<0.5; "
      "assert [r['Name'] for r in rows][0]=='cudaMemcpy'; print('ok')";
  Result py = run({PYTHON3, "-c", check, out, std::to_string(expected_.counted_calls)});
  EXPECT_EQ(py.exit, 0) << py.out << py.err;
  EXPECT_EQ(py.out, "ok\n");
}

TEST_F(ReportTest, CudaApiTraceListsCallsByStartTime) {
  Result r = cli({"stats", "-r", "cuda_api_trace", "-f", "csv", trace_});
  ASSERT_EQ(r.exit, 0) << r.err;
  expect_golden("cuda_api_trace.csv", r.out);
  EXPECT_EQ(count_lines(r.out), 1 + expected_.counted_calls);
  Result col = cli({"stats", "-r", "cuda_api_trace", trace_});
  ASSERT_EQ(col.exit, 0) << col.err;
  expect_golden("cuda_api_trace.txt", col.out);
}

TEST_F(ReportTest, SeveralReportsReadTheTraceOnce) {
  Result both = cli({"stats", "-r", "cuda_api_sum,cuda_api_trace", trace_});
  ASSERT_EQ(both.exit, 0) << both.err;
  EXPECT_TRUE(contains(both.out, " ** CUDA API Summary (cuda_api_sum):"));
  EXPECT_TRUE(contains(both.out, " ** CUDA API Trace (cuda_api_trace):"));
  // In json they form one document keyed by report name.
  const std::string out = temp_path("both.json");
  ASSERT_EQ(cli({"stats", "-r", "cuda_api_sum,cuda_api_trace", "-f", "json", "-o", out, trace_}).exit, 0);
  const std::string check =
      "import json,sys; d=json.load(open(sys.argv[1])); "
      "assert sorted(d)==['cuda_api_sum','cuda_api_trace'], d.keys(); "
      "assert len(d['cuda_api_trace'])==int(sys.argv[2]); print('ok')";
  Result py = run({PYTHON3, "-c", check, out, std::to_string(expected_.counted_calls)});
  EXPECT_EQ(py.exit, 0) << py.out << py.err;
}

TEST_F(ReportTest, StatsRefusesBadUsageWithOneSentence) {
  Result r = cli({"stats", "-r", "gpu_kern_magic", trace_});
  EXPECT_EQ(r.exit, 2);
  EXPECT_EQ(r.err,
            "cutrace stats: unknown report 'gpu_kern_magic'; available reports: cuda_api_sum, cuda_api_trace.\n");
  r = cli({"stats", "--format", "xml", trace_});
  EXPECT_EQ(r.exit, 2);
  EXPECT_EQ(r.err, "cutrace stats: unknown format 'xml'; use column, csv or json.\n");
  r = cli({"stats", "--frobnicate", trace_});
  EXPECT_EQ(r.exit, 2);
  EXPECT_EQ(r.err, "cutrace stats: unknown option '--frobnicate'; see `cutrace stats --help`.\n");
  r = cli({"stats"});
  EXPECT_EQ(r.exit, 2);
  EXPECT_EQ(count_lines(r.err), 1u);
  r = cli({"stats", "--report"});
  EXPECT_EQ(r.exit, 2);
  EXPECT_EQ(r.err, "cutrace stats: --report needs a value; see `cutrace stats --help`.\n");
  r = cli({"stats", "--help"});
  EXPECT_EQ(r.exit, 0);
  EXPECT_TRUE(contains(r.out, "cuda_api_trace"));
}

TEST_F(ReportTest, OutputFilesAreNeverOverwrittenByAccident) {
  const std::string out = temp_path("sum.txt");
  ASSERT_EQ(cli({"stats", "-o", out, trace_}).exit, 0);
  const std::string first = slurp(out);
  EXPECT_FALSE(first.empty());
  Result again = cli({"stats", "-f", "csv", "-o", out, trace_});
  EXPECT_EQ(again.exit, 1);
  EXPECT_EQ(again.err, "cutrace stats: " + out +
                           " already exists; pass --force-overwrite true to overwrite it or choose another name with "
                           "-o.\n");
  EXPECT_EQ(slurp(out), first);
  ASSERT_EQ(cli({"stats", "-f", "csv", "-o", out, "--force-overwrite", "true", trace_}).exit, 0);
  EXPECT_EQ(slurp(out).rfind("Time (%),", 0), 0u);
}

TEST_F(ReportTest, InfoShowsProcessesThreadsTotalsAndMetadata) {
  Result r = cli({"info", trace_});
  ASSERT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const std::string& o = r.out;
  EXPECT_TRUE(contains(o, "Status:    complete: " + std::to_string(expected_.events) + " events in 7 chunks")) << o;
  EXPECT_TRUE(contains(o, "\n  host                node01\n")) << o;
  EXPECT_TRUE(contains(o, "\n  session.clock       monotonic\n")) << o;
  EXPECT_TRUE(contains(o, "Processes (2):")) << o;
  EXPECT_TRUE(contains(o, "  4242     1        2  12.8  ./app --n 3")) << o;
  EXPECT_TRUE(contains(o, "  4300  4242        1  -     python train.py")) << o;  // never reached the runtime
  EXPECT_TRUE(contains(o, "\n  CUDA runtime library: /venv/nvidia/cuda_runtime/lib/libcudart.so.12\n")) << o;
  EXPECT_TRUE(contains(o, "Threads (3):")) << o;
  EXPECT_TRUE(contains(o, "  4242  4243  worker        7        3          0")) << o;
  EXPECT_TRUE(contains(o, "  events         " + std::to_string(expected_.events) + "\n")) << o;
  EXPECT_TRUE(contains(o, "  api calls      23 (20 timed, 3 kept only to name kernels)")) << o;
  EXPECT_TRUE(contains(o, "  dropped        3\n")) << o;
  EXPECT_TRUE(contains(o, "  malformed      1\n")) << o;
  EXPECT_TRUE(contains(o, "  lost_no_slot   2\n")) << o;
  // The end summary's keys are padded to its longest, the writer's own chunks.compressed_fast.
  EXPECT_TRUE(contains(o, "\n  cuda.runtime_library    /usr/local/cuda/lib64/libcudart.so.13\n")) << o;
  EXPECT_TRUE(contains(o, "\n  chunks.compressed_fast  0\n")) << o;
}

TEST_F(ReportTest, DropsAreShownEvenWhenZero) {
  const std::string path = temp_path("clean.cutrace");
  trace::TraceWriter w;
  ASSERT_TRUE(w.open(path));
  ASSERT_TRUE(w.write_api_table(kTestApis, kTestApiCount));
  w.add_thread_def(thread_def(0, 7, 7));
  Records r;
  r.call(kCudaFree, 100, 200, 0, {0});
  r.add_to(w, 0);
  ASSERT_TRUE(w.finish({{"dropped", "0"}, {"malformed", "0"}, {"lost_no_slot", "0"}}, {{0, 0, 1, 0, 0}}));
  Result info = cli({"info", path});
  ASSERT_EQ(info.exit, 0);
  EXPECT_TRUE(contains(info.out, "  dropped        0\n")) << info.out;
  EXPECT_TRUE(contains(info.out, "  lost_no_slot   0\n")) << info.out;
  EXPECT_TRUE(contains(info.out, "(not recorded)")) << info.out;  // no command line in this trace
  Result stats = cli({"stats", path});
  ASSERT_EQ(stats.exit, 0);
  EXPECT_EQ(stats.out.rfind(" ** CUDA API Summary", 0), 0u) << stats.out;  // no loss, no note
}

TEST_F(ReportTest, IncompleteTracesWarnAndShowWhatIsIntact) {
  const std::string crashed = temp_path("crashed.cutrace");
  SmallTrace st = write_small_trace(crashed, /*finish=*/false);
  Result info = cli({"info", crashed});
  EXPECT_EQ(info.exit, 3);
  EXPECT_EQ(info.err, "cutrace info: warning: " + crashed +
                          ": incomplete: the recorder did not finish (killed or crashed); " +
                          std::to_string(st.events) +
                          " events in 5 intact chunks are shown; drop counts are unknown because the trace has no "
                          "end summary; record again for a whole trace.\n");
  EXPECT_TRUE(contains(info.out, "  dropped        unknown (no end summary)")) << info.out;
  EXPECT_TRUE(contains(info.out, "unknown")) << info.out;

  // Cut inside the last events chunk: stats still reports the chunks before it.
  auto bytes = read_file(crashed);
  auto offsets = chunk_offsets(bytes);
  const std::string cut = temp_path("cut.cutrace");
  bytes.resize(offsets[4] + 40);
  write_file(cut, bytes);
  Result stats = cli({"stats", "-f", "csv", cut});
  EXPECT_EQ(stats.exit, 3);
  EXPECT_TRUE(contains(stats.err, "truncated at byte " + reader::thousands(offsets[4] + 40) + " after 4 intact chunks"))
      << stats.err;
  EXPECT_EQ(count_lines(stats.err), 1u) << stats.err;
  EXPECT_TRUE(contains(stats.out, "cudaMemcpy")) << stats.out;
  EXPECT_FALSE(contains(stats.out, "cuMemAlloc_v2")) << stats.out;  // only in the lost chunk
}

TEST_F(ReportTest, ADamagedChunkCostsOnlyItsOwnCallsAndTheEndSummaryStillCounts) {
  const std::string whole = temp_path("whole.cutrace");
  write_small_trace(whole, /*finish=*/true);
  Result before = cli({"stats", "-f", "csv", whole});
  ASSERT_EQ(before.exit, 0) << before.err;
  EXPECT_TRUE(contains(before.out, "cuMemAlloc_v2")) << before.out;

  // Damage the frame of the events chunk that alone holds cuMemAlloc_v2, leaving its header sound.
  auto bytes = read_file(whole);
  auto offsets = chunk_offsets(bytes);
  const std::string damaged = temp_path("damaged.cutrace");
  bytes[offsets[4] + sizeof(format::ChunkHeader) + 20] ^= 0x5a;
  write_file(damaged, bytes);
  Result stats = cli({"stats", "-f", "csv", damaged});
  EXPECT_EQ(stats.exit, 3);
  // One line for the damage, one for the losses the end summary (after the damage) counts.
  EXPECT_EQ(count_lines(stats.err), 2u) << stats.err;
  EXPECT_TRUE(contains(stats.err, "3 records dropped (ring full)")) << stats.err;
  EXPECT_TRUE(contains(stats.err, "damaged: 1 damaged chunk was skipped (the first, chunk 4 at byte " +
                                      reader::thousands(offsets[4])))
      << stats.err;
  EXPECT_TRUE(contains(stats.err, "a copy made before would read whole")) << stats.err;
  EXPECT_FALSE(contains(stats.err, "drop counts are unknown")) << stats.err;  // the end summary was read
  EXPECT_TRUE(contains(stats.out, "cudaMemcpy")) << stats.out;
  EXPECT_FALSE(contains(stats.out, "cuMemAlloc_v2")) << stats.out;
}

TEST_F(ReportTest, UnreadableInputsFailWithOneSentence) {
  Result r = cli({"info", "/nonexistent/trace.cutrace"});
  EXPECT_EQ(r.exit, 1);
  EXPECT_EQ(r.err, "cutrace info: /nonexistent/trace.cutrace: no such file; check the path (traces end in .cutrace).\n");
  const std::string text = temp_path("notes.txt");
  write_file(text, {'n', 'o', 't', 'e', 's', '\n'});
  for (const char* cmd : {"info", "stats"}) {
    r = cli({cmd, text});
    EXPECT_EQ(r.exit, 1);
    EXPECT_EQ(count_lines(r.err), 1u) << r.err;
    EXPECT_TRUE(contains(r.err, "not a cutrace trace")) << r.err;
  }
  r = cli({"export", "--type", "perfetto", text});
  EXPECT_EQ(r.exit, 1);
  EXPECT_TRUE(contains(r.err, "not a cutrace trace")) << r.err;
  r = cli({"info", "--verbose", trace_});
  EXPECT_EQ(r.exit, 2);
  EXPECT_EQ(r.err, "cutrace info: unknown option '--verbose'; usage: cutrace info FILE.cutrace.\n");
  r = cli({"info", trace_, trace_});
  EXPECT_EQ(r.exit, 2);
}

TEST_F(ReportTest, PerfettoExportParsesAndHoldsTracksNamesAndArguments) {
  const std::string out = temp_path("trace.json");
  Result r = cli({"export", "--type", "perfetto", "-o", out, trace_});
  ASSERT_EQ(r.exit, 0) << r.err;
  const uint64_t timed = expected_.api_calls - 3;  // everything but the capture-off registrations
  EXPECT_TRUE(contains(r.err, "wrote " + out + " (" + std::to_string(timed) + " calls, 2 processes, 3 threads)"))
      << r.err;
  Result py = run({PYTHON3, CHECK_PERFETTO, out, std::to_string(kT0), std::to_string(timed)});
  EXPECT_EQ(py.exit, 0) << py.out << py.err;
  EXPECT_EQ(py.out, "ok\n");
}

TEST_F(ReportTest, PerfettoExportHonoursForceOverwriteAndLeavesNoTemporaryFiles) {
  const std::string dir = temp_path("exportdir");
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  const std::string trace = dir + "/run1.cutrace";
  write_small_trace(trace);
  // The default output is the trace's name with .json.
  Result r = cli({"export", "--type", "perfetto", trace});
  ASSERT_EQ(r.exit, 0) << r.err;
  const std::string json = dir + "/run1.json";
  ASSERT_FALSE(slurp(json).empty());
  r = cli({"export", "--type", "perfetto", trace});
  EXPECT_EQ(r.exit, 1);
  EXPECT_EQ(r.err, "cutrace export: " + json +
                       " already exists; pass -f true to overwrite it or choose another name with -o.\n");
  EXPECT_EQ(cli({"export", "--type", "perfetto", "-f", "true", trace}).exit, 0);
  EXPECT_EQ(cli({"export", "--type", "perfetto", "--force-overwrite=true", trace}).exit, 0);
  EXPECT_EQ(cli({"export", "--type", "perfetto", "--force-overwrite", "TRUE", trace}).exit, 0);
  Result bad = cli({"export", "--type", "perfetto", "--force-overwrite=yes", trace});
  EXPECT_EQ(bad.exit, 2);
  EXPECT_EQ(bad.err, "cutrace export: --force-overwrite takes true or false.\n");
  EXPECT_EQ(cli({"export", "-f", "--type", "perfetto", trace}).exit, 0);  // a bare -f means true
  EXPECT_EQ(cli({"export", "--type", "perfetto", "--force-overwrite", "false", trace}).exit, 1);
  DIR* d = opendir(dir.c_str());
  ASSERT_NE(d, nullptr);
  std::vector<std::string> names;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') names.push_back(e->d_name);
  closedir(d);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"run1.cutrace", "run1.json"}));
}

TEST_F(ReportTest, ExportRefusesBadUsageWithOneSentence) {
  Result r = cli({"export", trace_});
  EXPECT_EQ(r.exit, 2);
  EXPECT_EQ(r.err, "cutrace export: no export type given; add --type perfetto.\n");
  r = cli({"export", "--type", "sqlite", trace_});
  EXPECT_EQ(r.exit, 2);
  EXPECT_EQ(r.err, "cutrace export: unknown export type 'sqlite'; the available type is perfetto.\n");
  r = cli({"export", "--type", "perfetto", "-o", "/nonexistent/dir/out.json", trace_});
  EXPECT_EQ(r.exit, 1);
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;
  EXPECT_TRUE(contains(r.err, "cannot create /nonexistent/dir/out.json")) << r.err;
}

TEST_F(ReportTest, PerfettoExportOfACutTraceIsValidJson) {
  auto bytes = read_file(trace_);
  auto offsets = chunk_offsets(bytes);
  const std::string cut = temp_path("cut.cutrace");
  bytes.resize(offsets[3] + 50);
  write_file(cut, bytes);
  const std::string out = temp_path("cut.json");
  Result r = cli({"export", "--type", "perfetto", "-o", out, cut});
  ASSERT_EQ(r.exit, 3) << r.err;
  EXPECT_TRUE(contains(r.err, "warning: " + cut + ": truncated at byte")) << r.err;
  const std::string check =
      "import json,sys; d=json.load(open(sys.argv[1])); x=[e for e in d['traceEvents'] if e['ph']=='X']; "
      "assert len(x)==12, len(x); assert 'truncated' in d['otherData']['status']; print('ok')";
  Result py = run({PYTHON3, "-c", check, out});
  EXPECT_EQ(py.exit, 0) << py.out << py.err;
}

TEST_F(ReportTest, JsonStringsAreAlwaysValidUtf8) {
  const std::string path = temp_path("names.cutrace");
  trace::TraceWriter w;
  ASSERT_TRUE(w.open(path));
  ASSERT_TRUE(w.write_api_table(kTestApis, kTestApiCount));
  w.add_thread_def(thread_def(0, 9, 9));
  Records r;
  r.string(abi::StringKind::kProcessCommand, 0, "prog \"quoted\" \\ \x01 tab\t caf\xc3\xa9 bad\xff\xfe end")
      .string(abi::StringKind::kThreadName, 0, "th\xe2\x82")  // cut UTF-8 sequence
      .call(kCudaFree, 100, 200, 0, {0});
  r.add_to(w, 0);
  ASSERT_TRUE(w.finish({}, {{0, 0, 3, 0, 0}}));
  const std::string out = temp_path("names.json");
  ASSERT_EQ(cli({"export", "--type", "perfetto", "-o", out, path}).exit, 0);
  const std::string check =
      "import json,sys; d=json.load(open(sys.argv[1],encoding='utf-8')); "
      "n={e['name']:e['args']['name'] for e in d['traceEvents'] if e['ph']=='M'}; "
      "assert n['process_name']=='prog \"quoted\" \\\\ \\x01 tab\\t caf\\u00e9 bad\\ufffd\\ufffd end', repr(n); "
      "assert n['thread_name']=='th\\ufffd\\ufffd', repr(n); print('ok')";
  Result py = run({PYTHON3, "-c", check, out});
  EXPECT_EQ(py.exit, 0) << py.out << py.err;
  EXPECT_EQ(py.out, "ok\n");
}

}  // namespace
}  // namespace cutrace::testing
