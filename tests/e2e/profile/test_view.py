"""`cutrace view`: a trace served to the Perfetto UI from 127.0.0.1, answered over HTTP as the UI asks
(the CORS header for its origin, the preflight), and the command's end: after one complete fetch, on
Ctrl-C, or refused before serving."""
import gzip
import json
import os
import re
import signal
import socket
import subprocess
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as perfetto_pb2

from conftest import CUTRACE, app, profile, run_tool

UI = "https://ui.perfetto.dev"
LINK = re.compile(r"^https://ui\.perfetto\.dev/#!/\?url=(http://127\.0\.0\.1:(\d+)(/[A-Za-z0-9_-]{20,}/[^/&]+))"
                  r"(&rpc_port=(\d+))?$")


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    _, path = profile(tmp_path_factory.mktemp("view"), [app("sim_vector_add"), "2", "1024"])
    return path


def exported(trace, tmp_path, *options):
    out = tmp_path / "reference.pftrace"
    run_tool("export", "--type", "perfetto", "-o", out, "-f", "true", *options, trace)
    return out.read_bytes()


class View:
    """`cutrace view ARGS` running, with the link it printed (None when it printed none)."""

    def __init__(self, *args, env=None):
        # Ctrl-C's signal as a terminal gives it: a suite started in the background by a shell without
        # job control would otherwise hand the command SIGINT ignored, which Python then keeps.
        self.proc = subprocess.Popen([str(CUTRACE), "view", *map(str, args)], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env,
                                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        # Nothing here may hang the suite: the command is killed if it outlives the test.
        self.watchdog = threading.Timer(30, self.proc.kill)
        self.watchdog.start()
        line = self.proc.stdout.readline().rstrip("\n")
        self.link = line or None
        self.match = LINK.match(line) if line else None

    @property
    def url(self):
        return self.match.group(1)

    @property
    def port(self):
        return int(self.match.group(2))

    def end(self, timeout=10):
        """(exit status, stdout after the link, stderr)."""
        try:
            out, err = self.proc.communicate(timeout=timeout)
        finally:
            self.watchdog.cancel()
        return self.proc.returncode, out, err


def request(url, method="GET", headers=None):
    """(status, headers, body) of one request, errors included."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method=method, headers=headers or {}),
                                    timeout=10) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def listening_addresses(pid):
    """The local addresses ("IP:port", IPv4 or IPv6 as the kernel writes them) of the TCP sockets that
    process `pid` listens on, from /proc."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                address, port = fields[1].split(":")
                found.append(f"{address}:{int(port, 16)}")
    return found


def browser(tmp_path):
    """An environment whose web browser ($BROWSER, which Python's webbrowser runs) writes the link it is
    given into a file; returns (the environment, the file)."""
    opened = tmp_path / "opened.txt"
    script = tmp_path / "browser.sh"
    script.write_text(f'#!/bin/sh\nprintf "%s" "$1" > "{opened}"\n')
    script.chmod(0o755)
    return dict(os.environ, BROWSER=str(script)), opened


def export_directory(stderr):
    """The temporary directory the export was written into, from the export's line."""
    written = re.search(r"cutrace export: wrote (/\S+)/[^/ ]+ \(", stderr)
    assert written, stderr
    return Path(written.group(1))


def test_the_ui_is_served_the_export_from_127_0_0_1_alone_and_the_command_ends_after_the_fetch(trace, tmp_path):
    reference = exported(trace, tmp_path)
    env, opened = browser(tmp_path)
    view = View("--port", "0", trace, env=env)
    assert view.match, view.link
    # Any port but the UI's own 9001 needs the UI to relax its Content Security Policy for it.
    assert view.match.group(5) == str(view.port)
    assert view.url.endswith("/trace.pftrace")
    assert listening_addresses(view.proc.pid) == [f"0100007F:{view.port}"]  # 127.0.0.1, nothing else

    # The UI's probe for a trace processor, a wrong path, and the right name under a wrong path.
    base = f"http://127.0.0.1:{view.port}"
    assert request(base + "/status", "POST")[0] == 404
    assert request(base + "/trace.pftrace")[0] == 404
    assert request(base + "/x" + view.match.group(3))[0] == 404
    assert request(base + re.sub(r"^/[^/]+/", "/AAAAAAAAAAAAAAAAAAAAAA/", view.match.group(3)))[0] == 404

    status, headers, body = request(view.url, "OPTIONS", {
        "Origin": UI, "Access-Control-Request-Method": "GET", "Access-Control-Request-Private-Network": "true"})
    assert (status, body) == (204, b"")
    assert headers["Access-Control-Allow-Origin"] == UI
    assert "GET" in headers["Access-Control-Allow-Methods"].split(", ")
    assert headers["Access-Control-Allow-Private-Network"] == "true"

    # Neither a HEAD nor the requests above count as the fetch.
    status, headers, body = request(view.url, "HEAD")
    assert (status, int(headers["Content-Length"]), body) == (200, len(reference), b"")
    assert view.proc.poll() is None

    status, headers, body = request(view.url, headers={"Origin": UI})
    assert status == 200
    assert headers["Access-Control-Allow-Origin"] == UI
    assert headers["Content-Type"] == "application/octet-stream"
    assert body == reference

    code, out, err = view.end()
    assert (code, out) == (0, ""), err
    assert "Traceback" not in err
    assert "the UI fetched trace.pftrace; done." in err
    assert not export_directory(err).exists()
    assert not opened.exists()  # no browser unless asked


def test_gzip_is_served_compressed_and_an_export_as_it_is(trace, tmp_path):
    reference = exported(trace, tmp_path)
    env, opened = browser(tmp_path)
    view = View("--port", "0", "--gzip", "true", "-q", "--open", trace, env=env)
    assert view.match and view.url.endswith("/trace.pftrace.gz"), view.link
    status, headers, body = request(view.url)
    assert (status, headers["Content-Type"]) == (200, "application/gzip")
    assert gzip.decompress(body) == reference
    code, _, err = view.end()
    assert code == 0, err
    assert "cutrace view:" not in err  # -q: the link alone
    assert opened.read_text() == view.link

    given = tmp_path / "given run.json.gz"
    run_tool("export", "--type", "perfetto-json", "-z", "true", "-o", given, trace)
    view = View("--port", "0", given)
    assert view.match and view.url.endswith("/given_run.json.gz"), view.link
    status, _, body = request(view.url)
    assert status == 200 and body == given.read_bytes()
    assert view.end()[0] == 0


def test_ctrl_c_ends_it_quietly_with_130(trace):
    view = View("--port", "0", trace)
    assert view.match, view.link
    view.proc.send_signal(signal.SIGINT)
    code, out, err = view.end()
    assert code == 130
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert not export_directory(err).exists()


def test_a_busy_port_is_refused(trace):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        view = View("--port", port, trace)
        code, _, err = view.end()
    assert view.link is None
    assert code == 1
    # Refused before the export, in one sentence.
    assert err.startswith(f"cutrace view: port {port} of 127.0.0.1 is in use ") and err.count("\n") == 1, err


def test_a_directory_of_traces_is_served_as_one_timeline(trace, tmp_path):
    # A job's ranks (here one trace twice): the export of both, merged, with a process per trace.
    job = tmp_path / "job"
    job.mkdir()
    for rank in (0, 1):
        (job / f"rank{rank}.cutrace").write_bytes(trace.read_bytes())
    view = View("--port", "0", job)
    assert view.link is not None
    status, headers, body = request(view.url)
    assert status == 200
    merged = perfetto_pb2.Trace.FromString(body)
    names = sorted(p.track_descriptor.process.process_name for p in merged.packet
                   if p.track_descriptor.process.process_name)
    assert len(names) == 2 and names[0].startswith("trace 0 (") and names[1].startswith("trace 1 ("), names
    assert view.end()[0] == 0


def test_what_cannot_be_served_is_refused(trace, tmp_path):
    missing = tmp_path / "nothing.cutrace"
    view = View(missing)
    assert (view.link, view.end()[::2]) == (None, (2, f"cutrace view: no trace, export or directory {missing}; "
                                                      "check the path.\n"))

    json_export = tmp_path / "given.json"
    run_tool("export", "--type", "perfetto-json", "-o", json_export, trace)
    view = View("--from", "1s", json_export)
    code, _, err = view.end()
    assert (view.link, code) == (None, 2)
    assert err == (f"cutrace view: {json_export} is an export, served as it is, and --from applies to a .cutrace "
                   "trace only; give the trace instead.\n")

    # The export's own refusal, with its status, and nothing served.
    view = View("--port", "0", "--filter-nvtx", "no such range", trace)
    code, _, err = view.end()
    assert view.link is None
    assert code == 4, err  # as cutrace export's
    assert "has no NVTX range no such range" in err, err
    assert "Traceback" not in err


def test_a_cut_off_trace_is_served_and_its_status_is_3(trace, tmp_path):
    cut = tmp_path / "cut.cutrace"
    cut.write_bytes(trace.read_bytes()[:trace.stat().st_size * 2 // 3])
    out = tmp_path / "reference.pftrace"
    run_tool("export", "--type", "perfetto", "-o", out, cut, expect=3)
    view = View("--port", "0", cut)
    assert view.match, view.link
    status, _, body = request(view.url)
    assert (status, body) == (200, out.read_bytes())
    code, _, err = view.end()
    assert code == 3, err
    assert "cutrace export: warning: " in err
