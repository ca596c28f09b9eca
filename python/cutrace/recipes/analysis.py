"""The recipes of nsys's analysis rules: each finds the calls or the GPU idle time a rule flags, in
every trace, and writes them with their Rank to analysis.parquet. Their per-trace queries are plain
SQL over the trace's tables (Rule.query), which `cutrace analyze` (python/cutrace/analyze.py) runs on
each trace with the call's stack id and thread added, and with one rule more, gpu_time_util."""
from .framework import INDEX

PID = "// 16777216 % 16777216"  # globalTid or globalPid -> the process id (nsys's packing)

# A GPU memory operation with the call that issued it (same process, same correlationId).
MEMORY_WITH_CALL = """
    SELECT m."end" - m.start AS "Duration", m.start AS "Start", sk.label AS "Src Kind", dk.label AS "Dst Kind",
           m.bytes AS "Bytes", m.globalPid {pid} AS "PID", m.deviceId AS "Device ID", m.contextId AS "Context ID",
           m.streamId AS "Stream ID", s.value AS "API Name", r.globalTid AS "GlobalTid"{call}
    FROM {table} AS m
    JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r
      ON r.correlationId = m.correlationId AND r.correlationId <> 0 AND r.globalTid {pid} = m.globalPid {pid}
    JOIN StringIds AS s ON s.id = r.nameId
    LEFT JOIN ENUM_CUDA_MEM_KIND AS sk ON sk.id = m.srcKind
    LEFT JOIN ENUM_CUDA_MEM_KIND AS dk ON dk.id = m.dstKind"""

MEMSET_WITH_CALL = """
    SELECT m."end" - m.start AS "Duration", m.start AS "Start", m.globalPid {pid} AS "PID", m.deviceId AS "Device ID",
           m.contextId AS "Context ID", m.streamId AS "Stream ID", s.value AS "API Name", r.globalTid AS "GlobalTid"{call}
    FROM CUPTI_ACTIVITY_KIND_MEMSET AS m
    JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r
      ON r.correlationId = m.correlationId AND r.correlationId <> 0 AND r.globalTid {pid} = m.globalPid {pid}
    JOIN StringIds AS s ON s.id = r.nameId"""

# The calls that block the host until the device has finished work. (cudaStreamWaitEvent is not one:
# it orders two streams on the device and returns at once, and is what the rule's advice suggests.)
SYNC_CALLS = ("cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
              "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize")


# Everything that occupies a GPU: kernels, copies and memsets.
GPU_WORK = """
    SELECT globalPid, deviceId, start, "end" FROM CUPTI_ACTIVITY_KIND_KERNEL
    UNION ALL SELECT globalPid, deviceId, start, "end" FROM CUPTI_ACTIVITY_KIND_MEMCPY
    UNION ALL SELECT globalPid, deviceId, start, "end" FROM CUPTI_ACTIVITY_KIND_MEMSET"""
GPU_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")


class Rule:
    outputs = ("analysis.parquet",)
    summary_output = "analysis.parquet"
    arguments = ()

    def __init__(self, name, description, tables, sql, order='"Duration" DESC'):
        self.name, self.description, self.tables, self.sql, self.order = name, description, tables, sql, order

    def query(self, options, call=""):
        """The rule's findings in one trace. `call`: more columns of the flagged call (its row of
        CUPTI_ACTIVITY_KIND_RUNTIME is `r`), written as ', r.callchainId AS "Chain"'."""
        return self.sql.format(pid=PID, call=call, **options)

    def map_queries(self, options):
        return {"analysis": self.query(options)}

    def reduce_queries(self, partials, options):
        return {"analysis.parquet": f"""SELECT * EXCLUDE ({INDEX}) FROM {partials["analysis"]}
                                        ORDER BY {self.order}, "Rank", "Start" """}


class GpuGaps(Rule):
    arguments = (("--gap", {"type": int, "default": 500_000_000, "metavar": "NS",
                            "help": "gpu_gaps: the shortest GPU idle time reported, in ns (default 500 ms)"}),)

    def query(self, options, call=""):  # a gap is no call: `call` has nothing to add
        gap = int(options.get("gap") or 500_000_000)
        return f"""
            WITH work AS ({GPU_WORK}),
            -- the latest end before each piece of work on its device: overlapping work is no gap
            ordered AS (
                SELECT globalPid, deviceId, start,
                       max("end") OVER (PARTITION BY globalPid, deviceId ORDER BY start, "end"
                                        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS busy_until
                FROM work)
            SELECT start - busy_until AS "Duration", busy_until AS "Start", start AS "End",
                   globalPid {PID} AS "PID", deviceId AS "Device ID"
            FROM ordered WHERE busy_until IS NOT NULL AND start - busy_until >= {gap}"""


