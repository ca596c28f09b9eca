"""`cutrace export --type perfetto`: Perfetto's protobuf format, parsed with Perfetto's own definitions
(perfetto_trace_pb2 from the `perfetto` package) and read the way Perfetto's documentation says a
trace processor reads it: packet sequences with their interned strings, defaults and incremental
clocks; track descriptors; begin/end slices matched per track after sorting by time; flows. What it
holds must be, item for item, what the JSON export (`--type perfetto-json`) of the same trace holds:
the same slices with the same names, times and arguments on the same tracks, the same flows from
calls to GPU work, instants, spans and counters. Then exact counts of the simulated programs' work,
two ranks merged on one timeline, and the packets' size."""
import json
from collections import Counter, defaultdict

import pytest
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from conftest import SUCCESS_NAMES, app, check_results, profile, run_tool, sim_env

pytestmark = pytest.mark.reads_traces

BEGIN, END, INSTANT, COUNTER = (pb.TrackEvent.TYPE_SLICE_BEGIN, pb.TrackEvent.TYPE_SLICE_END,
                                pb.TrackEvent.TYPE_INSTANT, pb.TrackEvent.TYPE_COUNTER)
TRACE_CLOCK = 6  # BOOTTIME, the default


def annotation_value(a, strings):
    if a.HasField("uint_value"):
        return a.uint_value
    if a.HasField("int_value"):
        return a.int_value
    if a.HasField("string_value"):
        return a.string_value
    if a.HasField("string_value_iid"):
        return strings[a.string_value_iid].decode()
    return [annotation_value(v, strings) for v in a.array_values]


