// The test programs on the simulated device (and one on the real runtime): what they print is what
// end-to-end tests compare traces against, so it is checked here first.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "process.h"
#include "simcuda.h"

namespace simcuda::test {
namespace {

std::string app(const std::string& name) { return std::string(SIM_APPS_DIR) + "/" + name; }

std::string describe(const Result& r) {
  return "exit " + std::to_string(r.exit_code) + "\nstdout:\n" + r.out + "stderr:\n" + r.err;
}

TEST(Apps, DriverLaunchUsesEveryLaunchPathAndCountsItsCalls) {
  Result r = run({app("sim_driver_launch"), "5"}, on_simulator());
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(field_long(r.out, "launches vec_scale"), 6);
  EXPECT_EQ(field_long(r.out, "launches lib_fill"), 1);
  EXPECT_EQ(field_long(r.out, "launches tail_sleep_us_200"), 2);
  EXPECT_EQ(field_long(r.out, "verified"), 1);
  EXPECT_EQ(field_long(r.out, "elapsed ok"), 1);
  EXPECT_EQ(field_long(r.out, "calls cuLaunchKernel"), 7);
  EXPECT_EQ(field_long(r.out, "calls cuLaunchKernelEx"), 1);
  EXPECT_EQ(field_long(r.out, "calls cuLaunchCooperativeKernel"), 1);
  EXPECT_EQ(field_long(r.out, "calls cuGraphLaunch"), 1);
  EXPECT_EQ(field_long(r.out, "calls cuMemAlloc_v2"), 1);
  EXPECT_EQ(field_long(r.out, "calls cuModuleGetFunction"), 2);
}

TEST(Apps, VectorAddRoundTripsItsDataAndCountsItsCalls) {
  Result r = run({app("sim_vector_add"), "3", "4096"}, on_simulator());
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  // Also proves the dynamic linker found the version node it expects (it warns on stderr if not).
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(field_long(r.out, "verified"), 3);
  EXPECT_EQ(field_long(r.out, "bytes HostToDevice"), 2 * 3 * 4096 * 4);
  EXPECT_EQ(field_long(r.out, "bytes DeviceToHost"), 3 * 4096 * 4);
  EXPECT_EQ(field_long(r.out, "calls cudaMalloc"), 9);
  EXPECT_EQ(field_long(r.out, "calls cudaMemcpy"), 9);
  EXPECT_EQ(field_long(r.out, "calls cudaFree"), 9);
  EXPECT_EQ(field_long(r.out, "calls cudaDeviceSynchronize"), 3);
  EXPECT_EQ(field_long(r.out, "calls __cudaPushCallConfiguration"), 6);
  EXPECT_EQ(field_long(r.out, "calls __cudaPopCallConfiguration"), 6);
  EXPECT_EQ(field_long(r.out, "calls __cudaLaunchKernel"), 6);
  EXPECT_EQ(field_long(r.out, "calls __cudaGetKernel"), 2);
  EXPECT_EQ(field_long(r.out, "launches ns::axpy<float>(int, float, float const*, float*)"), 3);
}

TEST(Apps, VectorAddEndsCleanlyOnTheRealRuntime) {
  Result r = run({app("sim_vector_add")}, {{"LD_LIBRARY_PATH", REAL_CUDART_DIR}});
  // Without a driver the first call fails and the program says so; with one it just works.
  if (r.exit_code == 1) {
    EXPECT_NE(r.err.find("error: cudaMalloc returned 35 cudaErrorInsufficientDriver"),
              std::string::npos)
        << describe(r);
    EXPECT_EQ(field_long(r.out, "calls cudaMalloc"), 1);
  } else {
    EXPECT_EQ(r.exit_code, 0) << describe(r);
  }
}

TEST(Apps, StreamsTimeEachStreamOnTheDevice) {
  constexpr long kElements = 65536;
  constexpr uint64_t kKernelNs = 50000;
  Result r = run({app("sim_streams"), std::to_string(kElements), "2"},
                 on_simulator({{"SIMCUDA_KERNEL_NS", std::to_string(kKernelNs)},
                               {"SIMCUDA_COPY_GBPS", "5"}}));
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(field_long(r.out, "verified"), 4);
  double min_ms = double(2 * copy_duration_ns(kElements * 4, 5.0) + kKernelNs) / 1e6;
  for (const char* key : {"elapsed_ms stream0 round0", "elapsed_ms stream1 round0",
                          "elapsed_ms stream0 round1", "elapsed_ms stream1 round1"}) {
    std::string v = field(r.out, key);
    ASSERT_FALSE(v.empty()) << key << "\n" << describe(r);
    EXPECT_GE(std::stod(v), min_ms * (1 - 1e-5)) << key;
  }
  EXPECT_EQ(field_long(r.out, "calls cudaMemcpyAsync"), 8);
  EXPECT_EQ(field_long(r.out, "calls cudaEventRecord"), 8);
}

TEST(Apps, ErrorsAreTheRealRuntimeCodes) {
  Result r = run({app("sim_errors")}, on_simulator());
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(field(r.out, "matched"), "17 of 17");
  EXPECT_EQ(field(r.out, "cudaFree(bogus)"), "1 cudaErrorInvalidValue expected 1 cudaErrorInvalidValue");
}

TEST(Apps, OutputAndExitCodePassThrough) {
  Result r = run({app("sim_output"), "42"}, on_simulator());
  EXPECT_EQ(r.exit_code, 42);
  EXPECT_EQ(r.out,
            "sim_output: line 1 to stdout\n"
            "errno before ENOENT\n"
            "cudaGetDeviceCount 0 cudaSuccess count 1\n"
            "cudaSetDevice(99) 101 cudaErrorInvalidDevice\n"
            "cudaGetLastError 101 cudaErrorInvalidDevice\n"
            "cudaGetLastError 0 cudaSuccess\n"
            "errno after ENOENT\n"
            "sim_output: last line to stdout\n");
  EXPECT_EQ(r.err, "sim_output: line 1 to stderr\nsim_output: last line to stderr\n");
}

TEST(Apps, KnobsChangeTheSimulatedDevice) {
  Result none = run({app("sim_output"), "0"}, on_simulator({{"SIMCUDA_DEVICE_COUNT", "0"}}));
  EXPECT_EQ(field(none.out, "cudaGetDeviceCount"), "100 cudaErrorNoDevice count 0") << describe(none);
  Result three = run({app("sim_output"), "0"}, on_simulator({{"SIMCUDA_DEVICE_COUNT", "3"}}));
  EXPECT_EQ(field(three.out, "cudaGetDeviceCount"), "0 cudaSuccess count 3") << describe(three);
  Result bad = run({app("sim_output"), "0"}, on_simulator({{"SIMCUDA_KERNEL_NS", "soon"}}));
  EXPECT_EQ(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("simcuda: ignoring SIMCUDA_KERNEL_NS=soon"), std::string::npos)
      << describe(bad);
}

TEST(Apps, ShortLivedAndConcurrentThreads) {
  Result r = run({app("sim_threads"), "200", "3", "short"}, on_simulator());
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(field_long(r.out, "failed_threads"), 0);
  EXPECT_EQ(field_long(r.out, "calls cudaSetDevice"), 200);
  EXPECT_EQ(field_long(r.out, "calls cudaMalloc"), 600);
  EXPECT_EQ(field_long(r.out, "calls cudaStreamSynchronize"), 200);
  r = run({app("sim_threads"), "8", "50", "concurrent"}, on_simulator());
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(field_long(r.out, "calls cudaMemsetAsync"), 400);
}

TEST(Apps, ForkedExecedAndShellChildrenAllUseTheDevice) {
  Result r = run({app("sim_fork"), "5"}, on_simulator());
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(field(r.out, "fork_child exit"), "7");
  EXPECT_EQ(field(r.out, "exec_child exit"), "0");
  EXPECT_EQ(field(r.out, "system_child exit"), "0");
  for (const char* role : {"parent", "fork_child", "exec_child", "system_child", "parent_after"}) {
    EXPECT_EQ(field_long(r.out, std::string(role) + " calls cudaGetDevice"), 5) << role;
    EXPECT_EQ(field_long(r.out, std::string(role) + " calls cudaStreamSynchronize"), 1) << role;
  }
  EXPECT_NE(field(r.out, "fork_child pid"), field(r.out, "parent pid"));
}

TEST(Apps, ProgressFileIsConsistentAfterSigkill) {
  char dir_template[] = "/tmp/simcuda-progress-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  std::string file = std::string(dir_template) + "/progress";
  pid_t pid = spawn({app("sim_progress"), file, "0", "50"}, on_simulator());
  ASSERT_GT(pid, 0);
  std::string text;
  for (int i = 0; i < 2000 && field_long(text, "completed") < 300; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::ifstream in(file);
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  text = ss.str();
  long completed = field_long(text, "completed");
  EXPECT_GE(completed, 300) << text;
  long per_api = field_long(text, "cudaGetDevice");
  EXPECT_EQ(per_api % 50, 0) << text;
  EXPECT_EQ(field_long(text, "cudaMemsetAsync"), per_api);
  EXPECT_EQ(field_long(text, "cudaStreamSynchronize"), per_api);
  EXPECT_EQ(completed, 1 + 3 * per_api);
  std::remove(file.c_str());
  std::remove((file + ".tmp").c_str());
  rmdir(dir_template);
}

TEST(Apps, CheapCallsReportsItsCost) {
  for (const char* api : {"cudaGetDevice", "cudaPeekAtLastError"}) {
    Result r = run({app("cheap_calls"), "100000", api}, on_simulator());
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    EXPECT_EQ(field(r.out, "api"), api);
    EXPECT_EQ(field_long(r.out, "calls"), 100000);
    EXPECT_EQ(field_long(r.out, "failed"), 0);
    EXPECT_GT(std::stod(field(r.out, "ns_per_call")), 0);
  }
}

TEST(Process, ExitingWithWorkQueuedDoesNotWaitForIt) {
  // Ten minutes of device work are queued: a hang here runs into the test's timeout.
  Result r = run({HELPER, "queued"}, on_simulator());
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.err, "");
}

TEST(Process, SynchronisingAfterTheDeviceThreadStoppedStillCompletesTheWork) {
  Result r = run({HELPER, "late-sync"}, on_simulator());
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.out, "late-sync ok\n");
}

TEST(Process, DevicesHaveTheirOwnMemoryAndTimelines) {
  Result r = run({HELPER, "two-devices"}, on_simulator({{"SIMCUDA_DEVICE_COUNT", "2"}}));
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.out, "two-devices ok\n");
}

}  // namespace
}  // namespace simcuda::test
