"""A program that changes user (the entrypoint of many containers runs gosu, su-exec or runuser) is
recorded: its processes reach the session through the descriptor cutrace hands down, not by opening
the object (mode 0600, the launching user's). One that lost the descriptor before changing user cannot
reach it; the trace names it, its uid and the cause, not "check that the program uses CUDA"."""
import os
import shutil
import stat
import subprocess
import sys

import pytest

from conftest import api_sum, app, profile, sim_env

NOBODY = 65534
pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                                reason="changing user needs root and setpriv")

# Changes to uid/gid 65534 the way setpriv, runuser and gosu do: inherited descriptors stay open.
AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
# Run as uid 65534: whether it may read each path it is given.
READABLE = "import os, sys; sys.exit(0 if all(os.access(p, os.R_OK) for p in sys.argv[1:]) else 1)"
# A program that closes every inherited descriptor, then changes user and runs the rest.
CLOSE_THEN_SWITCH = [sys.executable, "-c",
                     f"import os, sys; os.closerange(3, 65536); os.setgid({NOBODY}); os.setuid({NOBODY}); "
                     "os.execv(sys.argv[1], sys.argv[1:])"]


@pytest.fixture(autouse=True)
def nobody_can_reach_the_build():
    """The programs, the shim and this Python must be reachable by uid 65534 (a checkout under a private
    home directory is not); otherwise there is nothing to test here."""
    from conftest import BUILD
    needed = [app("sim_vector_add"), str(BUILD / "lib" / "libcutrace-preload.so")]
    check = subprocess.run([*AS_NOBODY, sys.executable, "-c", READABLE, *needed], capture_output=True, timeout=60)
    if check.returncode != 0:
        pytest.skip(f"uid {NOBODY} cannot run this Python or read the build ({', '.join(needed)})")


def untraced(command):
    return subprocess.run(command, env=sim_env(), capture_output=True, text=True, timeout=120)


def call_counts(trace):
    return {name: row["Num Calls"] for name, row in api_sum(trace).items()}


def summary_and_warnings(stderr):
    lines = stderr.splitlines()
    return [l for l in lines if " events, " in l], [l for l in lines if l.startswith("cutrace: warning:")]


@pytest.mark.parametrize("switch", [
    pytest.param(AS_NOBODY, id="setpriv"),
    pytest.param(["runuser", "-u", "nobody", "--"], id="runuser",
                 marks=pytest.mark.skipif(not shutil.which("runuser"), reason="no runuser")),
])
def test_a_program_that_changes_user_is_recorded(tmp_path, switch):
    program = [*switch, app("sim_vector_add")]
    alone = untraced(program)
    as_root, root_trace = profile(tmp_path, [app("sim_vector_add")], name="root")
    traced, trace = profile(tmp_path, program)
    assert (traced.returncode, traced.stdout) == (alone.returncode, alone.stdout)
    # Every call, as the same program makes them without changing user.
    assert call_counts(trace) == call_counts(root_trace) != {}
    summary, warnings = summary_and_warnings(traced.stderr)
    assert warnings == [] and "1 process" in summary[0], traced.stderr


def test_processes_started_after_the_switch_inherit_the_way_in(tmp_path):
    # A shell as the other user starts the program twice: each process is recorded.
    vector_add = app("sim_vector_add")
    program = [*AS_NOBODY, "sh", "-c", f'"{vector_add}" && "{vector_add}"']
    alone = untraced(program)
    traced, trace = profile(tmp_path, program)
    assert (traced.returncode, traced.stdout) == (alone.returncode, alone.stdout)
    _, once = profile(tmp_path, [vector_add], name="once")
    assert call_counts(trace) == {name: 2 * n for name, n in call_counts(once).items()} != {}
    summary, warnings = summary_and_warnings(traced.stderr)
    assert warnings == [] and "2 processes" in summary[0], traced.stderr


def test_a_process_that_cannot_reach_the_session_is_named_with_its_cause(tmp_path):
    program = [*CLOSE_THEN_SWITCH, app("sim_vector_add")]
    alone = untraced(program)
    traced, trace = profile(tmp_path, program)
    # Unrecorded, but unchanged: the same output and exit.
    assert (traced.returncode, traced.stdout) == (alone.returncode, alone.stdout)
    _, warnings = summary_and_warnings(traced.stderr)
    assert len(warnings) == 1, traced.stderr
    assert f"ran as uid {NOBODY} and could not open the session's shared memory (Permission denied)" in warnings[0]
    assert "CUTRACE_SESSION_FD" in warnings[0] and "uses CUDA" not in traced.stderr
    assert api_sum(trace) == {}


def test_the_descriptor_is_the_only_way_in_for_another_user(tmp_path):
    # The program, as nobody, looks at the session by name: it may not open it; through the
    # descriptor it was handed it may.
    probe = ("import os, sys\n"
             "name = os.environ['CUTRACE_SESSION']\n"
             "fd = int(os.environ['CUTRACE_SESSION_FD'].split(':')[0])\n"
             "st = os.stat('/dev/shm' + name)\n"
             "print(oct(st.st_mode & 0o777), st.st_uid)\n"
             "try:\n"
             "    open('/dev/shm' + name, 'rb')\n"
             "    print('opened by name')\n"
             "except PermissionError:\n"
             "    print('refused by name')\n"
             "print('descriptor', os.fstat(fd).st_ino == st.st_ino)\n")
    traced, _ = profile(tmp_path, [*AS_NOBODY, sys.executable, "-c", probe])
    assert traced.stdout.splitlines()[-3:] == ["0o600 0", "refused by name", "descriptor True"], traced.stderr
