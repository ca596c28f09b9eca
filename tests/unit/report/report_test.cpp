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
#include "common/cli.h"
#include "model/mpi_calls.h"
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
// nsys's kinds of MPI calls, by name: the blocking and non-blocking forms alike.
TEST(MpiKinds, SortCallsAsNsysTablesDo) {
  using model::MpiKind;
  for (const char* p2p : {"MPI_Send", "MPI_Recv", "MPI_Isend", "MPI_Irecv", "MPI_Sendrecv", "MPI_Ssend", "MPI_Iprobe",
                          "MPI_Sendrecv_replace"})
    EXPECT_EQ(model::mpi_kind(p2p), MpiKind::kPointToPoint) << p2p;
  for (const char* coll : {"MPI_Barrier", "MPI_Ibarrier", "MPI_Bcast", "MPI_Ibcast", "MPI_Allreduce", "MPI_Iallreduce",
                           "MPI_Reduce_scatter_block", "MPI_Ireduce_scatter", "MPI_Alltoallv", "MPI_Iexscan"})
    EXPECT_EQ(model::mpi_kind(coll), MpiKind::kCollective) << coll;
  for (const char* wait : {"MPI_Wait", "MPI_Waitall", "MPI_Test", "MPI_Testsome", "MPI_Start", "MPI_Startall"})
    EXPECT_EQ(model::mpi_kind(wait), MpiKind::kStartWait) << wait;
  for (const char* other : {"MPI_Init", "MPI_Comm_split", "MPI_Put", "MPI_Win_fence", "MPI_Info_create", "cudaMalloc"})
    EXPECT_EQ(model::mpi_kind(other), MpiKind::kOther) << other;
  EXPECT_EQ(model::mpi_kind_name(MpiKind::kCollective), "coll");
}

TEST(LossSentence, NamesEachKindOfLoss) {
  cli::LossCounts loss;
  loss.dropped = 5;
  loss.dropped_no_memory = 2;
  loss.lost_no_slot = 1;
  EXPECT_EQ(cli::loss_sentence(loss),
            "3 records dropped (ring full), 2 records dropped (no room in /dev/shm), 1 record lost (no free ring)");
  loss.dropped_no_memory = 5;
  loss.lost_no_slot = 0;
  EXPECT_EQ(cli::loss_sentence(loss), "5 records dropped (no room in /dev/shm)");
}

TEST_F(ReportTest, CudaApiSumColumnMatchesGolden) {
  Result r = cli({"stats", "-r", "cuda_api_sum", trace_});
  ASSERT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.err, "");
  expect_golden("cuda_api_sum.txt", r.out);
  // Loss heads the table, so nobody reads undercounted numbers unawares.
  EXPECT_EQ(r.out.rfind("Note: 3 records dropped (ring full), 1 record malformed, 2 records lost (no free ring)", 0), 0u)
      << r.out;
  // Named in full, the format changes nothing.
  EXPECT_EQ(cli({"stats", "--report", "cuda_api_sum", "--format", "column", trace_}).out, r.out);
}

TEST_F(ReportTest, TheDefaultReportsAreNsysStatsOwn) {
  // nsys stats' default set, of the reports cutrace has, in nsys's order: those without data in the
  // trace say SKIPPED on stderr.
  Result r = cli({"stats", trace_});
  Result named = cli({"stats", "-r", "nvtx_sum,osrt_sum,cuda_api_sum,cuda_gpu_kern_sum,cuda_gpu_mem_time_sum",
                      "-r", "cuda_gpu_mem_size_sum", trace_});
  ASSERT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.out, named.out);
  EXPECT_EQ(r.err, named.err);
  EXPECT_TRUE(contains(r.out, " ** CUDA API Summary (cuda_api_sum):")) << r.out;
  EXPECT_TRUE(contains(r.err, "SKIPPED: " + trace_ + " does not contain NVTX data.\n")) << r.err;
  // nsys's --force-export asks for a fresh database; the reports always read the trace itself.
  EXPECT_EQ(cli({"stats", "--force-export=true", trace_}).out, r.out);
  EXPECT_EQ(cli({"stats", "--force-export=maybe", trace_}).exit, 2);
}

TEST_F(ReportTest, CudaApiSumCsvMatchesGolden) {
  Result r = cli({"stats", "-r", "cuda_api_sum", "-f", "csv", trace_});
  ASSERT_EQ(r.exit, 0) << r.err;
  expect_golden("cuda_api_sum.csv", r.out);
  // csv stays pure data; the loss goes to stderr.
  EXPECT_TRUE(contains(r.err, "3 records dropped (ring full)")) << r.err;
  // Header plus one row per API name counted (7: cuBLAS, nested driver, internal and capture-off calls
  // are not, and __cudaLaunchKernel is counted as cudaLaunchKernel).
  EXPECT_EQ(count_lines(r.out), 8u) << r.out;
}

TEST_F(ReportTest, CudaApiSumJsonMatchesGoldenAndParses) {
  // -o is a base name, as in nsys: the report goes to BASE_cuda_api_sum.json.
  const std::string base = temp_path("sum");
  const std::string out = base + "_cuda_api_sum.json";
  Result r = cli({"stats", "-r", "cuda_api_sum", "--format=json", "-o", base, trace_});
  ASSERT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.out, "Generated: " + out + "\n");
  EXPECT_EQ(cli({"stats", "-r", "cuda_api_sum", "-q", "--force-overwrite", "--format=json", "-o", base, trace_}).out, "");
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
  // JSON on standard output has one shape, however many reports and traces: a list of
  // {trace, report, rows}.
  const std::string out = temp_path("both.json");
  Result json = cli({"stats", "-r", "cuda_api_sum,cuda_api_trace", "-f", "json", trace_});
  ASSERT_EQ(json.exit, 0) << json.err;
  std::ofstream(out) << json.out;
  const std::string check =
      "import json,sys; d=json.load(open(sys.argv[1])); "
      "assert [x['report'] for x in d]==['cuda_api_sum','cuda_api_trace'], d; "
      "assert len(d[1]['rows'])==int(sys.argv[2]); print('ok')";
  Result py = run({PYTHON3, "-c", check, out, std::to_string(expected_.counted_calls)});
  EXPECT_EQ(py.exit, 0) << py.out << py.err;
}

