"""Backtraces of slow calls (--cudabacktrace, --osrt-backtrace-threshold): exactly the calls at or
above their class's threshold carry their stack, from the program's own code (none of the tracer's
frames), and the stack names the program's call chain when symbolised from the trace alone
(module + offset, addr2line). Calls under the threshold, other classes and runs without the option
carry none; the shim's unwinder is its own, apart from any the program loads."""
import csv
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import APPS, CUTRACE, app, calls, metadata, profile, sim_env

# 16 MiB at 0.5 GB/s: each copy takes about 32 ms on the simulated device; cudaMalloc, cudaFree and
# cudaGetDevice take well under 20 ms, also the first call, which loads and initialises the driver
# and waits for CUPTI to start (a few ms on a machine busy with other tests).
SLOW_COPIES = {"SIMCUDA_COPY_GBPS": "0.5"}
THRESHOLD = "20000000"


def symbolise(frame):
    """(function, file) of a "module+0xoffset" frame of the test program, by addr2line on the offset
    of the return address less one (the call instruction's)."""
    module, _, offset = frame.partition("+")
    assert module == "backtrace_app", frame
    out = subprocess.run(["addr2line", "-f", "-C", "-e", app("backtrace_app"), hex(int(offset, 16) - 1)],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    return out[0].replace("(anonymous namespace)::", "").split("(")[0], Path(out[1].split(":")[0]).name


def stacks(tmp_path, options, name="trace", env=None):
    command = [app("backtrace_app"), "3", "5"]
    proc, trace = profile(tmp_path, command, env=env or sim_env(**SLOW_COPIES), options=options, name=name)
    assert proc.stdout == "copies 3 queries 5 failed 0\n"
    events, _ = calls(trace, tmp_path, domains=None)
    return [(e["name"], e["args"]["backtrace"]) for e in events if "backtrace" in e["args"]], events, proc, trace


def slow_memory_calls(events):
    """The outermost memory calls at or above THRESHOLD: the copies, and on a loaded machine the first
    call too (cudaMalloc loads and initialises the driver and waits for CUPTI to start)."""
    return [e["name"] for e in events if e["name"] in ("cudaMalloc", "cudaMemcpy", "cudaFree")
            and e["dur"] * 1000 >= int(THRESHOLD) and e["args"].get("depth", 0) == 0]


def test_slow_memory_calls_carry_the_programs_call_chain(tmp_path):
    taken, events, _, trace = stacks(tmp_path, ["--cudabacktrace", "memory:" + THRESHOLD])
    assert [name for name, _ in taken] == slow_memory_calls(events)
    copies = [e for e in events if e["name"] == "cudaMemcpy"]
    assert len(copies) == 3 and all(e["dur"] * 1000 >= int(THRESHOLD) for e in copies)
    for _, frames in (t for t in taken if t[0] == "cudaMemcpy"):
        # Innermost first: the function that called cudaMemcpy, its caller, main; then libc's start.
        assert [symbolise(f) for f in frames[:3]] == [("copy_slowly", "backtrace_app.cpp"),
                                                      ("level_two", "backtrace_app.cpp"), ("main", "backtrace_app.cpp")]
        assert not any("cutrace" in f for f in frames), frames
    # The nested driver copy inside each cudaMemcpy shares its caller's stack and carries none.
    assert not any(e["name"].startswith("cuMemcpy") and "backtrace" in e["args"] for e in events)
    assert metadata(trace)["backtrace.threshold_ns"] == "memory=" + THRESHOLD


def test_the_legacy_spelling_takes_every_class_at_its_threshold(tmp_path):
    taken, events, _, _ = stacks(tmp_path, ["--cudabacktrace=true", "--cudabacktrace-threshold=" + THRESHOLD])
    slow = [e["name"] for e in events if e["dur"] * 1000 >= int(THRESHOLD) and e["args"].get("depth", 0) == 0]
    assert [name for name, _ in taken] == slow and slow.count("cudaMemcpy") == 3


def test_calls_of_other_classes_below_their_threshold_or_without_the_option_carry_none(tmp_path):
    for k, options in enumerate((["--cudabacktrace", "sync:" + THRESHOLD], [],
                                 ["--cudabacktrace", "memory:1000000000"], ["--cudabacktrace", "none"])):
        taken, events, _, trace = stacks(tmp_path, options, name=f"run{k}")
        assert taken == [] and len(events) > 10, options
    assert "backtrace.threshold_ns" not in metadata(trace)


def test_every_class_at_a_low_threshold_takes_each_slow_call(tmp_path):
    # all:1000000 (1 ms): the copies, and whichever of cudaMalloc and cudaFree took that long; never a
    # cudaGetDevice, and never a call nested inside another.
    taken, events, _, _ = stacks(tmp_path, ["--cudabacktrace", "all:1000000"])
    slow = [e["name"] for e in events if e["dur"] >= 1000 and e["args"].get("depth", 0) == 0]
    assert [name for name, _ in taken] == slow and slow.count("cudaMemcpy") == 3


def test_slow_os_runtime_calls_carry_their_stack(tmp_path):
    command = [app("osrt_app"), "sleeps", "3", "4", "60", "50"]
    options = ["-t", "osrt", "--osrt-threshold", "1000000", "--osrt-backtrace-threshold", "20000000",
               "--osrt-backtrace-depth", "2"]
    proc, trace = profile(tmp_path, command, options=options)
    events, _ = calls(trace, tmp_path, domains=("os_runtime",))
    taken = [e for e in events if "backtrace" in e["args"]]
    # The six 60 ms sleeps; the 50 us ones are not even recorded.
    assert sorted(e["name"] for e in taken) == ["nanosleep"] * 3 + ["usleep"] * 3
    for e in taken:
        assert len(e["args"]["backtrace"]) == 2 and e["args"]["backtrace"][0].startswith("osrt_app+"), e["args"]
    assert metadata(trace)["backtrace.threshold_ns"] == "osrt=20000000"


def own_unwinder_run(tmp_path, mode, name, env=None):
    proc, trace = profile(tmp_path, [app("own_unwinder_app"), mode, "3"], env=env or sim_env(**SLOW_COPIES),
                          options=["--cudabacktrace", "memory:" + THRESHOLD], name=name)
    events, _ = calls(trace, tmp_path, domains=None)
    copies = [e for e in events if e["name"] == "cudaMemcpy"]
    assert len(copies) == 3 and all("backtrace" in e["args"] for e in copies), copies
    for e in copies:
        module, _, offset = e["args"]["backtrace"][0].partition("+")
        out = subprocess.run(["addr2line", "-f", "-C", "-e", app("own_unwinder_app"), hex(int(offset, 16) - 1)],
                             capture_output=True, text=True, check=True).stdout.splitlines()
        assert module == "own_unwinder_app" and "copy_through_own_unwinder" in out[0], (e["args"], out)
    assert "warning" not in proc.stderr, proc.stderr
    return proc.stdout.splitlines()


def test_the_shim_carries_its_own_unwinder_apart_from_the_programs(tmp_path):
    # The shim's stacks come from the unwinder linked into it, local to it: it loads no libunwind, and a
    # program that brings its own into its global scope (whose _Unwind_* then take its exceptions) keeps
    # it to itself, with its own stacks and exceptions working and the shim's backtraces unchanged.
    assert own_unwinder_run(tmp_path, "none", "none") == ["caught 7", "copies 3 failed 0", "libunwind mapped: no"]
    assert own_unwinder_run(tmp_path, "libunwind", "own") == [
        "own unwinder: walks", "caught 7", "copies 3 failed 0", "libunwind mapped: yes"]
    # Whatever libunwind.so.8 comes first on the library path, one without unw_backtrace included.
    env = sim_env(**SLOW_COPIES)
    env["LD_LIBRARY_PATH"] = f"{APPS / 'no_unwinder'}:{env['LD_LIBRARY_PATH']}"
    assert own_unwinder_run(tmp_path, "libunwind", "stand_in", env=env) == [
        "own unwinder: none", "caught 7", "copies 3 failed 0", "libunwind mapped: yes"]


# --- Naming the frames from the binaries (cutrace export's "stack", cutrace stats' callsite_sum). ---

SOURCES = Path(__file__).resolve().parents[2] / "apps"


def call_line(source, marker):
    """The line of tests/apps/SOURCE that ends with "// CALL: MARKER"."""
    lines = (SOURCES / source).read_text().splitlines()
    (number,) = [n for n, line in enumerate(lines, 1) if line.rstrip().endswith("// CALL: " + marker)]
    return number


def named(source, function, marker=None):
    return f"{function} ({source}:{call_line(source, marker or function)})"


def callsites(trace, options=()):
    proc = subprocess.run([str(CUTRACE), "stats", "--report", "callsite_sum", "--format", "csv", *options, str(trace)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return list(csv.DictReader(io.StringIO(proc.stdout))), proc.stderr


def copies_of(rows):
    """callsite_sum's rows of the slow copies alone: a call of another name may cross the threshold too
    when the machine stalls the program (see with_library)."""
    return [r for r in rows if r["Name"] == "cudaMemcpy"]


def with_library(tmp_path, command, name="trace", env=None):
    proc, trace = profile(tmp_path, command, env=sim_env(**SLOW_COPIES, **(env or {})), name=name,
                          options=["--cudabacktrace", "memory:" + THRESHOLD])
    events, _ = calls(trace, tmp_path, domains=None)
    # The slow copies' stacks. Another call of the class may cross the threshold too when the machine
    # stalls the program for 20 ms (a cudaMalloc, seen once under ctest -j2); it is not what these test.
    return proc, trace, [e for e in events if "stack" in e["args"] and e["name"] == "cudaMemcpy"]


def test_stacks_name_functions_lines_inlined_calls_and_a_dlopened_library(tmp_path):
    command = [app("backtrace_app"), "3", "5", str(APPS / "libbacktrace_lib.so")]
    proc, trace, taken = with_library(tmp_path, command)
    assert proc.stdout == "copies 3 queries 5 failed 0\n"
    assert [e["name"] for e in taken] == ["cudaMemcpy"] * 4
    program = [named("backtrace_app.cpp", "copy_slowly"), named("backtrace_app.cpp", "level_two"),
               named("backtrace_app.cpp", "main")]
    for e in taken[:3]:
        assert e["args"]["stack"][:3] == program, e["args"]["stack"]
    # The library's copy: the inlined helper and the function it was inlined into share one return
    # address (one raw frame, two named ones), then the program's main at the line that called it.
    library = taken[3]["args"]
    assert library["stack"][:3] == [named("backtrace_lib.cpp", "copy_inline") + " [inlined]",
                                    named("backtrace_lib.cpp", "backtrace_lib_copy"),
                                    named("backtrace_app.cpp", "main", "main (library)")], library["stack"]
    assert library["backtrace"][0].startswith("libbacktrace_lib.so+") and library["backtrace"][1].startswith("backtrace_app+")
    # Every frame outside the two test objects is named too (libc and the start code, here).
    assert len(library["stack"]) == len(library["backtrace"]) + 1

    rows, stderr = callsites(trace)
    assert stderr == ""
    copies = [e for e in calls(trace, tmp_path, domains=None)[0] if e["name"] == "cudaMemcpy"]
    rows = [r for r in rows if r["Name"] == "cudaMemcpy"]  # as with_library: the slow copies' rows
    assert [(r["Name"], r["Call Site"], int(r["Num Calls"])) for r in rows] == [
        ("cudaMemcpy", program[0], 3), ("cudaMemcpy", named("backtrace_lib.cpp", "copy_inline") + " [inlined]", 1)]
    assert rows[0]["Stack"].startswith(" <- ".join(program))
    # The totals are the calls' own durations (the export's microseconds, to the nanosecond).
    assert abs(int(rows[0]["Total Time (ns)"]) - sum(e["dur"] for e in copies[:3]) * 1000) < 3
    assert abs(int(rows[1]["Total Time (ns)"]) - copies[3]["dur"] * 1000) < 1


def test_a_library_unloaded_and_replaced_at_its_addresses_keeps_its_own_names(tmp_path):
    # Two builds of the library that differ in a function's name only; each is closed before the next
    # is loaded, so the second tends to be mapped where the first was, at the same offsets.
    first, again = APPS / "libbacktrace_lib.so", APPS / "libbacktrace_lib_again.so"
    proc, trace, taken = with_library(tmp_path, [app("backtrace_app"), "1", "1", str(first), str(again)],
                                      env={"BACKTRACE_APP_ADDRESSES": "1"})
    assert proc.stdout == "copies 1 queries 1 failed 0\n"
    # The test means something only where the loader reused the range.
    entry = [line.split(" at ")[1] for line in proc.stderr.splitlines() if " at 0x" in line]
    assert len(entry) == 2 and entry[0] == entry[1], proc.stderr
    assert [e["name"] for e in taken] == ["cudaMemcpy"] * 3
    line = call_line("backtrace_lib.cpp", "copy_inline")
    assert taken[1]["args"]["stack"][0] == f"copy_inline (backtrace_lib.cpp:{line}) [inlined]", taken[1]["args"]
    assert taken[2]["args"]["stack"][0] == f"copy_inline_again (backtrace_lib.cpp:{line}) [inlined]", taken[2]["args"]
    assert taken[1]["args"]["backtrace"][0].startswith("libbacktrace_lib.so+")
    assert taken[2]["args"]["backtrace"][0].startswith("libbacktrace_lib_again.so+")


def test_a_stripped_program_keeps_module_offsets_and_says_so(tmp_path):
    proc, trace, taken = with_library(tmp_path, [app("backtrace_app_stripped"), "2", "1"])
    assert proc.stdout == "copies 2 queries 1 failed 0\n"
    for e in taken:
        own = [f for f in e["args"]["backtrace"] if f.startswith("backtrace_app_stripped+")]
        assert len(own) >= 3 and own[:3] == e["args"]["stack"][:3], e["args"]
    rows, stderr = callsites(trace)
    assert copies_of(rows)[0]["Call Site"] == taken[0]["args"]["backtrace"][0]
    assert stderr == (f"cutrace stats: note: callsite_sum: {app('backtrace_app_stripped')}: no symbol or debug "
                      "information covers some of its frames (stripped, and no separate debug file found); those "
                      "are shown as module+offset.\n")


def test_modules_missing_for_one_reason_are_named_in_one_note(tmp_path):
    # A trace read where neither the program nor its dlopened library is (another machine, say): one
    # note names both, rather than a line each.
    program, library = tmp_path / "backtrace_app", tmp_path / "libbacktrace_lib.so"
    shutil.copy(app("backtrace_app"), program)
    shutil.copy(APPS / "libbacktrace_lib.so", library)
    _, trace, taken = with_library(tmp_path, [str(program), "1", "1", str(library)])
    assert [e["args"]["stack"][0] for e in taken][:1] == [named("backtrace_app.cpp", "copy_slowly")]
    program.unlink()
    library.unlink()
    rows, stderr = callsites(trace)
    assert stderr == (f"cutrace stats: note: callsite_sum: 2 modules: No such file or directory; their frames are "
                      "shown as module+offset (symbolise where the same builds are at those paths, or give a "
                      f"directory of copies with --symbol-path): {program}, {library}.\n"), stderr


def test_a_rebuilt_or_missing_binary_is_never_named_from_another_build(tmp_path):
    program = tmp_path / "backtrace_app"
    shutil.copy(app("backtrace_app"), program)
    _, trace, taken = with_library(tmp_path, [str(program), "1", "1"])
    assert taken[0]["args"]["stack"][0] == named("backtrace_app.cpp", "copy_slowly")
    # Another program where the traced one was: its build-id differs, so its symbols are not used.
    shutil.copy(app("osrt_app"), program)
    rows, stderr = callsites(trace)
    assert copies_of(rows)[0]["Call Site"] == taken[0]["args"]["backtrace"][0]
    assert stderr == (f"cutrace stats: note: callsite_sum: {program}: not the build the trace recorded (its GNU "
                      "build-id differs): rebuilt or replaced since; its frames are shown as module+offset rather "
                      "than named from another build.\n")
    program.unlink()
    rows, stderr = callsites(trace)
    assert copies_of(rows)[0]["Call Site"] == taken[0]["args"]["backtrace"][0]
    assert f"{program}: No such file or directory; its frames are shown as module+offset" in stderr

    # A copy of the traced build elsewhere (the binaries of another machine, say): --symbol-path finds
    # it by name, or below it by the recorded path, and names the frames again once its build-id matches.
    by_name, by_path, wrong = tmp_path / "symbols", tmp_path / "sysroot", tmp_path / "other"
    by_name.mkdir()
    shutil.copy(app("backtrace_app"), by_name / "backtrace_app")
    (by_path / program.parent.relative_to("/")).mkdir(parents=True)
    shutil.copy(app("backtrace_app"), by_path / program.relative_to("/"))
    wrong.mkdir()
    shutil.copy(app("osrt_app"), wrong / "backtrace_app")
    site = named("backtrace_app.cpp", "copy_slowly")
    # Or by build-id, as debug packages lay files out (/usr/lib/debug/.build-id/ab/cdef....debug).
    notes = subprocess.run(["readelf", "-n", app("backtrace_app")], capture_output=True, text=True, check=True).stdout
    build_id = next(l.split(":")[1].strip() for l in notes.splitlines() if "Build ID" in l)
    by_id = tmp_path / "debug"
    (by_id / ".build-id" / build_id[:2]).mkdir(parents=True)
    shutil.copy(app("backtrace_app"), by_id / ".build-id" / build_id[:2] / (build_id[2:] + ".debug"))
    for where in (by_name, by_path, by_id, f"{wrong}:{by_name}"):
        rows, stderr = callsites(trace, ["--symbol-path", str(where)])
        assert copies_of(rows)[0]["Call Site"] == site and str(program) not in stderr, (where, stderr)
    rows, stderr = callsites(trace, ["--symbol-path", str(wrong)])
    assert copies_of(rows)[0]["Call Site"] == taken[0]["args"]["backtrace"][0]
    assert f"{program}: No such file or directory nor anywhere in the symbol path;" in stderr
    # The export takes it too, and so do both from $CUTRACE_SYMBOL_PATH.
    out = tmp_path / "named.json"
    env = dict(os.environ, CUTRACE_SYMBOL_PATH=str(by_name))
    subprocess.run([str(CUTRACE), "export", "--type", "perfetto-json", "-o", str(out), str(trace)], env=env, check=True,
                   capture_output=True, timeout=60)
    stacks = [e["args"]["stack"] for e in json.loads(out.read_text())["traceEvents"]
              if "stack" in e.get("args", {}) and e["name"] == "cudaMemcpy"]
    assert stacks and stacks[0][0] == site


# --- Python frames. ---

SCRIPT = Path(__file__).resolve().parent / "scripts" / "python_backtrace.py"


def script_line(marker):
    lines = SCRIPT.read_text().splitlines()
    (number,) = [n for n, line in enumerate(lines, 1) if line.rstrip().endswith("# CALL: " + marker)]
    return number


def test_a_python_scripts_slow_call_names_its_functions_and_lines(tmp_path):
    command = [sys.executable, str(SCRIPT), "libcudart.so.13"]
    proc, trace = profile(tmp_path, command, env=sim_env(**SLOW_COPIES), options=["--cudabacktrace", "memory:" + THRESHOLD])
    assert proc.stdout == "failed 0\n"
    events, _ = calls(trace, tmp_path, domains=None)
    copies = [e for e in events if e["name"] == "cudaMemcpy"]
    assert len(copies) == 2 and all("backtrace" in e["args"] for e in copies)
    expected = [f"{function} (python_backtrace.py:{script_line(marker)})" for function, marker in
                (("copy_batch", "copy_batch"), ("train_step", "train_step"), ("main", "main"), ("<module>", "<module>"))]
    # Through ctypes.PyDLL the thread holds the GIL during the call, through ctypes.CDLL it has released
    # it: the same Python frames either way, innermost first (the second call's outermost line differs).
    assert copies[0]["args"]["python_stack"] == expected
    released = expected[:3] + [f"<module> (python_backtrace.py:{script_line('<module>')})"]
    released[2] = f"main (python_backtrace.py:{script_line('main (GIL released)')})"
    assert copies[1]["args"]["python_stack"] == released
    rows, _ = callsites(trace)
    by_stack = {r["Python Stack"]: r for r in copies_of(rows) if r["Python Stack"]}
    assert set(by_stack) == {" <- ".join(expected), " <- ".join(released)}
    row = by_stack[" <- ".join(expected)]
    assert (row["Name"], row["Call Site"], int(row["Num Calls"])) == ("cudaMemcpy", expected[0], 1)
    assert metadata(trace)["backtrace.python_depth"] == "32"

    # nsys's --python-backtrace none: native stacks only.
    proc, trace = profile(tmp_path, command, env=sim_env(**SLOW_COPIES), name="no_python",
                          options=["--cudabacktrace", "memory:" + THRESHOLD, "--python-backtrace", "none"])
    copies = [e for e in calls(trace, tmp_path, domains=None)[0] if e["name"] == "cudaMemcpy"]
    assert [("backtrace" in e["args"], "python_stack" in e["args"]) for e in copies] == [(True, False)] * 2
    assert metadata(trace)["backtrace.python_depth"] == "0"


def test_threads_that_exit_right_after_a_slow_call_keep_its_named_stack(tmp_path):
    # Each thread's ring is released when it exits, while the recorder may still be draining it: the
    # stack must stay with its call.
    threads = 8
    proc, trace = profile(tmp_path, [app("backtrace_threads"), str(threads)], env=sim_env(**SLOW_COPIES),
                          options=["--cudabacktrace", "memory:" + THRESHOLD])
    assert proc.stdout == f"threads {threads} failed 0\n"
    events, _ = calls(trace, tmp_path, domains=None)
    copies = [e for e in events if e["name"] == "cudaMemcpy"]
    assert len(copies) == threads and len({e["tid"] for e in copies}) == threads
    site = f"copy_then_exit (backtrace_threads.cpp:{call_line('backtrace_threads.cpp', 'copy_then_exit')})"
    assert all(e["args"]["stack"][0] == site for e in copies), [e["args"].get("stack") for e in copies]
    rows, _ = callsites(trace)
    assert [(r["Call Site"], int(r["Num Calls"])) for r in rows if r["Name"] == "cudaMemcpy"] == [(site, threads)]
