#include "launcher/options.h"

#include "cutrace/domains.h"

#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <vector>

namespace cutrace::launcher {
namespace {

struct Parsed {
  bool ok;
  ProfileOptions options;
  UsageError error;
};

Parsed parse(std::vector<std::string> args) {
  args.insert(args.begin(), "profile");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  Parsed p;
  p.ok = parse_options(int(argv.size()), argv.data(), &p.options, &p.error);
  return p;
}

void expect_refused(std::vector<std::string> args, const std::string& message) {
  Parsed p = parse(args);
  EXPECT_FALSE(p.ok) << message;
  EXPECT_EQ(p.error.message, message);
  EXPECT_EQ(p.error.exit_code, kExitUsage) << message;
}

TEST(LauncherOptions, DefaultsFollowNsys) {
  Parsed p = parse({"./app"});
  ASSERT_TRUE(p.ok) << p.error.message;
  EXPECT_EQ(p.options.output_pattern, "");
  EXPECT_FALSE(p.options.force_overwrite);
  EXPECT_TRUE(p.options.show_output);
  EXPECT_FALSE(p.options.stats);
  // nsys's default is cuda,opengl,nvtx,osrt; cutrace records the first and the third of those.
  EXPECT_EQ(p.options.trace_domains, abi::kCudaDomains | abi::domain_bit(abi::ApiDomain::kNvtx));
  EXPECT_EQ(p.options.ring_bytes, abi::kDefaultRingBytes);
  EXPECT_EQ(p.options.ring_slots, abi::kDefaultSlotCount);
  EXPECT_EQ(p.options.command, std::vector<std::string>{"./app"});
  EXPECT_TRUE(p.options.given.empty());
}

TEST(LauncherOptions, OutputSpellings) {
  for (auto args : std::vector<std::vector<std::string>>{
           {"-o", "run1", "app"}, {"--output", "run1", "app"}, {"--output=run1", "app"}, {"-orun1", "app"}}) {
    Parsed p = parse(args);
    ASSERT_TRUE(p.ok) << args[0] << ": " << p.error.message;
    EXPECT_EQ(p.options.output_pattern, "run1") << args[0];
    EXPECT_EQ(p.options.command, std::vector<std::string>{"app"}) << args[0];
  }
}

TEST(LauncherOptions, OutputNeedsAValue) {
  expect_refused({"-o"}, "cutrace profile: option '-o' needs a file name.");
  expect_refused({"--output=", "app"}, "cutrace profile: option '--output' needs a file name.");
}

TEST(LauncherOptions, BooleanSpellings) {
  struct Case {
    std::vector<std::string> args;
    bool expected;
  };
  for (const Case& c : std::vector<Case>{{{"-f", "true", "app"}, true},
                                         {{"-f", "false", "app"}, false},
                                         {{"-f", "TRUE", "app"}, true},
                                         {{"--force-overwrite=true", "app"}, true},
                                         {{"--force-overwrite=false", "app"}, false},
                                         {{"--force-overwrite", "true", "app"}, true},
                                         {{"-ftrue", "app"}, true},
                                         // Alone, a boolean means true and the next word is the command.
                                         {{"-f", "app"}, true},
                                         {{"--force-overwrite", "app"}, true}}) {
    Parsed p = parse(c.args);
    ASSERT_TRUE(p.ok) << c.args[0] << ": " << p.error.message;
    EXPECT_EQ(p.options.force_overwrite, c.expected) << c.args[0] << " " << c.args[1];
    EXPECT_EQ(p.options.command, std::vector<std::string>{"app"}) << c.args[0] << " " << c.args[1];
  }
}

TEST(LauncherOptions, BooleanValueMustBeTrueOrFalse) {
  expect_refused({"--force-overwrite=yes", "app"},
                 "cutrace profile: option '--force-overwrite' takes true or false, not 'yes'.");
  expect_refused({"--stats=1", "app"}, "cutrace profile: option '--stats' takes true or false, not '1'.");
}

TEST(LauncherOptions, ShowOutputStatsAndStopOnExit) {
  Parsed p = parse({"-w", "false", "--stats", "true", "-x", "true", "app"});
  ASSERT_TRUE(p.ok) << p.error.message;
  EXPECT_FALSE(p.options.show_output);
  EXPECT_TRUE(p.options.stats);
  p = parse({"--show-output=false", "--stats=false", "--stop-on-exit=true", "app"});
  ASSERT_TRUE(p.ok) << p.error.message;
  EXPECT_FALSE(p.options.show_output);
  EXPECT_FALSE(p.options.stats);
}

TEST(LauncherOptions, StopOnExitFalseIsRefused) {
  expect_refused({"-x", "false", "app"},
                 "cutrace profile: -x false is not supported; cutrace always stops recording when the program exits.");
  expect_refused(
      {"--stop-on-exit=false", "app"},
      "cutrace profile: --stop-on-exit false is not supported; cutrace always stops recording when the program exits.");
}

TEST(LauncherOptions, TraceCudaAndNone) {
  for (auto args : std::vector<std::vector<std::string>>{
           {"-t", "cuda", "app"}, {"--trace=cuda", "app"}, {"--trace", "CUDA", "app"}}) {
    Parsed p = parse(args);
    ASSERT_TRUE(p.ok) << p.error.message;
    EXPECT_EQ(p.options.trace_domains, cutrace::abi::kCudaDomains);
  }
  Parsed p = parse({"-t", "none", "app"});
  ASSERT_TRUE(p.ok) << p.error.message;
  EXPECT_EQ(p.options.trace_domains, 0u);
}

TEST(LauncherOptions, TraceLibrariesAlsoTraceCuda) {
  using namespace cutrace::abi;
  Parsed p = parse({"-t", "cublas", "app"});
  ASSERT_TRUE(p.ok) << p.error.message;
  EXPECT_EQ(p.options.trace_domains, kCudaDomains | kCublasDomains);
  p = parse({"--trace=cuda,cudnn", "app"});
  ASSERT_TRUE(p.ok) << p.error.message;
  EXPECT_EQ(p.options.trace_domains, kCudaDomains | kCudnnDomains);
  p = parse({"-t", "cudnn,cublas", "app"});
  ASSERT_TRUE(p.ok) << p.error.message;
  EXPECT_EQ(p.options.trace_domains, kCudaDomains | kCublasDomains | kCudnnDomains);
  // nsys's -t cusolver and -t cusparse: each library alone, with CUDA.
  p = parse({"-t", "cusolver", "app"});
  ASSERT_TRUE(p.ok) << p.error.message;
  EXPECT_EQ(p.options.trace_domains, kCudaDomains | domain_bit(ApiDomain::kCusolver));
  p = parse({"-t", "cusparse,nvtx", "app"});
  ASSERT_TRUE(p.ok) << p.error.message;
  EXPECT_EQ(p.options.trace_domains,
            kCudaDomains | domain_bit(ApiDomain::kCusparse) | domain_bit(ApiDomain::kNvtx));
  EXPECT_EQ(parse({"app"}).options.trace_domains, kCudaDomains | domain_bit(ApiDomain::kNvtx));
  p = parse({"-t", "nvtx", "app"});
  ASSERT_TRUE(p.ok) << p.error.message;
  EXPECT_EQ(p.options.trace_domains, domain_bit(ApiDomain::kNvtx));
}

// -t osrt and --osrt-threshold as nsys takes them: a whole number of nanoseconds, default 1000.
TEST(LauncherOptions, OsrtAndItsThreshold) {
  ProfileOptions o;
  UsageError e;
  std::vector<const char*> argv = {"profile", "-t", "cuda,osrt", "--osrt-threshold", "250", "app"};
  ASSERT_TRUE(parse_options(int(argv.size()), argv.data(), &o, &e)) << e.message;
  EXPECT_EQ(o.trace_domains, abi::kCudaDomains | abi::domain_bit(abi::ApiDomain::kOsRuntime));
  EXPECT_EQ(o.osrt_threshold_ns, 250u);
  ProfileOptions d;
  argv = {"profile", "--osrt-threshold=0", "app"};
  ASSERT_TRUE(parse_options(int(argv.size()), argv.data(), &d, &e)) << e.message;
  EXPECT_EQ(d.osrt_threshold_ns, 0u);
  EXPECT_EQ(ProfileOptions{}.osrt_threshold_ns, 1000u);
  expect_refused({"--osrt-threshold", "1us", "app"},
                 "cutrace profile: option '--osrt-threshold' takes a whole number of nanoseconds, not '1us'.");
  expect_refused({"--osrt-threshold=-5", "app"},
                 "cutrace profile: option '--osrt-threshold' takes a whole number of nanoseconds, not '-5'.");
}

// --cudabacktrace with nsys's values: classes with their own thresholds, all, the legacy true with
// --cudabacktrace-threshold (in either order), none; the OS runtime's threshold and depth with -t osrt.
TEST(LauncherOptions, BacktraceThresholdsByClass) {
  using cutrace::abi::ApiClass;
  constexpr uint64_t kOff = abi::kBacktraceOff;
  auto thresholds = [](const ProfileOptions& o) {
    return std::vector<uint64_t>(std::begin(o.backtrace_threshold_ns), std::end(o.backtrace_threshold_ns));
  };
  // By index: other, sync, memory, kernel, OS runtime.
  Parsed p = parse({"--cudabacktrace", "kernel:500,sync:10000", "app"});
  ASSERT_TRUE(p.ok) << p.error.message;
  EXPECT_EQ(thresholds(p.options), (std::vector<uint64_t>{kOff, 10000, kOff, 500, kOff}));
  p = parse({"--cudabacktrace=memory", "app"});  // nsys's default threshold, 1 us
  ASSERT_TRUE(p.ok) << p.error.message;
  EXPECT_EQ(thresholds(p.options), (std::vector<uint64_t>{kOff, kOff, 1000, kOff, kOff}));
  p = parse({"--cudabacktrace=all:2000", "app"});
  ASSERT_TRUE(p.ok) << p.error.message;
  EXPECT_EQ(thresholds(p.options), (std::vector<uint64_t>{2000, 2000, 2000, 2000, kOff}));
  for (auto args : {std::vector<std::string>{"--cudabacktrace=true", "--cudabacktrace-threshold=80000", "app"},
                    std::vector<std::string>{"--cudabacktrace-threshold", "80000", "--cudabacktrace", "true", "app"}}) {
    p = parse(args);
    ASSERT_TRUE(p.ok) << p.error.message;
    EXPECT_EQ(thresholds(p.options), (std::vector<uint64_t>{80000, 80000, 80000, 80000, kOff}));
  }
  for (const char* none : {"none", "false"}) {
    p = parse({"--cudabacktrace", none, "app"});
    ASSERT_TRUE(p.ok) << p.error.message;
    EXPECT_EQ(thresholds(p.options), (std::vector<uint64_t>(5, kOff)));
  }
  // The OS runtime's: nsys's 80 us and 24 frames with -t osrt, nothing without it.
  p = parse({"-t", "osrt", "app"});
  ASSERT_TRUE(p.ok) << p.error.message;
  EXPECT_EQ(p.options.backtrace_threshold_ns[abi::kBacktraceClassOsrt], 80000u);
  EXPECT_EQ(p.options.osrt_backtrace_depth, 24u);
  p = parse({"-t", "osrt", "--osrt-backtrace-threshold", "5000", "--osrt-backtrace-depth=8", "app"});
  ASSERT_TRUE(p.ok) << p.error.message;
  EXPECT_EQ(p.options.backtrace_threshold_ns[abi::kBacktraceClassOsrt], 5000u);
  EXPECT_EQ(p.options.osrt_backtrace_depth, 8u);
  p = parse({"--osrt-backtrace-threshold", "5000", "app"});
  ASSERT_TRUE(p.ok) << p.error.message;
  EXPECT_EQ(p.options.backtrace_threshold_ns[abi::kBacktraceClassOsrt], kOff);
  expect_refused({"--cudabacktrace", "kernal:500", "app"},
                 "cutrace profile: --cudabacktrace kernal:500: 'kernal' is not a class; use all, none, kernel, memory, "
                 "sync or other, each with an optional :THRESHOLD_NS (e.g. kernel:500,sync:10000).");
  expect_refused({"--cudabacktrace=kernel:5us", "app"},
                 "cutrace profile: --cudabacktrace kernel:5us: '5us' is not a whole number of nanoseconds.");
  expect_refused({"--osrt-backtrace-depth=0", "app"},
                 "cutrace profile: option '--osrt-backtrace-depth' takes a number of frames from 1 to 128, not '0'.");
}

TEST(LauncherOptions, MpiImplementationIsOpenMpiUnlessNamed) {
  Parsed p = parse({"-t", "mpi", "app"});
  ASSERT_TRUE(p.ok) << p.error.message;
  EXPECT_EQ(p.options.trace_domains, abi::domain_bit(abi::ApiDomain::kMpi));
  EXPECT_EQ(p.options.mpi_impl, "openmpi");
  p = parse({"-t", "cuda,mpi", "--mpi-impl", "mpich", "app"});
  ASSERT_TRUE(p.ok) << p.error.message;
  EXPECT_EQ(p.options.trace_domains, abi::kCudaDomains | abi::domain_bit(abi::ApiDomain::kMpi));
  EXPECT_EQ(p.options.mpi_impl, "mpich");
  expect_refused({"--mpi-impl", "intel", "app"}, "cutrace profile: option '--mpi-impl' takes openmpi or mpich, not 'intel'.");
  expect_refused({"--mpi-impl=", "app"}, "cutrace profile: option '--mpi-impl' takes openmpi or mpich.");
}

TEST(LauncherOptions, TraceValuesNotYetSupportedAreNamed) {
  expect_refused({"-t", "nccl", "app"},
                 "cutrace profile: -t nccl is not supported yet by cutrace; leave it out (cutrace traces cuda, nvtx, "
                 "osrt, cublas, cudnn, cusolver, cusparse, cufft and mpi).");
  expect_refused({"-t", "cuda,nvtx,osrt,ucx,nccl", "app"},
                 "cutrace profile: -t ucx,nccl are not supported yet by cutrace; leave them out (cutrace traces "
                 "cuda, nvtx, osrt, cublas, cudnn, cusolver, cusparse, cufft and mpi).");
  expect_refused({"--trace=cuda,ucx", "app"},
                 "cutrace profile: --trace ucx is not supported yet by cutrace; leave it out (cutrace traces cuda, "
                 "nvtx, osrt, cublas, cudnn, cusolver, cusparse, cufft and mpi).");
  expect_refused({"-t", "cusolver,cusparse-verbose", "app"},
                 "cutrace profile: -t cusparse-verbose is not supported yet by cutrace; leave it out (cutrace traces "
                 "cuda, nvtx, osrt, cublas, cudnn, cusolver, cusparse, cufft and mpi).");
  expect_refused({"-t", "frobnicate", "app"},
                 "cutrace profile: unknown -t value 'frobnicate'; cutrace traces cuda, nvtx, osrt, cublas, cudnn, "
                 "cusolver, cusparse, cufft and mpi (-t cuda,nvtx,osrt,cublas,cudnn,cusolver,cusparse,cufft,mpi).");
  expect_refused({"-t", "cuda,none", "app"},
                 "cutrace profile: -t none cannot be combined with other values; use -t cuda or -t none.");
  expect_refused({"-t", ",", "app"}, "cutrace profile: option '-t' needs a value such as cuda.");
}

TEST(LauncherOptions, RingGeometry) {
  Parsed p = parse({"--ring-size", "1M", "--ring-slots=8", "app"});
  ASSERT_TRUE(p.ok) << p.error.message;
  EXPECT_EQ(p.options.ring_bytes, 1u << 20);
  EXPECT_EQ(p.options.ring_slots, 8u);
  p = parse({"--ring-size=65536", "app"});
  ASSERT_TRUE(p.ok) << p.error.message;
  EXPECT_EQ(p.options.ring_bytes, 65536u);

  const std::string size_error =
      "cutrace profile: --ring-size needs a power of two between 16384 and 2147483648 bytes (suffixes K, M, G "
      "allowed).";
  expect_refused({"--ring-size", "100000", "app"}, size_error);  // not a power of two
  expect_refused({"--ring-size", "8K", "app"}, size_error);      // below the smallest ring
  expect_refused({"--ring-size", "4G", "app"}, size_error);      // beyond 32 bits
  expect_refused({"--ring-size", "lots", "app"}, size_error);
  expect_refused({"--ring-slots", "0", "app"}, "cutrace profile: --ring-slots needs a whole number of at least 1.");
}

TEST(LauncherOptions, ByteCounts) {
  uint64_t v = 0;
  EXPECT_TRUE(parse_byte_count("4194304", &v));
  EXPECT_EQ(v, 4194304u);
  EXPECT_TRUE(parse_byte_count("512K", &v));
  EXPECT_EQ(v, 512u << 10);
  EXPECT_TRUE(parse_byte_count("4MiB", &v));
  EXPECT_EQ(v, 4u << 20);
  EXPECT_TRUE(parse_byte_count("2G", &v));
  EXPECT_EQ(v, uint64_t(2) << 30);
  EXPECT_FALSE(parse_byte_count("", &v));
  EXPECT_FALSE(parse_byte_count("-1", &v));
  EXPECT_FALSE(parse_byte_count("4X", &v));
  EXPECT_FALSE(parse_byte_count("99999999999999999999", &v));
  EXPECT_FALSE(parse_byte_count("99999999999999G", &v));
}

TEST(LauncherOptions, CpuSamplingTakesNsysValues) {
  EXPECT_FALSE(parse({"app"}).options.cpu_sampling);
  for (const char* value : {"cpu", "process-tree"}) {
    Parsed p = parse({"-s", value, "app"});
    ASSERT_TRUE(p.ok) << p.error.message;
    EXPECT_TRUE(p.options.cpu_sampling) << value;
    EXPECT_EQ(p.options.sampling_frequency, 1000u);
  }
  EXPECT_FALSE(parse({"--sample=none", "app"}).options.cpu_sampling);
  EXPECT_EQ(parse({"--sampling-frequency", "8000", "app"}).options.sampling_frequency, 8000u);
  EXPECT_EQ(parse({"--sampling-frequency=100", "app"}).options.sampling_frequency, 100u);
  expect_refused({"--sampling-frequency", "99", "app"},
                 "cutrace profile: option '--sampling-frequency' takes a number of samples per second from 100 to "
                 "8000, not '99'.");
  EXPECT_FALSE(parse({"app"}).options.context_switches);
  EXPECT_TRUE(parse({"--cpuctxsw", "process-tree", "app"}).options.context_switches);
  EXPECT_FALSE(parse({"--cpuctxsw=none", "app"}).options.context_switches);
  expect_refused({"--cpuctxsw", "system-wide", "app"},
                 "cutrace profile: option '--cpuctxsw' takes process-tree or none, not system-wide: cutrace follows "
                 "the command's processes alone.");
  expect_refused({"-s", "system-wide", "app"},
                 "cutrace profile: option '-s' takes process-tree (or cpu) or none, not system-wide: cutrace samples "
                 "the command's processes alone.");
}

TEST(LauncherOptions, PythonBacktraceTakesNsysValues) {
  EXPECT_TRUE(parse({"app"}).options.python_backtrace);  // on with every stack of a CPython thread
  EXPECT_TRUE(parse({"--python-backtrace=cuda", "app"}).options.python_backtrace);
  EXPECT_FALSE(parse({"--python-backtrace", "none", "app"}).options.python_backtrace);
  EXPECT_FALSE(parse({"--python-backtrace=false", "app"}).options.python_backtrace);
  Parsed p = parse({"--python-backtrace=all", "app"});
  EXPECT_FALSE(p.ok);
  EXPECT_EQ(p.error.message, "cutrace profile: option '--python-backtrace' takes cuda or none, not 'all'.");
}

TEST(LauncherOptions, PythonSamplingTakesNsysValues) {
  EXPECT_FALSE(parse({"app"}).options.python_sampling);  // off unless asked for, as in nsys
  Parsed p = parse({"--python-sampling=true", "--python-sampling-frequency", "250", "app"});
  ASSERT_TRUE(p.ok) << p.error.message;
  EXPECT_TRUE(p.options.python_sampling);
  EXPECT_EQ(p.options.python_sampling_frequency, 250u);
  EXPECT_EQ(parse({"--python-sampling", "true", "app"}).options.python_sampling_frequency, 1000u);
  EXPECT_FALSE(parse({"--python-sampling=false", "app"}).options.python_sampling);
  expect_refused({"--python-sampling-frequency=2001", "app"},
                 "cutrace profile: option '--python-sampling-frequency' takes a number of samples per second from 1 "
                 "to 2000, not '2001'.");
  expect_refused({"--python-sampling=often", "app"},
                 "cutrace profile: option '--python-sampling' takes true or false, not 'often'.");
}

TEST(LauncherOptions, GpuActivityIsOnWithCudaUnlessTurnedOff) {
  EXPECT_TRUE(parse({"app"}).options.gpu_activity);
  EXPECT_FALSE(parse({"--gpu-activity=false", "app"}).options.gpu_activity);
  EXPECT_FALSE(parse({"--gpu-activity", "false", "app"}).options.gpu_activity);
  EXPECT_FALSE(parse({"app"}).options.cuda_memory_usage);
  EXPECT_TRUE(parse({"--cuda-memory-usage=true", "app"}).options.cuda_memory_usage);
  expect_refused({"--gpu-activity=some", "app"}, "cutrace profile: option '--gpu-activity' takes true or false, not 'some'.");
}

TEST(LauncherOptions, NsysOptionsNotImplementedAreRefusedByName) {
  // Every option the brief of `nsys profile` lists that cutrace lacks, in each spelling, with a value
  // that asks for something.
  const std::vector<std::vector<std::string>> cases = {
      {"--sampling-period", "1000000"},
      {"--samples-per-backtrace=2"},
      {"-b", "dwarf"},
      {"--backtrace", "fp"},
      {"--dask=functions-trace"},
      {"--cuda-um-cpu-page-faults", "true"},
      {"-n", "false"},
      {"--inherit-environment=false"},
      {"--session-new", "s"},
      {"--session", "s"},
  };
  for (auto args : cases) {
    std::string spelled = args[0].substr(0, args[0].find('='));
    args.push_back("app");
    Parsed p = parse(args);
    EXPECT_FALSE(p.ok) << spelled;
    EXPECT_EQ(p.error.message.rfind("cutrace profile: option '" + spelled + "' is not supported yet; remove it to "
                                    "profile without it", 0), 0u) << p.error.message;
    EXPECT_EQ(p.error.exit_code, kExitUsage) << spelled;
  }
  // Where a value asks for nothing, the message names it.
  expect_refused({"-b", "dwarf", "app"},
                 "cutrace profile: option '-b' is not supported yet; remove it to profile without it, or pass -b none.");
  expect_refused({"--cuda-um-gpu-page-faults=true", "app"},
                 "cutrace profile: option '--cuda-um-gpu-page-faults' is not supported yet; remove it to profile "
                 "without it, or pass --cuda-um-gpu-page-faults=false.");
  expect_refused({"--session", "s", "app"},
                 "cutrace profile: option '--session' is not supported yet; remove it to profile without it.");
  // Options of recent nsys releases.
  for (const char* option : {"--force-export=true", "--retain-export=false", "--cpu-cluster-events=1",
                             "--cpu-socket-events=2", "--cuda-trace-all-apis=true", "--storage-metrics=x"}) {
    Parsed p = parse({option, "app"});
    EXPECT_FALSE(p.ok) << option;
    EXPECT_NE(p.error.message.find("is not supported yet"), std::string::npos) << p.error.message;
  }
}

TEST(LauncherOptions, EnvironmentVariablesForTheCommand) {
  EXPECT_TRUE(parse({"app"}).options.env_vars.empty());
  EXPECT_EQ(parse({"-e", "A=1,B=x=y", "--env-var=C=", "-eD=4", "app"}).options.env_vars,
            (std::vector<std::string>{"A=1", "B=x=y", "C=", "D=4"}));
  expect_refused({"-e", "A", "app"}, "cutrace profile: option '-e' takes NAME=VALUE[,NAME=VALUE...], not 'A'.");
  expect_refused({"--env-var", "A=1,=2", "app"},
                 "cutrace profile: option '--env-var' takes NAME=VALUE[,NAME=VALUE...], not '=2'.");
  // A child forked without exec is always traced: either value of nsys's option is taken.
  EXPECT_TRUE(parse({"--trace-fork-before-exec=true", "app"}).ok);
  EXPECT_TRUE(parse({"--trace-fork-before-exec", "false", "app"}).ok);
}

TEST(LauncherOptions, ExportsAreListedOnceEachInTheOrderGiven) {
  EXPECT_TRUE(parse({"app"}).options.exports.empty());
  EXPECT_EQ(parse({"--export", "sqlite,parquetdir", "--export=arrow,sqlite", "app"}).options.exports,
            (std::vector<std::string>{"sqlite", "parquetdir", "arrow"}));
  EXPECT_TRUE(parse({"--export", "sqlite", "--export", "none", "app"}).options.exports.empty());
  EXPECT_EQ(parse({"--export", "none,perfetto", "app"}).options.exports, (std::vector<std::string>{"perfetto"}));
  Parsed p = parse({"--export", "text", "app"});
  EXPECT_EQ(p.error.message.rfind("cutrace profile: option '--export': nsys's text export is not one cutrace writes; "
                                  "it writes ", 0), 0u) << p.error.message;
  EXPECT_EQ(p.error.exit_code, kExitUsage);
  p = parse({"--export=csv", "app"});
  EXPECT_EQ(p.error.message.rfind("cutrace profile: option '--export' takes ", 0), 0u) << p.error.message;
  EXPECT_NE(p.error.message.find(" or none, not 'csv'."), std::string::npos) << p.error.message;
}

TEST(LauncherOptions, NsysOptionsAskingForNothingAreAccepted) {
  // `-s none`, `-b none`, ... ask for what cutrace does anyway; published scripts keep working.
  Parsed p = parse({"-s",
                    "none",
                    "--backtrace=none",
                    "-c",
                    "none",
                    "--cudabacktrace",
                    "none",
                    "--cuda-memory-usage=false",
                    "-y",
                    "0",
                    "--export",
                    "none",
                    "-n",
                    "true",
                    "--cpuctxsw=none",
                    "-t",
                    "cuda",
                    "app",
                    "-s",
                    "cpu"});
  ASSERT_TRUE(p.ok) << p.error.message;
  EXPECT_EQ(p.options.command, (std::vector<std::string>{"app", "-s", "cpu"}));
}

// A published command line is ported in one run: every option cutrace cannot take is named at once,
// each with its remedy, and their values are not mistaken for the command.
TEST(LauncherOptions, EveryRefusedOptionIsNamedInOneMessage) {
  expect_refused({"-b", "dwarf", "--cuda-um-cpu-page-faults=true", "-t", "cuda,ucx", "--bogus", "--dask",
                  "functions-trace", "python3", "train.py"},
                 "cutrace profile: 5 options cannot be used: "
                 "(1) option '-b' is not supported yet; remove it to profile without it, or pass -b none; "
                 "(2) option '--cuda-um-cpu-page-faults' is not supported yet; remove it to profile without it, or "
                 "pass --cuda-um-cpu-page-faults=false; "
                 "(3) -t ucx is not supported yet by cutrace; leave it out (cutrace traces cuda, nvtx, osrt, cublas, "
                 "cudnn, cusolver, cusparse, cufft and mpi); "
                 "(4) unknown option '--bogus'; run `cutrace profile --help`; "
                 "(5) option '--dask' is not supported yet; remove it to profile without it, or pass "
                 "--dask=none.");
  // Other mistakes are still reported alone and first.
  expect_refused({"-b", "dwarf", "-o"}, "cutrace profile: option '-o' needs a file name.");
}

// --pytorch takes nsys's values and combinations, kept in one order; what cannot mean anything is
// refused with the values it takes.
TEST(LauncherOptions, PytorchTakesNsysModes) {
  auto modes = [](std::vector<std::string> args) {
    args.push_back("python3");
    Parsed p = parse(args);
    EXPECT_TRUE(p.ok) << p.error.message;
    return p.options.pytorch;
  };
  EXPECT_EQ(modes({}), "");
  EXPECT_EQ(modes({"--pytorch", "none"}), "");
  EXPECT_EQ(modes({"--pytorch=autograd-nvtx"}), "autograd-nvtx");
  EXPECT_EQ(modes({"--pytorch", "functions-trace,autograd-shapes-nvtx"}), "autograd-shapes-nvtx,functions-trace");
  EXPECT_EQ(modes({"--pytorch", "autograd-nvtx,functions-trace,autograd-nvtx"}), "autograd-nvtx,functions-trace");
  expect_refused({"--pytorch", "autograd", "python3"},
                 "cutrace profile: option '--pytorch' takes autograd-nvtx, autograd-shapes-nvtx, functions-trace or "
                 "none, or a comma list, not 'autograd'.");
  expect_refused({"--pytorch", "autograd-nvtx,", "python3"},
                 "cutrace profile: option '--pytorch' takes autograd-nvtx, autograd-shapes-nvtx, functions-trace or "
                 "none, or a comma list, not 'autograd-nvtx,'.");
  expect_refused({"--pytorch", "autograd-nvtx,autograd-shapes-nvtx", "python3"},
                 "cutrace profile: option '--pytorch' takes autograd-nvtx or autograd-shapes-nvtx, not both: the "
                 "second is the first with shapes.");
  expect_refused({"--pytorch", "none,functions-trace", "python3"},
                 "cutrace profile: option '--pytorch' takes none alone, not with other values.");
  expect_refused({"-t", "cuda", "--pytorch", "autograd-nvtx", "python3"},
                 "cutrace profile: --pytorch autograd-nvtx annotates through NVTX, which -t leaves out; add nvtx to "
                 "-t.");
}

// --python-functions-trace's file is checked before the program starts: one sentence for what is
// wrong with it, and the absolute path of a good one for every Python of the command.
TEST(LauncherOptions, PythonFunctionsTraceChecksItsFile) {
  std::string dir = ::testing::TempDir();
  if (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  auto file = [&](const std::string& name, const std::string& text) {
    const std::string path = dir + "/" + name;
    FILE* f = std::fopen(path.c_str(), "w");
    std::fputs(text.c_str(), f);
    std::fclose(f);
    return path;
  };
  const std::string good = file("good.json", R"([{"module": "torch.amp", "domain": "PyTorch", "color": "E8B795",
                                                 "functions": ["GradScaler.step"]}])");
  Parsed p = parse({"--python-functions-trace", good, "python3"});
  ASSERT_TRUE(p.ok) << p.error.message;
  EXPECT_EQ(p.options.python_functions, good);
  auto refused = [&](const std::string& text) {
    const std::string path = file("bad.json", text);
    Parsed bad = parse({"--python-functions-trace", path, "python3"});
    EXPECT_FALSE(bad.ok);
    const std::string prefix = "cutrace profile: --python-functions-trace " + path + ": ";
    EXPECT_EQ(bad.error.message.rfind(prefix, 0), 0u) << bad.error.message;
    return bad.error.message.substr(prefix.size());
  };
  EXPECT_EQ(refused("[{"), "it is not JSON; it holds a list of {\"module\": ..., \"functions\": [...]} objects.");
  EXPECT_EQ(refused(R"({"module": "m"})"), "it holds a list of {\"module\": ..., \"functions\": [...]} objects, not a list.");
  EXPECT_EQ(refused(R"([{"functions": []}])"), "entry 1 has no \"module\" string.");
  EXPECT_EQ(refused(R"([{"module": "m", "functions": ["f", 3]}])"), "entry 1 (m) lists a function that is not a name.");
  EXPECT_EQ(refused(R"([{"module": "m", "functions": [], "color": 7}])"), "entry 1 (m) has a \"color\" that is not a string.");
  Parsed missing = parse({"--python-functions-trace", dir + "/none.json", "python3"});
  EXPECT_EQ(missing.error.message, "cutrace profile: --python-functions-trace " + dir +
                                       "/none.json: cannot read it (No such file or directory).");
  expect_refused({"-t", "cuda", "--python-functions-trace", good, "python3"},
                 "cutrace profile: --python-functions-trace annotates through NVTX, which -t leaves out; add nvtx to -t.");
}

// `-w maybe` names the option, not a command called maybe; a real command after a bare flag runs.
TEST(LauncherOptions, MistypedBooleanValueNamesItsOption) {
  expect_refused({"-w", "maybe", "app"}, "cutrace profile: option '-w' takes true or false, not 'maybe'.");
  expect_refused({"--stats", "yes", "app"}, "cutrace profile: option '--stats' takes true or false, not 'yes'.");
  Parsed p = parse({"-f", "true", "-w", "sh", "-c", "true"});
  ASSERT_TRUE(p.ok) << p.error.message;
  EXPECT_FALSE(p.options.show_output == false);
  EXPECT_EQ(p.options.command, (std::vector<std::string>{"sh", "-c", "true"}));
}

TEST(LauncherOptions, WaitTakesNsysValues) {
  EXPECT_TRUE(parse({"app"}).options.wait_all);  // nsys's default
  EXPECT_FALSE(parse({"--wait", "primary", "app"}).options.wait_all);
  EXPECT_TRUE(parse({"--wait=all", "app"}).options.wait_all);
  expect_refused({"--wait", "some", "app"}, "cutrace profile: option '--wait' takes primary or all, not 'some'.");
}

TEST(LauncherOptions, UnknownOptions) {
  expect_refused({"--foo", "app"}, "cutrace profile: unknown option '--foo'; run `cutrace profile --help`.");
  expect_refused({"--foo=bar", "app"}, "cutrace profile: unknown option '--foo'; run `cutrace profile --help`.");
  expect_refused({"-z", "app"}, "cutrace profile: unknown option '-z'; run `cutrace profile --help`.");
  expect_refused({"-hx", "app"}, "cutrace profile: unknown option '-hx'; run `cutrace profile --help`.");
}

TEST(LauncherOptions, CommandStartsAtFirstOperandOrAfterDoubleDash) {
  Parsed p = parse({"-o", "x", "ls", "-l", "--", "-o"});
  ASSERT_TRUE(p.ok) << p.error.message;
  EXPECT_EQ(p.options.command, (std::vector<std::string>{"ls", "-l", "--", "-o"}));
  p = parse({"-f", "true", "--", "-weird-name", "--output", "y"});
  ASSERT_TRUE(p.ok) << p.error.message;
  EXPECT_EQ(p.options.command, (std::vector<std::string>{"-weird-name", "--output", "y"}));
  EXPECT_EQ(p.options.output_pattern, "");
  p = parse({"-", "arg"});
  ASSERT_TRUE(p.ok) << p.error.message;
  EXPECT_EQ(p.options.command, (std::vector<std::string>{"-", "arg"}));
}

TEST(LauncherOptions, NoCommand) {
  const std::string message =
      "cutrace profile: no command given; usage: cutrace profile [options] [--] <command> [args...].";
  expect_refused({}, message);
  expect_refused({"-o", "x"}, message);
  expect_refused({"-o", "x", "--"}, message);
}

TEST(LauncherOptions, HelpNeedsNoCommand) {
  for (auto flag : {"-h", "--help"}) {
    Parsed p = parse({flag});
    ASSERT_TRUE(p.ok) << p.error.message;
    EXPECT_TRUE(p.options.help);
  }
  EXPECT_NE(std::string(help_text()).find("--force-overwrite"), std::string::npos);
  EXPECT_NE(std::string(help_text()).find("NAME.stdout"), std::string::npos);
}

// The -t synopsis lists domains.def's values; its paragraph must say what each records, so that a
// library added there is not left undescribed.
TEST(LauncherHelp, EveryTraceValueIsDescribed) {
  const std::string help = help_text();
  const size_t synopsis = help.find("  -t, --trace ");
  ASSERT_NE(synopsis, std::string::npos);
  const size_t end = help.find("\n  -", synopsis + 1);
  const std::string paragraph = help.substr(synopsis, end - synopsis);
  std::string values;
  for (const abi::DomainInfo& d : abi::kDomains) {
    if (d.group.empty() || values.find(std::string(d.group) + ",") != std::string::npos) continue;
    values += std::string(d.group) + ",";
    // Named in the sentences below the synopsis, as a word.
    const std::string described = paragraph.substr(paragraph.find('\n'));
    bool found = false;
    for (size_t at = described.find(d.group); at != std::string::npos; at = described.find(d.group, at + 1)) {
      const auto word_edge = [&](size_t i) { return i >= described.size() || !std::isalnum((unsigned char)described[i]); };
      found = found || (word_edge(at - 1) && word_edge(at + d.group.size()));
    }
    EXPECT_TRUE(found) << "-t " << d.group << " is not described in:\n" << paragraph;
  }
  values.pop_back();
  EXPECT_EQ(paragraph.substr(0, paragraph.find('\n')), "  -t, --trace " + values + "|none");
}

TEST(LauncherOptions, GivenWordsAreKeptVerbatimForTheTrace) {
  Parsed p = parse({"-o", "x%p", "--force-overwrite=true", "-w", "false", "-s", "none", "--stats", "app", "arg"});
  ASSERT_TRUE(p.ok) << p.error.message;
  EXPECT_EQ(p.options.given,
            (std::vector<std::string>{"-o", "x%p", "--force-overwrite=true", "-w", "false", "-s", "none", "--stats"}));
}

TEST(LauncherOptions, LastOccurrenceWins) {
  Parsed p = parse({"-o", "a", "--output=b", "-f", "true", "-f", "false", "app"});
  ASSERT_TRUE(p.ok) << p.error.message;
  EXPECT_EQ(p.options.output_pattern, "b");
  EXPECT_FALSE(p.options.force_overwrite);
}


// Capture ranges as nsys spells them, the older --stop-on-range-end, -y/-d in seconds, --kill.
TEST(LauncherOptions, CaptureRangesDelayDurationAndKill) {
  Parsed p = parse({"-c", "cudaProfilerApi", "--capture-range-end=repeat:3", "-y", "1.5", "-d", "2s", "--kill",
                    "sigkill", "app"});
  ASSERT_TRUE(p.ok) << p.error.message;
  EXPECT_EQ(p.options.capture_range, ProfileOptions::CaptureRange::kProfilerApi);
  EXPECT_EQ(p.options.capture_end, "repeat");
  EXPECT_EQ(p.options.capture_count, 3u);
  EXPECT_EQ(p.options.delay_ns, 1'500'000'000u);
  EXPECT_EQ(p.options.duration_ns, 2'000'000'000u);
  EXPECT_EQ(p.options.kill_signal, 9);

  p = parse({"--capture-range=nvtx", "-p", "train@*", "app"});
  ASSERT_TRUE(p.ok) << p.error.message;
  EXPECT_EQ(p.options.capture_range, ProfileOptions::CaptureRange::kNvtx);
  EXPECT_EQ(p.options.nvtx_capture, "train@*");
  EXPECT_EQ(p.options.capture_end, "stop-shutdown");  // nsys's default
  EXPECT_EQ(p.options.kill_signal, 15);

  p = parse({"-c", "cudaProfilerApi", "--stop-on-range-end", "false", "--kill", "none", "app"});
  ASSERT_TRUE(p.ok) << p.error.message;
  EXPECT_EQ(p.options.capture_end, "none");
  EXPECT_EQ(p.options.kill_signal, 0);
  p = parse({"-c", "cudaProfilerApi", "--capture-range-end", "repeat-shutdown:2", "app"});
  ASSERT_TRUE(p.ok) << p.error.message;
  EXPECT_EQ(p.options.capture_end, "repeat-shutdown");
  EXPECT_EQ(p.options.capture_count, 2u);

  expect_refused({"-c", "nvtx", "app"},
                 "cutrace profile: -c nvtx needs the range to follow: add -p RANGE, -p RANGE@DOMAIN or -p RANGE@*.");
  expect_refused({"-c", "sometimes", "app"},
                 "cutrace profile: option '-c' takes none, cudaProfilerApi or nvtx, not 'sometimes'.");
  expect_refused({"--capture-range-end", "repeat-shutdown", "app"},
                 "cutrace profile: option '--capture-range-end' takes none, stop, stop-shutdown, repeat[:N] or "
                 "repeat-shutdown:N, not 'repeat-shutdown'.");
  expect_refused({"--capture-range-end", "stop:2", "app"},
                 "cutrace profile: option '--capture-range-end' takes none, stop, stop-shutdown, repeat[:N] or "
                 "repeat-shutdown:N, not 'stop:2'.");
  expect_refused({"-y", "soon", "app"}, "cutrace profile: option '-y' takes a number of seconds, not 'soon'.");
  // A duration of zero would have meant none at all; as nsys, it must be more.
  expect_refused({"--duration", "0", "app"},
                 "cutrace profile: option '--duration' takes a number of seconds greater than zero, not '0'; leave it "
                 "out to record until the program ends.");
  expect_refused({"-d", "0.0000000001", "app"},
                 "cutrace profile: option '-d' takes a number of seconds greater than zero, not '0.0000000001'; leave "
                 "it out to record until the program ends.");
  p = parse({"-y", "0", "-d", "0.5", "app"});
  ASSERT_TRUE(p.ok) << p.error.message;
  EXPECT_EQ(p.options.delay_ns, 0u);
  EXPECT_EQ(p.options.duration_ns, 500000000u);
  expect_refused({"--kill", "sigwhat", "app"},
                 "cutrace profile: option '--kill' takes none, sigterm, sigkill or a signal number, not 'sigwhat'.");
  expect_refused({"-c", "hotkey", "app"}, "cutrace profile: option '-c hotkey' is not supported; use cudaProfilerApi or nvtx.");
  // The words are taken in any case, the count too.
  p = parse({"-c", "cudaProfilerApi", "--capture-range-end", "REPEAT:3", "app"});
  ASSERT_TRUE(p.ok) << p.error.message;
  EXPECT_EQ(p.options.capture_end, "repeat");
  EXPECT_EQ(p.options.capture_count, 3u);
  // The shim matches a range and a domain of up to 255 bytes; a longer one could never match.
  p = parse({"-c", "nvtx", "-p", std::string(255, 'r') + "@" + std::string(255, 'd'), "app"});
  ASSERT_TRUE(p.ok) << p.error.message;
  const std::string long_range = std::string(256, 'r');
  expect_refused({"-c", "nvtx", "-p", long_range, "app"},
                 "cutrace profile: option '-p' takes a range name and a domain of at most 255 bytes each.");
  const std::string long_domain = "step@" + std::string(256, 'd');
  expect_refused({"-c", "nvtx", "-p", long_domain, "app"},
                 "cutrace profile: option '-p' takes a range name and a domain of at most 255 bytes each.");
}

}  // namespace
}  // namespace cutrace::launcher
