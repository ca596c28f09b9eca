"""`cutrace analyze [-r RULE[,RULE...]] TRACE|DIR...`: nsys's expert-system rules over one trace or a
job's traces (one per rank).

Each trace is read once, by the recipes' map step (recipes/framework.py), for all the rules asked
for: each rule's query (recipes/analysis.py) with the flagged call's thread and stack added, and,
over several traces, the stragglers recipe's per-rank totals (recipes/summaries.py). The small
results are then ordered, most costly first, and printed per rule with an explanation and advice.
"""
import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path

from .recipes import analysis, summaries
from .text_table import table_lines
from .recipes.framework import INDEX, quote_text, run_maps, sql_list

PROG = "cutrace analyze"
TRACE_SUFFIX = ".cutrace"
DEFAULT_ROWS = 50  # nsys analyze shows a rule's first 50 rows

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_PARTIAL = 0, 1, 2, 3

# Modules that are not the program's own code, besides the CUDA libraries cutrace traces (which
# include/cutrace/domains.def lists, not_the_program()): a call site is the innermost frame outside them.
NOT_THE_PROGRAM_TOO = (r"libcupti|libnvrtc|libnvJitLink|"
                       r"libcutrace[^/]*|libc|libm|libpthread|libdl|librt|libstdc\+\+|libgcc_s|libffi|libpython[^/]*|"
                       r"ld-linux[^/]*|_ctypes[^/]*|python[0-9.]*")


def not_the_program():
    """The regular expression of a module path that is not the program's own code."""
    from . import cuda_library_prefixes
    stems = []
    for prefix in cuda_library_prefixes():
        # "libcudart.so": that library, any version; "libcudnn_": every library of that name's family.
        stem = prefix[:-3] if prefix.endswith(".so") else re.escape(prefix) + "[^/]*"
        if stem not in stems:
            stems.append(stem)
    return r"(^|/)(" + "|".join(stems) + "|" + NOT_THE_PROGRAM_TOO + r")(\.so[^/]*)?$"
CONCURRENT_BYTES = 32 << 20  # traces of more than this in all are read by a process per core
SITE_FRAMES = 3         # native frames of the program shown per call site
PYTHON_SITE_FRAMES = 2  # Python frames shown per call site
# The C runtime's entry frames, in the executable itself: no part of what the program does.
ENTRY_FRAMES = ("_start", "__libc_start_main", "__libc_start_call_main")
STACK_HINT = ("A finding without a call site is of a call that took no stack: record with `cutrace profile "
              "--cudabacktrace all:THRESHOLD` (every CUDA call of at least THRESHOLD ns, e.g. 10000, takes its "
              "native and Python stack) to see where such calls are made.")


class AnalyzeError(Exception):
    """A sentence for the user; `code` is the exit status."""

    def __init__(self, message, code=EXIT_FAILURE):
        super().__init__(message)
        self.code = code


class Rule:
    """A rule as analyze shows it: the recipe rule whose SQL it runs, a title, what it means and what
    to do, the columns of its findings, and whether it needs GPU activity in the trace."""

    def __init__(self, sql_rule, title, explanation, advice, columns, needs_gpu=True, is_call=True):
        self.sql_rule, self.name = sql_rule, sql_rule.name
        self.title, self.explanation, self.advice = title, explanation, advice
        self.columns, self.needs_gpu, self.is_call = columns, needs_gpu, is_call


