"""The recipes of nsys's analysis rules: each finds the calls or the GPU idle time a rule flags, in
every trace, and writes them with their Rank to analysis.parquet. Their per-trace queries are plain
SQL over the trace's tables, for `cutrace analyze` to reuse on one trace."""
from .framework import INDEX

PID = "// 16777216 % 16777216"  # globalTid or globalPid -> the process id (nsys's packing)

# A GPU memory operation with the call that issued it (same process, same correlationId).
MEMORY_WITH_CALL = """
    SELECT m."end" - m.start AS "Duration", m.start AS "Start", sk.label AS "Src Kind", dk.label AS "Dst Kind",
           m.bytes AS "Bytes", m.globalPid {pid} AS "PID", m.deviceId AS "Device ID", m.contextId AS "Context ID",
           m.streamId AS "Stream ID", s.value AS "API Name", r.globalTid AS "GlobalTid"
    FROM {table} AS m
    JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r
      ON r.correlationId = m.correlationId AND r.correlationId <> 0 AND r.globalTid {pid} = m.globalPid {pid}
    JOIN StringIds AS s ON s.id = r.nameId
    LEFT JOIN ENUM_CUDA_MEM_KIND AS sk ON sk.id = m.srcKind
    LEFT JOIN ENUM_CUDA_MEM_KIND AS dk ON dk.id = m.dstKind"""

MEMSET_WITH_CALL = """
    SELECT m."end" - m.start AS "Duration", m.start AS "Start", m.globalPid {pid} AS "PID", m.deviceId AS "Device ID",
           m.contextId AS "Context ID", m.streamId AS "Stream ID", s.value AS "API Name", r.globalTid AS "GlobalTid"
    FROM CUPTI_ACTIVITY_KIND_MEMSET AS m
    JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r
      ON r.correlationId = m.correlationId AND r.correlationId <> 0 AND r.globalTid {pid} = m.globalPid {pid}
    JOIN StringIds AS s ON s.id = r.nameId"""

# The calls that block the host until the device has finished work.
SYNC_CALLS = ("cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaStreamWaitEvent",
              "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize", "cuStreamWaitEvent")


class Rule:
    outputs = ("analysis.parquet",)
    summary_output = "analysis.parquet"
    arguments = ()

    def __init__(self, name, description, tables, sql, order='"Duration" DESC'):
        self.name, self.description, self.tables, self.sql, self.order = name, description, tables, sql, order

    def map_queries(self, options):
        return {"analysis": self.sql.format(pid=PID, **options)}

    def reduce_queries(self, partials, options):
        return {"analysis.parquet": f"""SELECT * EXCLUDE ({INDEX}) FROM {partials["analysis"]}
                                        ORDER BY {self.order}, "Rank", "Start" """}


class GpuGaps(Rule):
    arguments = (("--gap", {"type": int, "default": 500_000_000, "metavar": "NS",
                            "help": "gpu_gaps: the shortest GPU idle time reported, in ns (default 500 ms)"}),)

    def map_queries(self, options):
        gap = int(options.get("gap") or 500_000_000)
        return {"analysis": f"""
            WITH work AS (
                SELECT globalPid, deviceId, start, "end" FROM CUPTI_ACTIVITY_KIND_KERNEL
                UNION ALL SELECT globalPid, deviceId, start, "end" FROM CUPTI_ACTIVITY_KIND_MEMCPY
                UNION ALL SELECT globalPid, deviceId, start, "end" FROM CUPTI_ACTIVITY_KIND_MEMSET),
            -- the latest end before each piece of work on its device: overlapping work is no gap
            ordered AS (
                SELECT globalPid, deviceId, start,
                       max("end") OVER (PARTITION BY globalPid, deviceId ORDER BY start, "end"
                                        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS busy_until
                FROM work)
            SELECT start - busy_until AS "Duration", busy_until AS "Start", start AS "End",
                   globalPid {PID} AS "PID", deviceId AS "Device ID"
            FROM ordered WHERE busy_until IS NOT NULL AND start - busy_until >= {gap}"""}


def recipes():
    memcpy_tables = ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_RUNTIME", "StringIds", "ENUM_CUDA_MEM_KIND")
    sync_names = ", ".join(f"'{n}'" for n in SYNC_CALLS)
    return [
        Rule("cuda_api_sync", "CUDA calls that wait for the device (cudaDeviceSynchronize, stream and event "
             "synchronisation), per rank",
             ("CUPTI_ACTIVITY_KIND_RUNTIME", "StringIds"), f"""
             SELECT r."end" - r.start AS "Duration", r.start AS "Start", r.globalTid {{pid}} AS "PID",
                    r.globalTid % 16777216 AS "TID", s.value AS "API Name", r.globalTid AS "GlobalTid"
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
                ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"), ""),
    ]