class Decoded:
    """The trace as a trace processor sees it: tracks, slices, instants, counters and flows."""

    def __init__(self, data):
        trace = pb.Trace.FromString(data)
        self.packets = trace.packet
        self.tracks = {}  # uuid -> TrackDescriptor (the last one given)
        sequences = defaultdict(lambda: {"names": {}, "keys": {}, "values": {}, "categories": {}, "defaults": None,
                                         "clocks": {}})
        events = []  # (timestamp, order, event, interned tables)
        for order, p in enumerate(trace.packet):
            seq = sequences[p.trusted_packet_sequence_id]
            if p.sequence_flags & pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED:
                for table in ("names", "keys", "values", "categories"):
                    seq[table] = {}
                seq["defaults"] = None
            if p.HasField("trace_packet_defaults"):
                seq["defaults"] = p.trace_packet_defaults
            if p.HasField("interned_data"):
                d = p.interned_data
                seq["names"].update({e.iid: e.name for e in d.event_names})
                seq["keys"].update({e.iid: e.name for e in d.debug_annotation_names})
                seq["values"].update({e.iid: e.str for e in d.debug_annotation_string_values})
                seq["categories"].update({e.iid: e.name for e in d.event_categories})
            if p.HasField("clock_snapshot"):
                readings = {c.clock_id: c for c in p.clock_snapshot.clocks}
                base = readings[TRACE_CLOCK].timestamp
                for clock_id, c in readings.items():
                    if clock_id >= 64:
                        # A sequence's own clock: its value at the snapshot, and the trace clock's then.
                        seq["clocks"][clock_id] = {"value": c.timestamp, "base": base, "at": c.timestamp,
                                                   "incremental": c.is_incremental}
            if p.HasField("track_descriptor"):
                self.tracks[p.track_descriptor.uuid] = p.track_descriptor
            if not p.HasField("track_event"):
                continue
            defaults = seq["defaults"]
            clock_id = p.timestamp_clock_id if p.HasField("timestamp_clock_id") else \
                (defaults.timestamp_clock_id if defaults is not None and defaults.HasField("timestamp_clock_id")
                 else TRACE_CLOCK)
            if clock_id == TRACE_CLOCK:
                ts = p.timestamp
            else:
                clock = seq["clocks"][clock_id]
                value = clock["value"] + p.timestamp if clock["incremental"] else p.timestamp
                clock["value"] = value
                ts = clock["base"] + (value - clock["at"])
            e = p.track_event
            track = e.track_uuid if e.HasField("track_uuid") else defaults.track_event_defaults.track_uuid
            events.append((ts, order, e, track, dict(seq)))
        events.sort(key=lambda x: (x[0], x[1]))
        self.slices = defaultdict(list)     # track uuid -> [slice]
        self.instants = defaultdict(list)
        self.counters = defaultdict(list)
        self.flows = {}  # flow id -> [slice, ...] in order
        open_slices = defaultdict(list)
        self.unmatched_ends = 0
        for ts, _, e, track, seq in events:
            if e.type == END:
                if not open_slices[track]:
                    self.unmatched_ends += 1
                    continue
                s = open_slices[track].pop()
                s["dur"] = ts - s["ts"]
                continue
            if e.type == COUNTER:
                self.counters[track].append((ts, e.counter_value))
                continue
            item = {"name": seq["names"][e.name_iid] if e.HasField("name_iid") else e.name, "ts": ts,
                    "cat": ",".join(seq["categories"][c] for c in e.category_iids),
                    "args": {seq["keys"][a.name_iid]: annotation_value(a, seq["values"]) for a in e.debug_annotations},
                    "track": track}
            if e.type == INSTANT:
                self.instants[track].append(item)
                continue
            item["depth"] = len(open_slices[track])
            self.slices[track].append(item)
            open_slices[track].append(item)
            for f in list(e.flow_ids) + list(e.terminating_flow_ids):
                self.flows.setdefault(f, []).append(item)
        self.unclosed = sum(len(v) for v in open_slices.values())

    def process_of(self, uuid):
        while uuid:
            d = self.tracks[uuid]
            if d.HasField("process"):
                return d.process.pid
            if d.HasField("thread"):
                return d.thread.pid
            uuid = d.parent_uuid
        return None

    def thread_of(self, uuid):
        """The thread whose track this is, or whose push/pop ranges it holds ("NVTX", "NVTX (domain)");
        else None."""
        d = self.tracks[uuid]
        if d.name.startswith("NVTX") and self.tracks[d.parent_uuid].HasField("thread"):
            d = self.tracks[d.parent_uuid]
        return d if d.HasField("thread") else None

    def key(self, uuid):
        """A track as the JSON export names it: (pid, tid) of a thread (its push/pop ranges too, which
        the JSON nests among its calls), (pid, name) of another track."""
        thread = self.thread_of(uuid)
        if thread is not None:
            return (thread.thread.pid, thread.thread.tid)
        return (self.process_of(uuid), self.tracks[uuid].name)


def export_both(trace, tmp_path, *options, expect=0):
    pf, js = tmp_path / "out.pftrace", tmp_path / "out.json"
    run_tool("export", "--type", "perfetto", "-o", pf, "-f", "true", *options, *map(str, trace), expect=expect)
    run_tool("export", "--type", "perfetto-json", "-o", js, "-f", "true", *options, *map(str, trace), expect=expect)
    return Decoded(pf.read_bytes()), json.loads(js.read_text()), pf


def us_to_ns(us):
    return round(us * 1000)


def json_tracks(doc):
    """{(pid, tid): name} of the JSON's thread_name events (GPU tracks are threads there)."""
    return {(e["pid"], e["tid"]): e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "thread_name"}


