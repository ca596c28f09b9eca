"""NVTX through NVTX_INJECTION64_PATH: a program and two shared objects that each carry NVTX v3 (each
initialises the tool itself), nested push/pop ranges on several threads, a start/end range ended on
another thread, domains, registered strings, categories, payloads, marks, thread names, wide
strings; the Python `nvtx` package with no change to the script; `-t` with and without nvtx."""
import csv
import io
import json
import subprocess
import sys
from pathlib import Path

from conftest import api_sum, app, profile, run_tool, sim_env

SCRIPTS = Path(__file__).resolve().parent / "scripts"


def table(trace, report):
    proc = run_tool("stats", "--report", report, "--format", "csv", trace, check=False)
    if proc.returncode == 4:
        assert "SKIPPED: " in proc.stderr, proc.stderr
        return None
    assert proc.returncode == 0, proc.stderr
    return list(csv.DictReader(io.StringIO(proc.stdout)))


def nvtx_sum(trace):
    rows = table(trace, "nvtx_sum")
    return None if rows is None else {(r["Style"], r["Range"]): int(r["Instances"]) for r in rows}


def export(trace, tmp_path):
    out = tmp_path / "nvtx.json"
    run_tool("export", "--type", "perfetto-json", "-o", out, "-f", "true", trace)
    return json.loads(out.read_text())["traceEvents"]


