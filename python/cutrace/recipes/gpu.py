"""The recipes of the device's timeline: NVTX ranges projected onto the GPU (nvtx_gpu_proj_trace,
nvtx_gpu_proj_sum) and the share of time the GPU was in use (gpu_time_util, cuda_gpu_time_util_map).

A CUDA graph launch recorded whole (--cuda-graph-trace graph, the default) is one GPU operation, counted
as kernel time, from its first node's start to its last node's end: its nodes have no records of their
own, and leaving it out would show a graph-heavy program's GPU as idle.

Projection: a GPU operation (kernel, memory copy, memset, graph launch) belongs to an NVTX range when the CUDA call
that issued it (same process and correlationId) started and ended inside the range, on the range's
thread. A range holds the calls of the ranges nested in it too, so an outer range projects onto all
the work of its inner ones. The projected range runs from the start of its first GPU operation to
the end of its last; ranges without GPU work, and start/end ranges ended on another thread than the
one that started them, are left out.

Utilization is time utilization, as nsys counts it: the time GPU operations ran within a stretch of
time over its length, each operation counted on its own, so that concurrent ones add up (and may
exceed 100%); a running copy counts as much as a kernel that fills the device.
"""
import argparse

from .framework import INDEX, quote_ident
from .summaries import NVTX_RANGES, aggregate, describe

PID = "// 16777216 % 16777216"  # globalTid or globalPid -> the process id (nsys's packing)
TID = "% 16777216"
# A thread's times joined as one number per thread (HUGEINT), so that "inside the range, on its
# thread" is two inequalities, which DuckDB answers with a range join (IEJoin) instead of comparing
# every call of a thread with every range of it. A thread's events lie within 10^15 ns (11 days).
THREAD_TIME = "({tid}::HUGEINT * 1000000000000000 + {t})"

# Closed push/pop and start/end ranges ended on their own thread, named as nvtx_sum names them.
RANGES = NVTX_RANGES.replace(
    'n."end" - n.start AS v',
    'n."end" - n.start AS v, n.start, n."end", n.globalTid, coalesce(n.endGlobalTid, n.globalTid) AS endGlobalTid'
) + " AND coalesce(n.endGlobalTid, n.globalTid) = n.globalTid"

GPU_OPERATIONS = """
    SELECT start, "end", correlationId, globalPid, deviceId, 'kernel' AS kind FROM CUPTI_ACTIVITY_KIND_KERNEL
    UNION ALL SELECT start, "end", correlationId, globalPid, deviceId, 'memory' FROM CUPTI_ACTIVITY_KIND_MEMCPY
    UNION ALL SELECT start, "end", correlationId, globalPid, deviceId, 'memory' FROM CUPTI_ACTIVITY_KIND_MEMSET
    UNION ALL SELECT start, "end", correlationId, globalPid, deviceId, 'kernel' FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE"""

# One row per projected range: its nesting among all of its thread's ranges (Lvl: how many enclose
# it; ParentId: the innermost of them; NumChild: the ranges it directly encloses; RangeStack: the ids
# from the outermost to itself) and its GPU operations.
PROJECTION = f"""
    WITH ranges AS NOT MATERIALIZED (  -- inlined where used: a join of a materialised CTE is no range join
        SELECT row_number() OVER (ORDER BY start, globalTid, "end" DESC, "Range", "Style") AS id, "Style", "Range", start, "end",
               globalTid, {THREAD_TIME.format(tid='globalTid', t='start')} AS ts,
               {THREAD_TIME.format(tid='globalTid', t='"end"')} AS te
        FROM ({RANGES})),
    enclosing AS NOT MATERIALIZED (  -- (range, a range of its thread that encloses it); identical ranges: the first encloses
        SELECT inner_r.id, outer_r.id AS outer_id, outer_r.start AS outer_start, outer_r."end" AS outer_end
        FROM ranges AS inner_r JOIN ranges AS outer_r
          ON outer_r.ts <= inner_r.ts AND outer_r.te >= inner_r.te
        WHERE outer_r.id <> inner_r.id
          AND (outer_r.start < inner_r.start OR outer_r."end" > inner_r."end" OR outer_r.id < inner_r.id)),
    nesting AS NOT MATERIALIZED (
        SELECT id, count(*) AS lvl, arg_max(outer_id, [outer_start, -outer_end, outer_id]) AS parent,
               string_agg(CAST(outer_id AS VARCHAR), ':' ORDER BY outer_start, outer_end DESC, outer_id) AS stack
        FROM enclosing GROUP BY id),
    children AS NOT MATERIALIZED (SELECT parent AS id, count(*) AS n FROM nesting GROUP BY parent),
    launches AS NOT MATERIALIZED (  -- the calls that gave the device work, with that work
        SELECT {THREAD_TIME.format(tid='r.globalTid', t='r.start')} AS ts,
               {THREAD_TIME.format(tid='r.globalTid', t='r."end"')} AS te, g.start, g."end"
        FROM CUPTI_ACTIVITY_KIND_RUNTIME AS r
        JOIN ({GPU_OPERATIONS}) AS g
          ON g.correlationId = r.correlationId AND r.correlationId <> 0 AND g.globalPid {PID} = r.globalTid {PID}),
    projected AS NOT MATERIALIZED (
        SELECT ranges.id, min(l.start) AS pstart, max(l."end") AS pend, count(*) AS ops
        FROM ranges JOIN launches AS l ON l.ts >= ranges.ts AND l.te <= ranges.te
        GROUP BY ranges.id)
    SELECT r."Range" AS "Name", p.pstart AS "Projected Start", p.pend - p.pstart AS "Projected Duration",
           p.pend AS "Projected End", r.start AS "Orig Start", r."end" - r.start AS "Orig Duration", r."Style",
           r.globalTid {PID} AS "PID", r.globalTid {TID} AS "TID", p.ops AS "NumGPUOps",
           coalesce(n.lvl, 0) AS "Lvl", coalesce(c.n, 0) AS "NumChild", r.id AS "RangeId", n.parent AS "ParentId",
           coalesce(n.stack || ':', '') || r.id AS "RangeStack"
    FROM projected AS p JOIN ranges AS r USING (id)
    LEFT JOIN nesting AS n USING (id) LEFT JOIN children AS c USING (id)"""