def _rules():
    recipe_rules = {r.name: r for r in analysis.recipes()}
    call_columns = ["PID", "TID", "Thread"]
    memory = ["Duration", "Start", "API Name", "Bytes", "Src Kind", "Dst Kind", "Stream ID"] + call_columns
    return [
        Rule(recipe_rules["cuda_memcpy_async"], "Asynchronous copies with pageable host memory",
             "An asynchronous copy (cudaMemcpyAsync and the like) whose host side is pageable memory, from "
             "malloc or new rather than pinned, cannot be done by the copy engine on its own: the data is staged "
             "through a pinned buffer of the driver's and the call returns only once the copy is done, so it "
             "overlaps neither with the host's work nor with other streams. Duration and Start are the copy's "
             "on the GPU.",
             "Allocate the host buffers of asynchronous copies with cudaMallocHost or cudaHostAlloc, or pin "
             "existing memory with cudaHostRegister.", memory),
        Rule(recipe_rules["cuda_memcpy_sync"], "Synchronous copies",
             "A copy made by cudaMemcpy or another call without Async keeps the calling thread until the copy "
             "has finished (device-to-device copies aside): the host issues no work meanwhile, and the GPU has "
             "nothing queued behind the copy. Duration and Start are the copy's on the GPU.",
             "Copy with cudaMemcpyAsync from pinned memory on a stream, and wait (on an event or the stream) only "
             "where the host needs the data.", memory),
        Rule(recipe_rules["cuda_memset_sync"], "Synchronous memsets",
             "A memset made by cudaMemset or another call without Async runs on the legacy default stream, which "
             "waits for the work of every blocking stream and holds theirs back, and setting pinned or managed "
             "host memory keeps the calling thread until it is done. Duration and Start are the memset's on "
             "the GPU.",
             "Use cudaMemsetAsync on the stream whose work uses the memory.",
             ["Duration", "Start", "API Name", "Stream ID"] + call_columns),
        Rule(recipe_rules["cuda_api_sync"], "Calls that wait for the device",
             "cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize and their driver counterparts "
             "keep the calling thread until the device has finished the work they wait for: the host queues "
             "nothing meanwhile, so the GPU may run dry right after. Duration and Start are the call's.",
             "Wait only where the host needs a result, on the narrowest thing (an event rather than the device); "
             "order work between streams on the device with cudaStreamWaitEvent instead of on the host.",
             ["Duration", "Start", "API Name"] + call_columns, needs_gpu=False),
        Rule(recipe_rules["gpu_gaps"], "GPU idle time",
             "Times when a GPU ran no kernel, copy or memset of a process for at least --gap ns (500 ms by "
             "default) between two of its operations: the program was busy elsewhere (host computation, I/O, "
             "waiting for other ranks) with nothing queued on the GPU.",
             "Look at what the host threads did from the gap's start (the CUDA calls and NVTX ranges there); "
             "queue work ahead, and prepare the next batch on the host while the GPU works on this one.",
             ["Duration", "Start", "End", "PID", "Device ID"], is_call=False),
        Rule(analysis.LowUtilization("gpu_time_util", "windows of low GPU utilization", analysis.GPU_TABLES, ""),
             "Low GPU utilization",
             "Each process's GPU activity on each device, from its first operation to its last, is cut into "
             "--chunks equal windows (30 by default); the windows in which kernels, copies and memsets kept the "
             "GPU busy less than --threshold percent of the time (50 by default) are listed, adjacent ones "
             "merged into one. Utilization is the busy share of the window, Windows how many were merged.",
             "Find what the host did then (gpu_gaps and cuda_api_sync point at waits); keep more work queued "
             "(larger batches, several streams, CUDA graphs for many small kernels).",
             ["Duration", "Start", "End", "Utilization", "Windows", "PID", "Device ID"], is_call=False),
    ]


RULES = {r.name: r for r in _rules()}

# What a row's column is called on output, where the SQL's name is not nsys's report column.
SHOWN = {"Duration": "Duration (ns)", "Start": "Start (ns)", "End": "End (ns)", "API Name": "Name",
         "Utilization": "Utilization (%)"}