// `nsys stats` conventions: repeated -r, formats and outputs paired in order with the last repeating,
// -o as a base name (and . for the trace's own), several traces, tsv and table, --timeunit.
TEST_F(ReportTest, NsysStatsConventions) {
  const std::string base = temp_path("conv");
  Result r = cli({"stats", "-r", "cuda_api_sum", "-r", "cuda_api_trace", "-f", "csv,tsv", "-o", base, trace_});
  ASSERT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.out, "Generated: " + base + "_cuda_api_sum.csv\nGenerated: " + base + "_cuda_api_trace.tsv\n");
  EXPECT_EQ(slurp(base + "_cuda_api_sum.csv"), cli({"stats", "-r", "cuda_api_sum", "-f", "csv", trace_}).out);
  const std::string tsv = slurp(base + "_cuda_api_trace.tsv");
  EXPECT_EQ(tsv.rfind("Start (ns)\tDuration (ns)\tName\tResult\tCorrID\tPid\tTid\tT-Pri\tThread Name\n", 0), 0u) << tsv;
  EXPECT_EQ(count_lines(tsv), 1 + expected_.counted_calls);

  // Several traces: -o . names each report after its trace; one fixed base name would collide.
  const std::string one = temp_path("one.cutrace"), two = temp_path("two.cutrace");
  std::ofstream(one, std::ios::binary) << slurp(trace_);
  std::ofstream(two, std::ios::binary) << slurp(trace_);
  r = cli({"stats", "-r", "cuda_api_sum", "-q", "-o", ".", one, two});
  ASSERT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(slurp(one.substr(0, one.size() - 8) + "_cuda_api_sum.csv"), slurp(base + "_cuda_api_sum.csv"));
  EXPECT_EQ(slurp(two.substr(0, two.size() - 8) + "_cuda_api_sum.csv"), slurp(base + "_cuda_api_sum.csv"));
  r = cli({"stats", "-r", "cuda_api_sum", "-o", base, one, two});
  EXPECT_EQ(r.exit, 2);
  EXPECT_EQ(r.err, "cutrace stats: -o " + base +
                       " with several traces would write their reports to the same files; use -o . (each trace's own "
                       "name) or -o -.\n");
  r = cli({"stats", "-r", "cuda_api_sum", "-f", "json", one, two});
  ASSERT_EQ(r.exit, 0) << r.err;
  const std::string json_file = temp_path("two.json");
  std::ofstream(json_file) << r.out;
  Result py = run({PYTHON3, "-c",
                   "import json,sys; d=json.load(open(sys.argv[1])); "
                   "assert [x['trace'] for x in d]==sys.argv[2:], d; print('ok')",
                   json_file, one, two});
  EXPECT_EQ(py.out, "ok\n") << py.err;

  // --timeunit: every (ns) column in the unit, with every nanosecond kept.
  r = cli({"stats", "-r", "cuda_api_sum", "-f", "csv", "--timeunit", "usec", trace_});
  ASSERT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.out.rfind("Time (%),Total Time (us),Num Calls,Avg (us),Med (us),Min (us),Max (us),StdDev (us),Name\n"
                        "38.4,18.000,3,6.0000,6.0000,4.000,8.000,2.0000,cudaMemcpy\n", 0),
            0u)
      << r.out;
  EXPECT_EQ(cli({"stats", "-r", "cuda_api_sum", "--timeunit", "fortnights", trace_}).exit, 2);
  // table: the column layout between bars.
  r = cli({"stats", "-r", "cuda_api_sum", "-f", "table", trace_});
  ASSERT_EQ(r.exit, 0) << r.err;
  EXPECT_TRUE(contains(r.out, " Time (%) | Total Time (ns) | ")) << r.out;
  EXPECT_TRUE(contains(r.out, "----------+-----------------+")) << r.out;
}

// Two ranks recorded on hosts whose monotonic clocks differ: one timeline on the wall clock, by each
// trace's start anchor, counted from the earlier start; the same pid on both hosts gives two processes,
// each named by its rank and host.
TEST(PerfettoExport, SeveralTracesAreOneTimelineOnTheWallClock) {
  constexpr uint64_t kWall = 1'790'000'000'000'000'000ull;  // rank 0's start, ns since 1970
  auto write_rank = [](const std::string& path, int rank, const char* host, uint64_t monotonic_start,
                       uint64_t wall_start) {
    trace::TraceWriter w;
    w.set_creation_monotonic_ns(monotonic_start);
    ASSERT_TRUE(w.open(path)) << w.error();
    ASSERT_TRUE(w.write_metadata({{"host", host},
                                  {"job.rank", std::to_string(rank)},
                                  {"start.realtime_ns", std::to_string(wall_start)},
                                  {"start.monotonic_ns", std::to_string(monotonic_start)}}));
    ASSERT_TRUE(w.write_api_table(kTestApis, kTestApiCount));
    w.add_thread_def(thread_def(0, 4242, 4242, 1, 1000, monotonic_start));
    Records r;
    r.thread_start(monotonic_start, 4242, 4242, 1, abi::kThreadFlagFirstInProcess)
        .string(abi::StringKind::kProcessCommand, 0, "./train")
        .call(kCudaMalloc, monotonic_start + 1000, monotonic_start + 4000, 0, {4096, 0x7f0000000000});
    r.add_to(w, 0);
    ASSERT_TRUE(w.flush_events());
    w.close();
  };
  const std::string a = temp_path("rank0.cutrace"), b = temp_path("rank1.cutrace"), json = temp_path("job.json");
  // Rank 1's host booted later (a smaller monotonic clock) and its recording started 2.5 ms later.
  write_rank(a, 0, "node01", kT0, kWall);
  write_rank(b, 1, "node02", kT0 / 2, kWall + 2'500'000);
  Result r = cli({"export", "--type", "perfetto-json", "-o", json, b, a});
  ASSERT_EQ(r.exit, 3) << r.err;  // the synthetic traces have no end summary: cut off, and said so
  EXPECT_TRUE(contains(r.err, "wrote " + json + " (2 traces: 2 calls, 2 processes, 2 threads)")) << r.err;
  const std::string check =
      "import json,sys; d=json.load(open(sys.argv[1])); ev=d['traceEvents']; "
      "names={e['pid']:e['args']['name'] for e in ev if e.get('name')=='process_name'}; "
      "calls={names[e['pid']]:e['ts'] for e in ev if e.get('name')=='cudaMalloc'}; "
      "assert sorted(names.values())==['rank 0 (node01, pid 4242): ./train','rank 1 (node02, pid 4242): ./train'], names; "
      "assert calls=={'rank 0 (node01, pid 4242): ./train':1.0,'rank 1 (node02, pid 4242): ./train':2501.0}, calls; "
      "assert [t['shift_ns'] for t in d['otherData']['traces']]==['2500000','0'], d['otherData']; print('ok')";
  Result py = run({PYTHON3, "-c", check, json});
  EXPECT_EQ(py.out, "ok\n") << py.out << py.err;

  // Only the Perfetto timeline merges, and it needs a name; the NVTX filter is one trace's.
  EXPECT_EQ(cli({"export", "--type", "sqlite", "-o", temp_path("job.sqlite"), a, b}).exit, 2);
  EXPECT_EQ(cli({"export", "--type", "perfetto-json", a, b}).exit, 2);
  EXPECT_EQ(cli({"export", "--type", "perfetto-json", "-o", temp_path("j2.json"), "--filter-nvtx", "step", a, b}).exit, 2);
}

// The Perfetto export compressed (what the UI opens as it is), limited to a time window, and with a
// warning when the JSON is larger than the UI can load.
TEST_F(ReportTest, PerfettoExportGzipWindowAndSizeWarning) {
  const std::string gz = temp_path("trace.json.gz");
  Result r = cli({"export", "--type", "perfetto-json", "-o", gz, trace_});
  ASSERT_EQ(r.exit, 0) << r.err;
  const std::string all_check =
      "import gzip,json,sys; d=json.load(gzip.open(sys.argv[1])); "
      "print(len([e for e in d['traceEvents'] if e['ph']=='X']))";
  Result all = run({PYTHON3, "-c", all_check, gz});
  ASSERT_EQ(all.exit, 0) << all.err;
  EXPECT_GT(std::stoul(all.out), 10u);

  const std::string window = temp_path("window.json");
  r = cli({"export", "--type", "perfetto-json", "-o", window, "--from", "10us", "--to", "0.00004", trace_});
  ASSERT_EQ(r.exit, 0) << r.err;
  const std::string window_check =
      "import json,sys; d=json.load(open(sys.argv[1])); x=[e for e in d['traceEvents'] if e['ph']=='X']; "
      "assert x and all(e['ts']+e['dur']>=10 and e['ts']<40 for e in x), x; print(len(x))";
  Result in_window = run({PYTHON3, "-c", window_check, window});
  ASSERT_EQ(in_window.exit, 0) << in_window.err;
  EXPECT_LT(std::stoul(in_window.out), std::stoul(all.out));
  EXPECT_EQ(cli({"export", "--type", "perfetto-json", "--from", "5ms", "--to", "1ms", trace_}).exit, 2);
  EXPECT_EQ(cli({"export", "--type", "perfetto-json", "--from", "soon", trace_}).exit, 2);

  Result big = run({"/usr/bin/env", "CUTRACE_PERFETTO_UI_LIMIT_BYTES=100", REPORT_CLI, "export", "--type", "perfetto-json",
                    "-o", temp_path("big.json"), trace_});
  EXPECT_EQ(big.exit, 0) << big.err;
  EXPECT_TRUE(contains(big.err, "bytes of JSON, more than the Perfetto UI can load in a browser; export a part with "
                                "--from and --to, or open it with trace_processor --httpd.\n"))
      << big.err;
  EXPECT_FALSE(contains(r.err, "more than the Perfetto UI can load")) << r.err;
}

