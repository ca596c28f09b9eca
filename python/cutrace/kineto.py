"""`cutrace export --type kineto`: a trace as the Kineto-style JSON that PyTorch's profiler writes, one
file per rank, for Holistic Trace Analysis (HTA) and the other tools that read PyTorch traces
(docs/hta.md).

The trace is read twice, a batch at a time. The first pass keeps what the events are written with
(names, threads, processes and their ranks, the NVTX ranges, and which calls gave the GPU work); the
second writes the events as their batches come. Memory grows with the strings, the NVTX ranges and
eight bytes per GPU operation, not with the calls; a trace with NVTX ranges also keeps the GPU
operations' times until the end, to draw each range's span on the GPU ("gpu_user_annotation")."""
import bisect
import json
import os
import re
import tempfile
from collections import defaultdict
from pathlib import Path

import numpy as np

from . import TraceError, open as open_trace

# NVTX_EVENTS.eventType values (ENUM_NSYS_EVENT_TYPE).
NVTX_MARK, NVTX_PUSH_POP, NVTX_START_END = 34, 59, 60
# The copy directions of ENUM_CUDA_MEMCPY_OPER as CUDA spells them in its copy kinds (the names
# Kineto's "Memcpy HtoD (Pageable -> Device)" uses).
COPY_KINDS = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA", 8: "DtoD", 9: "HtoH",
              10: "PtoP"}
# CUPTI's synchronisation types (ENUM_CUPTI_SYNC_TYPE) as Kineto names its "cuda_sync" events.
SYNC_NAMES = {1: "Event Sync", 2: "Stream Wait Event", 3: "Stream Sync", 4: "Context Sync"}
# The file of each rank in the output directory; HTA reads every *.json of a directory and finds the
# rank inside, so the name only keeps a job's files apart.
RANK_FILE = "rank-{}.json"
GPU_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
THREAD_BITS = 24
# An op range of torch.autograd.profiler.emit_nvtx (cutrace profile --pytorch autograd-nvtx): the op's
# name, then the numbers that make each range unique, and with autograd-shapes-nvtx its inputs' sizes.
# It is written as the cpu_op torch.profiler would have written, under the op's own name.
EMIT_NVTX_OP = re.compile(r"^(?P<name>[^,]+?)(?:, seq = (?P<seq>\d+))?(?:, op_id = (?P<op_id>\d+))"
                          r"(?:, sizes = (?P<sizes>\[.*?\]))?(?:, input_op_ids = \[.*\])?$")


def op_event_of(text):
    """(name, args) of an emit_nvtx op range, or None for any other range."""
    m = EMIT_NVTX_OP.match(text or "")
    if not m:
        return None
    args = [f'"Record function id": {m["op_id"]}']
    if m["seq"] is not None:
        args.append(f'"Sequence number": {m["seq"]}')
    if m["sizes"] is not None:
        args.append(f'"Input Dims": {m["sizes"]}')
    return json.dumps(m["name"]), args


class UsageError(Exception):
    pass


def us(ns):
    """Nanoseconds as Kineto writes times: microseconds with three decimals, exact."""
    ns = int(ns)
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    return f"{sign}{ns // 1000}.{ns % 1000:03d}"


def process_of(global_tid):
    return int(global_tid) & ~((1 << THREAD_BITS) - 1)


class Process:
    def __init__(self, row):
        self.global_pid = row["globalPid"]
        self.pid = row["pid"]
        self.command = row["command"] or ""
        self.name = os.path.basename(row["executable"] or self.command.split(" ")[0] or str(self.pid))
        self.rank, self.world_size = row["rank"], row["worldSize"]
        # Correlation ids count per process: the second process of a rank gets its ids moved past
        # 2^32 (CUPTI's are 32-bit), so that HTA, which joins calls to kernels by id over a whole
        # file, never joins two processes' operations.
        self.correlation_base = 0


class Ranges:
    """One thread's NVTX ranges: which one encloses a time (the innermost, as the profiler links a call
    to the annotation it was made in)."""

    def __init__(self, ranges):
        # (start, end, external id), longest first among those starting together.
        self.ranges = sorted(ranges, key=lambda r: (r[0], -r[1]))
        self.starts = [r[0] for r in self.ranges]
        self.parent = []
        open_ranges = []
        for start, end, _ in self.ranges:
            while open_ranges and self.ranges[open_ranges[-1]][1] <= start:
                open_ranges.pop()
            self.parent.append(open_ranges[-1] if open_ranges else -1)
            open_ranges.append(len(self.parent) - 1)

    def innermost(self, t):
        i = bisect.bisect_right(self.starts, t) - 1
        while i >= 0 and self.ranges[i][1] <= t:
            i = self.parent[i]
        return self.ranges[i][2] if i >= 0 else None


