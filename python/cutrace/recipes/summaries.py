"""The summary recipes (cuda_api_sum, cuda_gpu_kern_sum, cuda_gpu_mem_time_sum, cuda_gpu_mem_size_sum,
nvtx_sum, osrt_sum, nccl_sum) and the stragglers view.

Each summary's map step computes the `cutrace stats` report of that name for one trace, exactly (the
median and quartiles from every value), with nsys's recipe columns: the report's columns without
their units, Q1 and Q3 beside the median. The reduce writes rank_stats.parquet (those rows with
their Rank) and all_stats.parquet (one row per name over all ranks: sums, the pooled standard
deviation, the smallest Q1, the median of the medians, the largest Q3, and which ranks hold the
minimum and the maximum). The per-trace queries are plain SQL over the trace's tables, so that
other tools (cutrace analyze's rules) can run them on one trace as they are.
"""
from .framework import INDEX, quote_ident

# The durations (or sizes) each summary describes, one row per call or activity: label columns, v.
API_CALLS = """
    SELECT s.value AS "Name", r."end" - r.start AS v
    FROM CUPTI_ACTIVITY_KIND_RUNTIME AS r JOIN StringIds AS s ON s.id = r.nameId"""
OSRT_CALLS = """
    SELECT s.value AS "Name", o."end" - o.start AS v
    FROM OSRT_API AS o JOIN StringIds AS s ON s.id = o.nameId"""
KERNELS = """
    SELECT s.value AS "Name", k."end" - k.start AS v
    FROM CUPTI_ACTIVITY_KIND_KERNEL AS k JOIN StringIds AS s ON s.id = k.demangledName"""
# As the reader names a memory operation: "[CUDA memcpy Host-to-Device]", "[CUDA memset]".
MEMORY_OPERATIONS = """
    SELECT '[CUDA memcpy ' || coalesce(e.label, 'Unknown') || ']' AS "Operation", m."end" - m.start AS v, m.bytes AS b
    FROM CUPTI_ACTIVITY_KIND_MEMCPY AS m LEFT JOIN ENUM_CUDA_MEMCPY_OPER AS e ON e.id = m.copyKind
    UNION ALL
    SELECT '[CUDA memset]', m."end" - m.start, m.bytes FROM CUPTI_ACTIVITY_KIND_MEMSET AS m"""
# Closed push/pop (59) and start/end (60) ranges, named "domain:range" as nvtx_sum names them (the
# default domain is the empty name); a domain's name is its row of type 75 in the same process.
NVTX_RANGES = """
    SELECT CASE WHEN n.eventType = 59 THEN 'PushPop' ELSE 'StartEnd' END AS "Style",
           coalesce(d.text, '') || ':' || coalesce(n.text, s.value, '') AS "Range", n."end" - n.start AS v
    FROM NVTX_EVENTS AS n
    LEFT JOIN StringIds AS s ON s.id = n.textId
    LEFT JOIN (SELECT DISTINCT domainId, globalTid // 16777216 AS pid, text FROM NVTX_EVENTS WHERE eventType = 75) AS d
           ON d.domainId = n.domainId AND n.domainId <> 0 AND d.pid = n.globalTid // 16777216
    WHERE n.eventType IN (59, 60) AND n."end" IS NOT NULL"""

# NCCL's own ranges: the closed ranges of the domain named "NCCL" (NCCL opens one per API call, named
# after the function, its extended payload decoded into jsonText), named by their message alone.
NCCL_RANGES = """
    SELECT coalesce(n.text, s.value, '') AS "Name", n."end" - n.start AS v
    FROM NVTX_EVENTS AS n
    LEFT JOIN StringIds AS s ON s.id = n.textId
    JOIN (SELECT DISTINCT domainId, globalTid // 16777216 AS pid FROM NVTX_EVENTS
          WHERE eventType = 75 AND text = 'NCCL') AS d
      ON d.domainId = n.domainId AND d.pid = n.globalTid // 16777216
    WHERE n.eventType IN (59, 60) AND n."end" IS NOT NULL"""


