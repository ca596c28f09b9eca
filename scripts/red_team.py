#!/usr/bin/env python3
"""Repeats, as a hostile user would, the probes that once broke cutrace or might: a container's small
/dev/shm, a program that changes user, another user going for the session's shared memory, a FIFO or
a device given to every command that reads traces, a recorder stopped with SIGSTOP, a full disk,
SIGKILL of the program, the recorder and the launcher, and random damage to a trace with many record
kinds. Each probe prints one line, "ok" or "BROKEN" with what it saw; the exit status is the number
of broken probes (capped at 100).

usage: scripts/red_team.py [--build DIR] [--flips N] [--seed S] [--only NAME[,NAME...]] [--list]

The build (default ./build, or $CUTRACE_BUILD_DIR) must have its tests built: the probes run its
programs on the simulated device. Probes that need root (mount namespaces, another user) say
"skipped" without it. tests/e2e/profile/test_red_team.py runs the probes that no other test repeats."""
import argparse
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOBODY = 65534


class Broken(Exception):
    pass


class Skipped(Exception):
    pass


def check(condition, what):
    if not condition:
        raise Broken(what)


class Kit:
    """Paths and helpers shared by the probes."""

    def __init__(self, build, work, flips, seed):
        self.build = build
        self.cutrace = build / "bin" / "cutrace"
        self.apps = build / "tests" / "bin"
        self.work = work
        self.flips = flips
        self.random = random.Random(seed)
        self.env = dict(os.environ)
        self.env["LD_LIBRARY_PATH"] = str(build / "simcuda" / "lib")
        for name in ("LD_PRELOAD", "CUTRACE_SESSION", "CUTRACE_SESSION_FD"):
            self.env.pop(name, None)
        for needed in (self.cutrace, self.apps / "sim_vector_add"):
            if not needed.exists():
                sys.exit(f"red_team.py: {needed} is missing; build the project with its tests first.")

    def app(self, name):
        return str(self.apps / name)

    def run(self, command, timeout=120, **kwargs):
        return subprocess.run([str(c) for c in command], env=kwargs.pop("env", self.env), capture_output=True,
                              text=True, timeout=timeout, **kwargs)

    def profile(self, name, command, options=(), timeout=300):
        out = self.work / name
        proc = self.run([self.cutrace, "profile", "-f", "true", "-o", out, *options, "--", *command], timeout=timeout)
        return proc, Path(str(out) + ".cutrace")

    def summary(self, stderr):
        lines = [line for line in stderr.splitlines() if " events, " in line]
        return lines[-1] if lines else ""


def need_root():
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("setpriv"):
        raise Skipped("needs root, unshare and setpriv")


def need_nobody_to_reach(kit):
    """Programs run as uid 65534 must reach the build and this Python (not so under a private home)."""
    needed = [kit.app("sim_vector_add"), str(kit.build / "lib" / "libcutrace-preload.so")]
    readable = "import os, sys; sys.exit(0 if all(os.access(p, os.R_OK) for p in sys.argv[1:]) else 1)"
    check = kit.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", sys.executable, "-c",
                     readable, *needed])
    if check.returncode != 0:
        raise Skipped(f"uid {NOBODY} cannot run this Python or read the build")


def in_mount_namespace(kit, mounts, command, timeout=300):
    """Runs `command` with each (tmpfs size, directory) mounted over its directory, in a mount namespace."""
    shell = " && ".join(f'mount -t tmpfs -o size={size},mode=1777 red-team "{where}"' for size, where in mounts)
    return kit.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", shell + ' && exec "$@"', "sh",
                    *command], timeout=timeout)


def probe_small_dev_shm(kit):
    """A 64 MiB /dev/shm, 16 threads tracing, the program writing 24 MiB of its own there."""
    need_root()
    program = [sys.executable, ROOT / "tests/e2e/profile/scripts/shm_user.py", "libcudart.so.13", 16, 24 << 10]
    alone = in_mount_namespace(kit, [("64m", "/dev/shm")], program)
    traced = in_mount_namespace(kit, [("64m", "/dev/shm")],
                                [kit.cutrace, "profile", "-f", "true", "-o", kit.work / "small_shm", "--", *program])
    check(alone.returncode == 0, f"the program alone failed: {alone.stdout} {alone.stderr}")
    check((traced.returncode, traced.stdout) == (alone.returncode, alone.stdout),
          f"exit {traced.returncode} and output {traced.stdout!r} under cutrace, {alone.returncode} alone")
    check("cutrace takes at most half of it" in traced.stderr, "no line says what was taken of /dev/shm")


