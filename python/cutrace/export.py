"""`cutrace export --type parquetdir|arrowdir`: the tables of a trace as one file per table, as nsys lays
out its Parquet export (NAME_pqtdir/TABLE.parquet), with the columns and rows of the SQLite export;
`--type arrow`: the same tables in one file, NAME.arrows, an Arrow IPC stream per table one after the
other (cutrace.read_arrow_export reads it back); `--type kineto`: the Kineto-style JSON of each rank
(kineto.py). `cutrace export` runs this module for those types; `python3 -m cutrace export ...` runs it
directly."""
import argparse
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from . import TraceError, _schemas, open as open_trace, table_names

PROG = "cutrace export"
# The suffix nsys gives each type's output directory, after the trace's name.
SUFFIXES = {"parquetdir": "_pqtdir", "arrowdir": "_arwdir", "arrow": ".arrows", "kineto": "_kineto"}
EXTENSIONS = {"parquetdir": ".parquet", "arrowdir": ".arrow"}


class UsageError(Exception):
    pass


def parse_time_ns(text):
    """'1.5' (seconds), '200ms', '30us', '1000ns', '2s' -> ns, as cutrace export takes --from and --to."""
    m = re.fullmatch(r"([0-9]*\.?[0-9]+)(ns|us|ms|s)?", text)
    if not m:
        raise UsageError(f"--from and --to take a time such as 1.5 (seconds), 200ms, 30us or 1000ns, not '{text}'")
    scale = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9, None: 1e9}[m.group(2)]
    return int(float(m.group(1)) * scale + 0.5)


def parse_bool(name, text):
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    raise UsageError(f"{name} takes true or false")


def default_output(trace, kind):
    name = str(trace)
    if name.endswith(".cutrace") and len(Path(name).name) > len(".cutrace"):
        name = name[: -len(".cutrace")]
    return Path(name + SUFFIXES[kind])


class TableFiles:
    """One file per table, opened at its first batch, in a temporary directory until all is written."""

    def __init__(self, kind, directory):
        self.kind, self.directory, self.writers, self.rows = kind, directory, {}, {}

    def write(self, name, batch):
        writer = self.writers.get(name)
        if writer is None:
            path = self.directory / (name + EXTENSIONS[self.kind])
            if self.kind == "parquetdir":
                # Without dictionaries: trace columns (times, ids) are mostly distinct values, which
                # the dictionary encoder tries and gives up on; plain pages with zstd came out 2.4
                # times smaller and twice as fast to write.
                writer = pq.ParquetWriter(path, batch.schema, compression="zstd", use_dictionary=False)
            else:
                writer = ipc.new_file(path, batch.schema)
            self.writers[name], self.rows[name] = writer, 0
        writer.write_batch(batch)
        self.rows[name] += batch.num_rows

    def write_empty(self, name, schema):
        """A table without rows, as --lazy false writes it: a file with its columns."""
        self.write(name, pa.RecordBatch.from_pylist([], schema=schema))

    def close(self):
        for writer in self.writers.values():
            writer.close()


class ProgressBar:
    """As the C++ commands draw it: on a terminal only, at most ten times a second, erased at the end."""

    def __init__(self, enabled, prog=PROG, amount=None):
        self.on = enabled and sys.stderr.isatty()
        self.prog = prog
        # How done, total and the rate are written: bytes by default; the recipes count traces.
        self.amount = amount or size_text
        self.start = self.last = time.monotonic()
        self.drawn = False

    def __call__(self, done, total):
        now = time.monotonic()
        if not self.on or total <= 0 or (self.drawn and now - self.last < 0.1):
            return
        self.last = now
        done = min(done, total)
        rate = done / (now - self.start) if now > self.start else 0
        filled = int(done / total * 20)
        left = f"  {int((total - done) / rate + 0.5)} s left" if rate > 0 and done < total else ""
        sys.stderr.write(f"\r{self.prog}: [{'#' * filled}{'.' * (20 - filled)}] {int(done / total * 100):3d}%  "
                         f"{self.amount(done)} of {self.amount(total)}  {self.amount(rate)}/s{left}\033[K")
        sys.stderr.flush()
        self.drawn = True

    def finish(self):
        if self.on and self.drawn:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def size_text(n):
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.0f} kB"


