"""The driver API, cuBLAS, cuBLASLt and cuDNN on the simulated stack, which reaches the driver the way
the real libraries do (dlopen of libcuda.so.1 and cuGetProcAddress, never through libcudart): every
call counted exactly, kernels named from the calls that produced the CUfunction, arguments decoded,
nesting (cuDNN -> cuBLAS -> driver) with exact depths and self times, the static runtime traced
through its driver calls, and one warning line exactly when a loaded library left no calls."""
import subprocess
import sys

from conftest import api_sum, api_trace, app, profile, program_calls, run_tool, sim_env




def warnings(stderr):
    return [l for l in stderr.splitlines() if l.startswith("cutrace: warning:")]


def test_driver_api_program_every_call_counted_and_every_launch_named(tmp_path):
    command = [app("sim_driver_launch"), "3"]
    proc, trace = profile(tmp_path, command)
    plain = subprocess.run(command, env=sim_env(), capture_output=True, text=True, timeout=60)
    assert proc.stdout == plain.stdout and proc.returncode == plain.returncode == 0
    expected = program_calls(proc.stdout)
    assert expected["cuLaunchKernel"] == 5
    # The program makes no runtime call: cuda_api_sum lists its driver calls under their cu* names.
    table = api_sum(trace, show_internal=False)
    assert {name: int(row["Num Calls"]) for name, row in table.items()} == expected
    assert warnings(proc.stderr) == []

    rows = api_trace(trace)
    launches = [(r["Name"], r["args"]["f"]) for r in rows if r["Name"].startswith("cuLaunch")]
    # Module functions (cuModuleGetFunction), a library kernel turned into a function
    # (cuLibraryGetKernel + cuKernelGetFunction), each launch named by the call that produced it.
    assert launches == [("cuLaunchKernel", "vec_scale")] * 3 + [("cuLaunchCooperativeKernel", "vec_scale"),
                                                                ("cuLaunchKernelEx", "lib_fill")] + \
        [("cuLaunchKernel", "tail_sleep_us_200")] * 2
    first = next(r for r in rows if r["Name"] == "cuLaunchKernel")
    assert first["args"]["gridDim"] == "(4,1,1)" and first["args"]["blockDim"] == "(256,1,1)"
    assert first["args"]["sharedMemBytes"] == "0"
    ex = next(r for r in rows if r["Name"] == "cuLaunchKernelEx")
    assert (ex["args"]["gridDimX"], ex["args"]["blockDimX"]) == ("1", "64")
    (alloc,) = [r for r in rows if r["Name"] == "cuMemAlloc_v2"]
    assert alloc["args"]["bytesize"] == "4096"
    # Two copies each way, 8192 bytes in all each way, as the program counts them.
    assert [r["args"]["ByteCount"] for r in rows if r["Name"].startswith("cuMemcpy")] == ["4096"] * 4
    assert "bytes HtoD 8192" in proc.stdout and "bytes DtoH 8192" in proc.stdout
    assert all(r["Depth"] == 0 for r in rows)


def test_runtime_calls_carry_their_driver_calls_nested_and_counted_once(tmp_path):
    proc, trace = profile(tmp_path, [app("sim_vector_add"), "2", "4096"])
    rows = api_trace(trace)
    for parent, child in (("cudaMalloc", "cuMemAlloc_v2"), ("cudaFree", "cuMemFree_v2"),
                          ("cudaLaunchKernel", "cuLaunchKernel"), ("cudaDeviceSynchronize", "cuCtxSynchronize_v2")):
        parents = [k for k, r in enumerate(rows) if r["Name"] == parent]
        assert parents, parent
        for k in parents:
            nested = [r for r in rows[k + 1:] if r["Depth"] == 1 and r["Start (ns)"] <= rows[k]["Start (ns)"] +
                      rows[k]["Duration (ns)"]]
            assert child in [r["Name"] for r in nested], (parent, k)
    # The launch the runtime made names the same kernel as the runtime call.
    runtime = [r["args"]["kernel"] for r in rows if r["Name"] == "cudaLaunchKernel"]
    driver = [r["args"]["f"] for r in rows if r["Name"] == "cuLaunchKernel"]
    assert runtime == driver and len(runtime) == 4
    # nsys counts the runtime calls only.
    table = api_sum(trace, show_internal=False)
    assert not [name for name in table if name.startswith("cu") and not name.startswith("cuda")]
    assert table["cudaMalloc"]["Num Calls"] == 6