def probe_tiny_dev_shm(kit):
    """A 1 MiB /dev/shm: cutrace still runs the program, with smaller rings."""
    need_root()
    program = [kit.app("sim_vector_add")]
    alone = in_mount_namespace(kit, [("1m", "/dev/shm")], program)
    traced = in_mount_namespace(kit, [("1m", "/dev/shm")],
                                [kit.cutrace, "profile", "-f", "true", "-o", kit.work / "tiny_shm", "--", *program])
    check((traced.returncode, traced.stdout) == (alone.returncode, alone.stdout),
          f"exit {traced.returncode} under cutrace, {alone.returncode} alone: {traced.stderr.strip()}")


def probe_user_switch(kit):
    """`cutrace profile -- setpriv --reuid nobody ... app` records the program."""
    need_root()
    need_nobody_to_reach(kit)
    proc, _ = kit.profile("switch", ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                                     kit.app("sim_vector_add")])
    check(proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr.strip()}")
    summary = kit.summary(proc.stderr)
    check(summary.startswith("cutrace: ") and not summary.startswith("cutrace: 0 events"),
          f"nothing recorded: {summary or proc.stderr.strip()}")
    check("warning" not in proc.stderr, f"a warning: {proc.stderr.strip()}")


def probe_user_switch_without_the_descriptor(kit):
    """A program that closes every descriptor, then changes user: named, with its uid and the cause."""
    need_root()
    need_nobody_to_reach(kit)
    switch = (f"import os, sys; os.closerange(3, 65536); os.setgid({NOBODY}); os.setuid({NOBODY}); "
              "os.execv(sys.argv[1], sys.argv[1:])")
    proc, _ = kit.profile("switch_lost", [sys.executable, "-c", switch, kit.app("sim_vector_add")])
    check(proc.returncode == 0, f"exit {proc.returncode}")
    check(f"ran as uid {NOBODY} and could not open the session's shared memory" in proc.stderr,
          f"the process is not named: {proc.stderr.strip()}")
    check("uses CUDA" not in proc.stderr, "blamed on the program not using CUDA")


def probe_other_user_and_the_session(kit):
    """Another user can neither open nor remove a running session's shared memory."""
    need_root()
    need_nobody_to_reach(kit)
    progress = kit.work / "other_user_progress"
    # SIGINT as a shell leaves it: a runner that ignores it (pytest-xdist's workers) would hand the launcher
    # SIGINT ignored, which it then leaves ignored for the program, and the SIGINT below would end nothing.
    launcher = subprocess.Popen([str(kit.cutrace), "profile", "-f", "true", "-o", str(kit.work / "other_user"), "--",
                                 kit.app("sim_progress"), str(progress), "0", "100"], env=kit.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        # This run's session, named in its program's environment once the program runs: other runs
        # beside this one (the test suite's, in parallel) have sessions of their own in /dev/shm.
        deadline = time.monotonic() + 60
        sessions = []
        while not sessions and time.monotonic() < deadline:
            try:
                for pid in Path(f"/proc/{launcher.pid}/task/{launcher.pid}/children").read_text().split():
                    if Path(f"/proc/{pid}/comm").read_text().strip() != "sim_progress":
                        continue
                    for entry in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                        if entry.startswith(b"CUTRACE_SESSION="):
                            sessions = [entry.split(b"=", 1)[1].decode().lstrip("/")]
            except OSError:
                pass  # the program is starting or gone; the deadline decides
            time.sleep(0.05)
        check(sessions, "the program never ran with a session")
        for name in sessions:
            mode = stat.S_IMODE(os.stat(f"/dev/shm/{name}").st_mode)
            check(mode == 0o600, f"/dev/shm/{name} has mode {oct(mode)}")
            attempt = ("import os, sys\n"
                       "for what in (lambda p: open(p, 'rb'), lambda p: open(p, 'r+b'), os.unlink):\n"
                       "    try:\n"
                       "        what(sys.argv[1]); print('allowed')\n"
                       "    except PermissionError:\n"
                       "        print('refused')\n")
            out = kit.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", sys.executable,
                           "-c", attempt, f"/dev/shm/{name}"]).stdout.split()
            check(out == ["refused"] * 3, f"another user's open, open for writing and unlink of {name}: {out}")
    finally:
        launcher.send_signal(signal.SIGINT)
        try:
            launcher.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            # What the launcher and its processes wait on, for the report.
            states = subprocess.run(["ps", "-o", "pid,ppid,stat,wchan:24,cmd", "-p", str(launcher.pid), "--ppid",
                                     str(launcher.pid)], capture_output=True, text=True).stdout
            launcher.kill()
            launcher.communicate()
            raise Broken(f"cutrace profile did not end within 120 s of SIGINT; its processes:\n{states}")