def _site_queries():
    """Per stack id: the innermost frames of the program's own code, and the innermost Python frames."""
    native = f"""
        SELECT id, string_agg(name, ' <- ' ORDER BY stackDepth) AS site
        FROM (SELECT c.id, c.stackDepth, s.value AS name,
                     row_number() OVER (PARTITION BY c.id ORDER BY c.stackDepth) AS k
              FROM CUDA_CALLCHAINS AS c JOIN StringIds AS s ON s.id = c.symbol
              JOIN StringIds AS m ON m.id = c.module
              WHERE NOT regexp_matches(m.value, {quote_text(not_the_program())})
                AND s.value NOT IN ({", ".join(quote_text(f) for f in ENTRY_FRAMES)}))
        WHERE k <= {SITE_FRAMES} GROUP BY id"""
    python = f"""
        SELECT id, string_agg(function || ' (' || regexp_replace(file, '^.*/', '') || ':' || line || ')', ' <- '
                              ORDER BY stackDepth) AS site
        FROM CUTRACE_PYTHON_CALLCHAINS WHERE stackDepth < {PYTHON_SITE_FRAMES} GROUP BY id"""
    return native, python


class Analysis:
    """The map step of analyze for the recipes' framework: every rule asked for in one read of a trace."""
    name = "analyze"
    outputs = ()

    def __init__(self, rule_names, stragglers):
        self.rule_names, self.stragglers = list(rule_names), stragglers
        tables = {"CUTRACE_PROCESSES", "CUTRACE_THREADS", "CUDA_CALLCHAINS", "CUTRACE_PYTHON_CALLCHAINS", "StringIds",
                  "CUPTI_ACTIVITY_KIND_RUNTIME"} | set(analysis.GPU_TABLES)
        for name in self.rule_names:
            tables |= set(RULES[name].sql_rule.tables)
        if stragglers:
            tables |= set(summaries.Stragglers.tables)
        self.tables = tuple(sorted(tables))

    def map_queries(self, options):
        native, python = _site_queries()
        parts = {"gpu": f"""
            SELECT (SELECT count(*) FROM ({analysis.GPU_WORK})) AS operations,
                   (SELECT count(callchainId) FROM CUPTI_ACTIVITY_KIND_RUNTIME) AS stacks,
                   (SELECT string_agg(DISTINCT gpuActivity, '; ') FROM CUTRACE_PROCESSES
                    WHERE gpuActivity IS NOT NULL) AS why,
                   (SELECT any_value(value) FROM trace_metadata WHERE name = 'options') AS options"""}
        for name in self.rule_names:
            rule = RULES[name]
            if not rule.is_call:
                parts["rule." + name] = rule.sql_rule.query(options)
                continue
            parts["rule." + name] = f"""
                WITH f AS ({rule.sql_rule.query(options, call=', r.callchainId AS "_chain"')}),
                native AS ({native}), python AS ({python})
                SELECT f.* EXCLUDE ("_chain"), f."GlobalTid" % 16777216 AS "TID", t.name AS "Thread",
                       n.site AS "Call Site", p.site AS "Python Call Site"
                FROM f LEFT JOIN (SELECT globalTid, any_value(name) AS name FROM CUTRACE_THREADS GROUP BY globalTid) AS t
                       ON t.globalTid = f."GlobalTid"
                LEFT JOIN native AS n ON n.id = f."_chain" LEFT JOIN python AS p ON p.id = f."_chain" """
            if name == "cuda_api_sync":  # its query has a TID already
                parts["rule." + name] = parts["rule." + name].replace(
                    'f.* EXCLUDE ("_chain"), f."GlobalTid" % 16777216 AS "TID"', 'f.* EXCLUDE ("_chain")')
        if self.stragglers:
            for part, sql in summaries.Stragglers().map_queries(options).items():
                parts["stragglers." + part] = sql
        return parts


# --- the command line ---

