"""The map-reduce under every recipe.

Map, once per trace, where it runs (this process, a pool process or a Dask worker): the tables the
recipe reads are streamed out of the trace into Parquet files in a local scratch directory (memory
bounded by a record batch), the recipe's per-trace SQL runs over them in DuckDB, and what comes back
is the small result only: each partial table as Parquet bytes, with the trace's job.rank, its state
and where the map ran.

Reduce, here: each partial is written to OUTPUT's work directory as it arrives, and the recipe's
SQL reads them all with DuckDB's Parquet scan and writes each output with COPY, so that no step
holds all ranks' rows at once (DuckDB streams, and spills a sort to disk when it must).
"""
import io
import os
import shutil
import socket
import tempfile
import time
from pathlib import Path

# The column every partial carries: the input's position in the sorted list of inputs, by which the
# reduce joins each row to its Rank.
INDEX = "_index"


class RecipeError(Exception):
    """Bad input or options: the message is one sentence for the user."""


def quote_ident(name):
    return '"' + name.replace('"', '""') + '"'


def quote_text(text):
    return "'" + str(text).replace("'", "''") + "'"


def sql_list(paths):
    return "[" + ", ".join(quote_text(p) for p in paths) + "]"


def worker_identity():
    """Where this map step runs: the Dask worker's name and address when on one, else host:pid."""
    try:
        from distributed import get_worker
        w = get_worker()
        return f"dask:{w.name}@{w.address} pid {os.getpid()}"
    except Exception:  # not on a Dask worker (or Dask not installed): this process
        return f"{socket.gethostname()} pid {os.getpid()}"


def map_trace(recipe_name, index, path, options, duckdb_threads=None, tables_library=None):
    """The map step of one trace. Returns a dict: index, file, rank (job.rank from the trace's
    metadata, or None), worker, seconds, complete/status of the read, parts {name: Parquet bytes},
    or error (a sentence) when the trace could not be read."""
    started = time.monotonic()
    # A Dask worker started without the library's location gets the client's, when the file is there.
    if tables_library and not os.environ.get("CUTRACE_TABLES_LIBRARY") and os.path.exists(tables_library):
        os.environ["CUTRACE_TABLES_LIBRARY"] = tables_library
    import duckdb
    import pyarrow as pa
    import pyarrow.parquet as pq

    import cutrace
    from . import RECIPES

    # `cutrace analyze` hands over its rules as a recipe object of its own, not a name.
    recipe = RECIPES[recipe_name] if isinstance(recipe_name, str) else recipe_name
    result = {"index": index, "file": str(path), "rank": None, "worker": worker_identity(), "parts": {},
              "complete": True, "status": "", "error": None}
    scratch = Path(tempfile.mkdtemp(prefix="cutrace-recipe-"))
    try:
        try:
            trace = cutrace.open(path)
        except cutrace.TraceError as e:
            result["error"] = str(e)
            return result
        wanted = set(recipe.tables) | {"META_DATA_CAPTURE"}
        schemas = dict(zip(cutrace.table_names(), cutrace._schemas()))
        missing = wanted - set(schemas)
        if missing:
            raise RecipeError(f"this cutrace library has no table {', '.join(sorted(missing))}")
        writers, metadata = {}, {}
        try:
            for name, batch in trace.batches():
                if name not in wanted:
                    continue
                if name == "META_DATA_CAPTURE":
                    for key, value in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()):
                        metadata[key] = value
                    continue
                if name not in writers:
                    writers[name] = pq.ParquetWriter(scratch / (name + ".parquet"), schemas[name], compression="lz4")
                writers[name].write_batch(batch)
        except cutrace.TraceError as e:
            result["error"] = str(e)
            return result
        finally:
            for w in writers.values():
                w.close()
        result["complete"], result["status"] = trace.complete, trace.status
        result["rank"] = metadata.get("job.rank")
        con = duckdb.connect()
        if duckdb_threads:
            con.execute(f"SET threads = {int(duckdb_threads)}")
        con.execute(f"SET temp_directory = {quote_text(str(scratch / 'duckdb.tmp'))}")
        for name in recipe.tables:
            file = scratch / (name + ".parquet")
            if not file.exists():  # a table with no rows in this trace: empty, with its columns
                pq.write_table(pa.Table.from_batches([], schema=schemas[name]), file)
            con.execute(f"CREATE VIEW {quote_ident(name)} AS SELECT * FROM read_parquet({quote_text(str(file))})")
        con.execute("CREATE TABLE trace_metadata AS SELECT * FROM (VALUES " +
                    (", ".join(f"({quote_text(k)}, {quote_text(v)})" for k, v in metadata.items()) or "('', '')") +
                    ") AS m(name, value)")
        for part, sql in recipe.map_queries(options).items():
            out = scratch / f"part.{part}.parquet"
            con.execute(f"COPY (SELECT {int(index)} AS {INDEX}, * FROM ({sql})) TO {quote_text(str(out))} "
                        "(FORMAT parquet, COMPRESSION zstd)")
            result["parts"][part] = out.read_bytes()
        con.close()
        return result
    finally:
        result["seconds"] = time.monotonic() - started
        shutil.rmtree(scratch, ignore_errors=True)