class Scan:
    """What the first pass keeps."""

    def __init__(self):
        self.strings = {}
        self.threads = {}           # globalTid -> name
        self.processes = {}         # globalPid -> Process
        self.utc_epoch_ns = None
        self.copy_kinds = {}
        self.memory_kinds = {}
        self.nvtx = []              # (start, end, eventType, text, textId, globalTid)
        self.gpu_keys = []          # arrays of globalPid-index << 32 | correlationId
        # Calls with a correlation id, for the range each GPU operation's launch was made in:
        # arrays of keys, globalTids and starts.
        self.calls = ([], [], [])
        self.process_index = {}     # globalPid -> a small number, for the keys

    def index_of(self, global_pid):
        return self.process_index.setdefault(global_pid, len(self.process_index))


def keys_of(scan, global_pids, correlations):
    pids = np.fromiter((scan.index_of(int(g)) for g in global_pids), dtype=np.int64, count=len(global_pids))
    return (pids << 32) | np.asarray(correlations, dtype=np.int64)


def first_pass(trace, progress):
    scan = Scan()
    for name, batch in trace.batches(progress):
        if name == "StringIds":
            scan.strings.update(zip(batch.column("id").to_pylist(), batch.column("value").to_pylist()))
        elif name == "CUTRACE_THREADS":
            scan.threads.update(zip(batch.column("globalTid").to_pylist(), batch.column("name").to_pylist()))
        elif name == "CUTRACE_PROCESSES":
            for row in batch.to_pylist():
                scan.processes[row["globalPid"]] = Process(row)
        elif name == "TARGET_INFO_SESSION_START_TIME" and batch.num_rows:
            scan.utc_epoch_ns = batch.column("utcEpochNs")[0].as_py()
        elif name == "ENUM_CUDA_MEM_KIND":
            scan.memory_kinds.update(zip(batch.column("id").to_pylist(), batch.column("label").to_pylist()))
        elif name == "NVTX_EVENTS":
            columns = [batch.column(c).to_pylist() for c in ("start", "end", "eventType", "text", "textId", "globalTid")]
            scan.nvtx.extend(row for row in zip(*columns) if row[2] in (NVTX_MARK, NVTX_PUSH_POP, NVTX_START_END))
        elif name in GPU_TABLES:
            correlation = batch.column("correlationId").fill_null(0).to_numpy()
            scan.gpu_keys.append(keys_of(scan, batch.column("globalPid").fill_null(0).to_pylist(), correlation))
        elif name == "CUPTI_ACTIVITY_KIND_RUNTIME" and batch.num_rows:
            correlation = batch.column("correlationId").fill_null(0).to_numpy()
            linked = correlation != 0
            tids = batch.column("globalTid").to_numpy(zero_copy_only=False)[linked]
            scan.calls[0].append(keys_of(scan, [process_of(t) for t in tids], correlation[linked]))
            scan.calls[1].append(tids.astype(np.int64))
            scan.calls[2].append(batch.column("start").to_numpy(zero_copy_only=False)[linked].astype(np.int64))
    keys = np.concatenate(scan.gpu_keys) if scan.gpu_keys else np.zeros(0, dtype=np.int64)
    scan.gpu_keys = np.unique(keys)
    scan.calls = tuple(np.concatenate(c) if c else np.zeros(0, dtype=np.int64) for c in scan.calls)
    return scan