def check_same_timeline(decoded, doc):
    """Everything the JSON export shows, the protobuf export shows the same way."""
    events = doc["traceEvents"]
    names = json_tracks(doc)
    assert decoded.unmatched_ends == 0 and decoded.unclosed == 0

    # Slices: complete events of threads (calls, push/pop ranges) and of GPU tracks.
    def json_key(e):
        name = names.get((e["pid"], e["tid"]))
        return (e["pid"], name) if name and name.startswith("CUDA HW") else (e["pid"], e["tid"])

    # A call's "correlation" differs on purpose: the JSON shows the reader's numbering of calls, the
    # protobuf CUPTI's id of the call's GPU work (checked with the flows below), as nsys's CorrID.
    def args_text(item, is_call):
        return json.dumps({k: v for k, v in item["args"].items() if not (is_call and k == "correlation")},
                          sort_keys=True)

    def is_call(item):
        return item["cat"] not in ("nvtx", "cuda_gpu")

    theirs = Counter((json_key(e), e["name"], e["cat"], us_to_ns(e["ts"]), us_to_ns(e["dur"]),
                      args_text(e, is_call(e))) for e in events if e["ph"] == "X")
    ours = Counter((decoded.key(uuid), s["name"], s["cat"], s["ts"], s["dur"], args_text(s, is_call(s)))
                   for uuid, slices in decoded.slices.items() for s in slices
                   if decoded.thread_of(uuid) is not None or decoded.tracks[uuid].name.startswith("CUDA HW"))
    assert ours == theirs, (ours - theirs, theirs - ours)

    # Nesting as a timeline shows it: a call inside another is one level deeper.
    for uuid, slices in decoded.slices.items():
        for s in slices:
            if "depth" in s["args"] and decoded.tracks[uuid].HasField("thread"):
                assert s["depth"] >= s["args"]["depth"], s

    # Flows: from the call its API link lies in to the GPU work of the same id. The JSON binds a flow to
    # the innermost slice at the link's time; the protobuf export starts it on the call of the api the
    # link names, which is that slice (a copy's link names the driver call the runtime made for it).
    def enclosing_call(pid, tid, ts):
        inside = [e for e in events if e["ph"] == "X" and (e["pid"], e["tid"]) == (pid, tid) and e["cat"] != "nvtx"
                  and us_to_ns(e["ts"]) <= ts <= us_to_ns(e["ts"]) + us_to_ns(e["dur"])]
        return max(inside, key=lambda e: (us_to_ns(e["ts"]), -us_to_ns(e["dur"])))

    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    json_flows = set()
    for f in (e for e in events if e["ph"] == "f"):
        if f["id"] in starts:
            s = starts[f["id"]]
            call = enclosing_call(s["pid"], s["tid"], us_to_ns(s["ts"]))
            json_flows.add(((s["pid"], s["tid"]), call["name"], us_to_ns(call["ts"]),
                            names[(f["pid"], f["tid"])], us_to_ns(f["ts"])))
    proto_flows = set()
    for flow_id, items in decoded.flows.items():
        if len(items) == 2:
            call, work = items if decoded.tracks[items[0]["track"]].HasField("thread") else items[::-1]
            proto_flows.add((decoded.key(call["track"]), call["name"], call["ts"],
                             decoded.tracks[work["track"]].name, work["ts"]))
            assert call["args"]["correlation"] == work["args"]["correlation"] == flow_id & 0xffffffff
    assert proto_flows == json_flows
    # Only a call that starts a flow carries a correlation.
    starting = {id(items[0]) for items in decoded.flows.values()}
    assert all(("correlation" in s["args"]) == (id(s) in starting) for uuid, slices in decoded.slices.items()
               if decoded.tracks[uuid].HasField("thread") for s in slices if is_call(s))

    # Instants: marks and samples on their threads.
    theirs = Counter(((e["pid"], e["tid"]), e["name"], e["cat"], us_to_ns(e["ts"]), json.dumps(e["args"], sort_keys=True))
                     for e in events if e["ph"] == "i")
    ours = Counter((decoded.key(uuid), i["name"], i["cat"], i["ts"], json.dumps(i["args"], sort_keys=True))
                   for uuid, items in decoded.instants.items() for i in items)
    assert ours == theirs

    # Spans of a process (NVTX start/end, capture ranges) and time off CPU: begin and end by id.
    begins = {(e["cat"], e["id"]): e for e in events if e["ph"] == "b"}
    theirs = Counter()
    for e in events:
        if e["ph"] == "e":
            b = begins[(e["cat"], e["id"])]
            theirs[(b["pid"], b["name"], b["cat"], us_to_ns(b["ts"]), us_to_ns(e["ts"]) - us_to_ns(b["ts"]),
                    json.dumps(b.get("args", {}), sort_keys=True))] += 1
    ours = Counter((decoded.process_of(uuid), s["name"], s["cat"], s["ts"], s["dur"], json.dumps(s["args"], sort_keys=True))
                   for uuid, slices in decoded.slices.items() for s in slices
                   if decoded.thread_of(uuid) is None and not decoded.tracks[uuid].name.startswith("CUDA HW"))
    assert ours == theirs

    # Counters.
    theirs = Counter((e["pid"], e["name"], us_to_ns(e["ts"]), e["args"]["bytes"]) for e in events if e["ph"] == "C")
    ours = Counter((decoded.process_of(uuid), decoded.tracks[uuid].name, ts, v)
                   for uuid, values in decoded.counters.items() for ts, v in values)
    assert ours == theirs
    assert all(decoded.tracks[uuid].counter.unit == pb.CounterDescriptor.UNIT_SIZE_BYTES for uuid in decoded.counters)

    # Processes and threads named as in the JSON.
    json_processes = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert {d.process.pid: d.process.process_name for d in decoded.tracks.values() if d.HasField("process")} == \
        json_processes
    assert {(d.thread.pid, d.thread.tid): d.thread.thread_name for d in decoded.tracks.values()
            if d.HasField("thread") and d.thread.thread_name} == \
        {k: v for k, v in names.items() if not v.startswith("CUDA HW")}


