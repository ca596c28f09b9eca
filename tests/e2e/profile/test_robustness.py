"""Nothing is lost silently: a program killed with SIGKILL keeps every call it had completed, a
recorder killed mid-run leaves the program undisturbed and a readable trace, and a ring too small for
its producer accounts for every call as recorded or dropped; a path that is no trace file is refused
at once."""
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import CUTRACE, api_sum, app, info, info_totals, metadata, profile, run_tool, sim_env


def children(pid):
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found += [int(p) for p in f.read().split()]
        except FileNotFoundError:
            pass
    return found


def comm(pid):
    """The process name, as the kernel keeps it (at most 15 characters)."""
    with open(f"/proc/{pid}/comm") as f:
        return f.read().strip()


def progress(path):
    """The program's last published progress: {"completed": n, "<function>": n, ...}."""
    try:
        with open(path) as f:
            return {k: int(v) for k, v in (line.split() for line in f if line.strip())}
    except FileNotFoundError:
        return {}


def wait_for(predicate, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError("timed out waiting")


def start(tmp_path, command, options=()):
    out = tmp_path / "trace"
    launcher = subprocess.Popen([str(CUTRACE), "profile", "-o", str(out), *options, "--", *command],
                                env=sim_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return launcher, tmp_path / "trace.cutrace"


def test_sigkilled_program_keeps_every_call_it_completed(tmp_path):
    progress_file = tmp_path / "progress"
    launcher, trace = start(tmp_path, [app("sim_progress"), str(progress_file), "0", "50"])
    wait_for(lambda: progress(progress_file).get("completed", 0) >= 3000)
    program = wait_for(lambda: [p for p in children(launcher.pid) if comm(p) == "sim_progress"])[0]
    os.kill(program, signal.SIGKILL)
    _, stderr = launcher.communicate(timeout=120)
    assert launcher.returncode == 128 + signal.SIGKILL, stderr
    done = progress(progress_file)  # what the program had published before it died
    table = api_sum(trace)
    for function in ("cudaMalloc", "cudaGetDevice", "cudaMemsetAsync", "cudaStreamSynchronize"):
        assert table[function]["Num Calls"] >= done[function], function
    assert "Status:    complete:" in info(trace)


def test_killed_recorder_leaves_the_program_running_and_a_salvageable_trace(tmp_path):
    progress_file = tmp_path / "progress"
    iterations = 300000
    launcher, trace = start(tmp_path, [app("sim_progress"), str(progress_file), str(iterations), "100"])
    recorder = wait_for(lambda: [p for p in children(launcher.pid) if comm(p).startswith("cutrace-record")])[0]
    # Let the recorder write a few chunks first (it flushes at least once a second).
    wait_for(lambda: progress(progress_file).get("completed", 0) >= 2000)
    time.sleep(1.2)
    os.kill(recorder, signal.SIGKILL)
    stdout, stderr = launcher.communicate(timeout=300)
    assert launcher.returncode == 0, stderr
    assert f"iterations {iterations}" in stdout
    assert "recorder" in stderr
    assert trace.exists()
    text = info(trace, expect=3)
    assert "Status:    incomplete:" in text
    stats = run_tool("stats", "--format", "csv", trace, expect=3)
    assert "cudaGetDevice" in stats.stdout
    assert "record again for a whole trace" in stats.stderr


def test_drops_while_the_recorder_was_stopped_are_blamed_on_the_stop(tmp_path):
    progress_file = tmp_path / "progress"
    iterations = 1000000
    launcher, trace = start(tmp_path, [app("sim_progress"), str(progress_file), str(iterations), "1000"],
                            options=("--ring-size", "65536"))
    recorder = wait_for(lambda: [p for p in children(launcher.pid) if comm(p).startswith("cutrace-record")])[0]
    wait_for(lambda: progress(progress_file).get("completed", 0) >= 3000)
    os.kill(recorder, signal.SIGSTOP)
    time.sleep(1.5)
    still_running = progress(progress_file).get("completed", 0) < 3 * iterations
    os.kill(recorder, signal.SIGCONT)
    stdout, stderr = launcher.communicate(timeout=300)
    assert launcher.returncode == 0, stderr
    assert f"iterations {iterations}" in stdout
    assert still_running, "the program must make calls while the recorder is stopped"
    summary = [line for line in stderr.splitlines() if " events, " in line]
    assert len(summary) == 1 and "(rings full: the recorder went " in summary[0], stderr
    stalled = float(summary[0].split("the recorder went ")[1].split(" s ")[0])
    assert 1.4 <= stalled < 60, summary[0]
    assert "raise --ring-size)" not in summary[0]
    totals = info_totals(info(trace))
    assert totals["dropped"] > 0
    end = metadata(trace, "End summary:")
    assert 1.4e9 <= int(end["recorder.longest_stall_ns"]) < 60e9, end


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="a small disk of its own needs root")
def test_a_full_disk_keeps_what_was_written_counts_what_was_not_and_names_the_final_file(tmp_path):
    calls = 3000000
    program = [app("cheap_calls"), str(calls)]
    alone = subprocess.run(program, env=sim_env(), capture_output=True, text=True, timeout=120)
    # A 1 MiB disk holds about a third of the calls; the trace is copied out before the disk goes. A
    # ring that holds every call (3 M records of 56 bytes: 160 MiB): however slow the recorder (a
    # sanitizer's build beside other tests), all of them reach the writer, so the disk fills.
    disk = tmp_path / "disk"
    disk.mkdir()
    shell = ('mount -t tmpfs -o size=1m cutrace-test-disk "$0" && "$@"; status=$?; '
             'cp "$0/trace.cutrace" "$0/../trace.cutrace"; ls -a "$0" >&2; exit $status')
    proc = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", shell, str(disk),
                           str(CUTRACE), "profile", "--gpu-activity", "false", "--ring-size", str(256 << 20), "-o",
                           str(disk / "trace"), "--", *program], env=sim_env(), capture_output=True, text=True,
                          timeout=300)
    # The program is not disturbed (its output but for its timing).
    untimed = lambda out: [line for line in out.splitlines() if not line.startswith(("total_ns", "ns_per_call"))]
    assert (proc.returncode, untimed(proc.stdout)) == (alone.returncode, untimed(alone.stdout)), proc.stderr
    final = f"{disk}/trace.cutrace"
    said = [line for line in proc.stderr.splitlines() if line.startswith("cutrace-recorder:")]
    assert len(said) == 1, proc.stderr
    assert said[0].startswith(f"cutrace-recorder: cannot write '{final}': No space left on device; {final} keeps the ")
    assert ".part" not in proc.stderr
    written, unwritten = (int(said[0].split(" keeps the ")[1].split()[0]),
                          int(said[0].split(", and the ")[1].split()[0]))
    assert written > 0 and unwritten > 0
    trace = tmp_path / "trace.cutrace"
    recorded = api_sum(trace, expect=3)["cudaGetDevice"]["Num Calls"]
    # A tight loop outruns the recorder on a small machine: its rings fill too, and the sentence says
    # how many were dropped there.
    dropped = int(said[0].split(" (")[1].split()[0]) if " more were dropped in full rings)" in said[0] else 0
    # Every call is in the trace, counted as not written or counted as dropped; the few other records
    # are the process's own (its start, its libraries).
    others = written + unwritten + dropped - calls
    assert 0 <= others < 100 and recorded <= written, (recorded, written, unwritten, dropped)
    assert calls <= recorded + unwritten + dropped <= calls + others, (recorded, written, unwritten, dropped)