# --- the modes: each yields map results as they complete ---

def run_none(recipe_name, inputs, options):
    for index, path in inputs:
        yield map_trace(recipe_name, index, path, options)


def run_concurrent(recipe_name, inputs, options, workers=None):
    import concurrent.futures
    import multiprocessing
    workers = workers or min(len(inputs), os.cpu_count() or 1)
    # spawn: the pool's processes start clean, without this process's DuckDB and reader state.
    context = multiprocessing.get_context("spawn")
    pending, queue = set(), list(inputs)
    with concurrent.futures.ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        # A few traces ahead of the workers, not all: a finished future holds its result until dropped.
        while queue or pending:
            while queue and len(pending) < 2 * workers:
                index, path = queue.pop(0)
                pending.add(pool.submit(map_trace, recipe_name, index, path, options, 1))
            done, pending = concurrent.futures.wait(pending, return_when=concurrent.futures.FIRST_COMPLETED)
            for future in done:
                yield future.result()


def dask_client(scheduler_file=None):
    """A Client to the cluster named by --scheduler-file or $DASK_SCHEDULER_ADDRESS, else a local one
    (one single-threaded worker process per core). Returns (client, description, cluster or None)."""
    try:
        from distributed import Client, LocalCluster
    except ImportError as e:
        raise RecipeError(f"--mode dask-futures needs the Python packages dask and distributed, which this "
                          f"Python cannot import ({e}); pip install 'cutrace[dask]'") from None
    address = os.environ.get("DASK_SCHEDULER_ADDRESS")
    try:
        if scheduler_file:
            return Client(scheduler_file=str(scheduler_file), timeout="30s"), f"the scheduler of {scheduler_file}", None
        if address:
            return Client(address, timeout="30s"), f"the scheduler at {address}", None
    except (OSError, TimeoutError) as e:
        raise RecipeError(f"cannot reach the Dask scheduler {scheduler_file or address} ({e}); start it, or unset "
                          "DASK_SCHEDULER_ADDRESS for a local cluster") from None
    cluster = LocalCluster(n_workers=os.cpu_count() or 1, threads_per_worker=1, processes=True,
                           dashboard_address=None)
    return Client(cluster), "a local Dask cluster", cluster


def run_dask(recipe_name, inputs, options, scheduler_file=None):
    from distributed import as_completed
    client, _, cluster = dask_client(scheduler_file)
    try:
        library = os.environ.get("CUTRACE_TABLES_LIBRARY")
        futures = [client.submit(map_trace, recipe_name, index, str(path), options, 1, library, pure=False,
                                 key=f"cutrace-recipe-{recipe_name}-{index}-{os.getpid()}-{time.time_ns()}")
                   for index, path in inputs]
        for future in as_completed(futures):
            result = future.result()
            future.release()  # the worker may forget it: the reduce writes it to disk now
            yield result
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


MODES = ("none", "concurrent", "dask-futures")


def run_maps(mode, recipe_name, inputs, options, scheduler_file=None):
    if mode == "none":
        return run_none(recipe_name, inputs, options)
    if mode == "concurrent":
        return run_concurrent(recipe_name, inputs, options)
    return run_dask(recipe_name, inputs, options, scheduler_file)


def parquet_bytes_rows(data):
    import pyarrow.parquet as pq
    return pq.ParquetFile(io.BytesIO(data)).metadata.num_rows