class NvtxGpuProjTrace:
    name = "nvtx_gpu_proj_trace"
    description = ("NVTX ranges projected onto the GPU: per range, the start, end and duration of the GPU work "
                   "launched inside it on its thread")
    tables = ("NVTX_EVENTS", "StringIds", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL",
              "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
              "CUPTI_ACTIVITY_KIND_GRAPH_TRACE")
    outputs = ("trace.parquet",)
    summary_output = "trace.parquet"

    def map_queries(self, options):
        return {"trace": PROJECTION}

    def reduce_queries(self, partials, options):
        return {"trace.parquet": f"""SELECT * EXCLUDE ({INDEX}) FROM {partials["trace"]}
                                     ORDER BY "Rank", "Projected Start", "Lvl", "RangeId" """}


class NvtxGpuProjSum:
    """rank_stats and all_stats of the projected durations, per range name and style, with the
    columns of nsys's report of that name (and Q1, Q3 as the other summaries have them)."""
    name = "nvtx_gpu_proj_sum"
    description = ("NVTX ranges projected onto the GPU: projected time, instances, average, quartiles, min, max, "
                   "stddev, GPU operations per range and style")
    tables = NvtxGpuProjTrace.tables
    outputs = ("all_stats.parquet", "rank_stats.parquet")
    summary_output = "all_stats.parquet"
    labels = ["Range", "Style"]
    # The summaries' columns -> this report's.
    renamed = {"Total Time": "Total Proj Time", "Instances": "Range Instances", "Avg": "Proj Avg", "Q1": "Proj Q1",
               "Med": "Proj Med", "Q3": "Proj Q3", "Min": "Proj Min", "Max": "Proj Max", "StdDev": "Proj StdDev"}

    def map_queries(self, options):
        projected = 'SELECT "Name" AS "Range", "Style", "Projected Duration" AS v FROM projection'
        return {  # the projection once, for the statistics and the sums beside them
            "stats": f"""
                WITH projection AS MATERIALIZED ({PROJECTION}),
                s AS ({describe(projected, self.labels, count="Instances", share=None)}),
                extra AS (SELECT "Name" AS "Range", "Style", CAST(sum("Orig Duration") AS BIGINT) AS "Total Range Time",
                                 CAST(sum("NumGPUOps") AS BIGINT) AS "Total GPU Ops", sum("Lvl") AS lvl_sum,
                                 sum("NumChild") AS child_sum
                          FROM projection GROUP BY ALL)
                SELECT * FROM s JOIN extra USING ("Range", "Style")"""}

    def columns(self, extra):
        """The output's columns in nsys's order, from the summaries' names and the extra sums."""
        r = self.renamed
        return ", ".join([
            '"Range"', '"Style"', f'"Total Time" AS "{r["Total Time"]}"', f'{extra}."Total Range Time"',
            f'"Instances" AS "{r["Instances"]}"'] + [
            f'"{k}" AS "{r[k]}"' for k in ("Avg", "Q1", "Med", "Q3", "Min", "Max", "StdDev")] + [
            f'{extra}."Total GPU Ops"', f'{extra}."Total GPU Ops" / "Instances" AS "Avg GPU Ops"',
            f'{extra}.lvl_sum / "Instances" AS "Avg Range Lvl"', f'{extra}.child_sum / "Instances" AS "Avg Num Child"'])

    def reduce_queries(self, partials, options):
        keys = ", ".join(quote_ident(l) for l in self.labels)
        stats = partials["stats"]
        return {
            "rank_stats.parquet": f"""SELECT "Rank", {self.columns("p")} FROM {stats} AS p
                                      ORDER BY "Rank", "Total Time" DESC, {keys}""",
            "all_stats.parquet": f"""
                WITH a AS ({aggregate(stats, self.labels, count="Instances", share=None)}),
                e AS (SELECT {keys}, CAST(sum("Total Range Time") AS BIGINT) AS "Total Range Time",
                             CAST(sum("Total GPU Ops") AS BIGINT) AS "Total GPU Ops", sum(lvl_sum) AS lvl_sum,
                             sum(child_sum) AS child_sum FROM {stats} GROUP BY {keys})
                SELECT {self.columns("e")}, "Min Rank", "Max Rank" FROM a JOIN e USING ({keys})
                ORDER BY "Total Time" DESC, {keys}""",
        }


