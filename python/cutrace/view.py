"""`cutrace view [options] TRACE|DIR|EXPORT`: opens a trace in the Perfetto UI (ui.perfetto.dev) with one
command.

A .cutrace is exported first (`cutrace export --type perfetto`: Perfetto's protobuf format, which the UI
loads faster and in larger sizes than JSON; into a temporary directory); a directory's
traces (a job's ranks) are exported as one timeline, each process named by its rank and host; an export
already made is served as it is. The file is served from 127.0.0.1 alone, under a path with a random
component, so that only whoever holds the printed link can fetch it; the link opens the UI, which
fetches the file once (its `#!/?url=` route, which for a 127.0.0.1 URL makes one plain GET and keeps
the file, so that nothing is fetched again), and the command exits once the file was sent in full.

What the UI needs from the server, as its source says: the `Access-Control-Allow-Origin` header for
its origin; port 9001, the only 127.0.0.1 port its Content Security Policy lets it fetch from (the
port of `trace_processor --httpd`, which it probes first with a POST to /status: answered 404 here,
so that the UI does not take this server for a trace processor); and, from browsers that ask before a
public site reaches the local machine, an answer to the preflight with
`Access-Control-Allow-Private-Network`.
"""
import argparse
import errno
import http.server
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from . import _file_kind

PROG = "cutrace view"
TRACE_SUFFIX = ".cutrace"
UI_ORIGIN = "https://ui.perfetto.dev"
# The only port of 127.0.0.1 that ui.perfetto.dev's Content Security Policy lets it fetch from.
UI_PORT = 9001
# A trace file of this size or more is exported gzip-compressed: its export is then megabytes or more
# (several times the trace), which compression makes several times smaller in the temporary directory
# (often in memory) and on the way to the browser.
GZIP_FROM_TRACE_BYTES = 1 << 20
# A connection that sends nothing for this long is closed, so that a stalled client holds no thread.
IDLE_CONNECTION_SECONDS = 60

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_PARTIAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


class ViewError(Exception):
    """A sentence for the user; `code` is the exit status."""

    def __init__(self, message, code=EXIT_FAILURE):
        super().__init__(message)
        self.code = code


class Stop(BaseException):
    """SIGTERM or SIGHUP: leave as Ctrl-C does, cleaning up, with 128 + the signal's number."""

    def __init__(self, signum):
        super().__init__(signum)
        self.code = 128 + signum


def parser():
    ap = argparse.ArgumentParser(
        prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Opens a trace in the Perfetto UI: exports it if it is a .cutrace, serves the file from "
                    "127.0.0.1 and prints the ui.perfetto.dev link that loads it; exits once the UI has "
                    "fetched the file, or on Ctrl-C.",
        epilog="The link works in a browser on this machine; from another one, forward the port first, e.g. "
               f"`ssh -L {UI_PORT}:127.0.0.1:{UI_PORT} HOST`. Nothing listens on any address but 127.0.0.1, "
               "and the file is served only under the link's random path.\n"
               "exit status: 0 once the file was fetched; 1 when it cannot be exported or served; 2 on a "
               "usage error; 3 when the trace is cut off or damaged (its intact part is served); 130 on Ctrl-C.")
    ap.add_argument("trace", metavar="TRACE|DIR|EXPORT",
                    help="a .cutrace, a directory of them (one timeline), or an export to serve as it is (.pftrace, "
                         ".json, either with .gz)")
    ap.add_argument("--port", type=int, default=UI_PORT, metavar="N",
                    help=f"the port of 127.0.0.1 to serve from (default {UI_PORT}, the only one ui.perfetto.dev "
                         "fetches from unless told otherwise; 0: any free port)")
    ap.add_argument("--from", dest="from_", metavar="TIME",
                    help="only the calls that overlap the window from TIME (as cutrace export --from)")
    ap.add_argument("--to", metavar="TIME", help="only the calls that overlap the window until TIME")
    ap.add_argument("--filter-nvtx", metavar="RANGE[@DOMAIN|@*][/N]",
                    help="only the time of this NVTX range (as cutrace export --filter-nvtx)")
    ap.add_argument("-z", "--gzip", choices=("true", "false"), metavar="true|false",
                    help="export gzip-compressed (default: when the trace is 1 MiB or more)")
    ap.add_argument("--open", action="store_true", help="also open the link in this machine's web browser")
    ap.add_argument("-q", "--quiet", action="store_true",
                    help="print the link alone: no progress bar, no line on how to stop")
    return ap


# --- what to serve ---

def is_cutrace(path):
    """A trace by its magic bytes (a renamed trace is a trace), else by its name."""
    try:
        with open(path, "rb") as f:
            return f.read(8) == b"CUTRACE\x01"
    except OSError:
        return path.name.endswith(TRACE_SUFFIX)


