"""`cutrace recipe NAME --input DIR|FILE... [--output DIR] [--mode none|concurrent|dask-futures]`."""
import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

from .. import _file_kind
from . import RECIPES
from .framework import INDEX, MODES, RecipeError, quote_text, run_maps, sql_list
from ..text_table import table_lines

PROG = "cutrace recipe"
TRACE_SUFFIX = ".cutrace"


class UsageError(RecipeError):
    pass


def recipe_list():
    width = max(len(n) for n in RECIPES)
    return "\n".join(f"  {name:<{width}}  {r.description}" for name, r in RECIPES.items())


def parser(recipe=None):
    ap = argparse.ArgumentParser(
        prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Runs a recipe over many traces (one per rank of a job): a map step per trace, a reduce over "
                    "their results, Parquet files with a Rank column out.",
        epilog="recipes:\n" + recipe_list() + "\n\n"
               "Rank: a trace's job.rank (recorded by cutrace profile from the job's environment), else its position "
               "among the input traces sorted by name.\n"
               "--mode dask-futures runs the map steps on the Dask cluster of --scheduler-file or "
               "$DASK_SCHEDULER_ADDRESS, else on a local one; see docs/recipes.md.\n"
               "exit status: 0; 3 when a trace was damaged, cut off or unreadable (a warning names it; the others are "
               "used); 1 when no trace could be read; 2 on a usage error.")
    ap.add_argument("recipe", metavar="NAME", help="the recipe (listed below)")
    ap.add_argument("--input", nargs="+", metavar="DIR|FILE", required=True,
                    help="traces, or directories whose *.cutrace files are all used")
    ap.add_argument("--output", metavar="DIR", help="the output directory (default: NAME-1, NAME-2, ... here)")
    ap.add_argument("--mode", choices=MODES, default="concurrent",
                    help="none: one process; concurrent (default): a process per core; dask-futures: a Dask cluster")
    ap.add_argument("--scheduler-file", metavar="FILE", help="with --mode dask-futures: the scheduler file of the cluster")
    ap.add_argument("-f", "--force-overwrite", action="store_true", help="replace an earlier output of a recipe")
    ap.add_argument("--rows", type=int, default=20, metavar="N", help="rows of the summary printed on stdout (default 20)")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress bar on a terminal")
    for flag, keywords in getattr(recipe, "arguments", ()):
        ap.add_argument(flag, **keywords)
    return ap


def recipe_options(recipe, args):
    """The values of the recipe's own options, for its queries: {"gap": 500000000}."""
    return {flag.lstrip("-").replace("-", "_"): getattr(args, flag.lstrip("-").replace("-", "_"))
            for flag, _ in getattr(recipe, "arguments", ())}


def collect_inputs(given):
    """The traces named or found in the directories named, sorted by file name (then path)."""
    found = []
    for item in given:
        p = Path(item)
        if p.is_dir():
            found += [f for f in p.iterdir() if f.name.endswith(TRACE_SUFFIX) and f.is_file()]
        elif p.is_file():
            found.append(p)
        elif p.exists():
            raise UsageError(f"{item} is {_file_kind(p)}, not a trace; give trace files or a directory "
                             "holding them to --input")
        else:
            raise UsageError(f"no trace or directory {item}; check the path given to --input")
    unique = {str(f.resolve()): f for f in found}
    if not unique:
        raise UsageError(f"no {TRACE_SUFFIX} traces in {', '.join(given)}; give trace files or a directory holding them")
    return sorted(unique.values(), key=lambda f: (f.name, str(f)))


def collect_sides(recipe, given):
    """The traces, and for a recipe that compares sides (recipe.sides, e.g. ("A", "B")) the side of each:
    one --input per side, a trace or a directory of traces. Without sides, the side of each is None."""
    names = getattr(recipe, "sides", None)
    if not names:
        return collect_inputs(given), None
    if len(given) != len(names):
        raise UsageError(f"{recipe.name} compares {len(names)} sides: give --input {' '.join(names)}, each a trace or "
                         f"a directory of traces (got {len(given)})")
    inputs, sides = [], []
    for name, item in zip(names, given):
        found = collect_inputs([item])
        inputs += found
        sides += [name] * len(found)
    return inputs, sides