class LowUtilization(Rule):
    """gpu_time_util (cutrace analyze only): each process's GPU activity on each device, from its first
    operation to its last, cut into `chunks` equal windows; the windows whose busy time (the union of
    its kernels, copies and memsets, so that overlapping work counts once) is under `threshold` percent
    of the window, adjacent ones merged."""

    def query(self, options, call=""):
        chunks = int(options.get("chunks") or 30)
        threshold = float(options.get("threshold") or 50)
        return f"""
            WITH work AS ({GPU_WORK}),
            ordered AS (
                SELECT globalPid, deviceId, start, "end",
                       max("end") OVER (PARTITION BY globalPid, deviceId ORDER BY start, "end"
                                        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS busy_until
                FROM work),
            -- islands of overlapping or touching work: each is one busy interval
            islands AS (
                SELECT *, sum(CASE WHEN busy_until IS NULL OR start > busy_until THEN 1 ELSE 0 END)
                          OVER (PARTITION BY globalPid, deviceId ORDER BY start, "end" ROWS UNBOUNDED PRECEDING) AS island
                FROM ordered),
            busy AS (SELECT globalPid, deviceId, min(start) AS s, max("end") AS e FROM islands
                     GROUP BY globalPid, deviceId, island),
            spans AS (SELECT globalPid, deviceId, min(s) AS s0, max(e) AS e0 FROM busy GROUP BY globalPid, deviceId),
            windows AS (
                SELECT globalPid, deviceId, i, s0 + (e0 - s0) * i // {chunks} AS ws, s0 + (e0 - s0) * (i + 1) // {chunks} AS we
                FROM spans, range({chunks}) AS t(i) WHERE e0 > s0),
            used AS (
                SELECT w.globalPid, w.deviceId, w.i, w.ws, w.we,
                       -- (least and greatest skip NULLs: a window without work must not take its own length)
                       coalesce(sum(least(b.e, w.we) - greatest(b.s, w.ws)) FILTER (WHERE b.s IS NOT NULL), 0) AS busy
                FROM windows AS w LEFT JOIN busy AS b
                  ON b.globalPid = w.globalPid AND b.deviceId = w.deviceId AND b.s < w.we AND b.e > w.ws
                GROUP BY w.globalPid, w.deviceId, w.i, w.ws, w.we),
            low AS (
                SELECT *, i - row_number() OVER (PARTITION BY globalPid, deviceId ORDER BY i) AS run
                FROM used WHERE we > ws AND busy * 100.0 < {threshold} * (we - ws))
            SELECT CAST(max(we) - min(ws) AS BIGINT) AS "Duration", min(ws) AS "Start", max(we) AS "End",
                   100.0 * sum(busy) / (max(we) - min(ws)) AS "Utilization", count(*) AS "Windows",
                   any_value(globalPid) {PID} AS "PID", any_value(deviceId) AS "Device ID"
            FROM low GROUP BY globalPid, deviceId, run"""


def recipes():
    memcpy_tables = ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_RUNTIME", "StringIds", "ENUM_CUDA_MEM_KIND")
    sync_names = ", ".join(f"'{n}'" for n in SYNC_CALLS)
    return [
        Rule("cuda_api_sync", "CUDA calls that wait for the device (cudaDeviceSynchronize, stream and event "
             "synchronisation), per rank",
             ("CUPTI_ACTIVITY_KIND_RUNTIME", "StringIds"), f"""
             SELECT r."end" - r.start AS "Duration", r.start AS "Start", r.globalTid {{pid}} AS "PID",
                    r.globalTid % 16777216 AS "TID", s.value AS "API Name", r.globalTid AS "GlobalTid"{{call}}
             FROM CUPTI_ACTIVITY_KIND_RUNTIME AS r JOIN StringIds AS s ON s.id = r.nameId
             WHERE s.value IN ({sync_names})"""),
        Rule("cuda_memcpy_sync", "memory copies made by a synchronous call (cudaMemcpy and the like), which block "
             "the host", memcpy_tables,
             "SELECT * FROM (" + MEMORY_WITH_CALL.replace("{table}", "CUPTI_ACTIVITY_KIND_MEMCPY") +
             ") WHERE \"API Name\" NOT LIKE '%Async%'"),
        Rule("cuda_memcpy_async", "asynchronous copies from or to pageable memory, which are synchronous in fact",
             memcpy_tables,
             "SELECT * FROM (" + MEMORY_WITH_CALL.replace("{table}", "CUPTI_ACTIVITY_KIND_MEMCPY") +
             ") WHERE \"API Name\" LIKE '%Async%' AND 'Pageable' IN (\"Src Kind\", \"Dst Kind\")"),
        Rule("cuda_memset_sync", "memsets made by a synchronous call (cudaMemset and the like)",
             ("CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_RUNTIME", "StringIds"),
             "SELECT * FROM (" + MEMSET_WITH_CALL + ") WHERE \"API Name\" NOT LIKE '%Async%'"),
        GpuGaps("gpu_gaps", "times a GPU ran no kernel, copy or memset for at least --gap ns (default 500 ms)",
                GPU_TABLES, ""),
    ]