def parser():
    ap = argparse.ArgumentParser(
        prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Runs nsys's expert-system rules over a trace, or over a job's traces (one per rank): each "
                    "rule explains what it looks for and what to do, then lists its findings, most costly first.",
        epilog="rules:\n" + "\n".join(f"  {r.name:<18} {r.title}" for r in RULES.values()) + "\n\n"
               "A finding of a call names its thread and, where the call carried a stack (cutrace profile "
               "--cudabacktrace all:THRESHOLD), its call site in the program and in Python. Given several traces "
               "or a directory, each finding has its Rank, and a per-rank view names the slowest ranks.\n"
               "exit status: 0; 1 when a trace could not be read (the others are analysed); 2 on a usage error; "
               "3 when a trace is cut off or damaged (its intact part is analysed).")
    ap.add_argument("traces", nargs="+", metavar="TRACE|DIR", help="traces, or directories whose *.cutrace are used")
    ap.add_argument("-r", "--rule", action="append", metavar="RULE[,RULE...]",
                    help="the rules to run (default: all)")
    ap.add_argument("--gap", type=int, default=500_000_000, metavar="NS",
                    help="gpu_gaps: the shortest GPU idle time reported, in ns (default 500000000, nsys's 500 ms)")
    ap.add_argument("--threshold", type=float, default=50.0, metavar="PERCENT",
                    help="gpu_time_util: a window busier than this is not low (default 50)")
    ap.add_argument("--chunks", type=int, default=30, metavar="N",
                    help="gpu_time_util: windows per process and device (default 30)")
    ap.add_argument("--rows", type=int, default=DEFAULT_ROWS, metavar="N",
                    help=f"findings shown per rule, most costly first (default {DEFAULT_ROWS}; 0: all)")
    # -f is --format, as in cutrace stats and nsys; --force-overwrite has no short form there either.
    ap.add_argument("-f", "--format", choices=("column", "csv", "json"), default="column", help="output format")
    ap.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of standard output")
    ap.add_argument("--force-overwrite", choices=("true", "false"), default="false",
                    help="replace an existing --output file (default false)")
    return ap


class UsageError(AnalyzeError):
    def __init__(self, message):
        super().__init__(message, EXIT_USAGE)


def chosen_rules(given):
    if not given:
        return list(RULES)
    names = [n.strip() for item in given for n in item.split(",") if n.strip()]
    unknown = [n for n in names if n not in RULES]
    if unknown:
        raise UsageError(f"unknown rule '{unknown[0]}'; the rules are {', '.join(RULES)}")
    return list(dict.fromkeys(names))


def collect_traces(given):
    found, directories = [], 0
    for item in given:
        p = Path(item)
        if p.is_dir():
            directories += 1
            inside = sorted(f for f in p.iterdir() if f.name.endswith(TRACE_SUFFIX) and f.is_file())
            if not inside:
                raise UsageError(f"{item} holds no {TRACE_SUFFIX} traces; give a trace or a job's directory of them")
            found += inside
        elif p.exists():
            found.append(p)
        else:
            raise UsageError(f"no trace or directory {item}; check the path")
    unique = {str(f.resolve()): f for f in found}
    return sorted(unique.values(), key=lambda f: (f.name, str(f))), directories > 0