def test_cublas_through_a_dlopen_handle_records_gemm_shapes_and_nesting(tmp_path):
    command = [app("sim_cublas"), "64", "32", "16", "3"]
    proc, trace = profile(tmp_path, command, options=["-t", "cublas"])
    expected = program_calls(proc.stdout)
    assert expected["cublasSgemm_v2"] == 3 and expected["cublasGemmEx"] == 1
    table = api_sum(trace, report="cublas_api_sum", show_internal=False)
    assert {name: int(row["Num Calls"]) for name, row in table.items()} == expected
    assert warnings(proc.stderr) == []

    rows = api_trace(trace)
    gemms = [r for r in rows if r["Name"] == "cublasSgemm_v2"]
    assert [(g["args"]["m"], g["args"]["n"], g["args"]["k"]) for g in gemms] == [("64", "32", "16")] * 3
    assert all(g["args"]["transa"] == "CUBLAS_OP_N" and g["Depth"] == 0 for g in gemms)
    # Each GEMM is one kernel launch through the driver, made inside it.
    for g in gemms:
        k = rows.index(g)
        child = rows[k + 1]
        assert (child["Name"], child["Depth"], child["args"]["f"]) == ("cuLaunchKernel", 1, "sgemm_sim_128x64")
        assert g["Self (ns)"] == g["Duration (ns)"] - child["Duration (ns)"]
    (ex,) = [r for r in rows if r["Name"] == "cublasGemmEx"]
    assert (ex["args"]["Atype"], ex["args"]["computeType"]) == ("CUDA_R_32F", "CUBLAS_COMPUTE_32F")
    # cublasGemmEx -> cublasLtMatmul -> cuLaunchKernel.
    k = rows.index(ex)
    inside = [r for r in rows[k + 1:] if r["Depth"] > 0]
    matmul = next(r for r in inside if r["Name"] == "cublasLtMatmul")
    assert matmul["Depth"] == 1 and matmul["Domain"] == "cublaslt"
    launch = rows[rows.index(matmul) + 1]
    assert (launch["Name"], launch["Depth"]) == ("cuLaunchKernel", 2)

    # -t cuda (the default) leaves cuBLAS out: its launches are then the program's driver calls.
    proc, trace = profile(tmp_path, command, name="cuda_only")
    assert not [r for r in api_trace(trace) if r["Domain"] in ("cublas", "cublaslt")]
    assert api_sum(trace, show_internal=False)["cuLaunchKernel"]["Num Calls"] == 4