def choose_output(name, given, force):
    if given is None:
        n = 1
        while Path(f"{name}-{n}").exists():
            n += 1
        return Path(f"{name}-{n}")
    out = Path(given)
    if out.exists():
        if not force:
            raise UsageError(f"{out} already exists; pass --force-overwrite to replace it or choose another --output")
        if not out.is_dir() or not (out / "files.parquet").exists():
            raise UsageError(f"{out} is not the output of a recipe (it has no files.parquet); choose another --output")
        # It is replaced whole: never a directory that holds anything but a recipe's Parquet files.
        others = [f.name for f in out.iterdir() if not f.is_file() or f.suffix != ".parquet"]
        if others:
            raise UsageError(f"{out} holds files that are not a recipe's ({', '.join(sorted(others)[:3])}"
                             f"{', ...' if len(others) > 3 else ''}); choose another --output")
    return out


class ReduceMeter:
    """For the benchmark ($CUTRACE_RECIPE_STATS=FILE): the wall time of the map and reduce steps, and
    the peak resident memory of this process during the reduce, sampled from /proc every 5 ms."""

    def __init__(self):
        import threading
        self.path = os.environ.get("CUTRACE_RECIPE_STATS")
        self.started = time.monotonic()
        self.peak = 0
        self.stop = threading.Event()
        self.thread = None

    def _sample(self):
        page = os.sysconf("SC_PAGE_SIZE")
        while not self.stop.wait(0.005):
            with open("/proc/self/statm") as f:
                self.peak = max(self.peak, int(f.read().split()[1]) * page)

    def reduce_begins(self):
        self.map_s = time.monotonic() - self.started
        if self.path:
            import threading
            self.thread = threading.Thread(target=self._sample, daemon=True)
            self.thread.start()
        self.reduce_started = time.monotonic()

    def reduce_ends(self):
        if not self.path:
            return
        self.stop.set()
        self.thread.join()
        import resource
        Path(self.path).write_text(json.dumps({
            "map_s": self.map_s, "reduce_s": time.monotonic() - self.reduce_started, "reduce_peak_rss": self.peak,
            "process_peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))


class Ranks:
    """A trace's Rank: job.rank from its metadata when every trace used has a distinct one, else its
    position among the inputs sorted by name (failed traces keep theirs, so no rank shifts)."""

    @staticmethod
    def assign(results):
        given = {}
        for r in results:
            try:
                given[r["index"]] = int(r["rank"])
            except (TypeError, ValueError):
                pass
        if len(given) == len(results) and len(set(given.values())) == len(given):
            return given, None
        if not given:
            why = "no trace has a job.rank in its metadata"
        elif len(given) < len(results):
            why = f"{len(results) - len(given)} of {len(results)} traces have no job.rank in their metadata"
        else:
            why = "two traces have the same job.rank"
        return {r["index"]: r["index"] for r in results}, f"ranks are the traces' positions in name order ({why})"


def run(args):
    import duckdb

    from ..export import ProgressBar

    recipe = RECIPES.get(args.recipe)
    if recipe is None:
        raise UsageError(f"unknown recipe '{args.recipe}'; the recipes are {', '.join(RECIPES)}")
    if args.scheduler_file and args.mode != "dask-futures":
        raise UsageError("--scheduler-file is for --mode dask-futures")
    if args.scheduler_file and not Path(args.scheduler_file).is_file():
        raise UsageError(f"no scheduler file {args.scheduler_file}; give the file the Dask scheduler wrote")
    if args.rows < 0:
        raise UsageError("--rows takes a number of rows, 0 or more")
    options = recipe_options(recipe, args)
    inputs, sides = collect_sides(recipe, args.input)
    output = choose_output(recipe.name, args.output, args.force_overwrite)
    parent = output.resolve().parent
    if not parent.is_dir():
        raise RecipeError(f"cannot create {output} (its directory does not exist)")
    temp = Path(tempfile.mkdtemp(prefix=f".{output.name}.tmp-", dir=parent))
    warnings = 0
    meter = ReduceMeter()
    try:
        work = temp / "partials"
        work.mkdir()
        bar = ProgressBar(not args.quiet, prog=PROG, amount=lambda n: f"{n:,.0f} traces" if n >= 1 else f"{n:.2f}")
        used, parts = [], {}
        indexed = list(enumerate(inputs))
        try:
            for done, result in enumerate(run_maps(args.mode, recipe.name, indexed, options, args.scheduler_file), 1):
                bar(done, len(inputs))
                if result["error"]:
                    bar.finish()
                    print(f"{PROG}: warning: {result['file']} is left out: {result['error']}", file=sys.stderr)
                    warnings += 1
                    continue
                if not result["complete"]:
                    bar.finish()
                    print(f"{PROG}: warning: {result['file']}: {result['status']}; its intact part is used",
                          file=sys.stderr)
                    warnings += 1
                for part, data in result.pop("parts").items():
                    path = work / f"{part}.{result['index']}.parquet"
                    path.write_bytes(data)
                    parts.setdefault(part, []).append(str(path))
                used.append(result)
        finally:
            bar.finish()
        if not used:
            raise RecipeError(f"none of the {len(inputs)} traces could be read; see the warnings above")
        meter.reduce_begins()
        side_of = {index: sides[index] if sides else None for index, _ in indexed}
        ranks = {}
        for side in dict.fromkeys(side_of.values()):  # each side's ranks on their own: pairs by rank
            assigned, note = Ranks.assign([r for r in used if side_of[r["index"]] == side])
            if note:  # positions within the side, whose inputs are consecutive
                first = min(index for index, _ in indexed if side_of[index] == side)
                assigned = {index: rank - first for index, rank in assigned.items()}
            ranks.update(assigned)
            if note:
                print(f"{PROG}: note: {'side ' + side + ': ' if side else ''}{note}.", file=sys.stderr)
        con = duckdb.connect()
        con.execute(f"SET temp_directory = {quote_text(str(temp / 'duckdb.tmp'))}")
        con.execute(f'CREATE TABLE ranks ({INDEX} BIGINT, "Rank" BIGINT, "File" VARCHAR, "Worker" VARCHAR, "Side" VARCHAR)')
        con.executemany("INSERT INTO ranks VALUES (?, ?, ?, ?, ?)",
                        [(r["index"], ranks[r["index"]], r["file"], r["worker"], side_of[r["index"]]) for r in used])
        side_column = ', r."Side"' if sides else ""
        partials = {part: f"""(SELECT p.*, r."Rank"{side_column} FROM read_parquet({sql_list(sorted(files))}) AS p
                                JOIN ranks AS r USING ({INDEX}))"""
                    for part, files in parts.items()}
        for file, sql in recipe.reduce_queries(partials, options).items():
            con.execute(f"COPY ({sql}) TO {quote_text(str(temp / file))} (FORMAT parquet, COMPRESSION zstd)")
        con.execute(f"""COPY (SELECT {'"Side", ' if sides else ''}"Rank", "File", "Worker" FROM ranks
                            ORDER BY {'"Side", ' if sides else ''}"Rank")
                        TO {quote_text(str(temp / 'files.parquet'))} (FORMAT parquet)""")
        summary = con.execute(f"SELECT * FROM read_parquet({quote_text(str(temp / recipe.summary_output))}) "
                              f"LIMIT {int(args.rows)}")
        columns = [d[0] for d in summary.description]
        rows = summary.fetchall()
        total = con.execute(f"SELECT count(*) FROM read_parquet({quote_text(str(temp / recipe.summary_output))})"
                            ).fetchone()[0]
        con.close()
        meter.reduce_ends()
        shutil.rmtree(work)
        shutil.rmtree(temp / "duckdb.tmp", ignore_errors=True)
        if output.exists():
            shutil.rmtree(output)
        os.rename(temp, output)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    print(f"{recipe.name} over {len(used)} {'trace' if len(used) == 1 else 'traces'}: {recipe.summary_output}"
          + (f" (first {len(rows)} of {total:,} rows)" if total > len(rows) else ""))
    print("\n".join(table_lines(columns, rows)))
    files = ", ".join(sorted(p.name for p in output.iterdir()))
    print(f"{PROG}: wrote {output} ({files}).", file=sys.stderr)
    return 3 if warnings else 0


def main(argv):
    ap = parser(RECIPES.get(argv[0]) if argv else None)
    if not argv or argv[0] in ("-h", "--help"):
        ap.print_help()
        return 0 if argv else 2
    args = ap.parse_args(argv)
    try:
        return run(args)
    except UsageError as e:
        print(f"{PROG}: {e}.", file=sys.stderr)
        return 2
    except RecipeError as e:
        print(f"{PROG}: {e}.", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"{PROG}: cannot write {args.output or 'the output'} ({e.strerror or e}).", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; nothing was written.", file=sys.stderr)
        return 130
