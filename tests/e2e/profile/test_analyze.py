"""`cutrace analyze`: each of nsys's expert-system rules fires exactly on the calls sim_rules makes to
trigger it (names, counts, the simulated device's exact durations, the program's function as the call
site; a Python program's line), and stays silent on sim_rules avoid, which does the same work the way
the advice says; a trace without GPU activity says so per rule; three ranks name the slowest one; the
exit codes."""
import json
import re
import shutil
from pathlib import Path

import pytest

from conftest import CUTRACE, app, profile, run_tool, sim_env

pytestmark = pytest.mark.reads_traces_in_python

pytest.importorskip("pyarrow")
pytest.importorskip("duckdb")

HERE = Path(__file__).resolve().parent
BYTES = 1_000_000
COPY_NS = 1_000_000  # BYTES at SIMCUDA_COPY_GBPS=1 (1 byte per ns)
GAP_MS = 600         # sim_rules' idle time between its copies and its 200 ms kernel
KERNEL_NS = 200_000_000
RULES = ["cuda_memcpy_async", "cuda_memcpy_sync", "cuda_memset_sync", "cuda_api_sync", "gpu_gaps", "gpu_time_util"]
ON_DEVICE = {"SIMCUDA_COPY_GBPS": "1"}


def analyze(*args, expect=0):
    proc = run_tool("analyze", *args, check=False)
    assert proc.returncode == expect, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


def findings(trace, *args):
    """{rule: its JSON entry, with "rows": the findings as dicts by column}."""
    doc = json.loads(analyze("--format", "json", *args, trace).stdout)
    rules = {}
    for entry in doc["rules"]:
        entry["rows"] = [dict(zip(entry.get("columns", []), row)) for row in entry.get("findings", [])]
        rules[entry["rule"]] = entry
    return rules, doc


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("analyze")
    traces = {}
    for mode in ("trigger", "avoid"):
        proc, traces[mode] = profile(tmp, [app("sim_rules"), mode], env=sim_env(**ON_DEVICE), name=mode,
                                     options=["--cudabacktrace", "all:0"])
        assert f"mode {mode}" in proc.stdout
    return traces


def site(row):
    return (row["Call Site"] or "").split(" <- ")[0]


def test_each_rule_fires_exactly_on_the_calls_made_to_trigger_it(runs):
    rules, doc = findings(runs["trigger"])
    assert [e["rule"] for e in doc["rules"]] == RULES
    for entry in rules.values():
        assert "skipped" not in entry, entry
    pid = rules["cuda_memcpy_async"]["rows"][0]["PID"]
    for name in ("cuda_memcpy_async", "cuda_memcpy_sync", "cuda_memset_sync", "cuda_api_sync"):
        for row in rules[name]["rows"]:
            assert (row["PID"], row["TID"], row["Thread"]) == (pid, pid, "sim_rules"), row

    copies = rules["cuda_memcpy_async"]
    assert copies["total"] == 2
    for row in copies["rows"]:
        assert (row["Name"], row["Bytes"], row["Src Kind"], row["Dst Kind"], row["Duration (ns)"]) == \
            ("cudaMemcpyAsync", BYTES, "Device", "Pageable", COPY_NS), row
        assert site(row) == "download_pageable", row

    blocking = rules["cuda_memcpy_sync"]
    assert blocking["total"] == 3
    assert [(r["Name"], r["Src Kind"], r["Dst Kind"], r["Duration (ns)"]) for r in
            sorted(blocking["rows"], key=lambda r: r["Start (ns)"])] == \
        [("cudaMemcpy", "Pageable", "Device", COPY_NS), ("cudaMemcpy", "Device", "Pageable", COPY_NS),
         ("cudaMemcpy", "Pageable", "Device", COPY_NS)]
    assert {site(r) for r in blocking["rows"]} == {"copy_blocking"}

    memsets = rules["cuda_memset_sync"]
    assert [(r["Name"], r["Duration (ns)"], site(r)) for r in memsets["rows"]] == \
        [("cudaMemset", COPY_NS, "clear_blocking")]

    waits = rules["cuda_api_sync"]
    assert sorted(r["Name"] for r in waits["rows"]) == ["cudaDeviceSynchronize"] * 2 + ["cudaStreamSynchronize"] * 2
    assert {site(r) for r in waits["rows"]} == {"wait_for_device"}
    gaps = rules["gpu_gaps"]["rows"]
    assert len(gaps) == 1 and GAP_MS * 1e6 <= gaps[0]["Duration (ns)"] < GAP_MS * 1e6 + 3e9, gaps
    gap = gaps[0]
    # Most costly first: the wait for the 200 ms kernel, which starts where the idle time ends.
    durations = [r["Duration (ns)"] for r in waits["rows"]]
    assert durations == sorted(durations, reverse=True)
    longest = waits["rows"][0]
    assert longest["Name"] == "cudaStreamSynchronize" and durations[0] > KERNEL_NS / 2, longest
    assert longest["Start (ns)"] + durations[0] >= gap["End (ns)"] + KERNEL_NS > longest["Start (ns)"], (longest, gap)
    # The memset before the idle time is the last of the copies and memsets, which start at the first.
    assert gap["Start (ns)"] == memsets["rows"][0]["Start (ns)"] + COPY_NS

    low = rules["gpu_time_util"]["rows"]
    assert len(low) == 1, low
    window = low[0]
    first_op = min(r["Start (ns)"] for r in copies["rows"])
    chunk = (gap["End (ns)"] + KERNEL_NS - first_op) / 30
    # From the first operation to about the kernel's start: the idle time and the short copies before it.
    assert window["Start (ns)"] == first_op and abs(window["End (ns)"] - gap["End (ns)"]) <= chunk + 1, (window, gap)
    assert window["Utilization (%)"] < 50 and window["Windows"] == round((window["End (ns)"] - first_op) / chunk)
    assert doc["stack_hint"] is None  # every call took its stack