def test_ranges_from_two_shared_objects_on_several_threads_counted_exactly(tmp_path):
    threads, iterations = 3, 20
    command = [app("nvtx_app"), str(threads), str(iterations)]
    proc, trace = profile(tmp_path, command)
    plain = subprocess.run(command, env=sim_env(), capture_output=True, text=True, timeout=60)
    assert proc.stdout == plain.stdout and proc.returncode == plain.returncode == 0
    n = threads * iterations
    assert nvtx_sum(trace) == {("PushPop", ":outer"): n, ("PushPop", ":a.work"): n, ("PushPop", "lib_b:b.step"): n,
                               ("PushPop", ":wide \u2713"): 1, ("StartEnd", ":whole run"): 1}
    assert {k: int(v["Num Calls"]) for k, v in api_sum(trace, show_internal=False).items()} == {"cudaGetDevice": n}

    rows = table(trace, "nvtx_pushpop_trace")
    assert len(rows) == 3 * n + 1
    by_id = {r["RangeId"]: r for r in rows}
    assert len(by_id) == len(rows)
    starts = [int(r["Start (ns)"]) for r in rows]
    assert starts == sorted(starts)
    for r in rows:
        start, end, duration = int(r["Start (ns)"]), int(r["End (ns)"]), int(r["Duration (ns)"])
        assert end - start == duration and int(r["DurNonChild (ns)"]) == duration - int(r["DurChild (ns)"])
        if r["Name"] == ":a.work":
            # Inside "outer" of the same thread and domain, one level down.
            parent = by_id[r["ParentId"]]
            assert parent["Name"] == ":outer" and parent["TID"] == r["TID"] and r["Lvl"] == "1"
            assert int(parent["Start (ns)"]) <= start and end <= int(parent["End (ns)"])
            assert parent["NumChild"] == "1" and int(parent["DurChild (ns)"]) == duration
            assert r["RangeStack"] == f":{parent['RangeId']}:{r['RangeId']}" and r["NameTree"] == ":outer:a.work"
        elif r["Name"] == "lib_b:b.step":
            # Another domain: a stack of its own.
            assert r["Lvl"] == "0" and r["ParentId"] == "" and r["NameTree"] == "lib_b:b.step"
    workers = {r["TID"] for r in rows if r["Name"] == ":outer"}
    assert len(workers) == threads

    events = export(trace, tmp_path)
    nvtx = [e for e in events if e.get("cat") == "nvtx"]
    marks = [e for e in nvtx if e["ph"] == "i"]
    assert sorted(e["name"] for e in marks) == ["b.mark"] * n + ["main.mark"]
    assert all(e["args"]["domain"] == "lib_b" for e in marks if e["name"] == "b.mark")
    slices = [e for e in nvtx if e["ph"] == "X"]
    assert len(slices) == 3 * n + 1
    (begin,) = [e for e in nvtx if e["ph"] == "b"]
    (end,) = [e for e in nvtx if e["ph"] == "e"]
    # Started on the main thread, ended by a worker.
    assert begin["name"] == end["name"] == "whole run" and begin["id"] == end["id"]
    assert begin["tid"] == begin["pid"] and str(end["tid"]) in workers
    # Each cudaGetDevice lies inside an "a.work" slice of its thread.
    calls = [e for e in events if e.get("cat") == "cuda_runtime"]
    work = [e for e in slices if e["name"] == "a.work"]
    assert len(calls) == n
    for c in calls:
        assert any(w["tid"] == c["tid"] and w["ts"] <= c["ts"] and c["ts"] + c["dur"] <= w["ts"] + w["dur"] + 1e-3
                   for w in work)
    names = {(e["tid"], e["args"]["name"]) for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {name for tid, name in names if str(tid) in workers} >= {f"worker {i}" for i in range(threads)}


def test_without_nvtx_in_t_the_program_runs_unannotated(tmp_path):
    command = [app("nvtx_app"), "2", "5"]
    proc, trace = profile(tmp_path, command, options=["-t", "cuda"])
    assert proc.stdout == "pushes 31\n"
    assert nvtx_sum(trace) is None
    assert {k: int(v["Num Calls"]) for k, v in api_sum(trace, show_internal=False).items()} == {"cudaGetDevice": 10}

    proc, trace = profile(tmp_path, command, options=["-t", "nvtx"], name="nvtx_only")
    assert nvtx_sum(trace)[("PushPop", ":outer")] == 10
    assert api_sum(trace, show_internal=False) == {}


def test_a_programs_own_nvtx_tool_is_replaced_while_nvtx_is_traced(tmp_path):
    env = sim_env(NVTX_INJECTION64_PATH="/nonexistent/libother-tool.so")
    _, trace = profile(tmp_path, [app("nvtx_app"), "1", "4"], env=env)
    assert nvtx_sum(trace)[("PushPop", ":a.work")] == 4


def test_python_nvtx_package_is_captured_without_changing_the_script(tmp_path):
    command = [sys.executable, str(SCRIPTS / "nvtx_annotations.py"), "7"]
    proc, trace = profile(tmp_path, command)
    assert proc.stdout == "done 7\n"
    assert nvtx_sum(trace) == {("PushPop", ":py.all"): 1, ("StartEnd", ":py.startend"): 1,
                               ("PushPop", ":py.step"): 7, ("PushPop", "py_domain:py.inner"): 7}
    rows = table(trace, "nvtx_pushpop_trace")
    steps = [r for r in rows if r["Name"] == ":py.step"]
    assert all(r["Lvl"] == "1" and r["NameTree"] == ":py.all:py.step" for r in steps)
    events = export(trace, tmp_path)
    inner = [e for e in events if e.get("cat") == "nvtx" and e["name"] == "py.inner"]
    assert len(inner) == 7 and all(e["args"]["domain"] == "py_domain" for e in inner)
    assert [e["name"] for e in events if e.get("cat") == "nvtx" and e["ph"] == "i"] == ["py.mark"]


def test_reports_limited_to_one_nvtx_range(tmp_path):
    _, trace = profile(tmp_path, [app("nvtx_app"), "3", "10"])

    def calls(spec, of=trace):
        proc = run_tool("stats", "-r", "cuda_api_sum", "-f", "csv", "--filter-nvtx", spec, of, check=False)
        if proc.returncode == 4:
            return None
        return {r["Name"]: int(r["Num Calls"]) for r in csv.DictReader(io.StringIO(proc.stdout))}

    # Each "a.work" and each "outer" holds one cudaGetDevice; "b.step" (domain lib_b) holds none.
    assert calls("a.work") == {"cudaGetDevice": 30}
    assert calls("outer@*") == {"cudaGetDevice": 30}
    proc = run_tool("stats", "--filter-nvtx", "b.step", trace, expect=4)
    assert proc.stderr == f"SKIPPED: {trace} has no NVTX range b.step (0 instances found).\n"
    proc = run_tool("stats", "--filter-nvtx", "x/0", trace, expect=2)
    # The filter keeps what overlaps a range's time in its process: with one worker thread, no other
    # thread's call can fall inside a "b.step" or an "outer" (with three, a loaded machine put one
    # there, twice), and the export keeps the 7th "outer" (by start) and its one call.
    _, one_worker = profile(tmp_path, [app("nvtx_app"), "1", "10"], name="one_worker")
    assert calls("outer/7", one_worker) == {"cudaGetDevice": 1}
    assert calls("b.step@lib_b", one_worker) is None  # nothing inside it: SKIPPED
    out = tmp_path / "window.json"
    run_tool("export", "--type", "perfetto-json", "-o", out, "--filter-nvtx", "outer/7", one_worker)
    events = json.loads(out.read_text())["traceEvents"]
    assert [e["name"] for e in events if e.get("cat") == "cuda_runtime"] == ["cudaGetDevice"]
    assert len([e for e in events if e.get("cat") == "nvtx" and e["name"] == "outer"]) == 1
    proc = run_tool("export", "--type", "perfetto-json", "-o", tmp_path / "none.json", "--filter-nvtx", "b.step", trace,
                    expect=4)
    assert not (tmp_path / "none.json").exists()