TEST_F(ReportTest, StatsRefusesBadUsageWithOneSentence) {
  Result r = cli({"stats", "-r", "gpu_kern_magic", trace_});
  EXPECT_EQ(r.exit, 2);
  EXPECT_EQ(r.err,
            "cutrace stats: unknown report 'gpu_kern_magic'; available reports: cuda_api_sum, cuda_api_trace, "
            "cublas_api_sum, cudnn_api_sum, osrt_sum, mpi_event_sum, mpi_event_trace, api_trace, nvtx_sum, nvtx_pushpop_trace, "
            "nvtx_gpu_proj_sum, nvtx_gpu_proj_trace, nvtx_kern_sum, callsite_sum, cpu_sample_sum, "
            "cuda_gpu_kern_sum, cuda_gpu_mem_time_sum, cuda_gpu_mem_size_sum, cuda_gpu_trace, cuda_kern_exec_trace, "
            "cuda_api_gpu_sum, "
            "python_sample_sum, cpu_ctxsw_sum.\n");
  r = cli({"stats", "-r", "cuda_api_sum", "--format", "xml", trace_});
  EXPECT_EQ(r.exit, 2);
  EXPECT_EQ(r.err, "cutrace stats: unknown format 'xml'; use column, table, csv, tsv or json.\n");
  r = cli({"stats", "-r", "cuda_api_sum", "--frobnicate", trace_});
  EXPECT_EQ(r.exit, 2);
  EXPECT_EQ(r.err, "cutrace stats: unknown option '--frobnicate'; see `cutrace stats --help`.\n");
  r = cli({"stats"});
  EXPECT_EQ(r.exit, 2);
  EXPECT_EQ(count_lines(r.err), 1u);
  r = cli({"stats", "--report"});
  EXPECT_EQ(r.exit, 2);
  EXPECT_EQ(r.err, "cutrace stats: --report needs a value; see `cutrace stats --help`.\n");
  r = cli({"stats", "-r", "cuda_api_sum", "--help"});
  EXPECT_EQ(r.exit, 0);
  EXPECT_TRUE(contains(r.out, "cuda_api_trace"));
}

TEST_F(ReportTest, OutputFilesAreNeverOverwrittenByAccident) {
  const std::string base = temp_path("sum");
  const std::string out = base + "_cuda_api_sum.column";
  ASSERT_EQ(cli({"stats", "-r", "cuda_api_sum", "-f", "column", "-o", base, trace_}).exit, 0);
  const std::string first = slurp(out);
  EXPECT_FALSE(first.empty());
  Result again = cli({"stats", "-r", "cuda_api_sum", "-f", "column", "-o", base, trace_});
  EXPECT_EQ(again.exit, 1);
  EXPECT_TRUE(contains(again.err, "cutrace stats: " + out +
                                      " already exists; pass --force-overwrite true to overwrite it or choose another "
                                      "name with -o.\n"))
      << again.err;
  EXPECT_EQ(slurp(out), first);
  ASSERT_EQ(cli({"stats", "-f", "column", "-o", base, "--force-overwrite", "true", "-r", "cuda_api_sum", trace_}).exit,
            0);
  EXPECT_EQ(slurp(out), first);
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
  EXPECT_TRUE(contains(o, "  api calls      23 (20 timed, 3 recorded outside capture, to name later calls or open a range)")) << o;
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
  Result stats = cli({"stats", "-r", "cuda_api_sum", path});
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
  Result stats = cli({"stats", "-r", "cuda_api_sum", "-f", "csv", cut});
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
  Result before = cli({"stats", "-r", "cuda_api_sum", "-f", "csv", whole});
  ASSERT_EQ(before.exit, 0) << before.err;
  EXPECT_TRUE(contains(before.out, "cuMemAlloc_v2")) << before.out;

  // Damage the frame of the events chunk that alone holds cuMemAlloc_v2, leaving its header sound.
  auto bytes = read_file(whole);
  auto offsets = chunk_offsets(bytes);
  const std::string damaged = temp_path("damaged.cutrace");
  bytes[offsets[4] + sizeof(format::ChunkHeader) + 20] ^= 0x5a;
  write_file(damaged, bytes);
  Result stats = cli({"stats", "-r", "cuda_api_sum", "-f", "csv", damaged});
  EXPECT_EQ(stats.exit, 3);
  // One line for the damage, one for the losses the end summary (after the damage) counts.
  EXPECT_EQ(count_lines(stats.err), 2u) << stats.err;
  EXPECT_TRUE(contains(stats.err, "3 records dropped (ring full)")) << stats.err;
  EXPECT_TRUE(contains(stats.err, "damaged: 1 damaged chunk was skipped (the first, chunk 4 at byte " +
                                      reader::thousands(offsets[4])))
      << stats.err;
  EXPECT_TRUE(contains(stats.err, "; record again for a whole trace.")) << stats.err;
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
  r = cli({"export", "--type", "perfetto-json", text});
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
  Result r = cli({"export", "--type", "perfetto-json", "-o", out, trace_});
  ASSERT_EQ(r.exit, 0) << r.err;
  const uint64_t timed = expected_.api_calls - 4;  // all but the capture-off registrations and __cudaGetKernel
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
  Result r = cli({"export", "--type", "perfetto-json", trace});
  ASSERT_EQ(r.exit, 0) << r.err;
  const std::string json = dir + "/run1.json";
  ASSERT_FALSE(slurp(json).empty());
  r = cli({"export", "--type", "perfetto-json", trace});
  EXPECT_EQ(r.exit, 1);
  EXPECT_EQ(r.err, "cutrace export: " + json +
                       " already exists; pass -f true to overwrite it or choose another name with -o.\n");
  EXPECT_EQ(cli({"export", "--type", "perfetto-json", "-f", "true", trace}).exit, 0);
  EXPECT_EQ(cli({"export", "--type", "perfetto-json", "--force-overwrite=true", trace}).exit, 0);
  EXPECT_EQ(cli({"export", "--type", "perfetto-json", "--force-overwrite", "TRUE", trace}).exit, 0);
  Result bad = cli({"export", "--type", "perfetto-json", "--force-overwrite=yes", trace});
  EXPECT_EQ(bad.exit, 2);
  EXPECT_EQ(bad.err, "cutrace export: --force-overwrite takes true or false.\n");
  EXPECT_EQ(cli({"export", "-f", "--type", "perfetto-json", trace}).exit, 0);  // a bare -f means true
  EXPECT_EQ(cli({"export", "--type", "perfetto-json", "--force-overwrite", "false", trace}).exit, 1);
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
  EXPECT_EQ(r.err, "cutrace export: no export type given; add --type TYPE (perfetto, perfetto-json, sqlite, parquetdir, arrowdir, arrow and kineto).\n");
  r = cli({"export", "--type", "parquet", trace_});
  EXPECT_EQ(r.exit, 2);
  EXPECT_EQ(r.err, "cutrace export: unknown export type 'parquet'; the available types are perfetto, perfetto-json, sqlite, parquetdir, arrowdir, arrow and kineto.\n");
  r = cli({"export", "--type", "perfetto-json", "-o", "/nonexistent/dir/out.json", trace_});
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
  Result r = cli({"export", "--type", "perfetto-json", "-o", out, cut});
  ASSERT_EQ(r.exit, 3) << r.err;
  EXPECT_TRUE(contains(r.err, "warning: " + cut + ": truncated at byte")) << r.err;
  const std::string check =
      "import json,sys; d=json.load(open(sys.argv[1])); x=[e for e in d['traceEvents'] if e['ph']=='X']; "
      "assert len(x)==11, len(x); assert 'truncated' in d['otherData']['status']; print('ok')";
  Result py = run({PYTHON3, "-c", check, out});
  EXPECT_EQ(py.exit, 0) << py.out << py.err;
}