@pytest.fixture(scope="module")
def vector_add(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("vector_add")
    _, trace = profile(tmp, [app("sim_vector_add"), "10"],
                       options=["-t", "cuda,nvtx,osrt", "--cudabacktrace", "memory:1000", "--cuda-memory-usage", "true"])
    return trace


def test_the_protobuf_export_holds_what_the_json_export_holds(vector_add, tmp_path):
    decoded, doc, _ = export_both([vector_add], tmp_path)
    check_same_timeline(decoded, doc)
    # The program's own work, counted: 10 iterations of 2 launches, 3 copies.
    calls = Counter(s["name"] for uuid, slices in decoded.slices.items() if decoded.tracks[uuid].HasField("thread")
                    for s in slices if s["cat"] == "cuda_runtime")
    assert calls["cudaLaunchKernel"] == 20 and calls["cudaMemcpy"] == 30
    gpu = [s for uuid, slices in decoded.slices.items() if decoded.tracks[uuid].name.startswith("CUDA HW")
           for s in slices]
    assert sum(1 for s in gpu if s["cat"] == "cuda_gpu" and "grid" in s["args"]) == 20
    assert sum(1 for items in decoded.flows.values() if len(items) == 2) == 50  # each launch and copy to its work
    # Stacks of the slow allocations are arrays of frames.
    stacks = [s["args"]["stack"] for slices in decoded.slices.values() for s in slices if "stack" in s["args"]]
    assert stacks and all(isinstance(st, list) and st and all(isinstance(f, str) for f in st) for st in stacks)
    assert decoded.counters  # --cuda-memory-usage


def test_nvtx_ranges_marks_and_a_time_window(tmp_path):
    _, trace = profile(tmp_path, [app("nvtx_app"), "2", "3"], options=["-t", "cuda,nvtx,osrt", "--osrt-threshold", "0"])
    decoded, doc, _ = export_both([trace], tmp_path)
    check_same_timeline(decoded, doc)
    assert sum(len(v) for v in decoded.instants.values()) > 0
    # Push/pop ranges (those with a level) on an NVTX track of their thread per domain, apart from its calls.
    ranges = [(uuid, s) for uuid, slices in decoded.slices.items() for s in slices
              if s["cat"] == "nvtx" and "level" in s["args"]]
    assert ranges and all(decoded.tracks[uuid].name == (f"NVTX ({s['args']['domain']})" if s["args"]["domain"] else "NVTX")
                          for uuid, s in ranges)
    assert {decoded.tracks[uuid].name for uuid, _ in ranges} == {"NVTX", "NVTX (lib_b)"}
    # A window keeps the same items in both.
    end = max(us_to_ns(e["ts"]) for e in doc["traceEvents"] if "ts" in e)
    decoded, doc, _ = export_both([trace], tmp_path, "--from", f"{end // 3}ns", "--to", f"{2 * end // 3}ns")
    check_same_timeline(decoded, doc)


def test_two_ranks_on_one_timeline(tmp_path):
    traces = []
    for rank in (0, 1):
        _, t = profile(tmp_path, [app("sim_vector_add"), str(rank + 1)], env=sim_env(RANK=rank), name=f"rank{rank}")
        traces.append(t)
    decoded, doc, pf = export_both(traces, tmp_path)
    check_same_timeline(decoded, doc)
    processes = sorted((d.process.pid, d.process.process_name) for d in decoded.tracks.values() if d.HasField("process"))
    assert len(processes) == 2
    assert processes[0][1].startswith("rank 0 (") and processes[1][1].startswith("rank 1 (")
    # The second trace's pids are offset by 2^22, above any Linux pid, whatever the two pids were.
    assert processes[0][0] < 1 << 22 <= processes[1][0] < 2 << 22
    # A directory stands for its traces, in name order.
    by_directory = tmp_path / "by_directory.pftrace"
    run_tool("export", "--type", "perfetto", "-o", by_directory, tmp_path)
    assert by_directory.read_bytes() == pf.read_bytes()
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = run_tool("export", "--type", "perfetto", "-o", tmp_path / "none.pftrace", empty, expect=2)
    assert proc.stderr == f"cutrace export: {empty} holds no .cutrace trace; give traces, or a directory of them.\n"
    assert not (tmp_path / "none.pftrace").exists()


def test_a_success_carries_its_results_name_a_failure_also_its_number(tmp_path):
    # sim_errors checks 17 calls' results, failures and successes among them.
    _, trace = profile(tmp_path, [app("sim_errors")], env=sim_env())
    decoded, doc, _ = export_both([trace], tmp_path)
    check_same_timeline(decoded, doc)
    json_calls = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] not in ("nvtx", "cuda_gpu")]
    proto_calls = [s for uuid, slices in decoded.slices.items() if decoded.tracks[uuid].HasField("thread")
                   for s in slices if s["cat"] != "nvtx"]
    for found in (json_calls, proto_calls):
        check_results(found)
        named = [c["args"] for c in found if "result_name" in c["args"]]
        succeeded = [a for a in named if a["result_name"] in SUCCESS_NAMES]
        failed = [a for a in named if a["result_name"] not in SUCCESS_NAMES]
        assert succeeded and all("result" not in a for a in succeeded)
        assert len(failed) >= 10 and all(a["result"] != 0 for a in failed)
        assert any(a["result"] == 2 and a["result_name"] == "cudaErrorMemoryAllocation" for a in failed)


def test_calls_are_small_and_gzip_is_the_same_file(tmp_path):
    _, trace = profile(tmp_path, [app("cheap_calls"), "20000"])
    decoded, doc, pf = export_both([trace], tmp_path)
    check_same_timeline(decoded, doc)
    calls = [s for slices in decoded.slices.values() for s in slices if s["name"] == "cudaGetDevice"]
    assert len(calls) == 20000
    # A call that succeeded shows its result by name only (cudaSuccess: the number, 0, is implied).
    assert all(set(s["args"]) == {"device", "result_name"} and s["args"]["result_name"] == "cudaSuccess" for s in calls)
    # A call is a begin and an end packet; with its arguments (device, result_name) it is within issue
    # 31's 40 bytes (37), a fifth of the JSON's size.
    per_call = pf.stat().st_size / len(calls)
    assert per_call <= 40, per_call
    gz = tmp_path / "out.pftrace.gz"
    run_tool("export", "--type", "perfetto", "-o", gz, trace)
    import gzip
    assert gzip.decompress(gz.read_bytes()) == pf.read_bytes()