def assign_ranks(trace, scan):
    """{rank: [Process]}, the world size of each rank, the processes left out, and notes for stderr."""
    notes, left_out = [], []
    trace_rank, trace_world = trace.rank, trace.world_size
    any_rank = trace_rank is not None or any(p.rank is not None for p in scan.processes.values())
    ranks, world = defaultdict(list), {}
    for process in sorted(scan.processes.values(), key=lambda p: p.global_pid):
        rank, size = process.rank, process.world_size
        if rank is None:
            rank, size = trace_rank, trace_world
        if rank is None and not any_rank:
            rank, size = 0, 1
        if rank is None:
            left_out.append(process)
            continue
        process.correlation_base = len(ranks[rank]) << 32
        ranks[rank].append(process)
        if size is not None:
            world.setdefault(rank, size)
    if not any_rank:
        notes.append(f"{trace.path} has no job rank (it was not recorded as a rank of a launcher that sets RANK, "
                     f"OMPI_COMM_WORLD_RANK, PMI_RANK or SLURM_PROCID); it is written as rank 0 of a world of 1")
    if left_out:
        notes.append("left out " + ", ".join(f"process {p.pid} ({p.name})" for p in left_out) +
                     ": it has no rank, beside processes that have one, and HTA reads one file per rank")
    return ranks, world, left_out, notes


class RankFile:
    """One rank's JSON, written into a temporary file beside its final name."""

    def __init__(self, path, rank, world_size, scan, trace_path):
        self.path, self.rank = path, rank
        self.temp = Path(tempfile.mkstemp(prefix=path.name + ".tmp-", dir=path.parent)[1])
        self.out = open(self.temp, "w", encoding="utf-8")
        self.first = True
        self.counts = defaultdict(int)
        info = {"rank": rank}
        if world_size is not None:
            info["world_size"] = world_size
        # HTA finds the rank with a regular expression over the first lines that name one, so
        # distributedInfo comes first, and on a line of its own.
        self.out.write('{\n  "schemaVersion": 1,\n  "distributedInfo": ' + json.dumps(info) + ",\n")
        self.out.write('  "deviceProperties": [],\n')
        if scan.utc_epoch_ns is not None:
            self.out.write(f'  "baseTimeNanoseconds": {scan.utc_epoch_ns},\n')
        self.out.write(f'  "displayTimeUnit": "ms",\n  "cutraceSource": {json.dumps(str(trace_path))},\n')
        self.out.write('  "traceEvents": [')

    def event(self, text, kind=None):
        self.out.write(("\n  " if self.first else ",\n  ") + text)
        self.first = False
        if kind:
            self.counts[kind] += 1

    def finish(self):
        self.out.write(f'\n  ],\n  "traceName": {json.dumps(self.path.name)}\n}}\n')
        self.out.close()
        # mkstemp's file is private (0600); the export gets the mode any new file of the user gets.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(self.temp, 0o666 & ~umask)

    def discard(self):
        if not self.out.closed:
            self.out.close()
        self.temp.unlink(missing_ok=True)


def complete_event(cat, name, pid, tid, start, end, args):
    return (f'{{"ph": "X", "cat": "{cat}", "name": {name}, "pid": {pid}, "tid": {tid}, '
            f'"ts": {us(start)}, "dur": {us(max(end - start, 0))}, "args": {{{args}}}}}')


def flow_event(phase, flow_id, pid, tid, t):
    # The end binds to the slice it lands in ("bp": "e"), as Kineto's links from a call to its kernel do.
    binding = ', "bp": "e"' if phase == "f" else ""
    return (f'{{"ph": "{phase}", "id": {flow_id}, "pid": {pid}, "tid": {tid}, "ts": {us(t)}, '
            f'"cat": "ac2g", "name": "ac2g"{binding}}}')


def metadata_event(name, pid, tid, key, value):
    return f'{{"name": "{name}", "ph": "M", "ts": 0, "pid": {pid}, "tid": {tid}, "args": {{"{key}": {json.dumps(value)}}}}}'