// Calls made inside other recorded calls, as the shim records them: children first (records are in the
// order calls end), one level deeper, with the domains around them. Thread 100 of process 100:
//   cudaMalloc [1000,2000]                 > cuMemAlloc_v2 [1100,1400] (the runtime's)
//   cuMemAlloc_v2 [3000,3500]              (the program's own)
//   __cudaPushCallConfiguration [4000,4010] (internal)
//   __cudaLaunchKernel [5000,6000]         > cuLaunchKernel [5100,5300]
//   __cudaLaunchKernel_ptsz [7000,7400]
//   cublasGemmEx [8000,9000]               > cublasLtMatmul [8100,8600] > cuLaunchKernel [8200,8300]
//   cudnnConvolutionForward [10000,11000]  > cublasGemmEx [10100,10500] > cuLaunchKernel [10200,10250]
//                                          > cuLaunchKernel [10600,10700]
//   cuCtxSetLimit [12000,12100]            (fails: CUDA_ERROR_INVALID_VALUE)
constexpr uint64_t kGemmFunction = 0x7f00000a0000;
std::string write_nesting_trace() {
  using abi::ApiDomain;
  const uint8_t rt = uint8_t(abi::domain_bit(ApiDomain::kCudaRuntime));
  const uint8_t blas = uint8_t(abi::domain_bit(ApiDomain::kCublas));
  const uint8_t lt = uint8_t(abi::domain_bit(ApiDomain::kCublasLt));
  const uint8_t dnn = uint8_t(abi::domain_bit(ApiDomain::kCudnn));
  const std::string path = temp_path("nesting.cutrace");
  trace::TraceWriter w;
  w.set_creation_monotonic_ns(0);  // its calls start at 1000 ns
  EXPECT_TRUE(w.open(path)) << w.error();
  EXPECT_TRUE(w.write_api_table(kTestApis, kTestApiCount));
  w.add_thread_def(thread_def(0, 100, 100));
  Records r;
  r.string(abi::StringKind::kThreadName, 0, "main")
      .string(abi::StringKind::kKernelName, kGemmFunction, "_Z4gemmPKfPf")
      .call(kCuMemAlloc, 1100, 1400, 0, {4096}, 0, 1, rt)
      .call(kCudaMalloc, 1000, 2000, 0, {4096, 0x7f0000000000})
      .call(kCuMemAlloc, 3000, 3500, 0, {512})
      .call(kPushCallConfiguration, 4000, 4010, 0, {1 | 1ull << 32 | 1ull << 48, 32 | 1ull << 32 | 1ull << 48})
      .call(kCuLaunchKernel, 5100, 5300, 0, {kGemmFunction, 4}, 0, 1, rt)
      .call(kLaunchKernel13, 5000, 6000, 0, {kGemmFunction, 4 | 1ull << 32 | 1ull << 48, 1 | 1ull << 32 | 1ull << 48, 0, 0})
      .call(kLaunchKernel13Ptsz, 7000, 7400, 0, {kGemmFunction, 1 | 1ull << 32 | 1ull << 48, 1 | 1ull << 32 | 1ull << 48, 0, 0})
      .call(kCuLaunchKernel, 8200, 8300, 0, {kGemmFunction, 8}, 0, 2, blas | lt)
      .call(kCublasLtMatmul, 8100, 8600, 0, {0xb000}, 0, 1, blas)
      // transa CUBLAS_OP_T, transb CUBLAS_OP_N, CUDA_R_16F, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT (-1)
      .call(kCublasGemmEx, 8000, 9000, 0, {0xa000, 1, 0, 2, 68, ~0ull})
      .call(kCuLaunchKernel, 10200, 10250, 0, {kGemmFunction, 2}, 0, 2, dnn | blas)
      .call(kCublasGemmEx, 10100, 10500, 0, {0xa000, 0, 0, 0, 68, 0xffffffffull}, 0, 1, dnn)
      .call(kCuLaunchKernel, 10600, 10700, 0, {0x7f00000b0000, 1}, 0, 1, dnn)
      // CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, then a value of an enum no header names
      .call(kCudnnConvolutionForward, 10000, 11000, 0, {0xc000, 1, 7})
      // CU_LIMIT_MALLOC_HEAP_SIZE; CUDA_ERROR_INVALID_VALUE
      .call(kCuCtxSetLimit, 12000, 12100, 1, {2, 1 << 20});
  r.add_to(w, 0);
  EXPECT_TRUE(w.finish({{"dropped", "0"}, {"malformed", "0"}, {"lost_no_slot", "0"}}, {{0, 0, r.count(), 0, 0}}));
  return path;
}

// Two push/pop ranges and a call that begin on the same nanosecond, as a push followed at once by a
// call gives on a fast clock: "outer" [1000, 1300], "inner" [1000, 1200], cudaMalloc [1000, 1100].
// The trace holds them in the order they ended: the call, then inner, then outer.
std::string write_same_nanosecond_trace() {
  const std::string path = temp_path("same_ns.cutrace");
  trace::TraceWriter w;
  w.set_creation_monotonic_ns(0);
  EXPECT_TRUE(w.open(path)) << w.error();
  EXPECT_TRUE(w.write_api_table(kTestApis, kTestApiCount));
  w.add_thread_def(thread_def(0, 100, 100));
  Records r;
  r.nvtx(abi::NvtxEvent::kPush, 1000, "outer")
      .nvtx(abi::NvtxEvent::kPush, 1000, "inner")
      .call(kCudaMalloc, 1000, 1100, 0, {4096, 0x7f0000000000})
      .nvtx(abi::NvtxEvent::kPop, 1200)
      .nvtx(abi::NvtxEvent::kPop, 1300);
  r.add_to(w, 0);
  EXPECT_TRUE(w.finish({{"dropped", "0"}, {"malformed", "0"}, {"lost_no_slot", "0"}}, {{0, 0, r.count(), 0, 0}}));
  return path;
}

// A timeline nests slices that begin together by the order it is given them. Ranges are handed over
// outermost first; in Perfetto's protobuf they are on an "NVTX" track of their thread, apart from its
// calls, so a call that begins with a range is never taken for its parent.
TEST(PerfettoExport, RangesAndACallThatBeginTogetherNestAsTheyRan) {
  const std::string trace = write_same_nanosecond_trace();
  const std::string json = temp_path("same_ns.json"), proto = temp_path("same_ns.pftrace");
  Result j = cli({"export", "--type", "perfetto-json", "-o", json, trace});
  ASSERT_EQ(j.exit, 0) << j.err;
  Result p = cli({"export", "--type", "perfetto", "-o", proto, trace});
  ASSERT_EQ(p.exit, 0) << p.err;
  const std::string check =
      "import json, sys\n"
      "from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb\n"
      "x = [(e['name'], e['ts'], e['dur']) for e in json.load(open(sys.argv[1]))['traceEvents'] if e['ph'] == 'X']\n"
      "assert x == [('cudaMalloc', 1.0, 0.1), ('outer', 1.0, 0.3), ('inner', 1.0, 0.2)], x\n"
      "trace = pb.Trace.FromString(open(sys.argv[2], 'rb').read())\n"
      "tracks = {p.track_descriptor.uuid: p.track_descriptor for p in trace.packet if p.HasField('track_descriptor')}\n"
      "(thread,) = [u for u, d in tracks.items() if d.HasField('thread')]\n"
      "(nvtx,) = [u for u, d in tracks.items() if d.name == 'NVTX']\n"
      "assert tracks[nvtx].parent_uuid == thread, tracks\n"
      "names = {}\n"
      "begins = []\n"
      "for p in trace.packet:\n"
      "  seq = p.trusted_packet_sequence_id\n"
      "  names.update({(seq, n.iid): n.name for n in p.interned_data.event_names})\n"
      "  e = p.track_event\n"
      "  if p.HasField('track_event') and e.type == pb.TrackEvent.TYPE_SLICE_BEGIN:\n"
      "    begins.append((e.name or names[seq, e.name_iid], e.track_uuid == nvtx))\n"
      "assert begins == [('cudaMalloc', False), ('outer', True), ('inner', True)], begins\n"
      "print('ok')";
  Result py = run({PYTHON3, "-c", check, json, proto});
  EXPECT_EQ(py.exit, 0) << py.out << py.err;
}

