#!/usr/bin/env python3
"""Checks `cutrace export --type perfetto` output of the small synthetic trace (tests/unit/reader/trace_builder.cpp).

usage: check_perfetto.py OUT.json T0_NS EXPECTED_CALLS
Parses the file with json.load, as Perfetto's importer would need it to parse, then checks tracks,
names, times and decoded arguments. Prints "ok" and exits 0, or names the first mismatch and exits 1.
"""

import json
import sys


def fail(msg):
    print(f"check_perfetto.py: {msg}")
    sys.exit(1)


def expect(cond, msg):
    if not cond:
        fail(msg)


def main():
    path, t0, expected_calls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    expect(doc.get("displayTimeUnit") == "ns", "displayTimeUnit is not ns")
    origin = int(doc["otherData"]["time_origin_ns"])
    events = doc["traceEvents"]

    meta = [(e["name"], e["pid"], e["tid"]) for e in events if e["ph"] == "M"]
    expect(len(meta) == len(set(meta)), f"a track is named more than once: {meta}")
    names = {(e["name"], e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M"}
    expect(names.get(("process_name", 4242, 4242)) == "./app --n 3", f"process 4242 name: {names}")
    expect(names.get(("process_name", 4300, 4300)) == "python train.py", f"process 4300 name: {names}")
    expect(names.get(("thread_name", 4242, 4242)) == "app", f"thread 4242 name: {names}")
    expect(names.get(("thread_name", 4242, 4243)) == "worker", f"thread 4243 name: {names}")
    expect(names.get(("thread_name", 4300, 4300)) == "python", f"thread 4300 name: {names}")

    calls = [e for e in events if e["ph"] == "X"]
    expect(len(calls) == expected_calls, f"{len(calls)} complete events, expected {expected_calls}")
    tracks = {(e["pid"], e["tid"]) for e in calls}
    expect(tracks == {(4242, 4242), (4242, 4243), (4300, 4300)}, f"tracks {tracks}")
    for e in calls:
        expect(isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float)), f"times of {e}")
        expect(e["name"] != "__cudaRegisterFunction", "a call recorded outside capture was exported")
        expect(e["name"] != "__cudaGetKernel", "an internal call was exported without --show-internal")

    def first(name, pid=None):
        for e in calls:
            if e["name"] == name and (pid is None or e["pid"] == pid):
                return e
        fail(f"no {name} event")

    malloc = first("cudaMalloc")
    expect(abs(malloc["ts"] - (t0 + 1000 - origin) / 1000) < 0.0005, f"cudaMalloc ts {malloc['ts']}")
    expect(malloc["dur"] == 5.0, f"cudaMalloc dur {malloc['dur']}")
    expect(malloc["cat"] == "cuda_runtime", f"cudaMalloc cat {malloc['cat']}")
    # A success carries only its result's name, which implies the number (0).
    expect(malloc["args"] == {"size": 1048576, "devPtr": "0x7f0000000000", "result_name": "cudaSuccess",
                              "correlation": malloc["args"].get("correlation")}, f"cudaMalloc args {malloc['args']}")
    # Every call has its own CorrID, the one cutrace stats shows.
    ids = [e["args"]["correlation"] for e in calls]
    expect(len(ids) == len(set(ids)) and min(ids) > 0, f"correlation ids {ids}")

    memcpy = first("cudaMemcpy")
    expect(memcpy["args"]["kind"] == "cudaMemcpyHostToDevice", f"memcpy kind {memcpy['args']}")
    expect(memcpy["args"]["count"] == 1048576, f"memcpy count {memcpy['args']}")

    launch = first("cudaLaunchKernel", 4242)
    expect(launch["args"]["func"] == "void ns::axpy<float>(float, float*, float*, int)", f"launch {launch['args']}")
    expect(launch["args"]["gridDim"] == "(256,1,1)" and launch["args"]["blockDim"] == "(128,1,1)",
           f"launch dims {launch['args']}")
    expect(launch["args"]["stream"] == "0x0", f"launch stream {launch['args']}")
    expect(first("cudaLaunchKernel", 4300)["args"]["func"] == "other_fn()", "stub of the second process")

    # __cudaLaunchKernel is shown by its display name, with the entry point kept in the arguments.
    launch13 = next((e for e in calls if e["args"].get("entry_point") == "__cudaLaunchKernel"), None)
    expect(launch13 is not None and launch13["name"] == "cudaLaunchKernel" and launch13["tid"] == 4243,
           f"__cudaLaunchKernel {launch13}")
    expect(launch13["args"]["kernel"] == "reduce(float const*, float*, int)", f"__cudaLaunchKernel {launch13['args']}")
    expect(launch13["args"]["stream"] == "0x5000" and launch13["args"]["sharedMem"] == 1024,
           f"__cudaLaunchKernel {launch13['args']}")

    # A failure carries both its number and its name; only failures carry the number.
    failed = [e for e in calls if e["name"] == "cudaMalloc" and "result" in e["args"]]
    expect(len(failed) == 1 and failed[0]["args"]["result"] == 2 and
           failed[0]["args"]["result_name"] == "cudaErrorMemoryAllocation", f"failed cudaMalloc {failed}")
    named = [e for e in calls if "result_name" in e["args"]]
    expect(named and all(("result" in e["args"]) == (e["args"]["result_name"] not in ("cudaSuccess", "CUDA_SUCCESS",
                                                                                      "CUBLAS_STATUS_SUCCESS"))
                         for e in named), f"results of {named}")

    err = first("cudaGetErrorString")
    expect({k: v for k, v in err["args"].items() if k != "correlation"} == {"error": 35, "result": "0x7ffff000"},
           f"cudaGetErrorString {err['args']}")

    nested = first("cuMemAlloc_v2", 4242)
    expect(nested["cat"] == "cuda_driver" and nested["args"].get("depth") == 1, f"nested driver call {nested}")
    # The parent comes first in the file although it was recorded after the call inside it.
    expect(calls.index(malloc) < calls.index(nested), "a nested slice precedes its parent")
    expect(first("cublasSgemm_v2")["cat"] == "cublas", "cuBLAS category")
    print("ok")


if __name__ == "__main__":
    main()
