"""/dev/shm is the program's too. In a container's small /dev/shm (Docker's default is 64 MiB)
cutrace takes at most half of what is free, with smaller and fewer rings rather than a refusal, says so
in one line, and the program's own buffer there is written as it would be without cutrace: same
output, same exit code; every thread that made calls is recorded."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CUTRACE, api_sum, sim_env

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"),
                                reason="mounting a /dev/shm of its own needs root and unshare")

SCRIPT = Path(__file__).resolve().parent / "scripts" / "shm_user.py"


def in_small_shm(size, command, env):
    """Runs `command` with an empty tmpfs of `size` over /dev/shm, in a mount namespace of its own."""
    shell = 'mount -t tmpfs -o size="$0",mode=1777 cutrace-test-shm /dev/shm && exec "$@"'
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", shell, size,
                           *map(str, command)], capture_output=True, text=True, timeout=180, env=env)


@pytest.mark.parametrize("size, threads, kib", [("64m", 16, 24 << 10), ("8m", 4, 3 << 10), ("1m", 4, 400)])
def test_the_program_keeps_its_share_of_a_small_dev_shm(tmp_path, size, threads, kib):
    env = sim_env()
    program = [sys.executable, SCRIPT, "libcudart.so.13", threads, kib]
    alone = in_small_shm(size, program, env)
    assert alone.returncode == 0 and alone.stdout.splitlines()[-1] == f"wrote {kib} KiB", (alone.stdout, alone.stderr)
    out = tmp_path / "shm"
    traced = in_small_shm(size, [CUTRACE, "profile", "-o", out, "--", *program], env)
    assert (traced.returncode, traced.stdout) == (alone.returncode, alone.stdout), traced.stderr
    said = [line for line in traced.stderr.splitlines() if "cutrace takes at most half of it" in line]
    assert len(said) == 1 and "docker run --shm-size" in said[0], traced.stderr
    trace = Path(str(out) + ".cutrace")
    # Every thread had a ring: all of its calls are in the trace, none lost or dropped.
    assert api_sum(trace)["cudaGetDeviceCount"]["Num Calls"] == threads * 100
    summary = [line for line in traced.stderr.splitlines() if " events, " in line]
    assert len(summary) == 1 and f"{threads} threads, 0 dropped ->" in summary[0], traced.stderr