// The `Name,Num Calls,Total Time (ns)` of each row of a csv summary, in the report's order.
std::string sum_rows(const std::string& csv) {
  std::istringstream in(csv);
  std::string line, out;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream fields(line);
    for (std::string x; std::getline(fields, x, ',');) f.push_back(x);
    if (f.size() == 9) out += f[8] + " " + f[2] + " " + f[1] + "\n";
  }
  return out;
}

// GPU activity as the shim writes it from CUPTI's buffers, on its GPU thread (101) beside the calling
// thread (100): two axpy kernels on stream 7 and a reduce on stream 13, a copy each way and a memset,
// with the links of the calls that issued them.
//   thread 100: cudaMalloc [1000,2000], __cudaLaunchKernel [5000,6000] x2 at 5000 and 8000, cudaMemcpy [7000,9000]
//   GPU:        axpy [5500,8500] (11), memcpy HtoD 2 MB [7100,8100] (14, runtime 15), axpy [8500,10500] (12),
//               reduce [9000,9500] (13), memcpy DtoH 1 MB [11000,11500] (16), memset 4 KiB [12000,12010] (17)
abi::GpuActivityHeader gpu_header(abi::GpuActivity kind, uint32_t bytes, uint64_t start, uint64_t end,
                                  uint32_t correlation, uint32_t stream) {
  abi::GpuActivityHeader h{};
  h.header = {uint16_t(abi::RecordKind::kGpuActivity), uint16_t(bytes), uint32_t(kind)};
  h.start = start, h.end = end, h.correlation = correlation, h.device = 0, h.context = 1, h.stream = stream;
  return h;
}

std::string write_gpu_trace() {
  const std::string path = temp_path("gpu.cutrace");
  trace::TraceWriter w;
  w.set_creation_monotonic_ns(0);
  EXPECT_TRUE(w.open(path)) << w.error();
  EXPECT_TRUE(w.write_metadata({{"gpu_activity", "cupti"}}));
  EXPECT_TRUE(w.write_api_table(kTestApis, kTestApiCount));
  w.add_thread_def(thread_def(0, 100, 100));
  w.add_thread_def(thread_def(1, 100, 101));
  Records calls;
  calls.string(abi::StringKind::kThreadName, 0, "main")
      .call(kCudaMalloc, 1000, 2000, 0, {4096, 0x7f0000000000})
      .call(kLaunchKernel13, 5000, 6000, 0, {kStubAxpy, 4 | 1ull << 32 | 1ull << 48, 256 | 1ull << 32 | 1ull << 48, 1024, 7})
      .call(kCudaMemcpy, 7000, 9000, 0, {0x7f0000000000, 0x1000, 2000000, 1})
      .call(kLaunchKernel13, 8000, 8100, 0, {kStubAxpy, 4 | 1ull << 32 | 1ull << 48, 256 | 1ull << 32 | 1ull << 48, 1024, 7});
  calls.add_to(w, 0);
  auto kernel = [](uint64_t start, uint64_t end, uint32_t corr, uint32_t stream, uint64_t name) {
    abi::GpuKernelRecord k{};
    k.h = gpu_header(abi::GpuActivity::kKernel, sizeof k, start, end, corr, stream);
    k.name = name;
    k.grid[0] = 4, k.grid[1] = 1, k.grid[2] = 1;
    k.block[0] = 256, k.block[1] = 1, k.block[2] = 1;
    k.registers_per_thread = 32;
    k.dynamic_shared_bytes = 1024;
    return k;
  };
  auto copy = [](uint64_t start, uint64_t end, uint32_t corr, uint64_t bytes, uint8_t kind, uint8_t src, uint8_t dst) {
    abi::GpuMemcpyRecord m{};
    m.h = gpu_header(abi::GpuActivity::kMemcpy, sizeof m, start, end, corr, 7);
    m.bytes = bytes, m.copy_kind = kind, m.src_kind = src, m.dst_kind = dst;
    return m;
  };
  abi::GpuMemsetRecord set{};
  set.h = gpu_header(abi::GpuActivity::kMemset, sizeof set, 12000, 12010, 17, 7);
  set.bytes = 4096, set.memory_kind = 3;
  abi::GpuApiLinkRecord link{};
  link.header = {uint16_t(abi::RecordKind::kGpuActivity), uint16_t(sizeof link), uint32_t(abi::GpuActivity::kApiLink)};
  link.start = 5100, link.end = 5900, link.correlation = 11, link.tid = 100, link.api_id = kLaunchKernel13;
  abi::GpuDroppedRecord dropped{};
  dropped.header = {uint16_t(abi::RecordKind::kGpuActivity), uint16_t(sizeof dropped), uint32_t(abi::GpuActivity::kDropped)};
  dropped.time = 13000, dropped.dropped = 3;
  Records gpu;
  gpu.string(abi::StringKind::kThreadName, 0, "cutrace-gpu")
      .string(abi::StringKind::kGpuKernelName, 1, kMangledAxpy)
      .string(abi::StringKind::kGpuKernelName, 2, kMangledReduce)
      .record(link)
      .record(kernel(5500, 8500, 11, 7, 1))
      .record(copy(7100, 8100, 14, 2000000, 1, 1, 3))
      .record(kernel(8500, 10500, 12, 7, 1))
      .record(kernel(9000, 9500, 13, 13, 2))
      .record(copy(11000, 11500, 16, 1000000, 2, 3, 2))
      .record(set)
      .record(dropped);
  gpu.add_to(w, 1);
  EXPECT_TRUE(w.finish({{"dropped", "0"}, {"malformed", "0"}, {"lost_no_slot", "0"}},
                       {{0, 0, calls.count(), 0, 0}, {1, 0, gpu.count(), 0, 0}}));
  return path;
}

TEST(GpuActivity, KernelAndMemoryReportsHaveNsysColumnsAndExactValues) {
  const std::string trace = write_gpu_trace();
  Result r = cli({"stats", "-f", "csv", "-r", "cuda_gpu_kern_sum,cuda_gpu_mem_time_sum,cuda_gpu_mem_size_sum", trace});
  ASSERT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.out,
            "Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name\n"
            "90.9,5000,2,2500.0,2500.0,2000,3000,707.1,\"void ns::axpy<float>(float, float*, float*, int)\"\n"
            "9.1,500,1,500.0,500.0,500,500,0.0,\"reduce(float const*, float*, int)\"\n"
            "\n"
            "Time (%),Total Time (ns),Count,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Operation\n"
            "66.2,1000,1,1000.0,1000.0,1000,1000,0.0,[CUDA memcpy Host-to-Device]\n"
            "33.1,500,1,500.0,500.0,500,500,0.0,[CUDA memcpy Device-to-Host]\n"
            "0.7,10,1,10.0,10.0,10,10,0.0,[CUDA memset]\n"
            "\n"
            "Total (MB),Count,Avg (MB),Med (MB),Min (MB),Max (MB),StdDev (MB),Operation\n"
            "2.000,1,2.000,2.000,2.000,2.000,0.000,[CUDA memcpy Host-to-Device]\n"
            "1.000,1,1.000,1.000,1.000,1.000,0.000,[CUDA memcpy Device-to-Host]\n"
            "0.004,1,0.004,0.004,0.004,0.004,0.000,[CUDA memset]\n");
}

TEST(GpuActivity, KernelsAreNamedByTheirBaseOrMangledNamesWhenAsked) {
  const std::string trace = write_gpu_trace();
  Result r = cli({"stats", "-f", "csv", "-r", "cuda_gpu_kern_sum:base,cuda_gpu_kern_sum:mangled", trace});
  ASSERT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.out,
            "Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name\n"
            "90.9,5000,2,2500.0,2500.0,2000,3000,707.1,axpy\n"
            "9.1,500,1,500.0,500.0,500,500,0.0,reduce\n"
            "\n"
            "Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name\n"
            "90.9,5000,2,2500.0,2500.0,2000,3000,707.1,_ZN2ns4axpyIfEEvT_PS1_S2_i\n"
            "9.1,500,1,500.0,500.0,500,500,0.0,_Z6reducePKfPfi\n");
  r = cli({"stats", "-r", "cuda_gpu_kern_sum:short", trace});
  EXPECT_EQ(r.exit, 2);
  EXPECT_EQ(r.err, "cutrace stats: report 'cuda_gpu_kern_sum' takes base or mangled after the colon, not 'short'.\n");
  r = cli({"stats", "-r", "cuda_api_sum:base", trace});
  EXPECT_EQ(r.exit, 2);
  EXPECT_EQ(r.err, "cutrace stats: report 'cuda_api_sum' takes no argument, not 'base'.\n");
}

