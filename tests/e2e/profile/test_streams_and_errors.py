"""Streams, asynchronous copies, events and failing calls under `cutrace profile`: every call is
recorded with the stream, sizes and handles the program passed and the code the runtime returned."""
import subprocess

from conftest import api_sum, app, calls, counts, profile, result, sim_env

SCALE = "ns::scale(float*, float const*, float, int)"


def app_calls(stdout):
    """The program's own count of each call it made ("calls <function> <n>" lines)."""
    return {p[1]: int(p[2]) for p in (line.split() for line in stdout.splitlines()) if len(p) == 3 and p[0] == "calls"}


def test_two_streams_each_call_carries_the_stream_it_was_given(tmp_path):
    elements, rounds = 4096, 3
    proc, trace = profile(tmp_path, [app("sim_streams"), str(elements), str(rounds)], env=sim_env())
    assert f"verified {2 * rounds}" in proc.stdout
    events, _ = calls(trace, tmp_path)
    events.sort(key=lambda e: e["ts"])

    expected = app_calls(proc.stdout)
    # cudaMallocHost(T**, size) is an inline template of cuda_runtime.h over cudaHostAlloc.
    expected["cudaHostAlloc"] = expected.pop("cudaMallocHost")
    recorded = counts(events)
    for name, n in expected.items():
        assert recorded.get(name) == n, name

    # The handles the runtime gave out, as recorded from the calls' output arguments.
    (created,) = [e["args"]["pStream"] for e in events if e["name"] == "cudaStreamCreate"]
    (non_blocking,) = [e for e in events if e["name"] == "cudaStreamCreateWithFlags"]
    assert non_blocking["args"]["flags"] == "0x1"  # cudaStreamNonBlocking
    streams = [created, non_blocking["args"]["pStream"]]
    assert len(set(streams)) == 2 and "0x0" not in streams
    event_handles = [e["args"]["event"] for e in events if e["name"] == "cudaEventCreate"]
    assert len(set(event_handles)) == 4

    bytes_ = 4 * elements
    for i, stream in enumerate(streams):
        on_stream = [e for e in events if e["args"].get("stream") == stream]
        # Per round: event, copy in, launch (with its call configuration), copy out, event.
        copies = [(e["args"]["kind"], e["args"]["count"]) for e in on_stream if e["name"] == "cudaMemcpyAsync"]
        assert copies == [("cudaMemcpyHostToDevice", bytes_), ("cudaMemcpyDeviceToHost", bytes_)] * rounds
        launches = [e for e in on_stream if e["name"] == "__cudaLaunchKernel"]
        assert [e["args"]["kernel"] for e in launches] == [SCALE] * rounds
        for e in launches:
            assert e["args"]["gridDim"] == f"({elements // 256},1,1)"
            assert e["args"]["blockDim"] == "(256,1,1)"
            assert e["args"]["sharedMem"] == 0
        records = [e["args"]["event"] for e in on_stream if e["name"] == "cudaEventRecord"]
        assert records == event_handles[2 * i:2 * i + 2] * rounds
        assert [e["name"] for e in on_stream if e["name"] in ("cudaStreamSynchronize", "cudaStreamDestroy")] == \
            ["cudaStreamSynchronize"] * rounds + ["cudaStreamDestroy"]

    # Every device and host buffer allocated is freed, by the pointer the allocation returned.
    allocated = sorted(e["args"]["devPtr"] for e in events if e["name"] == "cudaMalloc")
    pinned = sorted(e["args"]["pHost"] for e in events if e["name"] == "cudaHostAlloc")
    assert allocated and pinned and len(set(allocated)) == len(allocated)
    assert allocated == sorted(e["args"]["devPtr"] for e in events if e["name"] == "cudaFree")
    assert pinned == sorted(e["args"]["ptr"] for e in events if e["name"] == "cudaFreeHost")
    results = [e["args"]["result_name"] for e in events if "result_name" in e["args"]]
    assert len(results) > 60 and set(results) == {"cudaSuccess"}
    # Only the registration calls nvcc's code makes have no error code to name.
    assert {e["name"] for e in events if "result_name" not in e["args"]} <= {
        "__cudaRegisterFatBinary", "__cudaRegisterFatBinaryEnd", "__cudaRegisterFunction", "__cudaUnregisterFatBinary",
        "__cudaPushCallConfiguration", "__cudaPopCallConfiguration"}


def test_failing_calls_are_recorded_with_the_codes_the_program_saw(tmp_path):
    command = [app("sim_errors")]
    plain = subprocess.run(command, env=sim_env(), capture_output=True, text=True, timeout=60)
    proc, trace = profile(tmp_path, command, env=sim_env())
    assert plain.returncode == proc.returncode == 0
    assert proc.stdout == plain.stdout

    # "<check> <code> <name> expected <code> <name>", one line per call the program checked.
    seen = []
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 6 and parts[-3] == "expected":
            check = " ".join(parts[:-5])
            api = check.split(" then ")[-1].split("(")[0]
            seen.append((api, int(parts[-5]), parts[-4]))
    assert len(seen) == 17
    checked = {api for api, _, _ in seen}
    events, _ = calls(trace, tmp_path)
    events.sort(key=lambda e: e["ts"])
    # A success shows only its name (calls() checks that it is one), a failure its number and name.
    recorded = [(e["name"], result(e), e["args"]["result_name"]) for e in events if e["name"] in checked]
    assert recorded == seen

    # The <<<0,1>>> launch itself fails inside the runtime and reports through cudaGetLastError; the
    # recorded launch call carries the error code the runtime returned to the launch stub.
    (launch,) = [e for e in events if e["name"] == "__cudaLaunchKernel"]
    assert launch["args"]["gridDim"] == "(0,1,1)"
    assert launch["args"]["result_name"] == "cudaErrorInvalidConfiguration"
    table = api_sum(trace)
    assert table["cudaGetErrorName"]["Num Calls"] == app_calls(proc.stdout)["cudaGetErrorName"]