def open_for_export(trace_path, output, tables, show_internal, start_ns, end_ns, time_options):
    """The table-name pattern, the opened trace, and the directory the output goes to (which must exist)."""
    pattern = re.compile(tables, re.IGNORECASE) if tables else None
    trace = open_trace(trace_path, show_internal=show_internal, start_ns=start_ns, end_ns=end_ns, **(time_options or {}))
    parent = output.resolve().parent
    if not parent.is_dir():
        raise TraceError(f"cannot create {output} (its directory does not exist); check that it exists and is writable")
    return pattern, trace, parent


def tables_without_rows(pattern, written):
    """(name, schema) of each table the pattern chooses that got no file, which --lazy false writes."""
    return [(name, schema) for name, schema in zip(table_names(), _schemas())
            if name not in written and (pattern is None or pattern.fullmatch(name))]


def export_streams(trace_path, output, tables=None, show_internal=False, start_ns=0, end_ns=None, force=False,
                   progress=None, time_options=None, lazy=False):
    """Writes the tables of `trace_path` with rows (those whose name matches `tables`) into the one file
    `output`: for each, in the tables' order, an Arrow IPC stream (its schema, with the table's name
    under the metadata key "table", its batches, the end-of-stream marker). Returns (rows per table,
    the trace object)."""
    output = Path(output)
    if output.is_dir():
        raise UsageError(f"{output} is a directory; choose another name with -o")
    if output.exists() and not force:
        raise UsageError(f"{output} already exists; pass -f true to overwrite it or choose another name with -o")
    pattern, trace, parent = open_for_export(trace_path, output, tables, show_internal, start_ns, end_ns, time_options)
    # The trace gives the rows of all tables interleaved, and a stream holds one table: each table's
    # stream is written to a file of its own first, so memory stays bounded, then the streams are
    # joined in the tables' order.
    temp = Path(tempfile.mkdtemp(prefix=output.name + ".tmp-", dir=parent))
    try:
        writers, files, rows = {}, {}, {}

        def open_stream(name, schema):
            files[name] = pa.OSFile(str(temp / (name + ".stream")), "wb")
            writers[name], rows[name] = ipc.new_stream(files[name], schema.with_metadata({"table": name})), 0
            return writers[name]

        try:
            for name, batch in trace.batches(progress):
                if pattern is not None and not pattern.fullmatch(name):
                    continue
                writer = writers.get(name) or open_stream(name, batch.schema)
                writer.write_batch(batch)
                rows[name] += batch.num_rows
            for name, schema in ([] if lazy else tables_without_rows(pattern, writers)):
                open_stream(name, schema)
        finally:
            for name, writer in writers.items():
                writer.close()
                files[name].close()
        joined = temp / output.name
        with open(joined, "wb") as out:
            for name in table_names():
                if name in rows:
                    with open(temp / (name + ".stream"), "rb") as part:
                        shutil.copyfileobj(part, out, 1 << 20)
        os.replace(joined, output)
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    return {name: rows[name] for name in table_names() if name in rows}, trace


def export(trace_path, kind, output, tables=None, show_internal=False, start_ns=0, end_ns=None, force=False,
           progress=None, time_options=None, lazy=False):
    """Writes the tables of `trace_path` (those whose name matches the regular expression `tables`, all
    by default) into the directory `output`. time_options: open()'s times, ts_normalize and ts_shift_ns.
    Returns (rows per table, the trace object)."""
    output = Path(output)
    if output.exists() and not force:
        raise UsageError(f"{output} already exists; pass -f true to overwrite it or choose another name with -o")
    # -f replaces an earlier export, never a directory that holds anything else.
    if output.is_dir() and any(not f.is_file() or f.suffix not in EXTENSIONS.values() for f in output.iterdir()):
        raise UsageError(f"{output} is a directory with files other than an export's; choose another name with -o")
    if output.exists() and not output.is_dir():
        raise UsageError(f"{output} is not a directory; choose another name with -o")
    pattern, trace, parent = open_for_export(trace_path, output, tables, show_internal, start_ns, end_ns, time_options)
    temp = Path(tempfile.mkdtemp(prefix=output.name + ".tmp-", dir=parent))
    try:
        files = TableFiles(kind, temp)
        try:
            for name, batch in trace.batches(progress):
                if pattern is None or pattern.fullmatch(name):
                    files.write(name, batch)
            for name, schema in ([] if lazy else tables_without_rows(pattern, files.writers)):
                files.write_empty(name, schema)
        finally:
            files.close()
        if output.exists():
            shutil.rmtree(output) if output.is_dir() else output.unlink()
        # mkdtemp makes the directory 0700; an export is an ordinary directory, made as mkdir would.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temp, 0o777 & ~umask)
        os.rename(temp, output)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    return files.rows, trace