def describe(source, labels, count="Num Calls", total="Total Time", share="Time"):
    """SQL of the per-trace summary: share (% of the listed total), total, count, Avg, Q1, Med, Q3,
    Min, Max, StdDev (sample), then the labels; most total first, ties by label."""
    keys = ", ".join(quote_ident(l) for l in labels)
    share_column = f'100.0 * sum(v) / sum(sum(v)) OVER () AS {quote_ident(share)}, ' if share else ""
    return f"""
        SELECT {share_column}CAST(sum(v) AS BIGINT) AS {quote_ident(total)}, count(*) AS {quote_ident(count)},
               sum(v) / count(*) AS "Avg", quantile_cont(v, 0.25) AS "Q1", median(v) AS "Med",
               quantile_cont(v, 0.75) AS "Q3", CAST(min(v) AS BIGINT) AS "Min", CAST(max(v) AS BIGINT) AS "Max",
               coalesce(stddev_samp(v), 0) AS "StdDev", {keys}
        FROM ({source}) GROUP BY {keys}
        ORDER BY {quote_ident(total)} DESC, {keys}"""


def aggregate(partials, labels, count="Num Calls", total="Total Time", share="Time"):
    """SQL of all_stats over the per-rank rows: one row per label over all ranks."""
    keys = ", ".join(quote_ident(l) for l in labels)
    c, t = quote_ident(count), quote_ident(total)
    share_column = f'100.0 * tot / sum(tot) OVER () AS {quote_ident(share)}, ' if share else ""
    return f"""
        WITH p AS (SELECT * FROM {partials}),
        g AS (SELECT {keys}, sum({t}) AS tot, sum({c}) AS n, min("Q1") AS q1, median("Med") AS med,
                     max("Q3") AS q3, min("Min") AS mn, max("Max") AS mx FROM p GROUP BY {keys}),
        j AS (SELECT g.*, p.{c} AS cnt, p."Avg" AS avg, p."StdDev" AS sd, p."Min" AS rmin, p."Max" AS rmax, p."Rank"
              FROM g JOIN p USING ({keys})),
        s AS (SELECT {keys}, any_value(tot) AS tot, any_value(n) AS n, any_value(q1) AS q1, any_value(med) AS med,
                     any_value(q3) AS q3, any_value(mn) AS mn, any_value(mx) AS mx,
                     coalesce(sqrt((sum((cnt - 1) * sd * sd) + sum(cnt * (avg - tot / n) * (avg - tot / n)))
                                   / nullif(any_value(n) - 1, 0)), 0) AS sd,
                     string_agg(CAST("Rank" AS VARCHAR), ', ' ORDER BY "Rank") FILTER (WHERE rmin = mn) AS min_rank,
                     string_agg(CAST("Rank" AS VARCHAR), ', ' ORDER BY "Rank") FILTER (WHERE rmax = mx) AS max_rank
              FROM j GROUP BY {keys})
        SELECT {share_column}CAST(tot AS BIGINT) AS {t}, CAST(n AS BIGINT) AS {c}, tot / n AS "Avg", q1 AS "Q1",
               med AS "Med", q3 AS "Q3", mn AS "Min", mx AS "Max", sd AS "StdDev", {keys},
               min_rank AS "Min Rank", max_rank AS "Max Rank"
        FROM s ORDER BY {t} DESC, {keys}"""


class Summary:
    """A recipe of one nsys-style summary: rank_stats.parquet, all_stats.parquet."""
    outputs = ("all_stats.parquet", "rank_stats.parquet")
    summary_output = "all_stats.parquet"
    count, total, share = "Num Calls", "Total Time", "Time"

    def __init__(self, name, description, tables, source, labels, **columns):
        self.name, self.description, self.tables, self.source, self.labels = name, description, tables, source, labels
        for key, value in columns.items():
            setattr(self, key, value)

    def map_queries(self, options):
        return {"stats": describe(self.source, self.labels, self.count, self.total, self.share)}

    def reduce_queries(self, partials, options):
        keys = ", ".join(quote_ident(l) for l in self.labels)
        return {
            "rank_stats.parquet": f"""SELECT * EXCLUDE ({INDEX}) FROM {partials["stats"]}
                                      ORDER BY "Rank", {quote_ident(self.total)} DESC, {keys}""",
            "all_stats.parquet": aggregate(partials["stats"], self.labels, self.count, self.total, self.share),
        }