def chosen_traces(given):
    """The trace or export to open; a directory's traces (a job's ranks), opened as one timeline."""
    path = Path(given)
    if path.is_dir():
        traces = sorted(f for f in path.iterdir() if f.name.endswith(TRACE_SUFFIX) and f.is_file())
        if not traces:
            raise ViewError(f"{given} holds no {TRACE_SUFFIX} trace; give a trace, or an export of one", EXIT_USAGE)
        return traces
    if not path.exists():
        raise ViewError(f"no trace, export or directory {given}; check the path", EXIT_USAGE)
    if not path.is_file():
        raise ViewError(f"{given} is {_file_kind(path)}, not a trace or an export; give the path of one",
                        EXIT_USAGE)
    return [path]


def cutrace_executable():
    """The `cutrace` whose export to run: the one that started this command ($CUTRACE_EXE, set by it),
    else the build tree's or installation's beside the tables library or this Python, else PATH's."""
    given = os.environ.get("CUTRACE_EXE")
    if given:
        return given
    candidates = []
    library = os.environ.get("CUTRACE_TABLES_LIBRARY")
    if library:
        candidates.append(Path(library).resolve().parent.parent / "bin" / "cutrace")
    candidates.append(Path(sys.executable).parent / "cutrace")
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    found = shutil.which("cutrace")
    if found:
        return found
    raise ViewError("cannot find the cutrace executable to export the trace with; run `cutrace view`, or set "
                    "CUTRACE_EXE to its path")