TEST(GpuActivity, GpuTraceListsEveryOperationByStartTime) {
  const std::string trace = write_gpu_trace();
  Result r = cli({"stats", "-f", "csv", "-r", "cuda_gpu_trace", trace});
  ASSERT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.out,
            "Start (ns),Duration (ns),CorrId,GrdX,GrdY,GrdZ,BlkX,BlkY,BlkZ,Reg/Trd,StcSMem (MB),DymSMem (MB),Bytes (MB),"
            "Throughput (MB/s),SrcMemKd,DstMemKd,Device,Ctx,GreenCtx,Strm,Name\n"
            "5500,3000,11,4,1,1,256,1,1,32,0.000,0.001,,,,,0,1,,7,\"void ns::axpy<float>(float, float*, float*, int)\"\n"
            "7100,1000,14,,,,,,,,,,2.000,2000000.000,Pageable,Device,0,1,,7,[CUDA memcpy Host-to-Device]\n"
            "8500,2000,12,4,1,1,256,1,1,32,0.000,0.001,,,,,0,1,,7,\"void ns::axpy<float>(float, float*, float*, int)\"\n"
            "9000,500,13,4,1,1,256,1,1,32,0.000,0.001,,,,,0,1,,13,\"reduce(float const*, float*, int)\"\n"
            "11000,500,16,,,,,,,,,,1.000,2000000.000,Device,Pinned,0,1,,7,[CUDA memcpy Device-to-Host]\n"
            "12000,10,17,,,,,,,,,,0.004,409600.000,Device,,0,1,,7,[CUDA memset]\n");
}

// CorrID: CUPTI's id where the trace links the call (the first launch), 0 for every other call of a
// trace with GPU activity (no link came: the reader's numbering must not pose as CUPTI's).
TEST(GpuActivity, ApiTraceShowsCuptisCorrelationIdOfTheLinkedCalls) {
  const std::string trace = write_gpu_trace();
  Result r = cli({"stats", "-f", "csv", "-r", "cuda_api_trace", trace});
  ASSERT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.out,
            "Start (ns),Duration (ns),Name,Result,CorrID,Pid,Tid,T-Pri,Thread Name\n"
            "1000,1000,cudaMalloc,0,0,100,100,,main\n"
            "5000,1000,cudaLaunchKernel,0,11,100,100,,main\n"
            "7000,2000,cudaMemcpy,0,0,100,100,,main\n"
            "8000,100,cudaLaunchKernel,0,0,100,100,,main\n");
}

// The first axpy's call is linked (correlation 11, CUPTI's call [5100,5900]); the others are not.
TEST(GpuActivity, KernExecTraceJoinsEachKernelWithItsCall) {
  const std::string trace = write_gpu_trace();
  Result r = cli({"stats", "-f", "csv", "-r", "cuda_kern_exec_trace:base", trace});
  ASSERT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.out,
            "API Start (ns),API Dur (ns),Queue Start (ns),Queue Dur (ns),Kernel Start (ns),Kernel Dur (ns),"
            "Total Dur (ns),PID,TID,DevId,API Function,GridXYZ,BlockXYZ,Kernel Name\n"
            "5100,800,5900,-,5500,3000,3400,100,100,0,cudaLaunchKernel,4 1 1,256 1 1,axpy\n"
            ",,,,8500,2000,,100,,0,,4 1 1,256 1 1,axpy\n"
            ",,,,9000,500,,100,,0,,4 1 1,256 1 1,reduce\n");
}

TEST(GpuActivity, ApiGpuSumPutsCallsKernelsAndMemoryOperationsInOneTable) {
  const std::string trace = write_gpu_trace();
  Result r = cli({"stats", "-f", "csv", "-r", "cuda_api_gpu_sum", trace});
  ASSERT_EQ(r.exit, 0) << r.err;
  // Calls 1000 + 1000 + 2000 + 100, kernels 5500, memory 1510: 11110 ns in all.
  EXPECT_EQ(r.out,
            "Time (%),Total Time (ns),Count,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Category,Operation\n"
            "45.0,5000,2,2500.0,2500.0,2000,3000,707.1,CUDA_KERNEL,\"void ns::axpy<float>(float, float*, float*, int)\"\n"
            "18.0,2000,1,2000.0,2000.0,2000,2000,0.0,CUDA_API,cudaMemcpy\n"
            "9.9,1100,2,550.0,550.0,100,1000,636.4,CUDA_API,cudaLaunchKernel\n"
            "9.0,1000,1,1000.0,1000.0,1000,1000,0.0,CUDA_API,cudaMalloc\n"
            "9.0,1000,1,1000.0,1000.0,1000,1000,0.0,MEMORY_OPER,[CUDA memcpy Host-to-Device]\n"
            "4.5,500,1,500.0,500.0,500,500,0.0,CUDA_KERNEL,\"reduce(float const*, float*, int)\"\n"
            "4.5,500,1,500.0,500.0,500,500,0.0,MEMORY_OPER,[CUDA memcpy Device-to-Host]\n"
            "0.1,10,1,10.0,10.0,10,10,0.0,MEMORY_OPER,[CUDA memset]\n");
}

TEST(GpuActivity, PerfettoPutsGpuWorkOnStreamTracksWithFlowsFromItsCall) {
  const std::string trace = write_gpu_trace();
  const std::string out = temp_path("gpu.json");
  Result r = cli({"export", "--type", "perfetto-json", "-o", out, "--force-overwrite", "true", trace});
  ASSERT_EQ(r.exit, 0) << r.err;
  const std::string check = R"(
import json, sys
d = json.load(open(sys.argv[1]))
ev = d['traceEvents']
gpu = [e for e in ev if e.get('cat') == 'cuda_gpu']
assert len(gpu) == 6, len(gpu)
tracks = {e['tid']: e['args']['name'] for e in ev if e['ph'] == 'M' and e['name'] == 'thread_name' and e['tid'] >= 0x40000000}
assert sorted(tracks.values()) == ['CUDA HW (device 0, stream 13)', 'CUDA HW (device 0, stream 7)'], tracks
k = [e for e in gpu if e['args']['correlation'] == 11][0]
assert k['name'] == 'void ns::axpy<float>(float, float*, float*, int)' and k['ts'] == 5.5 and k['dur'] == 3.0, k
assert k['args']['grid'] == [4, 1, 1] and k['args']['mangled'] == '_ZN2ns4axpyIfEEvT_PS1_S2_i', k
assert tracks[k['tid']] == 'CUDA HW (device 0, stream 7)'
s = [e for e in ev if e['ph'] == 's']
f = [e for e in ev if e['ph'] == 'f' and e['id'] == s[0]['id']]
assert len(s) == 1 and s[0]['tid'] == 100 and s[0]['ts'] == 5.1, s
assert len(f) == 1 and f[0]['tid'] == k['tid'] and f[0]['ts'] == 5.5 and f[0]['bp'] == 'e', f
print('ok')
)";
  Result py = run({PYTHON3, "-c", check, out});
  EXPECT_EQ(py.exit, 0) << py.out << py.err;
  EXPECT_TRUE(contains(r.err, "6 GPU operations")) << r.err;
}