class Writer:
    """The second pass: every event into its rank's file."""

    def __init__(self, scan, files, rank_of):
        self.scan, self.files, self.rank_of = scan, files, rank_of
        self.quoted = {}
        self.streams = defaultdict(set)   # rank -> {(device, stream)}
        self.skipped_ranges = 0
        # NVTX ranges of each thread, by the external id their annotations are written with.
        self.ranges = {}
        self.annotated = {}               # GPU key -> external id of the range its call was made in
        self.gpu_spans = []               # (keys, device, stream, start, end) arrays, when there are ranges
        self.range_rank = {}              # external id -> (rank, name)
        self.ops = set()                  # external ids written as cpu_op

    def name(self, string_id):
        q = self.quoted.get(string_id)
        if q is None:
            q = self.quoted[string_id] = json.dumps(self.scan.strings.get(string_id, f"<string {string_id}>"))
        return q

    def where(self, global_pid):
        """(RankFile, Process) of a process, or (None, None) for one that is left out."""
        found = self.rank_of.get(int(global_pid))
        return found if found else (None, None)

    def annotations(self):
        by_thread = defaultdict(list)
        next_id = 1
        for start, end, event_type, text, text_id, global_tid in self.scan.nvtx:
            file, process = self.where(process_of(global_tid))
            if file is None:
                continue
            name = json.dumps(text if text is not None else self.scan.strings.get(text_id, ""))
            tid = int(global_tid) & ((1 << THREAD_BITS) - 1)
            if event_type == NVTX_MARK:
                file.event(f'{{"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": {name}, "pid": {process.pid}, '
                           f'"tid": {tid}, "ts": {us(start)}, "args": {{}}}}', "NVTX marks")
                continue
            if end is None:
                self.skipped_ranges += 1
                continue
            external_id = next_id
            next_id += 1
            op = op_event_of(text if text is not None else self.scan.strings.get(text_id))
            if op:
                name, args = op
                file.event(complete_event("cpu_op", name, process.pid, tid, start, end,
                                          ", ".join([f'"External id": {external_id}', *args])), "PyTorch ops")
                self.ops.add(external_id)
            else:
                file.event(complete_event("user_annotation", name, process.pid, tid, start, end,
                                          f'"External id": {external_id}'), "NVTX ranges")
            by_thread[global_tid].append((start, end, external_id))
            self.range_rank[external_id] = (file, name)
        self.ranges = {t: Ranges(r) for t, r in by_thread.items()}
        # Each GPU operation gets the External id of the range its launch was made in, as
        # torch.profiler gives a kernel its op's: known before the GPU tables come, whatever the order.
        keys, tids, starts = self.scan.calls
        if self.ranges and len(keys):
            issued = np.isin(keys, self.scan.gpu_keys)
            for key, global_tid, start in zip(keys[issued].tolist(), tids[issued].tolist(), starts[issued].tolist()):
                ranges = self.ranges.get(global_tid)
                external_id = ranges.innermost(start) if ranges else None
                if external_id is not None:
                    self.annotated[key] = external_id

    def runtime(self, batch):
        columns = [batch.column(c).to_pylist() for c in ("start", "end", "eventClass", "globalTid", "correlationId",
                                                         "nameId")]
        correlations = batch.column("correlationId").fill_null(0).to_numpy()
        global_pids = [process_of(t) for t in columns[3]]
        keys = keys_of(self.scan, global_pids, correlations)
        issued = np.isin(keys, self.scan.gpu_keys) & (correlations != 0)
        for (start, end, event_class, global_tid, correlation, name_id), global_pid, key, has_gpu in zip(
                zip(*columns), global_pids, keys.tolist(), issued.tolist()):
            file, process = self.where(global_pid)
            if file is None:
                continue
            tid = int(global_tid) & ((1 << THREAD_BITS) - 1)
            args = []
            if correlation:
                args.append(f'"correlation": {correlation + process.correlation_base}')
            ranges = self.ranges.get(global_tid)
            external_id = ranges.innermost(start) if ranges else None
            if external_id is not None:
                args.append(f'"External id": {external_id}')
            cat = "cuda_driver" if event_class == 1 else "cuda_runtime"
            file.event(complete_event(cat, self.name(name_id), process.pid, tid, start, end, ", ".join(args)),
                       "CUDA calls")
            if has_gpu:
                file.event(flow_event("s", correlation + process.correlation_base, process.pid, tid, start))

    def gpu(self, table, batch):
        rows = batch.to_pylist()
        if self.ranges:
            correlations = batch.column("correlationId").fill_null(0).to_numpy()
            keys = keys_of(self.scan, batch.column("globalPid").fill_null(0).to_pylist(), correlations)
            self.gpu_spans.append((keys, batch.column("deviceId").to_numpy(), batch.column("streamId").to_numpy(),
                                   batch.column("start").to_numpy(), batch.column("end").to_numpy(),
                                   np.asarray([self.where(g or 0)[0] is not None for g in
                                               batch.column("globalPid").to_pylist()])))
        for r in rows:
            file, process = self.where(r["globalPid"] or 0)
            if file is None:
                continue
            device, stream, start, end = r["deviceId"], r["streamId"], r["start"], r["end"]
            self.streams[file.rank].add((device, stream))
            correlation = r["correlationId"]
            args = [f'"device": {device}', f'"context": {r["contextId"]}', f'"stream": {stream}']
            if correlation:
                args.append(f'"correlation": {correlation + process.correlation_base}')
                external_id = self.annotated.get((self.scan.process_index.get(int(r["globalPid"] or 0), -1) << 32)
                                                 | correlation)
                if external_id is not None:
                    args.append(f'"External id": {external_id}')
            if table == "CUPTI_ACTIVITY_KIND_KERNEL":
                cat, kind = "kernel", "kernels"
                name = self.name(r["demangledName"])
                args += [f'"registers per thread": {r["registersPerThread"]}',
                         f'"shared memory": {r["staticSharedMemory"] + r["dynamicSharedMemory"]}',
                         f'"grid": [{r["gridX"]}, {r["gridY"]}, {r["gridZ"]}]',
                         f'"block": [{r["blockX"]}, {r["blockY"]}, {r["blockZ"]}]']
            else:
                if table == "CUPTI_ACTIVITY_KIND_MEMCPY":
                    cat, kind = "gpu_memcpy", "copies"
                    kinds = self.scan.memory_kinds
                    name = json.dumps(f"Memcpy {COPY_KINDS.get(r['copyKind'], 'Unknown')} "
                                      f"({kinds.get(r['srcKind'], 'Unknown')} -> {kinds.get(r['dstKind'], 'Unknown')})")
                else:
                    cat, kind = "gpu_memset", "memsets"
                    name = json.dumps(f"Memset ({self.scan.memory_kinds.get(r['memKind'], 'Unknown')})")
                args.append(f'"bytes": {r["bytes"]}')
                if end > start:  # bytes per ns are GB/s
                    args.append(f'"memory bandwidth (GB/s)": {r["bytes"] / (end - start):.6g}')
            file.event(complete_event(cat, name, device, stream, start, end, ", ".join(args)), kind)
            if correlation:
                file.event(flow_event("f", correlation + process.correlation_base, device, stream, start))

    def sync(self, batch):
        for r in batch.to_pylist():
            file, process = self.where(r["globalPid"] or 0)
            if file is None:
                continue
            name = SYNC_NAMES.get(r["syncType"], "Unknown Sync")
            device, stream = r["deviceId"], r["streamId"]
            args = [f'"cuda_sync_kind": "{name}"', f'"stream": {stream}', f'"device": {device}',
                    f'"context": {r["contextId"]}']
            if r["correlationId"]:
                args.append(f'"correlation": {r["correlationId"] + process.correlation_base}')
            self.streams[file.rank].add((device, stream))
            file.event(complete_event("cuda_sync", json.dumps(name), device, stream, r["start"], r["end"],
                                      ", ".join(args)), "synchronisations")

    def gpu_annotations(self):
        """Each NVTX range's span on each stream it gave work to: from the first to the last end of
        the GPU operations launched by calls made inside it (innermost range only, as Kineto draws them;
        none for a PyTorch op)."""
        if not self.annotated or not self.gpu_spans:
            return
        import pandas as pd
        frame = pd.DataFrame({name: np.concatenate([s[i] for s in self.gpu_spans])
                              for i, name in enumerate(("key", "device", "stream", "start", "end", "kept"))})
        frame["external"] = frame["key"].map(self.annotated)
        # Kineto draws annotations on the GPU, not ops: an op's span there would read as an annotation.
        frame = frame[frame["kept"] & frame["external"].notna() & ~frame["external"].isin(self.ops)]
        spans = frame.groupby(["external", "device", "stream"]).agg(start=("start", "min"), end=("end", "max"))
        for (external, device, stream), row in spans.sort_values("start").iterrows():
            file, name = self.range_rank[int(external)]
            file.event(complete_event("gpu_user_annotation", name, int(device), int(stream), int(row["start"]),
                                      int(row["end"]), f'"External id": {int(external)}'), "GPU annotation spans")

    def names(self, ranks):
        for rank, processes in ranks.items():
            file = self.files[rank]
            for process in processes:
                file.event(metadata_event("process_name", process.pid, 0, "name", process.name))
                file.event(metadata_event("process_labels", process.pid, 0, "labels", "CPU"))
            for global_tid, thread_name in sorted(self.scan.threads.items()):
                found = self.where(process_of(global_tid))
                if found[0] is file:
                    tid = int(global_tid) & ((1 << THREAD_BITS) - 1)
                    file.event(metadata_event("thread_name", found[1].pid, tid, "name", f"thread {tid} ({thread_name})"))
            for device in sorted({d for d, _ in self.streams[rank]}):
                file.event(metadata_event("process_name", device, 0, "name", f"GPU {device}"))
                file.event(metadata_event("process_labels", device, 0, "labels", f"GPU {device}"))
            for device, stream in sorted(self.streams[rank]):
                file.event(metadata_event("thread_name", device, stream, "name", f"stream {stream}"))