def run(args, out):
    import duckdb

    from .recipes.cli import Ranks
    rules = chosen_rules(args.rule)
    if args.rows < 0:
        raise UsageError("--rows takes a number of rows, 0 (all) or more")
    if args.gap < 0:
        raise UsageError("--gap takes a time in ns, 0 or more")
    if not 0 <= args.threshold <= 100:
        raise UsageError("--threshold takes a percentage, 0 to 100")
    if not 1 <= args.chunks <= 100000:
        raise UsageError("--chunks takes a number of windows, 1 to 100000")
    traces, from_directory = collect_traces(args.traces)
    job = len(traces) > 1 or from_directory
    options = {"gap": args.gap, "threshold": args.threshold, "chunks": args.chunks}
    work = Analysis(rules, stragglers=job)
    # A process per core pays for its start (Python, pyarrow, DuckDB: about a second) only on big traces.
    size = sum(t.stat().st_size for t in traces)
    mode = "concurrent" if len(traces) > 1 and size >= CONCURRENT_BYTES and (os.cpu_count() or 1) > 1 else "none"
    failed, partial, used = [], [], []
    with tempfile.TemporaryDirectory(prefix="cutrace-analyze-") as temp:
        parts = {}
        for result in run_maps(mode, work, list(enumerate(traces)), options):
            if result["error"]:
                print(f"{PROG}: {result['file']} cannot be read: {result['error'].rstrip('.')}.", file=sys.stderr)
                failed.append(result["file"])
                continue
            if not result["complete"]:
                print(f"{PROG}: warning: {result['file']}: {result['status']}; its intact part is analysed",
                      file=sys.stderr)
                partial.append(result["file"])
            for part, data in result.pop("parts").items():
                path = Path(temp) / f"{part}.{result['index']}.parquet"
                path.write_bytes(data)
                parts.setdefault(part, []).append(str(path))
            used.append(result)
        if not used:
            if len(traces) == 1:
                return EXIT_FAILURE  # the reader's sentence is above
            raise AnalyzeError(f"none of the {len(traces)} traces could be read; see the messages above")
        ranks, note = Ranks.assign(used) if job else ({used[0]["index"]: None}, None)
        if note:
            print(f"{PROG}: note: {note}.", file=sys.stderr)
        con = duckdb.connect()
        con.execute(f"SET temp_directory = {quote_text(str(Path(temp) / 'duckdb.tmp'))}")
        con.execute(f'CREATE TABLE ranks ({INDEX} BIGINT, "Rank" BIGINT, "File" VARCHAR)')
        con.executemany("INSERT INTO ranks VALUES (?, ?, ?)", [(r["index"], ranks[r["index"]], r["file"]) for r in used])

        def partials(part):
            return f"""(SELECT p.*, r."Rank" FROM read_parquet({sql_list(sorted(parts[part]))}) AS p
                        JOIN ranks AS r USING ({INDEX}))"""

        gpu = con.execute(f"SELECT \"Rank\", operations, stacks, why, options FROM {partials('gpu')} "
                          "ORDER BY \"Rank\"").fetchall()
        report = {"traces": [{"file": r["file"], "rank": ranks[r["index"]]} for r in sorted(used, key=lambda r: r["index"])],
                  "rules": [], "options": options}
        with_gpu = [g for g in gpu if g[1] > 0]
        for name in rules:
            rule = RULES[name]
            entry = {"rule": name, "title": rule.title, "explanation": rule.explanation, "advice": rule.advice}
            report["rules"].append(entry)
            if rule.needs_gpu and not with_gpu:
                entry["skipped"] = ("needs GPU activity (kernels, copies, memsets), and " +
                                    ("this trace has none" if len(gpu) == 1 else "none of these traces has any") +
                                    ": " + why_no_gpu(gpu))
                continue
            if rule.needs_gpu and len(with_gpu) < len(gpu):
                entry["note"] = ("ranks " + ", ".join(str(g[0]) for g in gpu if g[1] == 0) +
                                 " have no GPU activity and were not checked")
            columns = rule.columns + (["Rank"] if job else []) + (["Call Site", "Python Call Site"] if rule.is_call else [])
            order = rule.sql_rule.order + ', "Rank", "Start"' if job else rule.sql_rule.order + ', "Start"'
            source = partials("rule." + name)
            entry["total"] = con.execute(f"SELECT count(*) FROM {source}").fetchone()[0]
            limit = f"LIMIT {int(args.rows)}" if args.rows else ""
            cur = con.execute(f"SELECT {', '.join(_ident(c) for c in columns)} FROM {source} ORDER BY {order} {limit}")
            entry["columns"] = [SHOWN.get(c, c) for c in columns]
            entry["findings"] = [list(row) for row in cur.fetchall()]
            if "Call Site" in columns:
                at = columns.index("Call Site")
                for row in entry["findings"]:
                    row[at] = short_site(row[at])
            if rule.is_call and entry["total"]:
                with_site = con.execute(f'SELECT count(*) FROM {source} WHERE "Call Site" IS NOT NULL '
                                        f'OR "Python Call Site" IS NOT NULL').fetchone()[0]
                entry["without_stack"] = entry["total"] - with_site
        if job:
            report["stragglers"] = stragglers_view(con, partials)
        con.close()
    # Said where a finding of a call has no call site to show: the trace took no stack of it.
    report["stack_hint"] = STACK_HINT if any(e.get("without_stack") for e in report["rules"]) else None
    write(report, args, out)
    if failed:
        return EXIT_FAILURE
    return EXIT_PARTIAL if partial else EXIT_OK