def probe_not_a_regular_file(kit):
    """A FIFO (and a link to one), a device and a directory, given to every command that reads traces."""
    fifo = kit.work / "pipe.cutrace"
    if not fifo.exists():
        os.mkfifo(fifo)
    link = kit.work / "link.cutrace"
    if not link.is_symlink():
        link.symlink_to(fifo)
    directory = kit.work / "dir.cutrace"
    directory.mkdir(exist_ok=True)
    commands = [["info"], ["stats"], ["analyze"], ["view"],
                ["recipe", "cuda_api_sum", "--output", kit.work / "recipe_out", "--input"]]
    commands += [["export", "--type", kind, "-o", kit.work / f"fifo_{kind}"]
                 for kind in ("sqlite", "perfetto", "perfetto-json", "parquetdir", "arrow", "kineto")]
    for path in (fifo, link, "/dev/null", directory):
        for command in commands:
            try:
                proc = kit.run([kit.cutrace, *command, path], timeout=30, stdin=subprocess.DEVNULL)
            except subprocess.TimeoutExpired:
                raise Broken(f"cutrace {command[0]} waited on {path}")
            lines = proc.stderr.strip().splitlines()
            check(proc.returncode != 0 and len(lines) == 1,
                  f"cutrace {' '.join(map(str, command))} {path}: exit {proc.returncode}, {proc.stderr.strip()!r}")