def output_paths(output, ranks, force):
    """{rank: final path}. A name ending in .json is the file of a trace's one rank; any other is a
    directory that gets rank-N.json for each rank (made when missing)."""
    output = Path(output)
    if output.suffix == ".json":
        if len(ranks) > 1:
            raise UsageError(f"the trace holds ranks {', '.join(map(str, sorted(ranks)))}, one file each; give -o a "
                             f"directory rather than {output}")
        paths = {rank: output for rank in ranks}
        directory = output.resolve().parent
        if not directory.is_dir():
            raise TraceError(f"cannot create {output} (its directory does not exist); check that it exists and is "
                             f"writable")
    else:
        if output.exists() and not output.is_dir():
            raise UsageError(f"{output} is not a directory; give -o a directory, or a name ending in .json")
        paths = {rank: output / RANK_FILE.format(rank) for rank in ranks}
    for path in paths.values():
        if path.exists() and not force:
            raise UsageError(f"{path} already exists; pass -f true to overwrite it or choose another name with -o")
        if path.exists() and not path.is_file():
            raise UsageError(f"{path} is not a file; choose another name with -o")
    if output.suffix != ".json" and not output.exists():
        if not output.resolve().parent.is_dir():
            raise TraceError(f"cannot create {output} (its directory does not exist); check that it exists and is "
                             f"writable")
        output.mkdir()
    return paths