def whole_number(low, high=None):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"{value} is not between {low} and {high}" if high is not None
                                             else f"{value} is less than {low}")
        return value
    return parse


def bins_of(span, count, pieces):
    """SQL: the stretches of time (one row per `pieces` row x bin), each a whole number of ns:
    bin i of a span [s, e) is [s + (e - s) * i // count, s + (e - s) * (i + 1) // count)."""
    return f"""
        SELECT {pieces}, b.i AS bin, s + (e - s) * b.i // {count} AS bs, s + (e - s) * (b.i + 1) // {count} AS be
        FROM ({span}) CROSS JOIN range({count}) AS b(i) WHERE e > s"""


def overlaps(operations, bins, count, keys):
    """SQL: per bin, the ns each kind of operation ran in it. Each operation meets only the bins its
    start and end fall in and those between (one bin either side for the rounding of the bounds)."""
    on = " AND ".join(f"h.{k} = b.{k}" for k in keys)
    return f"""
        WITH b AS ({bins}),
        spans AS (SELECT {", ".join(keys)}, min(bs) AS s, max(be) AS e FROM b GROUP BY ALL),
        o AS (SELECT o.*, greatest(0, (o.start - s) * {count} // (e - s) - 1) AS first_bin,
                     least({count} - 1, (o."end" - s) * {count} // (e - s) + 1) AS last_bin
              FROM ({operations}) AS o JOIN spans USING ({", ".join(keys)})
              WHERE o."end" > s AND o.start < e),
        hits AS (SELECT o.*, unnest(range(first_bin, last_bin + 1)) AS bin FROM o)
        SELECT b.*, coalesce(sum(least(h."end", b.be) - greatest(h.start, b.bs)) FILTER (WHERE h.kind = 'kernel'), 0)
                        AS kernel_ns,
               coalesce(sum(least(h."end", b.be) - greatest(h.start, b.bs)) FILTER (WHERE h.kind = 'memory'), 0)
                        AS memory_ns
        FROM b LEFT JOIN hits AS h
          ON h.bin = b.bin AND {on} AND h.start < b.be AND h."end" > b.bs
        GROUP BY ALL"""


OPERATIONS_BY_DEVICE = f"""
    SELECT globalPid {PID} AS pid, deviceId AS device, start, "end", kind FROM ({GPU_OPERATIONS})"""


