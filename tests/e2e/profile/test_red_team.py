"""scripts/red_team.py repeats a hostile user's probes. Most have tests of their own (test_shm_budget,
test_user_switch, test_robustness); the suite runs the others through the script itself, so that the
script keeps working and a change that breaks one of its probes is caught."""
import os
import subprocess
import sys
from pathlib import Path

from conftest import BUILD

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "red_team.py"
# Covered nowhere else: another user against a live session, and damage to a trace of many record
# kinds through the command-line tools (the fuzzers test the reader's library, not the commands).
# A fixed seed, so that a failure here can be repeated with the same damage.
ONLY = "other_user_and_the_session,damaged_traces"


def test_the_red_team_probes_hold():
    proc = subprocess.run([sys.executable, SCRIPT, "--build", BUILD, "--only", ONLY, "--flips", "40", "--seed", "43"],
                          capture_output=True, text=True, timeout=900)
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    verdicts = {line.split()[0]: line.split()[1] for line in lines[1:]}
    # Skipped without root, or where uid 65534 cannot reach the build; never broken.
    assert verdicts["other_user_and_the_session"] in (("ok", "skipped") if os.geteuid() == 0 else ("skipped",))
    assert verdicts["damaged_traces"] == "ok" and len(verdicts) == 2, proc.stdout


def test_every_probe_is_listed_with_what_it_tries():
    proc = subprocess.run([sys.executable, SCRIPT, "--list"], capture_output=True, text=True, timeout=60)
    names = [line.split()[0] for line in proc.stdout.splitlines()]
    assert proc.returncode == 0 and len(names) == 10 and "full_disk" in names and "stopped_recorder" in names
    unknown = subprocess.run([sys.executable, SCRIPT, "--only", "nothing"], capture_output=True, text=True, timeout=60)
    assert unknown.returncode != 0 and unknown.stderr.strip() == \
        "red_team.py: no probe named nothing; --list shows them."