def main(argv):
    ap = argparse.ArgumentParser(prog=PROG, add_help=True,
                                 description="Writes a trace's tables, one file per table or all in one Arrow IPC "
                                             "file, or its Kineto-style JSON.")
    ap.add_argument("-t", "--type", required=True, choices=sorted(SUFFIXES))
    ap.add_argument("-o", "--output")
    ap.add_argument("-f", "--force-overwrite", default="false")
    ap.add_argument("--tables", action="append",
                    help="only the tables whose whole name matches one of these regular expressions (comma-separated), "
                         "in any case")
    ap.add_argument("--from", dest="start")
    ap.add_argument("--to", dest="end")
    ap.add_argument("--show-internal", default="false")
    ap.add_argument("--times", action="append", help="nsys's time ranges (START/END, comma-separated)")
    ap.add_argument("--ts-normalize", default="false")
    ap.add_argument("--ts-shift", default="0")
    ap.add_argument("-l", "--lazy", default="false", help="true: only the tables that have rows")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress bar on a terminal")
    ap.add_argument("trace")
    args = ap.parse_args(argv)
    try:
        force = parse_bool("--force-overwrite", args.force_overwrite)
        show_internal = parse_bool("--show-internal", args.show_internal)
        start = parse_time_ns(args.start) if args.start else 0
        end = parse_time_ns(args.end) if args.end else None
        if end is not None and end <= start:
            raise UsageError("--to must come after --from")
        if args.tables:
            patterns = [p for value in args.tables for p in value.split(",")]
            for p in patterns:
                try:
                    re.compile(p)
                except re.error as e:
                    raise UsageError(f"--tables takes regular expressions; '{p}' is not one ({e})") from None
            args.tables = "|".join(f"(?:{p})" for p in patterns)
        try:
            ts_shift_ns = int(args.ts_shift)
        except ValueError:
            raise UsageError(f"--ts-shift takes a whole number of nanoseconds, not '{args.ts_shift}'") from None
        lazy = parse_bool("--lazy", args.lazy)
        time_options = {"times": args.times, "ts_normalize": parse_bool("--ts-normalize", args.ts_normalize),
                        "ts_shift_ns": ts_shift_ns}
        output = Path(args.output) if args.output else default_output(args.trace, args.type)
        if args.type == "kineto":
            for given, option in ((args.tables, "--tables"), (args.times, "--times"), (lazy, "--lazy"),
                                  (time_options["ts_normalize"], "--ts-normalize"), (ts_shift_ns, "--ts-shift")):
                if given:
                    raise UsageError(f"{option} is for the exports made of tables (sqlite, parquetdir, arrowdir and "
                                     "arrow), not kineto")
        bar = ProgressBar(not args.quiet)
        try:
            if args.type == "kineto":
                from . import kineto
                try:
                    written, notes, trace = kineto.export(args.trace, output, show_internal, start, end, force, bar)
                except kineto.UsageError as e:
                    raise UsageError(str(e)) from None
            elif args.type == "arrow":
                rows, trace = export_streams(args.trace, output, args.tables, show_internal, start, end, force, bar,
                                             time_options, lazy)
            else:
                rows, trace = export(args.trace, args.type, output, args.tables, show_internal, start, end, force, bar,
                                     time_options, lazy)
        finally:
            bar.finish()
    except UsageError as e:
        print(f"{PROG}: {e}.", file=sys.stderr)
        return 2
    except TraceError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"{PROG}: cannot write {args.output or args.trace} ({e.strerror or e}).", file=sys.stderr)
        return 1
    if not trace.complete:
        print(f"{PROG}: warning: {trace.path}: {trace.status}", file=sys.stderr)
    if args.type == "kineto":
        for note in notes:
            print(f"{PROG}: note: {note}.", file=sys.stderr)
        for path, counts in written:
            what = ", ".join(f"{n:,} {kind}" for kind, n in counts.items()) or "no events"
            print(f"{PROG}: wrote {path} ({what}).", file=sys.stderr)
        return 0 if trace.complete else 3
    total = sum(rows.values())
    print(f"{PROG}: wrote {output} ({total:,} rows in {len(rows)} {'table' if len(rows) == 1 else 'tables'}).",
          file=sys.stderr)
    return 0 if trace.complete else 3