def test_each_rule_is_silent_on_the_program_that_avoids_it(runs):
    text = analyze(runs["avoid"]).stdout
    assert re.findall(r"^\*\* .* \((\w+)\)$", text, re.M) == RULES
    assert text.count("No findings.") == len(RULES) and "Not checked" not in text, text


def test_the_column_output_explains_each_rule_and_cuts_the_list(runs):
    text = analyze("-r", "cuda_memcpy_sync,cuda_api_sync", "--rows", "2", runs["trigger"]).stdout
    assert text.startswith("** Synchronous copies (cuda_memcpy_sync)\n")
    assert "** Calls that wait for the device (cuda_api_sync)" in text and "gpu_gaps" not in text
    assert "Advice: " in text and "3 findings:" in text and "4 findings:" in text
    assert "... and 1 more" in text and "... and 2 more" in text
    assert re.search(r"cudaMemcpy .* copy_blocking <- ", text), text


def test_a_python_call_site_names_the_function_and_its_line(tmp_path):
    script = HERE / "python" / "rules.py"
    line = next(i for i, text in enumerate(script.read_text().splitlines(), 1) if text.endswith("# COPY"))
    _, trace = profile(tmp_path, ["python3", str(script)], env=sim_env(**ON_DEVICE),
                       options=["--cudabacktrace", "all:0"])
    rules, _ = findings(trace, "-r", "cuda_memcpy_async")
    rows = rules["cuda_memcpy_async"]["rows"]
    assert len(rows) == 1 and rows[0]["Duration (ns)"] == COPY_NS, rows
    assert rows[0]["Python Call Site"].startswith(f"fetch_batch (rules.py:{line}) <- main (rules.py:"), rows[0]


def test_a_trace_without_gpu_activity_says_so_per_rule(tmp_path):
    _, trace = profile(tmp_path, [app("sim_rules"), "trigger", "0"], env=sim_env(**ON_DEVICE),
                       options=["--gpu-activity", "false"])
    text = analyze(trace).stdout
    sentence = ("Not checked: this rule needs GPU activity (kernels, copies, memsets), and this trace has none: "
                "recorded with --gpu-activity false; record without it.")
    assert text.count(sentence) == 5 and "No findings." not in text, text
    assert "4 findings:" in text  # cuda_api_sync needs the calls alone
    # No call took a stack: the output says how to get call sites.
    assert "--cudabacktrace all:THRESHOLD" in " ".join(text.split())


def test_three_ranks_name_the_slowest(tmp_path):
    job = tmp_path / "job"
    job.mkdir()
    for rank in range(3):
        # Rank 1's copies and memset are 20 times slower: 6 of them, 20 ms each instead of 1.
        profile(job, [app("sim_rules"), "avoid"], name=f"rank{rank}",
                env=sim_env(RANK=rank, SIMCUDA_COPY_GBPS="0.05" if rank == 1 else "1"))
    text = analyze("-r", "gpu_gaps", job).stdout
    assert "Slowest rank by Memcpy Time: rank 1 (100,000,000 ns; median 5,000,000 ns, fastest rank 0 " \
           "5,000,000 ns)" in text, text
    _, doc = findings(job, "-r", "gpu_gaps")
    view = doc["stragglers"]
    totals = [dict(zip(view["totals"]["columns"], r)) for r in view["totals"]["rows"]]
    assert [(t["Rank"], t["Memcpys"], t["Memcpy Time"]) for t in totals] == \
        [(0, 5, 5 * COPY_NS), (1, 5, 100 * COPY_NS), (2, 5, 5 * COPY_NS)]
    ranges = [dict(zip(view["ranges"]["columns"], r)) for r in view["ranges"]["rows"]]
    assert [(r["Range"], r["Ranks"], r["Slowest Rank"]) for r in ranges] == [(":step", 3, 1)], ranges
    assert [t["rank"] for t in doc["traces"]] == [0, 1, 2]


def test_exit_codes(runs, tmp_path):
    assert "unknown rule 'gpu_gap'" in analyze("-r", "gpu_gap", runs["avoid"], expect=2).stderr
    assert "no trace or directory" in analyze(tmp_path / "missing.cutrace", expect=2).stderr
    bad = tmp_path / "bad.cutrace"
    bad.write_bytes(b"not a trace at all" * 100)
    err = analyze(bad, expect=1).stderr
    assert err.startswith(f"cutrace analyze: {bad} cannot be read: ") and len(err.splitlines()) == 1, err
    cut = tmp_path / "cut.cutrace"
    data = Path(runs["trigger"]).read_bytes()
    cut.write_bytes(data[: len(data) * 2 // 3])
    err = analyze("-r", "cuda_api_sync", cut, expect=3).stderr
    assert "warning: " in err and "its intact part is analysed" in err, err
    out = tmp_path / "report.txt"
    analyze("-r", "gpu_gaps", "-o", out, runs["avoid"])
    assert out.read_text().count("No findings.") == 1
    assert "already exists" in analyze("-r", "gpu_gaps", "-o", out, runs["avoid"], expect=2).stderr
    analyze("-r", "gpu_gaps", "-o", out, "--force-overwrite", "true", "--format", "csv", runs["avoid"])
    assert out.read_text().startswith("# gpu_gaps: GPU idle time: 0 findings\n")
    # -f is --format, as in cutrace stats and nsys.
    out.unlink()
    analyze("-r", "gpu_gaps", "-o", out, "-f", "csv", runs["avoid"])
    assert out.read_text().startswith("# gpu_gaps: GPU idle time: 0 findings\n")
