"""nsys's NVTX projection reports on GPU work of known durations (scripts/gpu_work.py proj): each NVTX
range that launched work, projected onto the GPU (nvtx_gpu_proj_trace), summed per range
(nvtx_gpu_proj_sum), and each kernel under every range that holds its launch (nvtx_kern_sum). A range
that launched nothing ("host only"), or that is open on another thread ("other thread"), holds no work."""
import csv
import io
import sys
from pathlib import Path

import pytest

from conftest import profile, run_tool, sim_env

pytestmark = pytest.mark.reads_traces

pytest.importorskip("nvtx")

GPU_WORK = Path(__file__).resolve().parent / "scripts" / "gpu_work.py"
LONG, SHORT, MEMSET = 20_000_000, 3_000_000, 500  # ns: long_sleep_us_20000, short_sleep_us_3000, 5000 bytes
STEP = LONG + SHORT + MEMSET  # queued behind the long kernel, the three run back to back
ITERATIONS = 3


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    proc, path = profile(tmp_path_factory.mktemp("proj"), [sys.executable, str(GPU_WORK), "proj", str(ITERATIONS)],
                         env=sim_env(), options=["-t", "cuda,nvtx"])
    assert proc.stdout == "done\n", proc.stderr
    return path


def report(trace, name):
    out = run_tool("stats", "--report", name, "--format", "csv", trace).stdout
    return list(csv.DictReader(io.StringIO("\n".join(l for l in out.splitlines() if l and l[0] != "#"))))


def test_each_range_is_projected_onto_the_work_launched_inside_it(trace):
    rows = report(trace, "nvtx_gpu_proj_trace")
    assert list(rows[0]) == ["Name", "Projected Start (ns)", "Projected Duration (ns)", "Orig Start (ns)",
                             "Orig Duration (ns)", "Style", "PID", "TID", "NumGPUOps", "Lvl", "NumChild", "RangeId",
                             "ParentId", "RangeStack"]
    assert [r["Name"] for r in rows] == [":step", ":inner"] * ITERATIONS  # by projected start, longest first
    for step, inner in zip(rows[0::2], rows[1::2]):
        assert (int(step["Projected Duration (ns)"]), step["NumGPUOps"], step["Lvl"], step["NumChild"]) == \
               (STEP, "3", "0", "1")
        assert (int(inner["Projected Duration (ns)"]), inner["NumGPUOps"], inner["Lvl"], inner["NumChild"]) == \
               (MEMSET, "1", "1", "0")
        # The memset runs last, behind the two kernels of the same stream.
        assert int(inner["Projected Start (ns)"]) == int(step["Projected Start (ns)"]) + LONG + SHORT
        assert step["ParentId"] == "" and inner["ParentId"] == step["RangeId"]
        assert (step["RangeStack"], inner["RangeStack"]) == (f":{step['RangeId']}",
                                                             f":{step['RangeId']}:{inner['RangeId']}")
        assert step["Style"] == inner["Style"] == "PushPop"
        assert (step["PID"], step["TID"]) == (inner["PID"], inner["TID"])
        # The CPU range ends long before its work: the kernels run after it.
        assert int(step["Orig Start (ns)"]) < int(step["Projected Start (ns)"])
        assert int(step["Orig Duration (ns)"]) < STEP


def test_the_projections_are_summed_per_range(trace):
    rows = report(trace, "nvtx_gpu_proj_sum")
    assert list(rows[0]) == ["Range", "Style", "Total Proj Time (ns)", "Total Range Time (ns)", "Range Instances",
                             "Proj Avg (ns)", "Proj Med (ns)", "Proj Min (ns)", "Proj Max (ns)", "Proj StdDev (ns)",
                             "Total GPU Ops", "Avg GPU Ops", "Avg Range Lvl", "Avg Num Child"]
    step, inner = rows
    assert (step["Range"], step["Style"], int(step["Total Proj Time (ns)"]), step["Range Instances"]) == \
           (":step", "PushPop", ITERATIONS * STEP, str(ITERATIONS))
    assert (float(step["Proj Avg (ns)"]), int(step["Proj Min (ns)"]), int(step["Proj Max (ns)"])) == (STEP, STEP, STEP)
    assert (float(step["Proj StdDev (ns)"]), step["Total GPU Ops"], float(step["Avg GPU Ops"])) == \
           (0.0, str(3 * ITERATIONS), 3.0)
    assert (float(step["Avg Range Lvl"]), float(step["Avg Num Child"])) == (0.0, 1.0)
    assert (inner["Range"], int(inner["Total Proj Time (ns)"]), inner["Total GPU Ops"]) == \
           (":inner", ITERATIONS * MEMSET, str(ITERATIONS))
    assert (float(inner["Avg Range Lvl"]), float(inner["Avg Num Child"])) == (1.0, 0.0)
    # The CPU time of the ranges, for comparison: far less than their work on the GPU.
    assert 0 < int(step["Total Range Time (ns)"]) < ITERATIONS * STEP


@pytest.mark.parametrize("argument, long_name", [("", "long_sleep_us_20000"), (":base", "long_sleep_us_20000")])
def test_each_kernel_is_summed_under_the_ranges_that_launched_it(trace, argument, long_name):
    rows = report(trace, "nvtx_kern_sum" + argument)
    assert list(rows[0]) == ["NVTX Range", "Style", "PID", "TID", "NVTX Inst", "Kern Inst", "Total Time (ns)",
                             "Avg (ns)", "Med (ns)", "Min (ns)", "Max (ns)", "StdDev (ns)", "Kernel Name"]
    # Kernels only (the memset is not one), each under the step that launched it, most time first.
    assert [(r["NVTX Range"], r["Kernel Name"]) for r in rows] == [(":step", long_name), (":step", "short_sleep_us_3000")]
    long, short = rows
    assert (long["NVTX Inst"], long["Kern Inst"], int(long["Total Time (ns)"])) == \
           (str(ITERATIONS), str(ITERATIONS), ITERATIONS * LONG)
    assert (int(short["Min (ns)"]), int(short["Max (ns)"]), int(short["Total Time (ns)"])) == \
           (SHORT, SHORT, ITERATIONS * SHORT)