TEST(NestedCalls, CudaApiSumCountsWhatNsysCounts) {
  const std::string trace = write_nesting_trace();
  Result r = cli({"stats", "-r", "cuda_api_sum", "-f", "csv", trace});
  ASSERT_EQ(r.exit, 0) << r.err;
  // cudaMalloc once, not also its cuMemAlloc_v2; the program's own cuMemAlloc_v2 under its name; both
  // launch entry points as one cudaLaunchKernel, without the cuLaunchKernel the runtime made; the
  // cuLaunchKernel calls cuBLAS and cuDNN made are the program's driver work; the internal
  // __cudaPushCallConfiguration is left out.
  EXPECT_EQ(sum_rows(r.out),
            "cudaLaunchKernel 2 1400\n"
            "cudaMalloc 1 1000\n"
            "cuMemAlloc_v2 1 500\n"
            "cuLaunchKernel 3 250\n"
            "cuCtxSetLimit 1 100\n")
      << r.out;
  Result internal = cli({"stats", "-r", "cuda_api_sum", "-f", "csv", "--show-internal", "true", trace});
  ASSERT_EQ(internal.exit, 0) << internal.err;
  EXPECT_EQ(sum_rows(internal.out), sum_rows(r.out) + "__cudaPushCallConfiguration 1 10\n") << internal.out;
  EXPECT_EQ(cli({"stats", "-r", "cuda_api_sum", "-f", "csv", "--show-internal=false", trace}).out, r.out);
  Result bad = cli({"stats", "-r", "cuda_api_sum", "--show-internal=maybe", trace});
  EXPECT_EQ(bad.exit, 2);
  EXPECT_EQ(bad.err, "cutrace stats: --show-internal takes true or false.\n");

  Result api_trace = cli({"stats", "-r", "cuda_api_trace", "-f", "csv", trace});
  ASSERT_EQ(api_trace.exit, 0) << api_trace.err;
  EXPECT_EQ(api_trace.out,
            // CorrID numbers every call of the file in order, the nested ones not shown here too.
            "Start (ns),Duration (ns),Name,Result,CorrID,Pid,Tid,T-Pri,Thread Name\n"
            "1000,1000,cudaMalloc,0,2,100,100,,main\n"
            "3000,500,cuMemAlloc_v2,0,3,100,100,,main\n"
            "5000,1000,cudaLaunchKernel,0,6,100,100,,main\n"
            "7000,400,cudaLaunchKernel,0,7,100,100,,main\n"
            "8200,100,cuLaunchKernel,0,8,100,100,,main\n"
            "10200,50,cuLaunchKernel,0,11,100,100,,main\n"
            "10600,100,cuLaunchKernel,0,13,100,100,,main\n"
            "12000,100,cuCtxSetLimit,1,15,100,100,,main\n");
}

TEST(NestedCalls, LibrarySumsCountTheOutermostCallOfTheirLibrary) {
  const std::string trace = write_nesting_trace();
  // cuBLAS with cuBLASLt: the cublasLtMatmul inside cublasGemmEx is cuBLAS's own; the cublasGemmEx
  // inside cuDNN's convolution is a call into cuBLAS.
  Result blas = cli({"stats", "-r", "cublas_api_sum", "-f", "csv", trace});
  ASSERT_EQ(blas.exit, 0) << blas.err;
  EXPECT_EQ(sum_rows(blas.out), "cublasGemmEx 2 1400\n") << blas.out;
  Result dnn = cli({"stats", "-r", "cudnn_api_sum", "-f", "csv", trace});
  ASSERT_EQ(dnn.exit, 0) << dnn.err;
  EXPECT_EQ(sum_rows(dnn.out), "cudnnConvolutionForward 1 1000\n") << dnn.out;
  Result col = cli({"stats", "-r", "cublas_api_sum,cudnn_api_sum", trace});
  EXPECT_TRUE(contains(col.out, " ** cuBLAS API Summary (cublas_api_sum):")) << col.out;
  EXPECT_TRUE(contains(col.out, " ** cuDNN API Summary (cudnn_api_sum):")) << col.out;
  // The small trace has one cuBLAS call and no cuDNN call: SKIPPED, as nsys says it, and exit 4 when
  // no report had anything to show.
  const std::string small = temp_path("small.cutrace");
  write_small_trace(small);
  EXPECT_EQ(sum_rows(cli({"stats", "-r", "cublas_api_sum", "-f", "csv", small}).out), "cublasSgemm_v2 1 10000\n");
  Result none = cli({"stats", "-r", "cudnn_api_sum", "-f", "csv", small});
  EXPECT_EQ(none.exit, 4);
  EXPECT_EQ(none.out, "");
  EXPECT_TRUE(contains(none.err, "SKIPPED: " + small + " does not contain cuDNN trace data.\n")) << none.err;
  Result some = cli({"stats", "-r", "cudnn_api_sum,cublas_api_sum", "-f", "csv", small});
  EXPECT_EQ(some.exit, 0);
  EXPECT_EQ(sum_rows(some.out), "cublasSgemm_v2 1 10000\n");
}

TEST(NestedCalls, ApiTraceShowsDepthSelfTimeAndDecodedArguments) {
  const std::string trace = write_nesting_trace();
  Result r = cli({"stats", "-r", "api_trace", "-f", "csv", trace});
  ASSERT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.out,
            "Start (ns),Duration (ns),Self (ns),Depth,Domain,Name,Result,Args,Pid,Tid,Thread Name\n"
            "1000,1000,700,0,cuda_runtime,cudaMalloc,cudaSuccess (0),\"size=4096, devPtr=0x7f0000000000\",100,100,main\n"
            "1100,300,300,1,cuda_driver,cuMemAlloc_v2,CUDA_SUCCESS (0),bytesize=4096,100,100,main\n"
            "3000,500,500,0,cuda_driver,cuMemAlloc_v2,CUDA_SUCCESS (0),bytesize=512,100,100,main\n"
            "5000,1000,800,0,cuda_runtime,cudaLaunchKernel,cudaSuccess (0),"
            "\"kernel=gemm(float const*, float*), gridDim=(4,1,1), blockDim=(1,1,1), sharedMem=0, stream=0x0\",100,100,main\n"
            "5100,200,200,1,cuda_driver,cuLaunchKernel,CUDA_SUCCESS (0),\"f=gemm(float const*, float*), gridDimX=4\",100,"
            "100,main\n"
            "7000,400,400,0,cuda_runtime,cudaLaunchKernel,cudaSuccess (0),"
            "\"kernel=gemm(float const*, float*), gridDim=(1,1,1), blockDim=(1,1,1), sharedMem=0, stream=0x0\",100,100,main\n"
            "8000,1000,500,0,cublas,cublasGemmEx,CUBLAS_STATUS_SUCCESS (0),\"handle=0xa000, transa=CUBLAS_OP_T, "
            "transb=CUBLAS_OP_N, Atype=CUDA_R_16F, computeType=CUBLAS_COMPUTE_32F, algo=CUBLAS_GEMM_DFALT\",100,100,main\n"
            "8100,500,400,1,cublaslt,cublasLtMatmul,CUBLAS_STATUS_SUCCESS (0),lightHandle=0xb000,100,100,main\n"
            "8200,100,100,2,cuda_driver,cuLaunchKernel,CUDA_SUCCESS (0),\"f=gemm(float const*, float*), gridDimX=8\",100,"
            "100,main\n"
            "10000,1000,500,0,cudnn,cudnnConvolutionForward,CUDNN_STATUS_SUCCESS (0),\"handle=0xc000, "
            "algo=CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, mode=7\",100,100,main\n"
            "10100,400,350,1,cublas,cublasGemmEx,CUBLAS_STATUS_SUCCESS (0),\"handle=0xa000, transa=CUBLAS_OP_N, "
            "transb=CUBLAS_OP_N, Atype=CUDA_R_32F, computeType=CUBLAS_COMPUTE_32F, algo=CUBLAS_GEMM_DFALT\",100,100,main\n"
            "10200,50,50,2,cuda_driver,cuLaunchKernel,CUDA_SUCCESS (0),\"f=gemm(float const*, float*), gridDimX=2\",100,"
            "100,main\n"
            "10600,100,100,1,cuda_driver,cuLaunchKernel,CUDA_SUCCESS (0),\"f=0x7f00000b0000, gridDimX=1\",100,100,main\n"
            "12000,100,100,0,cuda_driver,cuCtxSetLimit,CUDA_ERROR_INVALID_VALUE (1),"
            "\"limit=CU_LIMIT_MALLOC_HEAP_SIZE, value=1048576\",100,100,main\n");
  // Internal calls appear with the option.
  Result all = cli({"stats", "-r", "api_trace", "-f", "csv", "--show-internal", trace});
  ASSERT_EQ(all.exit, 0) << all.err;
  EXPECT_TRUE(contains(all.out, "\n4000,10,10,0,cuda_runtime,__cudaPushCallConfiguration,0,")) << all.out;
  EXPECT_EQ(count_lines(all.out), count_lines(r.out) + 1);
}

