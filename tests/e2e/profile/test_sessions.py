"""Sessions seen from another shell: `cutrace sessions list` names every `cutrace profile` of this
user running on this host, and `cutrace status --calls` the call each traced thread is in now, as
`py-spy dump` does for Python: for a program hung in a synchronize, that synchronize and how long it
has lasted. Other users' sessions and objects that are not sessions are never shown. When recording
of a thread ends while it is in a call (it was killed there, or recording stopped first), the trace
keeps that call, marked not returned, and the run's warnings name it."""
import json
import os
import re
import secrets
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time

import pytest

from conftest import CUTRACE, api_sum, api_trace, app, info, metadata, sim_env

NOBODY = 65534
MINUTES_LONG_KERNEL = str(600 * 10**9)


def cutrace(*args, expect=0, prefix=()):
    proc = subprocess.run([*prefix, str(CUTRACE), *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == expect, f"cutrace {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}"
    return proc


def wait_until(what, probe, accept, timeout=60):
    """probe() again and again until accept(its value); returns that value."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if accept(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def start_hung(tmp_path, name="trace", options=()):
    """`cutrace profile -- sim_hang` with a kernel of ten minutes: its main thread stays in
    cudaDeviceSynchronize until the test interrupts it."""
    proc = subprocess.Popen([str(CUTRACE), "profile", "-o", str(tmp_path / name), *options, "--", app("sim_hang")],
                            env=sim_env(SIMCUDA_KERNEL_NS=MINUTES_LONG_KERNEL), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "launched\n"
    return proc


def interrupt(proc):
    """Ctrl+C as the launcher gets it: forwarded to the program, which dies of it."""
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


def calls_of(text):
    """thread id -> (thread name, call or None, seconds) from `cutrace status --calls`."""
    threads = {}
    for m in re.finditer(r"^    thread (\d+) \((.*)\): (?:in no traced call|in (\S+) for ([\d.]+) (us|ms|s))$", text, re.M):
        tid, name, api, amount, unit = m.groups()
        seconds = float(amount) * {"us": 1e-6, "ms": 1e-3, "s": 1.0}[unit] if api else 0.0
        threads[int(tid)] = (name, api, seconds)
    return threads


def test_status_calls_shows_the_synchronize_a_hung_program_is_in_and_for_how_long(tmp_path):
    proc = start_hung(tmp_path)
    try:
        session = f"profile-{proc.pid}"
        # The second thread claims its ring at its first call, which may come after "launched".
        text = wait_until("both threads", lambda: cutrace("status", "--session", session, "--calls").stdout,
                          lambda t: len(calls_of(t)) == 2)
        head, command, process = text.splitlines()[:3]
        assert re.fullmatch(rf"{session} \(pid {proc.pid}\): recording, running for 00:00:\d\d, 1 traced process, "
                            r"2 threads", head), text
        assert command == f"  command: {CUTRACE} profile -o {tmp_path / 'trace'} -- {app('sim_hang')}", text
        program = int(re.fullmatch(r"  process (\d+): (.*)", process).group(1))
        assert re.fullmatch(rf"  process {program}: {re.escape(app('sim_hang'))}", process), text
        threads = calls_of(text)
        # The shim's own threads (GPU activity here) are named as such, and counted neither as the
        # program's threads nor as threads in no call.
        for line in text.splitlines()[3:]:
            assert re.fullmatch(r"    thread \d+ \((?!cutrace-).*\): in .*|    thread \d+ \(cutrace-\w+\): cutrace's own thread",
                                line), text
        name, api, first = threads[program]
        assert (name, api) == ("sim_hang", "cudaDeviceSynchronize"), text
        [(other_name, other_api, _)] = [v for tid, v in threads.items() if tid != program]
        assert other_api is None, text
        # The time is the call's: it grows as the call goes on.
        time.sleep(0.5)
        later = calls_of(cutrace("status", "--session", str(proc.pid), "--calls").stdout)[program]
        assert later[1] == "cudaDeviceSynchronize" and later[2] >= first + 0.45, (first, later)

        listing = cutrace("sessions", "list").stdout.splitlines()
        assert re.fullmatch(r"NAME +PID +TIME +STATE +PROCESSES +THREADS +COMMAND", listing[0]), listing
        [row] = [line for line in listing[1:] if line.startswith(session + " ")]
        assert re.fullmatch(rf"{session} +{proc.pid} +00:00:\d\d +recording +1 +2 +{re.escape(str(CUTRACE))} profile .*sim_hang",
                            row), row
    finally:
        code, out, err = interrupt(proc)
    assert code == 128 + signal.SIGINT, err
    assert "synchronized" not in out
    # The session is gone with its launcher, and the trace kept what returned before the interrupt.
    gone = cutrace("status", "--session", session, expect=1)
    assert gone.stderr == (f"cutrace status: no session named {session} is running for this user on this host; "
                           "`cutrace sessions list` lists those that are.\n")
    trace = tmp_path / "trace.cutrace"
    assert re.search(r"^Status: +complete:", info(trace), re.M)
    # The synchronize never returned: the trace has it, from its start to the program's death.
    [sync] = [r for r in api_trace(trace) if r["Name"] == "cudaDeviceSynchronize"]
    assert sync["Result"] == "not returned" and sync["Depth"] == 0, sync
    assert sync["Duration (ns)"] >= later[2] * 1e9, (sync, later)
    [malloc] = [r for r in api_trace(trace) if r["Name"] == "cudaMalloc"]
    assert malloc["Result"] == "cudaSuccess (0)" and malloc["Start (ns)"] < sync["Start (ns)"]
    assert metadata(trace, "End summary:")["calls_not_returned"] == "1"
    [warning] = [l for l in err.splitlines() if l.startswith("cutrace: warning:")]
    assert re.fullmatch(rf"cutrace: warning: 1 call had not returned when recording of its thread ended \(the process "
                        rf"hung or died in it, or recording stopped first\): cudaDeviceSynchronize for [\d.]+ s in "
                        rf"thread {program} of process {program} \(.*sim_hang\); the trace has it, marked not returned\.",
                        warning), warning


def test_a_program_killed_in_a_call_leaves_that_call_in_the_trace_marked_not_returned(tmp_path):
    proc = start_hung(tmp_path)
    try:
        text = wait_until("the synchronize", lambda: cutrace("status", "--session", str(proc.pid), "--calls").stdout,
                          lambda t: "in cudaDeviceSynchronize for" in t)
        program = int(re.search(r"^  process (\d+):", text, re.M).group(1))
        os.kill(program, signal.SIGKILL)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            interrupt(proc)
    assert proc.returncode == 128 + signal.SIGKILL, err
    rows = api_trace(tmp_path / "trace.cutrace")
    # The other thread's call returned before the kill; the synchronize did not.
    results = sorted((r["Name"], r["Result"]) for r in rows if r["Name"] in ("cudaDeviceSynchronize", "cudaGetDevice"))
    assert results == [("cudaDeviceSynchronize", "not returned"), ("cudaGetDevice", "cudaSuccess (0)")], rows
    assert "1 call had not returned" in err
    # The exports say so too: the SQLite tables' result, and the timeline slice's args.
    trace = tmp_path / "trace.cutrace"
    cutrace("export", "--type", "perfetto-json", "-o", str(tmp_path / "t.json"), str(trace))
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    [sync] = [e for e in events if e.get("name") == "cudaDeviceSynchronize" and e.get("ph") == "X"]
    assert sync["args"]["not_returned"] == "true" and "result_name" not in sync["args"], sync
    cutrace("export", "--type", "sqlite", "-o", str(tmp_path / "t.sqlite"), str(trace))
    with sqlite3.connect(tmp_path / "t.sqlite") as db:
        assert db.execute("SELECT c.result FROM CUTRACE_API_CALLS c JOIN StringIds s ON s.id = c.nameId "
                          "WHERE s.value = 'cudaDeviceSynchronize'").fetchall() == [("not returned",)]


def test_every_session_is_listed_and_status_without_a_name_covers_them_all(tmp_path):
    first = start_hung(tmp_path, "one")
    try:
        second = start_hung(tmp_path, "two", options=("-t", "cuda,nvtx"))
        try:
            names = {f"profile-{first.pid}", f"profile-{second.pid}"}
            rows = cutrace("sessions", "list").stdout.splitlines()[1:]
            assert names <= {row.split()[0] for row in rows}, rows
            text = wait_until("both sessions' synchronizes", lambda: cutrace("status", "--calls").stdout,
                              lambda t: t.count("in cudaDeviceSynchronize for") >= 2)
            for name in names:
                assert re.search(rf"^{name} \(pid \d+\): recording,", text, re.M), text
        finally:
            interrupt(second)
    finally:
        interrupt(first)


def test_status_as_json_has_every_thread_and_its_call(tmp_path):
    proc = start_hung(tmp_path)
    try:
        doc = wait_until("the synchronize", lambda: json.loads(cutrace("status", "--session", str(proc.pid), "--calls",
                                                                       "--format", "json").stdout),
                         lambda d: any(t["call"] for p in d["sessions"][0]["processes"] for t in p["threads"]))
        assert doc["host"] == socket.gethostname()
        [session] = doc["sessions"]
        assert {k: session[k] for k in ("name", "pid", "state", "process_count")} == {
            "name": f"profile-{proc.pid}", "pid": proc.pid, "state": "recording", "process_count": 1}
        assert session["command"].endswith("sim_hang") and session["running_ns"] < 600 * 10**9
        [process] = session["processes"]
        assert process["command"] == app("sim_hang")
        main = next(t for t in process["threads"] if t["tid"] == process["pid"])
        assert main["call"]["name"] == "cudaDeviceSynchronize" and main["call"]["elapsed_ns"] > 0, main
        assert all(t["cutrace_thread"] == t["name"].startswith("cutrace-") for t in process["threads"])
        assert session["thread_count"] == sum(not t["cutrace_thread"] for t in process["threads"])
        # Without --calls, only the counts; with no session, an empty list rather than an error.
        assert "processes" not in json.loads(cutrace("status", "--session", str(proc.pid), "--format", "json").stdout)[
            "sessions"][0]
    finally:
        interrupt(proc)
    assert cutrace("status", "--session", str(proc.pid), "--format", "json", expect=1).stdout == ""


def test_no_session_and_bad_words_are_one_sentence_each(tmp_path):
    assert cutrace("status", "--session", "profile-1", expect=1).stderr.startswith(
        "cutrace status: no session named profile-1 is running")
    assert cutrace("status", "--bogus", expect=2).stderr == (
        "cutrace status: unknown option '--bogus'; see `cutrace status --help`.\n")
    assert cutrace("sessions", expect=2).stderr == (
        "cutrace sessions: say what to do with the sessions (list); see `cutrace sessions --help`.\n")
    assert cutrace("sessions", "kill", expect=2).stderr == (
        "cutrace sessions: unknown action 'kill' (only list is known); see `cutrace sessions --help`.\n")
    assert cutrace("status", "--format", "xml", expect=2).stderr == (
        "cutrace status: --format takes text or json, not 'xml'; see `cutrace status --help`.\n")
    assert "--calls" in cutrace("status", "--help").stdout


def test_objects_that_are_not_this_users_sessions_are_passed_over(tmp_path):
    """A file in /dev/shm under a session's name that is garbage, readable by others, or too short
    is not a session; status reads none of it and goes on to the real one."""
    planted = []
    try:
        for mode, content in ((0o600, b"\0" * 4096), (0o644, b"\0" * 4096), (0o600, b"TCSSION1")):
            path = f"/dev/shm/cutrace-{os.getuid()}-{secrets.token_hex(16)}"
            with open(path, "wb") as f:
                f.write(content)
            os.chmod(path, mode)
            planted.append(path)
        proc = start_hung(tmp_path)
        try:
            rows = cutrace("sessions", "list").stdout.splitlines()[1:]
            assert f"profile-{proc.pid}" in {row.split()[0] for row in rows}
            assert all(re.match(r"profile-\d+ ", row) for row in rows), rows
        finally:
            interrupt(proc)
    finally:
        for path in planted:
            os.unlink(path)


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="another user needs root and setpriv")
def test_another_user_sees_no_session_of_this_one(tmp_path):
    as_nobody = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    reach = subprocess.run([*as_nobody, str(CUTRACE), "--version"], capture_output=True, timeout=60)
    if reach.returncode != 0:
        pytest.skip(f"uid {NOBODY} cannot run {CUTRACE}")
    proc = start_hung(tmp_path)
    try:
        cutrace("status", "--session", str(proc.pid))  # this user sees it
        refused = cutrace("status", "--session", str(proc.pid), "--calls", expect=1, prefix=as_nobody)
        assert refused.stderr.startswith(f"cutrace status: no session named {proc.pid} is running for this user")
        listing = cutrace("sessions", "list", prefix=as_nobody).stdout.splitlines()
        assert listing[1:] == [], listing
    finally:
        interrupt(proc)