def served_name(name):
    """The file's name in the link: the UI names the trace by it, and characters outside these would need
    escaping twice (in the link's fragment, then in the URL the UI fetches)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) or "trace.pftrace"


def export(traces, args, directory):
    """Runs `cutrace export --type perfetto` into `directory`, several traces merged into one timeline;
    returns (the file, its exit status)."""
    size = sum(t.stat().st_size for t in traces)
    gzip = args.gzip == "true" if args.gzip else size >= GZIP_FROM_TRACE_BYTES
    trace = traces[0]
    stem = (trace.name[:-len(TRACE_SUFFIX)] if trace.name.endswith(TRACE_SUFFIX) else trace.name) if len(traces) == 1 \
        else trace.resolve().parent.name or "job"
    output = Path(directory) / served_name(stem + (".pftrace.gz" if gzip else ".pftrace"))
    command = [cutrace_executable(), "export", "--type", "perfetto", "-o", str(output)]
    for option, value in (("--from", args.from_), ("--to", args.to), ("--filter-nvtx", args.filter_nvtx)):
        if value is not None:
            command += [option, value]
    if args.quiet:
        command.append("-q")
    command += ["--"] + [str(t) for t in traces]
    try:
        # Its messages and progress bar go to stderr as they are; its stdout too, so that standard
        # output carries the link alone.
        status = subprocess.run(command, stdout=sys.stderr, stdin=subprocess.DEVNULL).returncode
    except OSError as e:
        raise ViewError(f"cannot run {command[0]} to export the trace ({e.strerror or e}); set CUTRACE_EXE to "
                        "the cutrace executable")
    if status < 0:
        raise Stop(-status) if -status in (signal.SIGTERM, signal.SIGHUP) else KeyboardInterrupt()
    if status not in (EXIT_OK, EXIT_PARTIAL) or not output.is_file():
        # The export said why, in its own sentence.
        raise ViewError(None, status or EXIT_FAILURE)
    return output, status


# --- serving it ---

class OneFileServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    # A port still in TIME_WAIT from the last run is free; one another program listens on is not.
    allow_reuse_address = True

    def __init__(self, port):
        super().__init__(("127.0.0.1", port), OneFileHandler)
        # What to serve, and where: set once the file exists (the port is taken before the export, so
        # that a busy one is refused before minutes of work); until then every path is unknown.
        self.file_path = None
        self.url_path = None
        self.content_type = None
        self.fetched = threading.Event()
        self.sent_in_full = set()

    def shutdown_request(self, request):
        # Done once the connection that carried the whole file is closed, its bytes on their way.
        super().shutdown_request(request)
        if request in self.sent_in_full:
            self.fetched.set()


class OneFileHandler(http.server.BaseHTTPRequestHandler):
    timeout = IDLE_CONNECTION_SECONDS
    server_version = "cutrace-view"

    def version_string(self):
        return self.server_version

    def log_message(self, format, *args):
        pass  # the terminal shows the link and how to stop, not a log of requests

    def cors_headers(self):
        self.send_header("Access-Control-Allow-Origin", UI_ORIGIN)
        self.send_header("Vary", "Origin")
        self.send_header("Cache-Control", "no-store")

    def not_found(self):
        self.send_response(404)
        self.cors_headers()
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_OPTIONS(self):
        # The CORS preflight: the UI's own fetch is a simple GET that needs none, but a browser may send
        # one before a public site reaches this machine.
        if self.path != self.server.url_path:
            return self.not_found()
        self.send_response(204)
        self.cors_headers()
        self.send_header("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
        asked = self.headers.get("Access-Control-Request-Headers")
        if asked:
            self.send_header("Access-Control-Allow-Headers", asked)
        if self.headers.get("Access-Control-Request-Private-Network", "").lower() == "true":
            self.send_header("Access-Control-Allow-Private-Network", "true")
        self.send_header("Access-Control-Max-Age", "600")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_HEAD(self):
        self.answer(body=False)

    def do_GET(self):
        self.answer(body=True)

    def do_POST(self):
        self.not_found()  # the UI's probe for a trace processor, POST /status

    def answer(self, body):
        if self.path != self.server.url_path:
            return self.not_found()
        try:
            f = open(self.server.file_path, "rb")
        except OSError:
            self.send_error(500, "the file to serve is gone")
            return
        with f:
            size = os.fstat(f.fileno()).st_size
            self.send_response(200)
            self.cors_headers()
            self.send_header("Content-Type", self.server.content_type)
            self.send_header("Content-Length", str(size))
            self.end_headers()
            if not body:
                return
            self.wfile.flush()
            try:
                sent = self.connection.sendfile(f)
            except OSError:
                return  # the client went away: the file still waits for a complete fetch
            if sent == size:
                self.server.sent_in_full.add(self.request)


def content_type(name):
    if name.endswith(".gz"):
        return "application/gzip"
    if name.endswith(".json"):
        return "application/json"
    return "application/octet-stream"


def listen(port):
    try:
        return OneFileServer(port)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise ViewError(f"port {port} of 127.0.0.1 is in use (by another `{PROG}`, or `trace_processor "
                            f"--httpd`?); stop that program, or give another port with --port N")
        if e.errno == errno.EACCES:
            raise ViewError(f"port {port} of 127.0.0.1 is reserved to the administrator; give a port above 1023 "
                            "with --port N")
        raise ViewError(f"cannot listen on 127.0.0.1 port {port} ({e.strerror or e})")


def ui_link(port, url_path):
    link = f"{UI_ORIGIN}/#!/?url=http://127.0.0.1:{port}{url_path}"
    if port != UI_PORT:
        # The UI then lets its Content Security Policy allow this port, if its flag for that is on (and
        # says how to turn it on otherwise).
        link += f"&rpc_port={port}"
    return link


def human_size(n):
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024


def serve(server, path, args):
    url_path = f"/{secrets.token_urlsafe(16)}/{served_name(path.name)}"
    server.file_path, server.content_type = path, content_type(path.name)
    server.url_path = url_path
    port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
    thread.start()
    try:
        link = ui_link(port, url_path)
        print(link, flush=True)
        if not args.quiet:
            print(f"{PROG}: serving {path.name} ({human_size(path.stat().st_size)}) on 127.0.0.1:{port} until "
                  "the Perfetto UI has fetched it: open the link above in a browser on this machine (or forward "
                  f"the port: ssh -L {port}:127.0.0.1:{port} HOST); Ctrl-C stops.", file=sys.stderr, flush=True)
            if port != UI_PORT:
                print(f"{PROG}: ui.perfetto.dev fetches from port {port} only with its flag 'Relax Content "
                      f"Security Policy for 127.0.0.1:*' on (the UI offers to turn it on); port {UI_PORT} needs "
                      "none.", file=sys.stderr, flush=True)
        if args.open:
            import webbrowser
            if not webbrowser.open(link):
                print(f"{PROG}: no web browser found here; open the link yourself.", file=sys.stderr, flush=True)
        # A wait with a timeout, so that Ctrl-C reaches this thread at once.
        while not server.fetched.wait(0.5):
            pass
        if not args.quiet:
            print(f"{PROG}: the UI fetched {path.name}; done.", file=sys.stderr, flush=True)
    finally:
        server.shutdown()


def run(args):
    if args.port < 0 or args.port > 65535:
        raise ViewError(f"--port {args.port} is no port; give a number from 1 to 65535, or 0 for any free one",
                        EXIT_USAGE)
    paths = chosen_traces(args.trace)
    path = paths[0]
    needs_export = is_cutrace(path)
    if not needs_export:
        options = [o for o, v in (("--from", args.from_), ("--to", args.to), ("--filter-nvtx", args.filter_nvtx),
                                  ("--gzip", args.gzip)) if v is not None]
        if options:
            verb = "applies" if len(options) == 1 else "apply"
            raise ViewError(f"{path} is an export, served as it is, and {' and '.join(options)} {verb} to a "
                            f"{TRACE_SUFFIX} trace only; give the trace instead", EXIT_USAGE)
    # The port first: a busy one is refused before minutes of export.
    server = listen(args.port)
    try:
        with tempfile.TemporaryDirectory(prefix="cutrace-view-") as directory:
            status = EXIT_OK
            if needs_export:
                path, status = export(paths, args, directory)
            serve(server, path, args)
            return status
    finally:
        server.server_close()


def _stop(signum, frame):
    raise Stop(signum)


def main(argv):
    ap = parser()
    if not argv:
        ap.print_usage(sys.stderr)
        return EXIT_USAGE
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return EXIT_OK if e.code == 0 else EXIT_USAGE
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _stop)
    try:
        return run(args)
    except ViewError as e:
        if e.args[0]:
            print(f"{PROG}: {e}.", file=sys.stderr)
        return e.code
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Stop as e:
        return e.code