def short_function(symbol):
    """A demangled C++ name without its parameter list: `ns::f(int, std::vector<float> const&) const` is
    `ns::f`, which is what a reader looks for in a call site."""
    text = symbol.rstrip()
    for suffix in (" const", " volatile", " &&", " &"):
        if text.endswith(suffix):
            text = text[:-len(suffix)].rstrip()
    if not text.endswith(")"):
        return symbol
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(text[i], 0)
        if depth == 0:
            return text[:i] if i > 0 else symbol
    return symbol


def short_site(site):
    return None if site is None else " <- ".join(short_function(f) for f in site.split(" <- "))


def why_no_gpu(gpu):
    """Why traces have no GPU activity, from their processes' GPU activity status and their options."""
    reasons = sorted({g[3] for g in gpu if g[3]})
    if any(re.search(r"--gpu-activity[ =](false|0|no|off)\b", g[4] or "") for g in gpu):
        reasons.insert(0, "recorded with --gpu-activity false; record without it")
    return "; ".join(reasons) if reasons else ("no kernel, copy or memset was recorded (a GPU and CUPTI are needed "
                                               "for them)")


def _ident(name):
    return '"' + name.replace('"', '""') + '"'


def stragglers_view(con, partials):
    """The stragglers recipe's reduce over the ranks: totals per rank, NVTX ranges' slowest and
    fastest ranks, and the slowest rank by each total."""
    queries = summaries.Stragglers().reduce_queries({"totals": partials("stragglers.totals"),
                                                     "ranges": partials("stragglers.ranges")}, {})
    view = {}
    for key, file in (("totals", "rank_totals.parquet"), ("ranges", "nvtx_ranges.parquet")):
        cur = con.execute(queries[file])
        columns = [d[0] for d in cur.description]
        # Sums of ns and bytes come back from Parquet as doubles: whole numbers are shown as such.
        whole = [c not in ("Mean Time", "Spread") for c in columns]
        rows = [[int(v) if w and isinstance(v, float) and v.is_integer() else v for v, w in zip(row, whole)]
                for row in cur.fetchall()]
        view[key] = {"columns": columns, "rows": rows}
    totals = [dict(zip(view["totals"]["columns"], row)) for row in view["totals"]["rows"]]
    slowest = []
    for column in ("Kernel Time", "Memcpy Time", "API Time"):
        values = [(t[column], t["Rank"]) for t in totals]
        if len(values) < 2 or max(values)[0] == min(values)[0]:  # no rank stands out
            continue
        top = max(values, key=lambda v: (v[0], -v[1]))
        low = min(values, key=lambda v: (v[0], v[1]))
        median = sorted(v[0] for v in values)[len(values) // 2]
        slowest.append({"by": column, "rank": top[1], "time": top[0], "fastest_rank": low[1], "fastest_time": low[0],
                        "median": median})
    view["slowest"] = slowest
    return view


# --- output ---

def _wrap(text, width=100):
    import textwrap
    return textwrap.wrap(text, width) or [""]


def _column_text(report):
    lines = []
    for e in report["rules"]:
        lines.append(f"** {e['title']} ({e['rule']})")
        lines.append("")
        lines += _wrap(e["explanation"])
        lines.append("")
        lines += _wrap("Advice: " + e["advice"])
        lines.append("")
        if "skipped" in e:
            lines.append(f"Not checked: this rule {e['skipped']}.")
            lines.append("")
            continue
        if e.get("note"):
            lines.append(f"Note: {e['note']}.")
        if not e["total"]:
            lines.append("No findings.")
            lines.append("")
            continue
        columns, rows = list(e["columns"]), e["findings"]
        # Call-site columns nobody has say nothing on a terminal: left out there (csv and json keep them).
        for name in ("Python Call Site", "Call Site"):
            if name in columns and all(r[columns.index(name)] is None for r in rows):
                i = columns.index(name)
                columns.pop(i)
                rows = [r[:i] + r[i + 1:] for r in rows]
        lines.append(f"{e['total']:,} {'finding' if e['total'] == 1 else 'findings'}:")
        lines += table_lines(columns, rows)
        if e["total"] > len(rows):
            lines.append(f"... and {e['total'] - len(rows):,} more (--rows N shows more, --rows 0 all)")
        lines.append("")
    if report.get("stragglers"):
        s = report["stragglers"]
        lines.append("** Stragglers: per-rank totals (stragglers)")
        lines.append("")
        for item in s["slowest"]:
            lines.append(f"Slowest rank by {item['by']}: rank {item['rank']} ({item['time']:,} ns; median "
                         f"{item['median']:,} ns, fastest rank {item['fastest_rank']} {item['fastest_time']:,} ns)")
        if s["slowest"]:
            lines.append("")
        lines += table_lines(s["totals"]["columns"], s["totals"]["rows"])
        lines.append("")
        if s["ranges"]["rows"]:
            lines.append("NVTX ranges, the slowest and fastest rank of each (total time per rank), widest spread first:")
            lines += table_lines(s["ranges"]["columns"], s["ranges"]["rows"])
            lines.append("")
    if report.get("stack_hint"):
        lines += _wrap("Note: " + report["stack_hint"])
    return "\n".join(lines).rstrip("\n") + "\n"


def _csv_text(report):
    import csv
    import io
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    for e in report["rules"]:
        if "skipped" in e:
            buf.write(f"# {e['rule']}: not checked: this rule {e['skipped']}\n\n")
            continue
        buf.write(f"# {e['rule']}: {e['title']}: {e['total']} findings" +
                  (f", the first {len(e['findings'])}" if e["total"] > len(e["findings"]) else "") + "\n")
        w.writerow(e["columns"])
        w.writerows(e["findings"])
        buf.write("\n")
    if report.get("stragglers"):
        for key in ("totals", "ranges"):
            buf.write(f"# stragglers: {'per-rank totals' if key == 'totals' else 'NVTX ranges'}\n")
            w.writerow(report["stragglers"][key]["columns"])
            w.writerows(report["stragglers"][key]["rows"])
            buf.write("\n")
    return buf.getvalue()


def write(report, args, out):
    if args.format == "json":
        text = json.dumps(report, indent=1) + "\n"
    elif args.format == "csv":
        text = _csv_text(report)
    else:
        text = _column_text(report)
    if out is not None:
        out.write(text)
        return
    target = Path(args.output)
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", dir=str(target.resolve().parent))
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    print(f"{PROG}: wrote {target}.", file=sys.stderr)


def main(argv):
    ap = parser()
    if not argv:
        ap.print_usage(sys.stderr)
        return EXIT_USAGE
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return EXIT_OK if e.code == 0 else EXIT_USAGE
    try:
        out = sys.stdout
        if args.output and args.output != "-":
            target = Path(args.output)
            if target.exists() and args.force_overwrite != "true":
                raise UsageError(f"{target} already exists; pass --force-overwrite true to replace it or choose "
                                 "another -o")
            if not target.resolve().parent.is_dir():
                raise AnalyzeError(f"cannot write {target} (its directory does not exist)")
            out = None
        return run(args, out)
    except AnalyzeError as e:
        print(f"{PROG}: {e}.", file=sys.stderr)
        return e.code
    except OSError as e:
        print(f"{PROG}: cannot write {args.output or 'the output'} ({e.strerror or e}).", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted.", file=sys.stderr)
        return 130