def test_tiny_ring_accounts_for_every_call_as_recorded_or_dropped(tmp_path):
    calls = 300000
    out = tmp_path / "tiny"
    # Calls alone: GPU activity's records, written into the same tiny ring at exit, would count among
    # the drops too (drops are of records, of any kind).
    proc = subprocess.run([str(CUTRACE), "profile", "--ring-size", "16384", "--gpu-activity", "false", "-o", str(out),
                           "--", app("cheap_calls"), str(calls)], env=sim_env(), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    trace = tmp_path / "tiny.cutrace"
    recorded = api_sum(trace)["cudaGetDevice"]["Num Calls"]
    dropped = info_totals(info(trace))["dropped"]
    assert dropped > 0, "a 16 KiB ring under a tight loop should overflow"
    assert recorded + dropped == calls
    assert f"{dropped:,} dropped" in proc.stderr or f"{dropped} dropped" in proc.stderr


def gone(pid):
    """Exited: no longer in /proc, or a zombie that nobody has reaped yet."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1][0] in "ZX"
    except (FileNotFoundError, ProcessLookupError):
        return True


def orphan_the_program(tmp_path):
    """Starts sim_progress under the launcher and kills the launcher with SIGKILL once the program is
    well under way. Returns (program pid, recorder pid, session shm path, progress file, trace,
    calls completed when the launcher died)."""
    progress_file = tmp_path / "progress"
    launcher, trace = start(tmp_path, [app("sim_progress"), str(progress_file), "0", "50"])
    program = wait_for(lambda: [p for p in children(launcher.pid) if comm(p) == "sim_progress"])[0]
    recorder = wait_for(lambda: [p for p in children(launcher.pid) if comm(p).startswith("cutrace-record")])[0]
    with open(f"/proc/{program}/environ", "rb") as f:
        env = dict(item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item)
    shm = "/dev/shm" + env[b"CUTRACE_SESSION"].decode()
    assert os.path.exists(shm)
    wait_for(lambda: progress(progress_file).get("completed", 0) >= 1000)
    launcher.kill()  # SIGKILL: the launcher can clean up nothing, nor end the recording
    launcher.wait(timeout=60)  # not communicate(): the orphaned program still holds its pipes
    return program, recorder, shm, progress_file, trace, progress(progress_file)["completed"]


def test_launcher_killed_with_sigkill_recording_goes_on_until_the_program_exits(tmp_path):
    program, recorder, shm, progress_file, trace, at_death = orphan_the_program(tmp_path)
    try:
        # The program runs on, and its calls are still wanted: the recorder keeps the session.
        wait_for(lambda: progress(progress_file).get("completed", 0) >= at_death + 3000)
        assert not gone(recorder)
        assert not trace.exists()
        assert os.path.exists(shm)
    finally:
        os.kill(program, signal.SIGKILL)
    # The program's death ends the recording: the recorder finishes the trace and removes the
    # session's name itself.
    wait_for(lambda: gone(recorder))
    done = progress(progress_file)  # the program is dead: its last word
    assert trace.exists()
    assert not os.path.exists(shm)
    text = info(trace)
    assert "Status:    complete:" in text
    assert "Launcher:  died " in text and "until every traced process had exited" in text
    assert api_sum(trace)["cudaGetDevice"]["Num Calls"] >= done["cudaGetDevice"] > at_death // 3


def test_recorder_stopped_after_the_launcher_died_calls_the_trace_cut_off(tmp_path):
    program, recorder, shm, progress_file, trace, at_death = orphan_the_program(tmp_path)
    try:
        wait_for(lambda: progress(progress_file).get("completed", 0) >= at_death + 1000)
        os.kill(recorder, signal.SIGTERM)  # a real SIGTERM: stop now, while the program goes on
        wait_for(lambda: gone(recorder))
        assert not gone(program)
    finally:
        os.kill(program, signal.SIGKILL)
    assert trace.exists()
    assert not os.path.exists(shm)
    text = info(trace, expect=3)
    assert ("Status:    cut off: the launcher died, and the recorder was sent SIGTERM while traced processes "
            "were still running; the last record is ") in text, text
    assert "s into the recording; " in text
    assert "Launcher:  died " in text
    stats = run_tool("stats", "--format", "csv", trace, expect=3)
    assert "cut off" in stats.stderr and "record again for a whole trace" in stats.stderr
    # What came after the launcher's death, up to the SIGTERM, is there.
    assert api_sum(trace, expect=3)["cudaGetDevice"]["Num Calls"] > at_death // 3 + 300


def test_a_shim_of_another_build_stays_out_and_the_recorder_says_so(tmp_path):
    # Api ids are one build's: a recorder naming another build's ids would mislabel every call. The
    # shim compares the session's table hash with its own and, on a mismatch, lets the program run
    # untraced, counted for one warning.
    program = [app("sim_vector_add"), "2", "1024"]
    alone = subprocess.run(program, env=sim_env(), capture_output=True, text=True, timeout=60)
    proc, trace = profile(tmp_path, [app("foreign_recorder"), *program])
    assert proc.stdout == alone.stdout and proc.returncode == 0
    said = [l for l in proc.stderr.splitlines() if "another build" in l]
    assert said == ["cutrace: warning: 1 process ran a cutrace shim of another build (its table of functions differs "
                    "from this recorder's), so its calls were not recorded rather than named wrongly; run the "
                    "launcher, the recorder and the shim of one build (CUTRACE_PRELOAD_LIB names the shim)."]
    assert api_sum(trace) == {}


def test_no_command_that_reads_traces_waits_on_a_fifo_or_takes_another_kind_of_file(tmp_path):
    # Opening a FIFO for reading waits for a writer: each command, and the Python package, must refuse
    # it (and a link to it, a directory, a device) in one sentence, at once.
    fifo = tmp_path / "pipe.cutrace"
    os.mkfifo(fifo)
    link = tmp_path / "link.cutrace"
    link.symlink_to(fifo)
    commands = [["info"], ["stats"], ["stats", "--report", "cuda_api_trace"], ["analyze"], ["view"],
                ["recipe", "cuda_api_sum", "--output", tmp_path / "recipe", "--input"]]
    commands += [["export", "--type", kind, "-o", tmp_path / f"out_{kind}"]
                 for kind in ("sqlite", "perfetto", "perfetto-json", "parquetdir", "arrow", "kineto")]
    for path, kind in ((fifo, "a FIFO (named pipe)"), (link, "a FIFO (named pipe)"), ("/dev/null", "a character device")):
        for command in commands:
            proc = subprocess.run([str(CUTRACE), *map(str, command), str(path)], capture_output=True, text=True,
                                  timeout=30, stdin=subprocess.DEVNULL)
            lines = proc.stderr.strip().splitlines()
            assert proc.returncode != 0 and len(lines) == 1 and f"is {kind}, not " in lines[0], (command, path, proc.stderr)
    directory = tmp_path / "dir.cutrace"
    directory.mkdir()
    proc = subprocess.run([str(CUTRACE), "stats", str(directory)], capture_output=True, text=True, timeout=30)
    assert proc.returncode != 0 and "is a directory, not a trace file" in proc.stderr, proc.stderr
    # The package: a trace, and an arrow export.
    script = ("import sys, cutrace\n"
              "for read in (cutrace.open, cutrace.read_arrow_export):\n"
              "    try:\n"
              "        read(sys.argv[1])\n"
              "    except cutrace.TraceError as e:\n"
              "        print(e)\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3] / "python")}
    out = subprocess.run([sys.executable, "-c", script, str(link)], capture_output=True, text=True, timeout=30,
                         env=env).stdout.splitlines()
    assert len(out) == 2 and all(f"{link}: is a FIFO (named pipe), not " in line for line in out), out