def test_cudnn_calls_cublas_calls_the_driver_with_exact_depths_and_self_times(tmp_path):
    proc, trace = profile(tmp_path, [app("sim_cudnn")], options=["-t", "cudnn,cublas"])
    expected = program_calls(proc.stdout)
    table = api_sum(trace, report="cudnn_api_sum", show_internal=False)
    assert {name: int(row["Num Calls"]) for name, row in table.items()} == expected
    # The cuBLAS calls cuDNN made (its handle, and the GEMM of the convolution) are counted in the
    # cuBLAS report, once each.
    assert {n: int(r["Num Calls"]) for n, r in api_sum(trace, "cublas_api_sum").items()} == \
        {"cublasCreate_v2": 1, "cublasSetStream_v2": 1, "cublasSgemm_v2": 1, "cublasDestroy_v2": 1}

    rows = api_trace(trace)
    (conv,) = [r for r in rows if r["Name"] == "cudnnConvolutionForward"]
    k = rows.index(conv)
    end = conv["Start (ns)"] + conv["Duration (ns)"]
    inside = [r for r in rows[k + 1:] if r["Depth"] > 0 and r["Start (ns)"] <= end]
    assert [(r["Name"], r["Depth"]) for r in inside] == [("cuLaunchKernel", 1), ("cublasSgemm_v2", 1),
                                                         ("cuLaunchKernel", 2)]
    assert inside[0]["args"]["f"] == "cudnn_im2col_sim" and inside[2]["args"]["f"] == "sgemm_sim_128x64"
    # Self time: what is left of a call once its direct children are taken out; nothing counted twice.
    assert conv["Self (ns)"] == conv["Duration (ns)"] - inside[0]["Duration (ns)"] - inside[1]["Duration (ns)"]
    assert inside[1]["Self (ns)"] == inside[1]["Duration (ns)"] - inside[2]["Duration (ns)"]
    assert conv["args"]["algo"].startswith("CUDNN_CONVOLUTION_FWD_ALGO_")
    shapes = [r["args"] for r in rows if r["Name"] == "cudnnSetTensor4dDescriptor"]
    assert [(s["dataType"], s["n"], s["c"]) for s in shapes][0] == ("CUDNN_DATA_FLOAT", "2", "3")


def test_static_runtime_is_traced_through_its_driver_calls(tmp_path):
    command = [app("sim_vector_add_static"), "2"]
    proc, trace = profile(tmp_path, command, check=False)
    plain = subprocess.run(command, env=sim_env(), capture_output=True, text=True, timeout=60)
    # The real static runtime asks the simulated driver for its private export table, which the
    # simulator does not have: its first call fails, and the error reaches the program unchanged.
    assert proc.returncode == plain.returncode == 1
    assert proc.stdout == plain.stdout
    assert "cudaErrorNotSupported" in proc.stderr and "cudaErrorNotSupported" in plain.stderr
    rows = api_trace(trace, show_internal=True)
    names = {r["Name"] for r in rows}
    assert {"cuDriverGetVersion", "cuInit", "cuGetExportTable", "cuGetProcAddress_v2"} <= names
    lookups = [r for r in rows if r["Name"] == "cuGetProcAddress_v2"]
    assert len(lookups) > 100  # every entry point the runtime uses, looked up once
    assert all(r["Depth"] == 0 and r["Domain"] == "cuda_driver" for r in rows)
    # Lookups are plumbing; the calls made through the pointers they gave out are the program's.
    assert set(api_sum(trace, show_internal=False)) == {"cuDriverGetVersion", "cuInit"}
    assert warnings(proc.stderr) == []


def test_warnings_name_what_was_not_seen_and_stay_silent_otherwise(tmp_path):
    # The static runtime with no driver to find: device code, no CUDA library, nothing recorded.
    env = sim_env()
    env.pop("LD_LIBRARY_PATH")
    proc, _ = profile(tmp_path, [app("sim_vector_add_static"), "1"], env=env, check=False, name="static")
    assert proc.returncode == 1
    # CUPTI starts only once a driver is initialised, so it was never tried: no second line about it.
    (line,) = warnings(proc.stderr)
    assert "sim_vector_add_static" in line and "static CUDA runtime" in line

    # cuBLAS loaded, selected with -t, never called: no blind spot (PyTorch loads libraries it never
    # calls), so no warning; recorder_core_test's WarningTest has the one for kernels nothing launched.
    script = [sys.executable, "-c", "import ctypes; ctypes.CDLL('libcublas.so.13')"]
    proc, _ = profile(tmp_path, script, options=["-t", "cublas"], name="loaded")
    assert warnings(proc.stderr) == [] and proc.returncode == 0
    proc, _ = profile(tmp_path, script, name="not_selected")
    assert warnings(proc.stderr) == []

    # No CUDA at all: one line, and the command's exit code.
    proc, _ = profile(tmp_path, ["sh", "-c", "exit 3"], check=False, name="none")
    assert proc.returncode == 3
    (line,) = warnings(proc.stderr)
    assert "no CUDA call was recorded" in line