def probe_stopped_recorder(kit):
    """The recorder stopped with SIGSTOP for 1.5 s: the program goes on, the drops are blamed on the stop."""
    progress = kit.work / "stop_progress"
    progress.unlink(missing_ok=True)
    launcher = subprocess.Popen([str(kit.cutrace), "profile", "-f", "true", "--ring-size", "65536", "-o",
                                 str(kit.work / "stopped"), "--", kit.app("sim_progress"), str(progress), "1000000",
                                 "1000"], env=kit.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    recorder = None
    deadline = time.monotonic() + 60
    while recorder is None and time.monotonic() < deadline:
        for pid in Path(f"/proc/{launcher.pid}/task/{launcher.pid}/children").read_text().split():
            if Path(f"/proc/{pid}/comm").read_text().startswith("cutrace-record"):
                recorder = int(pid)
        time.sleep(0.02)
    check(recorder, "no recorder found")
    while not progress.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    os.kill(recorder, signal.SIGSTOP)
    time.sleep(1.5)
    os.kill(recorder, signal.SIGCONT)
    _, stderr = launcher.communicate(timeout=300)
    check(launcher.returncode == 0, f"exit {launcher.returncode}: {stderr.strip()}")
    summary = kit.summary(stderr)
    check(" 0 dropped" in summary or "the recorder went " in summary, f"drops not blamed on the stop: {summary}")


def probe_full_disk(kit):
    """A 1 MiB disk for the trace: the program is undisturbed, the loss is counted, the final file named."""
    need_root()
    disk = kit.work / "disk"
    disk.mkdir(exist_ok=True)
    program = [kit.app("cheap_calls"), "3000000"]
    # A ring that holds every call, so that all of them reach the writer however slow the recorder.
    proc = in_mount_namespace(kit, [("1m", disk)], [kit.cutrace, "profile", "--gpu-activity", "false",
                                                     "--ring-size", 128 << 20, "-o", disk / "trace", "--", *program])
    check(proc.returncode == 0 and "calls 3000000" in proc.stdout, f"the program was disturbed: {proc.returncode}")
    check(".part" not in proc.stderr, f"a message names the partial file: {proc.stderr.strip()}")
    check("were not written" in proc.stderr, f"the loss is not counted: {proc.stderr.strip()}")


def probe_sigkill(kit):
    """SIGKILL of the program, then of the recorder, then of the launcher: a readable trace each time."""
    for victim in ("sim_progress", "cutrace-record", "launcher"):
        progress = kit.work / f"kill_{victim}"
        progress.unlink(missing_ok=True)
        out = kit.work / f"killed_{victim}"
        Path(str(out) + ".cutrace").unlink(missing_ok=True)
        launcher = subprocess.Popen([str(kit.cutrace), "profile", "-o", str(out), "--", kit.app("sim_progress"),
                                     str(progress), "200000", "100"], env=kit.env, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while not progress.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(1.2)  # a chunk or two on disk
        pid = launcher.pid
        if victim != "launcher":
            children = Path(f"/proc/{launcher.pid}/task/{launcher.pid}/children").read_text().split()
            pid = next(int(p) for p in children if Path(f"/proc/{p}/comm").read_text().startswith(victim))
        os.kill(pid, signal.SIGKILL)
        launcher.communicate(timeout=300)
        trace = Path(str(out) + ".cutrace")
        deadline = time.monotonic() + 120
        while victim == "launcher" and not trace.exists() and time.monotonic() < deadline:
            time.sleep(0.1)  # the recorder goes on until the program ends
        check(trace.exists(), f"no trace after SIGKILL of the {victim}")
        info = kit.run([kit.cutrace, "info", trace])
        check(info.returncode in (0, 3) and "cudaGetDevice" in kit.run([kit.cutrace, "stats", trace]).stdout,
              f"the trace after SIGKILL of the {victim} is unreadable: {info.stderr.strip()}")


def probe_damaged_traces(kit):
    """Random bit flips and truncations of a trace with many record kinds, through info, stats and export."""
    proc, trace = kit.profile("damage_source", [kit.app("sim_graphs")],
                              options=["-t", "cuda,nvtx,osrt", "--cuda-graph-trace", "node"])
    check(proc.returncode == 0, f"the source trace failed: {proc.stderr.strip()}")
    data = trace.read_bytes()
    damaged = kit.work / "damaged.cutrace"
    for i in range(kit.flips):
        copy = bytearray(data)
        if i % 5 == 4:
            copy = copy[:kit.random.randrange(1, len(copy))]
            what = f"truncated to {len(copy)} bytes"
        else:
            at = kit.random.randrange(len(copy))
            bit = kit.random.randrange(8)
            copy[at] ^= 1 << bit
            what = f"bit {bit} of byte {at} flipped"
        damaged.write_bytes(bytes(copy))
        for command in (["info"], ["stats"], ["export", "--type", "sqlite", "-f", "true", "-o", kit.work / "damaged"]):
            try:
                proc = kit.run([kit.cutrace, *command, damaged], timeout=60)
            except subprocess.TimeoutExpired:
                raise Broken(f"cutrace {command[0]} hung on the trace with {what}")
            check(0 <= proc.returncode < 64, f"cutrace {command[0]} exited {proc.returncode} on the trace with {what}: "
                                             f"{proc.stderr.strip()[-300:]}")
            check(proc.returncode == 0 or proc.stderr.strip(),
                  f"cutrace {command[0]} failed without a word on the trace with {what}")


PROBES = {name[len("probe_"):]: fn for name, fn in globals().items() if name.startswith("probe_")}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", type=Path, default=Path(os.environ.get("CUTRACE_BUILD_DIR", ROOT / "build")))
    parser.add_argument("--flips", type=int, default=60, help="damaged traces to try (default 60)")
    parser.add_argument("--seed", type=int, default=int(time.time()), help="for the damage (default: the time)")
    parser.add_argument("--only", default="", help="comma-separated probe names")
    parser.add_argument("--list", action="store_true", help="list the probes and exit")
    args = parser.parse_args()
    if args.list:
        for name, fn in PROBES.items():
            print(f"{name:42} {fn.__doc__.splitlines()[0]}")
        return 0
    chosen = [n for n in args.only.split(",") if n] or list(PROBES)
    unknown = [n for n in chosen if n not in PROBES]
    if unknown:
        sys.exit(f"red_team.py: no probe named {', '.join(unknown)}; --list shows them.")
    broken = 0
    print(f"red_team.py: seed {args.seed}", flush=True)
    with tempfile.TemporaryDirectory(prefix="cutrace-red-team.") as work:
        os.chmod(work, 0o755)  # programs run as another user reach its files
        kit = Kit(args.build.resolve(), Path(work), args.flips, args.seed)
        for name in chosen:
            start = time.monotonic()
            try:
                PROBES[name](kit)
                verdict = "ok"
            except Skipped as e:
                verdict = f"skipped ({e})"
            except (Broken, subprocess.TimeoutExpired) as e:
                verdict = f"BROKEN: {e}"
                broken += 1
            print(f"{name:42} {verdict} [{time.monotonic() - start:.1f} s]", flush=True)
    return min(broken, 100)


if __name__ == "__main__":
    sys.exit(main())