class Stragglers:
    """Which rank is slow: per rank, its totals; per NVTX range, the slowest and fastest rank."""
    name = "stragglers"
    description = ("per rank, its CUDA API, kernel, memory-copy and NVTX totals; per NVTX range, the slowest and "
                   "the fastest rank with their times")
    tables = ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
              "CUPTI_ACTIVITY_KIND_MEMSET", "NVTX_EVENTS", "StringIds", "ENUM_CUDA_MEMCPY_OPER")
    outputs = ("rank_totals.parquet", "nvtx_ranges.parquet")
    summary_output = "nvtx_ranges.parquet"

    def map_queries(self, options):
        return {
            "totals": """
                SELECT (SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME) AS "API Calls",
                       (SELECT coalesce(sum("end" - start), 0) FROM CUPTI_ACTIVITY_KIND_RUNTIME) AS "API Time",
                       (SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL) AS "Kernels",
                       (SELECT coalesce(sum("end" - start), 0) FROM CUPTI_ACTIVITY_KIND_KERNEL) AS "Kernel Time",
                       (SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY) AS "Memcpys",
                       (SELECT coalesce(sum("end" - start), 0) FROM CUPTI_ACTIVITY_KIND_MEMCPY) AS "Memcpy Time",
                       (SELECT coalesce(sum(bytes), 0) FROM CUPTI_ACTIVITY_KIND_MEMCPY) AS "Memcpy Bytes",
                       (SELECT count(*) FROM (""" + NVTX_RANGES + """)) AS "NVTX Ranges"
            """,
            "ranges": f"""SELECT "Style", "Range", CAST(sum(v) AS BIGINT) AS "Total Time", count(*) AS "Instances"
                          FROM ({NVTX_RANGES}) GROUP BY ALL""",
        }

    def reduce_queries(self, partials, options):
        return {
            "rank_totals.parquet": f"""SELECT "Rank", * EXCLUDE ({INDEX}, "Rank") FROM {partials["totals"]}
                                       ORDER BY "Rank" """,
            "nvtx_ranges.parquet": f"""
                SELECT "Style", "Range", count(*) AS "Ranks",
                       first("Rank" ORDER BY "Total Time" DESC, "Rank") AS "Slowest Rank",
                       max("Total Time") AS "Slowest Time",
                       first("Rank" ORDER BY "Total Time", "Rank") AS "Fastest Rank",
                       min("Total Time") AS "Fastest Time",
                       avg("Total Time") AS "Mean Time",
                       max("Total Time") / nullif(min("Total Time"), 0) AS "Spread",
                       sum("Instances") AS "Instances"
                FROM {partials["ranges"]} GROUP BY "Style", "Range"
                ORDER BY max("Total Time") - min("Total Time") DESC, "Range", "Style" """,
        }


def recipes():
    api_tables = ("CUPTI_ACTIVITY_KIND_RUNTIME", "StringIds")
    memory = ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET", "ENUM_CUDA_MEMCPY_OPER")
    return [
        Summary("cuda_api_sum", "CUDA API calls: time, calls, average, quartiles, min, max, stddev per function",
                api_tables, API_CALLS, ["Name"]),
        Summary("cuda_gpu_kern_sum", "CUDA kernels: GPU time, instances, average, quartiles, min, max, stddev per "
                "kernel", ("CUPTI_ACTIVITY_KIND_KERNEL", "StringIds"), KERNELS, ["Name"], count="Instances"),
        Summary("cuda_gpu_mem_time_sum", "GPU memory operations: time per copy direction and memset",
                memory, "SELECT \"Operation\", v FROM (" + MEMORY_OPERATIONS + ")", ["Operation"], count="Count"),
        Summary("cuda_gpu_mem_size_sum", "GPU memory operations: bytes per copy direction and memset",
                memory, "SELECT \"Operation\", b AS v FROM (" + MEMORY_OPERATIONS + ")", ["Operation"],
                count="Count", total="Total", share=None),
        Summary("nvtx_sum", "NVTX ranges: time, instances, average, quartiles, min, max, stddev per range and style",
                ("NVTX_EVENTS", "StringIds"), NVTX_RANGES, ["Style", "Range"], count="Instances"),
        Summary("nccl_sum", "NCCL calls (the ranges of NVTX domain NCCL): time, instances, average, quartiles, "
                "min, max, stddev per call", ("NVTX_EVENTS", "StringIds"), NCCL_RANGES, ["Name"], count="Instances"),
        Summary("osrt_sum", "OS runtime (libc) calls recorded with -t osrt: cuda_api_sum's columns",
                ("OSRT_API", "StringIds"), OSRT_CALLS, ["Name"]),
        Stragglers(),
    ]
