"""GPU activity (-t cuda) from CUPTI, on the simulated device's CUPTI (build/simcuda/lib/libcupti.so.13),
which reports what the simulated device ran with its own timeline: every kernel, copy and set exactly
once, at the device's times, on its stream, linked to the call that issued it; the API trace the same
with and without it; each way of failing (no driver, another profiler holding CUPTI, dropped records)
said in the trace and on stderr while the calls are still all recorded; -c keeps the work of the ranges
alone."""
import collections
import csv
import io
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import CUDA13_2_LIB, CUTRACE, SIM_LIB, api_sum, app, calls, counts, info, info_totals, metadata, profile, sim_env

KERNEL_NS = 50_000
ELEMENTS = 1 << 16  # 256 KiB per copy: 26,215 ns at the default 10 GB/s
COPY_NS = (4 * ELEMENTS + 9) // 10
AXPY = "void ns::axpy<float>(int, float, float const*, float*)"
SQUARE = "square_kernel(float*, float const*, int)"


def rows(trace, report):
    proc = subprocess.run([str(CUTRACE), "stats", "--report", report, "--format", "csv", str(trace)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode in (0, 4), proc.stderr  # 4: nothing of the kind in the trace, as nsys says SKIPPED
    return list(csv.DictReader(io.StringIO(proc.stdout))) if proc.returncode == 0 else []


def summary(trace):
    return info_totals(info(trace))


def warnings(stderr):
    return [l for l in stderr.splitlines() if l.startswith("cutrace: warning:")]


def vector_add(tmp_path, iterations=3, options=(), name="trace", **env):
    proc, trace = profile(tmp_path, [app("sim_vector_add"), str(iterations), str(ELEMENTS)],
                          env=sim_env(SIMCUDA_KERNEL_NS=KERNEL_NS, **env), options=options, name=name)
    assert f"verified {iterations}" in proc.stdout
    return proc, trace


def test_every_kernel_and_copy_once_at_the_devices_times_linked_to_its_call(tmp_path):
    iterations = 4
    proc, trace = vector_add(tmp_path, iterations)
    assert warnings(proc.stderr) == []
    kernels = {r["Name"]: r for r in rows(trace, "cuda_gpu_kern_sum")}
    assert set(kernels) == {AXPY, SQUARE}
    for r in kernels.values():
        # The simulated device runs each kernel for exactly SIMCUDA_KERNEL_NS.
        assert int(r["Instances"]) == iterations and int(r["Min (ns)"]) == int(r["Max (ns)"]) == KERNEL_NS, r
    memory = {r["Operation"]: r for r in rows(trace, "cuda_gpu_mem_time_sum")}
    assert int(memory["[CUDA memcpy Host-to-Device]"]["Count"]) == 2 * iterations
    assert int(memory["[CUDA memcpy Device-to-Host]"]["Count"]) == iterations
    assert int(memory["[CUDA memcpy Host-to-Device]"]["Max (ns)"]) == COPY_NS
    sizes = {r["Operation"]: r for r in rows(trace, "cuda_gpu_mem_size_sum")}
    assert sizes["[CUDA memcpy Device-to-Host]"]["Total (MB)"] == f"{iterations * 4 * ELEMENTS / 1e6:.3f}"

    events, doc = calls(trace, tmp_path, domains=None)
    work = sorted((e for e in doc["traceEvents"] if e.get("cat") == "cuda_gpu"), key=lambda e: e["ts"])
    assert len(work) == 5 * iterations  # two copies in, two kernels, one copy out
    # One stream, in issue order, never overlapping; copy in, copy in, axpy, square, copy out.
    names = [e["name"] for e in work]
    assert names == ["[CUDA memcpy Host-to-Device]"] * 2 + [AXPY, SQUARE, "[CUDA memcpy Device-to-Host]"] * 1 \
        + (["[CUDA memcpy Host-to-Device]"] * 2 + [AXPY, SQUARE, "[CUDA memcpy Device-to-Host]"]) * (iterations - 1)
    assert len({e["tid"] for e in work}) == 1
    assert all(a["ts"] + a["dur"] <= b["ts"] + 0.001 for a, b in zip(work, work[1:]))
    # Each piece of work has its flow from the call that issued it: the flow starts inside that call's
    # slice, on the calling thread, before the work starts; kernels come from launches, copies from
    # cudaMemcpy (its driver call, cuMemcpy*, which CUPTI names a copy by).
    starts = {e["id"]: e for e in doc["traceEvents"] if e.get("ph") == "s"}
    ends = {e["id"]: e for e in doc["traceEvents"] if e.get("ph") == "f"}
    assert len(ends) == len(work)
    by_thread = collections.defaultdict(list)
    for c in events:
        by_thread[c["tid"]].append(c)
    for w in work:
        f = next(f for f in ends.values() if f["ts"] == w["ts"] and f["tid"] == w["tid"])
        s = starts[f["id"]]
        assert s["ts"] <= w["ts"], (s, w)
        around = [c for c in by_thread[s["tid"]] if c["ts"] <= s["ts"] <= c["ts"] + c["dur"]]
        issuing = {c["name"] for c in around}
        if w["name"] in (AXPY, SQUARE):
            assert "__cudaLaunchKernel" in issuing, (w, issuing)
        else:
            assert "cudaMemcpy" in issuing, (w, issuing)
    # Nothing recorded twice: the API trace is the one recorded without GPU activity.
    _, plain = vector_add(tmp_path, iterations, options=["--gpu-activity", "false"], name="plain")
    assert counts(calls(plain, tmp_path)[0]) == counts(calls(trace, tmp_path)[0])
    # cuda_api_trace's CorrID joins each launch and copy with its work in cuda_gpu_trace, as in nsys.
    api = rows(trace, "cuda_api_trace")
    gpu = rows(trace, "cuda_gpu_trace")
    for name, work in (("cudaLaunchKernel", (AXPY, SQUARE)), ("cudaMemcpy", ("[CUDA memcpy Host-to-Device]",
                                                                             "[CUDA memcpy Device-to-Host]"))):
        ids = [int(r["CorrID"]) for r in api if r["Name"] == name]
        assert len(ids) == len(set(ids)) and all(ids), (name, ids)
        assert sorted(ids) == sorted(int(r["CorrId"]) for r in gpu if r["Name"] in work), name
    last_errors = [int(r["CorrID"]) for r in api if r["Name"] == "cudaGetLastError"]
    assert last_errors == [0] * iterations  # a call that gives the device no work has no id
    # Each kernel with the launch that queued it. The simulated device starts a kernel as soon as it is
    # queued, before the launch returns: no time queued after the call ("-").
    executed = rows(trace, "cuda_kern_exec_trace")
    assert len(executed) == 2 * iterations
    for r in executed:
        assert r["API Function"] == "cudaLaunchKernel" and int(r["Kernel Start (ns)"]) >= int(r["API Start (ns)"]), r
        assert r["Queue Dur (ns)"] == "-" or int(r["Queue Dur (ns)"]) >= 0, r
        assert int(r["Total Dur (ns)"]) == int(r["Kernel Start (ns)"]) + KERNEL_NS - int(r["API Start (ns)"]), r
    totals = summary(trace)
    assert totals["gpu_activity.kernels"] == 2 * iterations and totals["gpu_activity.memcpy"] == 3 * iterations
    assert totals["gpu_activity.dropped"] == 0
    assert metadata(trace)["gpu_activity"] == "cupti"


def test_gpu_activity_false_records_the_calls_alone(tmp_path):
    proc, trace = vector_add(tmp_path, options=["--gpu-activity=false"])
    assert warnings(proc.stderr) == []
    assert rows(trace, "cuda_api_sum")
    assert not [k for k in summary(trace) if k.startswith("gpu_activity.")]
    assert "gpu_activity" not in metadata(trace)
    _, doc = calls(trace, tmp_path, domains=None)
    assert not [e for e in doc["traceEvents"] if e.get("cat") in ("cuda_gpu", "cuda_flow")]


def test_without_a_driver_or_with_another_profiler_the_calls_are_all_there_and_the_reason_is_said(tmp_path):
    _, reference = vector_add(tmp_path, name="reference")
    expected = counts(calls(reference, tmp_path)[0])
    for code, reason in (("999", "CUPTI cannot reach a CUDA driver"),
                         ("39", "another profiler in the process (torch.profiler, Kineto, nsys) already holds CUPTI")):
        proc, trace = vector_add(tmp_path, name="failed" + code, SIMCUDA_CUPTI_ERROR=code)
        (line,) = warnings(proc.stderr)
        assert "has no GPU activity in the trace, only its API calls: cuptiSubscribe" in line, line
        assert f"({code}): {reason}" in line, line
        assert counts(calls(trace, tmp_path)[0]) == expected
        assert not rows(trace, "cuda_gpu_trace")
        # The reason is in the trace too, for whoever reads it later.
        assert line.replace("cutrace: warning: ", "") in info(trace), code


def test_a_cupti_that_hangs_costs_the_program_a_bounded_wait_and_is_said(tmp_path):
    # CUPTI's start takes longer than the 10 s the program's first CUDA call waits for it: the program
    # goes on, exactly as without cutrace, its calls are all recorded, and the reason is said. Tried
    # first in a process of its own (the default), it is given up after the trial's 8 s; loaded
    # untried (CUTRACE_CUPTI_TRIAL=0), after the program's 10 s.
    _, reference = vector_add(tmp_path, name="reference")
    for trial, least, reason in (
            ("1", 8, "was not started, so the trace has no GPU activity: it hung for 8 s when tried beside this driver"),
            ("0", 10, "CUPTI had not started 10 s after the driver")):
        started = time.monotonic()
        proc, trace = vector_add(tmp_path, name="hung" + trial, SIMCUDA_CUPTI_SUBSCRIBE_DELAY_MS="60000",
                                 CUTRACE_CUPTI_TRIAL=trial)
        took = time.monotonic() - started
        assert least <= took < 40, (trial, took)
        (line,) = warnings(proc.stderr)
        assert "has no GPU activity in the trace, only its API calls: " in line and reason in line, line
        assert counts(calls(trace, tmp_path)[0]) == counts(calls(reference, tmp_path)[0])
        assert not rows(trace, "cuda_gpu_trace")


def test_cutrace_cupti_path_names_the_cupti_to_load(tmp_path):
    # A copy of the simulated CUPTI elsewhere is the one loaded, and info names it.
    chosen = tmp_path / "elsewhere" / "libcupti.so.13"
    chosen.parent.mkdir()
    shutil.copy(SIM_LIB / "libcupti.so.13", chosen)
    _, trace = vector_add(tmp_path, 2, name="chosen", CUTRACE_CUPTI_PATH=str(chosen))
    assert f"gpu_activity.source            GPU activity from {chosen}, CUDA graphs as whole launches\n" in info(trace)
    assert summary(trace)["gpu_activity.kernels"] == 4
    # One that cannot be loaded: said, and the calls are all there.
    _, reference = vector_add(tmp_path, 2, name="reference")
    missing = tmp_path / "nowhere" / "libcupti.so.13"
    proc, trace = vector_add(tmp_path, 2, name="missing", CUTRACE_CUPTI_PATH=str(missing))
    (line,) = warnings(proc.stderr)
    assert f"has no GPU activity in the trace, only its API calls: CUTRACE_CUPTI_PATH={missing} cannot be loaded" in line
    assert counts(calls(trace, tmp_path)[0]) == counts(calls(reference, tmp_path)[0])


def test_a_cupti_that_crashes_beside_the_driver_is_tried_apart_and_never_loaded(tmp_path):
    # CUPTI 13.2 (PyTorch's wheels) beside a driver it cannot use, as the simulated one, recurses until
    # its stack overflows inside cuptiSubscribe. Tried first in a process of its own, it is never
    # loaded here: the program runs and exits as it does without cutrace, its calls are all recorded,
    # and the reason is said. The session's second process reuses the first one's verdict.
    if CUDA13_2_LIB is None:
        pytest.skip("the build has no CUDA 13.2 wheels")
    cupti = CUDA13_2_LIB / "libcupti.so.13"
    command = [app("sim_vector_add"), "2", str(ELEMENTS)]
    env = sim_env(SIMCUDA_KERNEL_NS=KERNEL_NS)
    plain = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    proc, trace = profile(tmp_path, ["sh", "-c", '"$0" "$@"; "$0" "$@"', *command],
                          env=dict(env, CUTRACE_CUPTI_PATH=str(cupti)), name="crashing")
    assert proc.stdout == plain.stdout * 2
    first, second = warnings(proc.stderr)
    assert (f"has no GPU activity in the trace, only its API calls: {cupti} was not started, so the trace has no "
            f"GPU activity: it crashed (signal 11) when tried beside this driver ({SIM_LIB / 'libcuda.so.1'}) in a "
            "separate process") in first, first
    assert "it crashed or hung beside this driver" in second and "when another process of the session tried it" in second
    _, reference = vector_add(tmp_path, 2, name="reference")
    expected = counts(calls(reference, tmp_path)[0])
    by_process = collections.defaultdict(list)
    for event in calls(trace, tmp_path)[0]:
        by_process[event["pid"]].append(event)
    assert [counts(events) for events in by_process.values()] == [expected, expected]
    assert not rows(trace, "cuda_gpu_trace")


def test_the_cupti_trial_is_invisible_to_the_program(tmp_path):
    # The trial process sends no SIGCHLD and is no child the program's wait() can reap: a program
    # that counts its children's signals and waits for any child sees none, traced or not.
    script = tmp_path / "children.py"
    script.write_text(
        "import ctypes, os, signal\n"
        "seen = []\n"
        "signal.signal(signal.SIGCHLD, lambda *_: seen.append(1))\n"
        "rt = ctypes.CDLL('libcudart.so.13')\n"
        "p = ctypes.c_void_p()\n"
        "print('malloc', rt.cudaMalloc(ctypes.byref(p), 256), 'free', rt.cudaFree(p))\n"
        "try:\n"
        "    os.waitpid(-1, os.WNOHANG)\n"
        "    print('a child')\n"
        "except ChildProcessError:\n"
        "    print('no child')\n"
        "print('SIGCHLD', len(seen))\n")
    command = [sys.executable, str(script)]
    plain = subprocess.run(command, env=sim_env(), capture_output=True, text=True, timeout=60)
    assert plain.stdout == "malloc 0 free 0\nno child\nSIGCHLD 0\n", plain.stdout + plain.stderr
    proc, trace = profile(tmp_path, command, name="children")
    assert proc.stdout == plain.stdout
    assert summary(trace)["gpu_activity.memcpy"] == 0 and "GPU activity from" in info(trace)


def test_records_cupti_drops_are_counted_and_warned_about(tmp_path):
    iterations = 4
    proc, trace = vector_add(tmp_path, iterations, SIMCUDA_CUPTI_DEVICE_BUFFER_RECORDS="3")
    totals = summary(trace)
    kept = totals["gpu_activity.kernels"] + totals["gpu_activity.memcpy"] + totals["gpu_activity.memset"]
    assert totals["gpu_activity.dropped"] > 0
    assert kept + totals["gpu_activity.dropped"] == 5 * iterations, totals
    (line,) = warnings(proc.stderr)
    assert f"{totals['gpu_activity.dropped']} GPU activity records were dropped by CUPTI" in line


# A script's start: the runtime named by its first argument, and sets(n, size) of n memsets then a sync.
SETS = """
import ctypes, sys, time
rt = ctypes.CDLL(sys.argv[1])
p = ctypes.c_void_p()
assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(1 << 20)) == 0
def sets(n, size):
    for _ in range(n):
        assert rt.cudaMemset(p, 0, ctypes.c_size_t(size)) == 0
    assert rt.cudaDeviceSynchronize() == 0
"""

CAPTURED = SETS + """
sets(2, 4096)            # outside: not kept
rt.cudaProfilerStart()
sets(3, 8192)            # inside
rt.cudaProfilerStop()
sets(4, 16384)           # outside again
print("done")
"""


def test_a_capture_range_keeps_the_work_of_the_range_alone(tmp_path):
    proc, trace = profile(tmp_path, [sys.executable, "-c", CAPTURED, "libcudart.so.13"],
                          options=["-c", "cudaProfilerApi", "--capture-range-end", "stop"])
    assert proc.stdout == "done\n"
    sets = [r for r in rows(trace, "cuda_gpu_trace") if r["Name"] == "[CUDA memset]"]
    assert [r["Bytes (MB)"] for r in sets] == ["0.008"] * 3, sets
    assert api_sum(trace)["cudaMemset"]["Num Calls"] == 3


def cupti_was_let_go_after_one_linked_copy(proc, trace):
    """cupti_after_capture's run once cutrace had let go of CUPTI: the program's own subscription
    succeeded, the trace says CUPTI was finalised, and only the copy made while recording is there,
    linked to its call."""
    assert proc.stdout == "copies 2\nsubscribe 0\n"
    summary = metadata(trace, "End summary:")
    assert summary["gpu_activity.source"] == (f"GPU activity from {SIM_LIB / 'libcupti.so.13'}, CUDA graphs as whole "
                                              "launches, until capture ended for good (CUPTI was finalised then)")
    (copy,) = rows(trace, "cuda_gpu_trace")
    traced = [r for r in rows(trace, "cuda_api_trace") if r["Name"] == "cudaMemcpy"]
    assert len(traced) == 1 and traced[0]["CorrID"] == copy["CorrId"] != "0"


def test_after_the_last_capture_range_cupti_is_finalised_and_free_for_the_programs_own_profiler(tmp_path):
    command = [app("cupti_after_capture")]
    alone = subprocess.run(command, env=sim_env(), capture_output=True, text=True, timeout=60)
    assert alone.stdout == "copies 2\nsubscribe 0\n"
    proc, trace = profile(tmp_path, command, options=["-c", "cudaProfilerApi", "--capture-range-end", "stop"])
    # CUPTI let go once the range ended, so the program takes it as it does alone.
    cupti_was_let_go_after_one_linked_copy(proc, trace)
    # Ranges that may come again keep CUPTI. This program reaches CUPTI through a handle of its own
    # (dlopen, dlsym), which hands it the shim's cuptiSubscribe: it shares the one subscriber CUPTI up
    # to 13.2 takes, and its subscription succeeds as it does alone.
    proc, trace = profile(tmp_path, command, name="repeat", options=["-c", "cudaProfilerApi", "--capture-range-end", "repeat"])
    assert proc.stdout == "copies 2\nsubscribe 0\n"
    assert metadata(trace, "End summary:")["gpu_activity.source"] == (f"GPU activity from {SIM_LIB / 'libcupti.so.13'}, "
                                                                      "CUDA graphs as whole launches")


def test_when_the_duration_ends_and_the_program_goes_on_cupti_is_finalised_at_its_next_copy(tmp_path):
    # -d 2 ends the recording while the program pauses for 4 s after its first copy; --kill none lets it
    # go on. Its next copy is where cutrace lets go of CUPTI, so the program's own subscription succeeds.
    command = [app("cupti_after_capture"), "4000"]
    proc, trace = profile(tmp_path, command, options=["-d", "2", "--kill", "none"])
    cupti_was_let_go_after_one_linked_copy(proc, trace)


@pytest.mark.parametrize("client", ["cupti_client", "cupti_client_dlopen"])
@pytest.mark.parametrize("let_go", ["disable", "finalize"])
def test_the_programs_own_cupti_client_gets_its_records_and_the_trace_keeps_every_kernel(tmp_path, let_go, client):
    """cupti_client profiles itself as torch.profiler does: its own subscriber for the launches, its own
    buffers and kernel records, for the 4 kernels in the middle of 12. It gets exactly those records and
    callbacks, as without cutrace, and nothing else (none of the memset records the trace has); the
    trace has all 12, and no warning of missing GPU activity. cupti_client_dlopen finds CUPTI's
    functions through a dlopen handle of its own (RTLD_LOCAL), and gets the same."""
    command = [app(client), "3", "4", "5", "1" if let_go == "finalize" else "0"]
    alone = subprocess.run(command, env=sim_env(), capture_output=True, text=True, timeout=60)
    assert (alone.returncode, alone.stdout) == (0, "own kernels 4\nother records 0\nlaunch callbacks 4\ndone\n")
    proc, trace = profile(tmp_path, command)
    assert proc.stdout == alone.stdout
    kernels = [r for r in rows(trace, "cuda_gpu_trace") if r["Name"] != "[CUDA memset]"]
    assert [r["Name"] for r in kernels] == ["plain_sleep_us_100"] * 3 + ["profiled_sleep_us_100"] * 4 + \
        ["plain_sleep_us_100"] * 5
    assert warnings(proc.stderr) == []


def test_a_cupti_client_that_profiles_twice_gets_each_window_and_only_it(tmp_path):
    """Two windows of its own, finalising after each as Kineto does: each gets exactly its kernels."""
    command = [app("cupti_client"), "2", "3", "4", "1", "2"]
    alone = subprocess.run(command, env=sim_env(), capture_output=True, text=True, timeout=60)
    assert (alone.returncode, alone.stdout) == (0, "own kernels 6\nother records 0\nlaunch callbacks 6\ndone\n"), \
        alone.stderr
    proc, trace = profile(tmp_path, command)
    assert proc.stdout == alone.stdout
    kernels = [r["Name"] for r in rows(trace, "cuda_gpu_trace") if r["Name"] != "[CUDA memset]"]
    assert kernels.count("profiled_sleep_us_100") == 6 and kernels.count("plain_sleep_us_100") == 2 + 4 * 2


LATE = """
import time
time.sleep(2.5)          # -d 1 has ended the recording, and the program goes on (--kill none)
""" + SETS + """
sets(1, 4096)
print("cupti loaded:", "libcupti" in open("/proc/self/maps").read())
"""


def test_a_process_that_first_uses_cuda_after_the_duration_never_loads_cupti(tmp_path):
    proc, trace = profile(tmp_path, [sys.executable, "-c", LATE, "libcudart.so.13"],
                          options=["-d", "1", "--kill", "none"])
    assert proc.stdout == "cupti loaded: False\n"
    assert rows(trace, "cuda_gpu_trace") == []
    assert "gpu_activity.source" not in metadata(trace, "End summary:")


WINDOWED = SETS + """
sets(2, 4096)            # before -y's delay has passed
time.sleep(2.5)
sets(3, 8192)            # within the window
time.sleep(2.5)
sets(4, 16384)           # after -d's duration, the program going on (--kill none)
print("done")
"""


def test_delay_and_duration_bound_the_gpu_work_kept_as_they_bound_the_calls(tmp_path):
    # The window is [2 s, 4 s] from the program's release. CUPTI reports the sets before it and after it
    # later, in a buffer: they are left out as the calls that made them are.
    proc, trace = profile(tmp_path, [sys.executable, "-c", WINDOWED, "libcudart.so.13"],
                          options=["-y", "2", "-d", "2", "--kill", "none"])
    assert proc.stdout == "done\n"
    sets = [r for r in rows(trace, "cuda_gpu_trace") if r["Name"] == "[CUDA memset]"]
    assert [r["Bytes (MB)"] for r in sets] == ["0.008"] * 3, sets
    assert api_sum(trace)["cudaMemset"]["Num Calls"] == 3


def test_cuda_memory_usage_is_a_counter_of_the_device_memory_allocated(tmp_path):
    iterations = 2
    _, trace = vector_add(tmp_path, iterations, options=["--cuda-memory-usage", "true"])
    _, doc = calls(trace, tmp_path, domains=None)
    counter = [e for e in sorted(doc["traceEvents"], key=lambda e: e.get("ts", 0))
               if e.get("ph") == "C" and e["name"] == "CUDA device memory (device 0)"]
    # Each iteration allocates three buffers of 4 * ELEMENTS bytes, then frees them.
    per_buffer = 4 * ELEMENTS
    assert [e["args"]["bytes"] for e in counter] == [per_buffer, 2 * per_buffer, 3 * per_buffer,
                                                     2 * per_buffer, per_buffer, 0] * iterations
    assert metadata(trace)["cuda_memory_usage"] == "true"
    # One record per allocation and free; without the option, as in nsys, none are collected (CUPTI's
    # MEMORY2 kind stays off) and no counter is drawn.
    assert summary(trace)["gpu_activity.memory"] == 6 * iterations
    _, plain = vector_add(tmp_path, iterations, name="plain")
    assert summary(plain)["gpu_activity.memory"] == 0
    assert not [e for e in calls(plain, tmp_path, domains=None)[1]["traceEvents"] if e.get("ph") == "C"]


def test_a_graphs_kernels_come_from_cupti_and_flow_from_the_graph_launch(tmp_path):
    # sim_driver_launch captures two tail kernels into a graph and replays it once: their launches
    # during capture ran nothing; the kernels ran from cuGraphLaunch, which interposition sees as one
    # call. Node by node, each is a kernel of its own (by default the launch is one interval:
    # test_graphs.py).
    proc, trace = profile(tmp_path, [app("sim_driver_launch"), "3"], options=["--cuda-graph-trace", "node"])
    launched = {p[1]: int(p[2]) for p in (l.split() for l in proc.stdout.splitlines()) if p[0] == "launches"}
    kernels = {r["Name"]: int(r["Instances"]) for r in rows(trace, "cuda_gpu_kern_sum")}
    assert kernels == launched, (kernels, launched)
    events, doc = calls(trace, tmp_path, domains=None)
    starts = {e["id"]: e for e in doc["traceEvents"] if e.get("ph") == "s"}
    tails = [e for e in doc["traceEvents"] if e.get("cat") == "cuda_gpu" and e["name"] == "tail_sleep_us_200"]
    assert len(tails) == 2 and all(e["dur"] == 200 for e in tails)
    for tail in tails:
        (end,) = [f for f in doc["traceEvents"] if f.get("ph") == "f" and f["ts"] == tail["ts"] and f["tid"] == tail["tid"]]
        start = starts[end["id"]]
        issuing = {c["name"] for c in events if c["tid"] == start["tid"] and c["ts"] <= start["ts"] <= c["ts"] + c["dur"]}
        assert "cuGraphLaunch" in issuing, issuing


def gpu_work_per_process(trace, tmp_path):
    _, doc = calls(trace, tmp_path, domains=None)
    return collections.Counter((e["pid"], e["name"]) for e in doc["traceEvents"] if e.get("cat") == "cuda_gpu")


# A process leaving through _exit (os._exit, multiprocessing's children) runs no exit handlers; the
# shim flushes CUPTI's records first.
EXITING = """
import ctypes, os, sys
lib = ctypes.CDLL("libcudart.so.13")
device, host = ctypes.c_void_p(), (ctypes.c_char * 256)()
lib.cudaMalloc(ctypes.byref(device), ctypes.c_size_t(256))
for _ in range(3):
    lib.cudaMemcpy(device, host, ctypes.c_size_t(256), 1)
sys.stdout.flush()
os._exit(5)
"""


def test_a_process_leaving_through_os_exit_keeps_its_gpu_activity(tmp_path):
    proc, trace = profile(tmp_path, [sys.executable, "-c", EXITING], check=False)
    assert proc.returncode == 5, proc.stderr
    assert summary(trace)["gpu_activity.memcpy"] == 3
    assert summary(trace)["dropped"] == 0


def test_multiprocessing_children_that_first_use_cuda_have_gpu_activity_of_their_own(tmp_path):
    # The parent forks its children before it loads the runtime: each child is the first of its line
    # to use CUDA, starts its own CUPTI, and leaves through os._exit.
    children, iterations = 2, 4
    scripts = Path(__file__).resolve().parent / "scripts"
    command = [sys.executable, str(scripts / "ctypes_runtime.py"), "libcudart.so.13", str(iterations),
               "--children-first", str(children)]
    proc, trace = profile(tmp_path, command)
    pids = {int(line.split()[-1]) for line in proc.stdout.splitlines() if line.split()[-2:-1] == ["pid"]}
    assert len(pids) == children + 1, proc.stdout
    work = gpu_work_per_process(trace, tmp_path)
    assert work == {(pid, "[CUDA memcpy Host-to-Device]"): iterations for pid in pids}, work
    assert not warnings(proc.stderr), proc.stderr