TEST(NestedCalls, PerfettoExportNestsSlicesAndDecodesArguments) {
  const std::string trace = write_nesting_trace();
  const std::string out = temp_path("nesting.json");
  Result r = cli({"export", "--type", "perfetto-json", "-o", out, trace});
  ASSERT_EQ(r.exit, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "(14 calls, 1 process, 1 thread)")) << r.err;
  // In file order every slice lies inside the slice open before it or starts after it ends, so a
  // viewer stacks them as they were called; names are display names, enums and functions decoded.
  const std::string check =
      "import json,sys; d=json.load(open(sys.argv[1])); x=[e for e in d['traceEvents'] if e['ph']=='X']\n"
      "stack=[]\n"
      "for e in x:\n"
      "  while stack and e['ts']>=stack[-1]['ts']+stack[-1]['dur']: stack.pop()\n"
      "  assert e['args'].get('depth',0)==len(stack), (e, stack)\n"
      "  stack.append(e)\n"
      "names=[e['name'] for e in x]\n"
      "assert names==['cudaMalloc','cuMemAlloc_v2','cuMemAlloc_v2','cudaLaunchKernel','cuLaunchKernel',"
      "'cudaLaunchKernel','cublasGemmEx','cublasLtMatmul','cuLaunchKernel','cudnnConvolutionForward','cublasGemmEx',"
      "'cuLaunchKernel','cuLaunchKernel','cuCtxSetLimit'], names\n"
      "g=x[6]['args']; assert g['transa']=='CUBLAS_OP_T' and g['Atype']=='CUDA_R_16F' and g['result_name']=="
      "'CUBLAS_STATUS_SUCCESS' and 'result' not in g, g\n"
      "assert x[4]['args']['f']=='gemm(float const*, float*)', x[4]\n"
      "assert x[5]['args']['entry_point']=='__cudaLaunchKernel_ptsz', x[5]\n"
      "assert x[9]['args']['mode']==7 and x[13]['args']['result_name']=='CUDA_ERROR_INVALID_VALUE', x[9]\n"
      // A success carries only its result's name (the number is implied), a failure both.
      "assert x[13]['args']['result']==1 and all(('result' in e['args'])==(e is x[13]) for e in x), x\n"
      "print('ok')";
  Result py = run({PYTHON3, "-c", check, out});
  EXPECT_EQ(py.exit, 0) << py.out << py.err;
  Result all = cli({"export", "--type", "perfetto-json", "-f", "--show-internal", "true", "-o", out, trace});
  EXPECT_TRUE(contains(all.err, "(15 calls, 1 process, 1 thread)")) << all.err;
}

TEST(Decode, EnumsByTheirHeaderNamesAndNumbersOtherwise) {
  EXPECT_EQ(reader::enum_name("cublasOperation_t", 1), "CUBLAS_OP_T");
  EXPECT_EQ(reader::enum_name("cudaDataType", 2), "CUDA_R_16F");
  EXPECT_EQ(reader::enum_name("cudaDataType_t", 2), "CUDA_R_16F");
  EXPECT_EQ(reader::enum_name("CUresult", 0), "CUDA_SUCCESS");
  EXPECT_EQ(reader::enum_name("cudaError_t", 35), "cudaErrorInsufficientDriver");
  EXPECT_EQ(reader::enum_name("cudnnDataType_t", 0), "CUDNN_DATA_FLOAT");
  EXPECT_EQ(reader::enum_name("cudnnStatus_t", 0), "CUDNN_STATUS_SUCCESS");
  EXPECT_EQ(reader::enum_name("cublasStatus_t", 0), "CUBLAS_STATUS_SUCCESS");
  EXPECT_EQ(reader::enum_name("cudnnTensorFormat_t", 0), "CUDNN_TENSOR_NCHW");
  EXPECT_EQ(reader::enum_name("cudnnConvolutionMode_t", 1), "CUDNN_CROSS_CORRELATION");
  EXPECT_EQ(reader::enum_name("cudnnActivationMode_t", 1), "CUDNN_ACTIVATION_RELU");
  EXPECT_EQ(reader::enum_name("CUlimit", 0), "CU_LIMIT_STACK_SIZE");
  // -1 whether it was recorded sign-extended or through 32 bits.
  EXPECT_EQ(reader::enum_name("cublasGemmAlgo_t", ~0ull), reader::enum_name("cublasGemmAlgo_t", 0xffffffffull));
  EXPECT_FALSE(reader::enum_name("cublasGemmAlgo_t", ~0ull).empty());
  EXPECT_EQ(reader::enum_name("cublasOperation_t", 12345), "");
  EXPECT_EQ(reader::enum_name("no_such_enum_t", 0), "");
  reader::ApiSpec cudnn;
  cudnn.domain = abi::ApiDomain::kCudnn;
  EXPECT_EQ(reader::result_text(cudnn, 0), "CUDNN_STATUS_SUCCESS (0)");
  EXPECT_EQ(reader::result_text(cudnn, 987654), "987654");
}

// The recorder's warnings (warning.N in the end summary) were said when the recording ended: info lists
// them, and stats and export say in one line that there are some.
TEST(TraceWarnings, InfoListsThemAndStatsAndExportPointToIt) {
  const std::string path = temp_path("warned.cutrace");
  trace::TraceWriter w;
  ASSERT_TRUE(w.open(path));
  ASSERT_TRUE(w.write_api_table(kTestApis, kTestApiCount));
  w.add_thread_def(thread_def(0, 7, 7));
  Records r;
  r.call(kCudaFree, 100, 200, 0, {0});
  r.add_to(w, 0);
  const std::string first = "process 7 (./gemm): the GPU ran 2 kernels of it, but no call that launches kernels was "
                            "recorded: they came through a route cutrace does not see";
  const std::string second = "3 CPU samples were lost: the kernel's sampling buffers filled before the recorder read them";
  ASSERT_TRUE(w.finish({{"dropped", "0"}, {"warning.0", first}, {"warning.1", second}}, {{0, 0, 1, 0, 0}}));
  Result stats = cli({"stats", "-r", "cuda_api_sum,cublas_api_sum", path});
  EXPECT_EQ(stats.exit, 0);
  EXPECT_EQ(stats.err, "cutrace stats: note: the recording of " + path + " gave 2 warnings; cutrace info shows "
                       "them.\nSKIPPED: " + path + " does not contain cuBLAS trace data.\n");
  Result exported = cli({"export", "--type", "perfetto-json", "-o", temp_path("warned.json"), path});
  EXPECT_EQ(exported.exit, 0);
  EXPECT_TRUE(contains(exported.err, "cutrace export: note: the recording of " + path + " gave 2 warnings; cutrace "
                                     "info shows them.\n")) << exported.err;
  EXPECT_EQ(count_lines(exported.err), 2u) << exported.err;  // the note and the "wrote" line
  Result info = cli({"info", path});
  EXPECT_EQ(info.exit, 0);
  EXPECT_TRUE(contains(info.out, "\nWarnings:\n  cutrace: warning: " + first + ".\n  cutrace: warning: " + second +
                                     ".\n"))
      << info.out;
  EXPECT_FALSE(contains(info.out, "warning.0")) << info.out;
  // A trace without warnings prints none.
  const std::string small = temp_path("small.cutrace");
  write_small_trace(small);
  EXPECT_EQ(cli({"stats", "-r", "cuda_api_sum", small}).err, "");
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
  ASSERT_EQ(cli({"export", "--type", "perfetto-json", "-o", out, path}).exit, 0);
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