class GpuTimeUtil:
    """Per process and device, from the start of its first GPU operation to the end of its last, cut into
    --chunks equal chunks: those in use less than --threshold percent, consecutive ones joined."""
    name = "gpu_time_util"
    description = ("stretches of time a GPU was in use less than --threshold percent (kernels, copies, memsets), "
                   "per rank, process and device")
    tables = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
              "CUPTI_ACTIVITY_KIND_GRAPH_TRACE")
    outputs = ("analysis.parquet", "utilization.parquet")
    summary_output = "analysis.parquet"
    arguments = (
        ("--threshold", {"type": whole_number(0, 100), "default": 50, "metavar": "PERCENT",
                         "help": "gpu_time_util: a chunk in use less than this is reported (default 50)"}),
        ("--chunks", {"type": whole_number(1, 10000), "default": 30, "metavar": "N",
                      "help": "gpu_time_util: the equal chunks each device's time is cut into (default 30)"}),
    )

    def map_queries(self, options):
        chunks = int(options.get("chunks") or 30)
        span = "SELECT pid, device, min(start) AS s, max(\"end\") AS e FROM (" + OPERATIONS_BY_DEVICE + ") GROUP BY ALL"
        used = overlaps(OPERATIONS_BY_DEVICE, bins_of(span, chunks, "pid, device"), chunks, ["pid", "device"])
        return {"chunks": f"""
            SELECT pid AS "PID", device AS "Device ID", bin AS "Chunk", bs AS "Start", be - bs AS "Duration",
                   kernel_ns + memory_ns AS "Busy Time"
            FROM ({used})"""}

    def reduce_queries(self, partials, options):
        threshold = int(options.get("threshold") if options.get("threshold") is not None else 50)
        chunks = partials["chunks"]
        device = '"Rank", "PID", "Device ID"'
        return {
            # Consecutive low chunks form one island: their chunk numbers less their order is constant.
            "analysis.parquet": f"""
                WITH low AS (SELECT *, "Chunk" - row_number() OVER (PARTITION BY {device} ORDER BY "Chunk") AS island
                             FROM {chunks} WHERE 100.0 * "Busy Time" / "Duration" < {threshold})
                SELECT 100.0 * sum("Busy Time") / sum("Duration") AS "In-Use", CAST(sum("Duration") AS BIGINT) AS "Duration",
                       min("Start") AS "Start", "PID", "Device ID", count(*) AS "Chunks", "Rank"
                FROM low GROUP BY {device}, island
                ORDER BY "Rank", "PID", "Device ID", "Start" """,
            "utilization.parquet": f"""
                SELECT "Rank", "PID", "Device ID", min("Start") AS "Start", CAST(sum("Duration") AS BIGINT) AS "Duration",
                       CAST(sum("Busy Time") AS BIGINT) AS "Busy Time",
                       100.0 * sum("Busy Time") / sum("Duration") AS "In-Use",
                       count(*) FILTER (WHERE 100.0 * "Busy Time" / "Duration" < {threshold}) AS "Low Chunks",
                       count(*) AS "Chunks"
                FROM {chunks} GROUP BY {device} ORDER BY {device}""",
        }


class CudaGpuTimeUtilMap:
    """Per rank, from the session's start to its end (the last CUDA call or GPU operation, or the
    recorded duration when later), cut into --bins equal bins: the time utilization of kernels, and of
    copies and memsets, per process and device in each bin."""
    name = "cuda_gpu_time_util_map"
    description = "GPU time utilization of kernels (and of copies and memsets) per time bin, rank, process and device"
    tables = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
              "CUPTI_ACTIVITY_KIND_GRAPH_TRACE", "CUPTI_ACTIVITY_KIND_RUNTIME", "ANALYSIS_DETAILS")
    outputs = ("analysis.parquet", "heatmap.parquet")
    summary_output = "heatmap.parquet"
    arguments = (("--bins", {"type": whole_number(1, 1000), "default": 30, "metavar": "N",
                             "help": "cuda_gpu_time_util_map: the equal time bins of each rank (default 30)"}),)

    def map_queries(self, options):
        bins = int(options.get("bins") or 30)
        span = f"""
            SELECT DISTINCT pid, device, 0 AS s,
                   greatest((SELECT max("end") FROM ({GPU_OPERATIONS})),
                            (SELECT coalesce(max("end"), 0) FROM CUPTI_ACTIVITY_KIND_RUNTIME),
                            (SELECT coalesce(max(duration), 0) FROM ANALYSIS_DETAILS)) AS e
            FROM ({OPERATIONS_BY_DEVICE})"""
        used = overlaps(OPERATIONS_BY_DEVICE, bins_of(span, bins, "pid, device"), bins, ["pid", "device"])
        return {"bins": f"""
            SELECT pid AS "PID", device AS "Device ID", bin AS "Bin", bs AS "Start", be - bs AS "Duration",
                   100.0 * kernel_ns / (be - bs) AS "Kernel", 100.0 * memory_ns / (be - bs) AS "Memory"
            FROM ({used})"""}

    def reduce_queries(self, partials, options):
        bins = int(options.get("bins") or 30)
        cells = ", ".join(f'max("Kernel") FILTER (WHERE "Bin" = {i}) AS "{i}"' for i in range(bins))
        return {
            "analysis.parquet": f"""SELECT "Rank", "PID", "Device ID", "Bin", "Start", "Duration", "Kernel", "Memory"
                                    FROM {partials["bins"]} ORDER BY "Rank", "PID", "Device ID", "Bin" """,
            "heatmap.parquet": f"""SELECT "Rank", "PID", "Device ID", {cells} FROM {partials["bins"]}
                                   GROUP BY "Rank", "PID", "Device ID" ORDER BY "Rank", "PID", "Device ID" """,
        }


def recipes():
    return [NvtxGpuProjTrace(), NvtxGpuProjSum(), GpuTimeUtil(), CudaGpuTimeUtilMap()]