def export(trace_path, output, show_internal=False, start_ns=0, end_ns=None, force=False, progress=None):
    """Writes the Kineto-style JSON of each rank in `trace_path` under `output` (a directory, or a .json
    file for a trace of one rank). Returns ([(path, {what: count})], notes, the trace object)."""
    trace = open_trace(trace_path, show_internal=show_internal, start_ns=start_ns, end_ns=end_ns)
    halves = [None, None]
    if progress:
        halves = [lambda done, total: progress(done, 2 * total), lambda done, total: progress(total + done, 2 * total)]
    scan = first_pass(trace, halves[0])
    ranks, world, left_out, notes = assign_ranks(trace, scan)
    if not ranks:
        raise TraceError(f"{trace_path} holds no process to export (no process made a traced call)")
    paths = output_paths(output, ranks, force)
    files = {}
    try:
        for rank in sorted(ranks):
            files[rank] = RankFile(paths[rank], rank, world.get(rank), scan, trace_path)
        rank_of = {p.global_pid: (files[rank], p) for rank, processes in ranks.items() for p in processes}
        writer = Writer(scan, files, rank_of)
        writer.annotations()
        for name, batch in trace.batches(halves[1]):
            if name == "CUPTI_ACTIVITY_KIND_RUNTIME":
                writer.runtime(batch)
            elif name in GPU_TABLES:
                writer.gpu(name, batch)
            elif name == "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION":
                writer.sync(batch)
        writer.gpu_annotations()
        writer.names(ranks)
        for file in files.values():
            file.finish()
        for file in files.values():
            os.replace(file.temp, file.path)
    except BaseException:
        for file in files.values():
            file.discard()
        raise
    if writer.skipped_ranges:
        notes.append(f"left out {writer.skipped_ranges:,} NVTX range{'s' if writer.skipped_ranges != 1 else ''} "
                     f"that never ended")
    for rank, file in sorted(files.items()):
        if not file.counts.get("kernels") and not file.counts.get("copies") and not file.counts.get("memsets"):
            notes.append(f"rank {rank} has no GPU activity (was it recorded with -t cuda on a GPU, or the "
                         f"simulated one?); HTA's breakdowns need kernels")
    return [(files[r].path, dict(files[r].counts)) for r in sorted(files)], notes, trace
