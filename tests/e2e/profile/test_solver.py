"""cuSOLVER and cuSPARSE (-t cusolver, -t cusparse) on the simulated stack: every call the program
made counted exactly, handles, shapes and types decoded, results named by their status enums, the
cuBLAS and cuSPARSE calls cuSOLVER makes nested under the cuSOLVER call, and nothing of either
library recorded unless its -t value asks for it. The real libraries, with no driver, are recorded with
the status they answer."""
import os
import subprocess
import sys

import sqlite3

from conftest import api_sum, api_trace, app, calls, counts, profile, program_calls, run_tool, sim_env

N = 128  # two column blocks of the simulated Cholesky (simcuda.h kCholeskyBlock = 64)
NNZ = 3 * N - 2




def count_by_name(rows):
    out = {}
    for r in rows:
        out[r["Name"]] = out.get(r["Name"], 0) + 1
    return out


def inside(rows, call):
    """The recorded calls made inside `call`, in order."""
    k = rows.index(call)
    end = call["Start (ns)"] + call["Duration (ns)"]
    return [r for r in rows[k + 1:] if r["Depth"] > call["Depth"] and r["Start (ns)"] <= end and r["Tid"] == call["Tid"]]


def warnings(stderr):
    return [l for l in stderr.splitlines() if l.startswith("cutrace: warning:")]


def split_by_library(expected):
    solver = {n: c for n, c in expected.items() if n.startswith("cusolver")}
    sparse = {n: c for n, c in expected.items() if n.startswith("cusparse")}
    assert len(solver) + len(sparse) == len(expected)
    return solver, sparse


def test_calls_shapes_types_and_nesting(tmp_path):
    command = [app("sim_solver"), str(N)]
    plain = subprocess.run(command, env=sim_env(), capture_output=True, text=True, timeout=60)
    proc, trace = profile(tmp_path, command, options=["-t", "cusolver,cusparse,cublas"])
    assert proc.stdout == plain.stdout and proc.returncode == plain.returncode == 0
    assert f"workspace {N * 64} {N * 64 * 8}\n" in proc.stdout
    assert warnings(proc.stderr) == []
    solver, sparse = split_by_library(program_calls(proc.stdout))
    assert solver["cusolverDnSpotrf"] == 1 and sparse["cusparseCreateDnVec"] == 2

    rows = api_trace(trace)
    # What the program called, each once, at depth 0, under its own domain.
    top = [r for r in rows if r["Depth"] == 0]
    assert count_by_name([r for r in top if r["Domain"] == "cusolver"]) == solver
    assert count_by_name([r for r in top if r["Domain"] == "cusparse"]) == sparse
    assert {r["Result"] for r in rows if r["Domain"] == "cusolver"} == {"CUSOLVER_STATUS_SUCCESS (0)"}
    assert {r["Result"] for r in rows if r["Domain"] == "cusparse"} == {"CUSPARSE_STATUS_SUCCESS (0)"}
    # cuSOLVER's own cuSPARSE calls are nested under it, and only there.
    assert [(r["Name"], r["Depth"]) for r in rows if r["Domain"] == "cusparse" and r["Depth"] > 0] == [
        ("cusparseCreate", 1), ("cusparseSetStream", 1), ("cusparseDestroy", 1)]
    for parent, child in (("cusolverSpCreate", "cusparseCreate"), ("cusolverSpSetStream", "cusparseSetStream"),
                          ("cusolverSpDestroy", "cusparseDestroy")):
        (call,) = [r for r in rows if r["Name"] == parent]
        assert [r["Name"] for r in inside(rows, call)] == [child], parent

    def one(name):
        (row,) = [r for r in rows if r["Name"] == name]
        return row

    # The dense handle: made by cusolverDnCreate (with its cuBLAS handle inside), used by every call.
    create = one("cusolverDnCreate")
    handle = create["args"]["handle"]
    assert handle.startswith("0x") and int(handle, 16) != 0
    # (Its first call also loads the driver and cuSOLVER's kernels: driver calls, left out here.)
    assert [(r["Name"], r["Depth"]) for r in inside(rows, create) if r["Domain"] != "cuda_driver"] == [
        ("cublasCreate_v2", 1), ("cublasLtCreate", 2)]
    assert [r["args"]["handle"] for r in rows if r["Name"].startswith("cusolverDn") and "handle" in r["args"]] == \
        [handle] * 7

    size = one("cusolverDnSpotrf_bufferSize")["args"]
    assert (size["uplo"], size["n"], size["lda"], size["Lwork"]) == ("CUBLAS_FILL_MODE_LOWER", str(N), str(N),
                                                                     str(N * 64))
    # Two column blocks: a kernel each, and between them one GEMM on the 64 x 64 trailing matrix
    # through cuBLAS, whose kernel is one level further down.
    potrf = one("cusolverDnSpotrf")
    assert (potrf["args"]["uplo"], potrf["args"]["n"], potrf["args"]["Lwork"]) == ("CUBLAS_FILL_MODE_LOWER", str(N),
                                                                                  str(N * 64))
    nested = inside(rows, potrf)
    assert [(r["Name"], r["Depth"]) for r in nested] == [("cuLaunchKernel", 1), ("cublasSgemm_v2", 1),
                                                         ("cuLaunchKernel", 2), ("cuLaunchKernel", 1)]
    assert [r["args"]["f"] for r in nested if r["Name"] == "cuLaunchKernel"] == [
        "cusolver_potrf_block_sim", "sgemm_sim_128x64", "cusolver_potrf_block_sim"]
    gemm = nested[1]["args"]
    assert (gemm["transa"], gemm["transb"], gemm["m"], gemm["n"], gemm["k"]) == ("CUBLAS_OP_N", "CUBLAS_OP_T", "64",
                                                                               "64", "64")
    assert potrf["Self (ns)"] == potrf["Duration (ns)"] - sum(r["Duration (ns)"] for r in nested if r["Depth"] == 1)

    # The 64-bit API: data and compute types, and the workspace the query answered.
    query = one("cusolverDnXpotrf_bufferSize")["args"]
    assert (query["uplo"], query["n"], query["dataTypeA"], query["computeType"]) == (
        "CUBLAS_FILL_MODE_UPPER", str(N), "CUDA_R_64F", "CUDA_R_64F")
    assert (query["workspaceInBytesOnDevice"], query["workspaceInBytesOnHost"]) == (str(N * 64 * 8), "0")
    xpotrf = one("cusolverDnXpotrf")
    assert (xpotrf["args"]["dataTypeA"], xpotrf["args"]["lda"], xpotrf["args"]["workspaceInBytesOnDevice"]) == (
        "CUDA_R_64F", str(N), str(N * 64 * 8))
    assert xpotrf["args"]["params"] == one("cusolverDnCreateParams")["args"]["params"]
    assert [r["Name"] for r in inside(rows, xpotrf)] == ["cuLaunchKernel", "cublasDgemm_v2", "cuLaunchKernel",
                                                         "cuLaunchKernel"]

    # cuSPARSE's generic API: the shape and types on the descriptor, the operation on the call.
    csr = one("cusparseCreateCsr")["args"]
    assert (csr["rows"], csr["cols"], csr["nnz"]) == (str(N), str(N), str(NNZ))
    assert (csr["csrRowOffsetsType"], csr["csrColIndType"], csr["idxBase"], csr["valueType"]) == (
        "CUSPARSE_INDEX_32I", "CUSPARSE_INDEX_32I", "CUSPARSE_INDEX_BASE_ZERO", "CUDA_R_32F")
    vectors = [r["args"] for r in rows if r["Name"] == "cusparseCreateDnVec"]
    assert [(v["size"], v["valueType"]) for v in vectors] == [(str(N), "CUDA_R_32F")] * 2
    spmv = one("cusparseSpMV")
    assert (spmv["args"]["opA"], spmv["args"]["computeType"], spmv["args"]["alg"]) == (
        "CUSPARSE_OPERATION_NON_TRANSPOSE", "CUDA_R_32F", "CUSPARSE_SPMV_CSR_ALG1")
    assert (spmv["args"]["matA"], spmv["args"]["vecX"], spmv["args"]["vecY"]) == (
        csr["spMatDescr"], vectors[0]["dnVecDescr"], vectors[1]["dnVecDescr"])
    (own_handle,) = [r["args"]["handle"] for r in rows if r["Name"] == "cusparseCreate" and r["Depth"] == 0]
    assert spmv["args"]["handle"] == own_handle
    assert [(r["Name"], r["args"]["f"]) for r in inside(rows, spmv)] == [("cuLaunchKernel", "cusparse_csrmv_sim")]
    assert one("cusparseSpMV_bufferSize")["args"]["bufferSize"] == str(N * 8)
    qr = one("cusolverSpScsrlsvqr")["args"]
    assert (qr["m"], qr["nnz"], qr["reorder"]) == (str(N), str(NNZ), "0")
    assert qr["descrA"] == one("cusparseCreateMatDescr")["args"]["descrA"]

    # The exports: every call of either library once, under its domain, nested ones too.
    recorded = count_by_name([r for r in rows if r["Domain"] in ("cusolver", "cusparse")])
    events, _ = calls(trace, tmp_path, domains=("cusolver", "cusparse"))
    assert counts(events) == recorded
    assert {e["cat"] for e in events if e["name"] == "cusparseCreate"} == {"cusparse"}
    run_tool("export", "--type", "sqlite", "-o", tmp_path / "solver.sqlite", trace)
    db = sqlite3.connect(tmp_path / "solver.sqlite")
    assert dict(db.execute("SELECT s.value, count(*) FROM CUTRACE_API_CALLS AS c JOIN StringIds AS s ON s.id = c.nameId "
                           "WHERE c.domain IN ('cusolver', 'cusparse') GROUP BY s.value").fetchall()) == recorded

    # No summary report of its own (nsys has none); the CUDA report counts the driver calls the
    # libraries made, as it counts cuBLAS's: 4 Cholesky blocks, 2 GEMMs, the SpMV and the QR solve.
    assert api_sum(trace, show_internal=False)["cuLaunchKernel"]["Num Calls"] == 8
    assert {n: int(r["Num Calls"]) for n, r in api_sum(trace, "cublas_api_sum").items()} == {
        "cublasCreate_v2": 1, "cublasSetStream_v2": 1, "cublasSgemm_v2": 1, "cublasDgemm_v2": 1,
        "cublasDestroy_v2": 1}


def test_each_library_only_with_its_trace_value(tmp_path):
    command = [app("sim_solver"), str(N)]
    expected = None
    for name, options, recorded in (("default", [], set()),
                                    ("solver", ["-t", "cusolver"], {"cusolver"}),
                                    ("sparse", ["-t", "cusparse"], {"cusparse"})):
        proc, trace = profile(tmp_path, command, options=options, name=name)
        expected = expected or proc.stdout
        assert proc.stdout == expected
        assert warnings(proc.stderr) == []
        rows = api_trace(trace)
        domains = {r["Domain"] for r in rows}
        assert domains & {"cusolver", "cusparse", "cublas", "cublaslt"} == recorded, name
        # CUDA is recorded with each: the kernels the libraries launched are the program's driver calls.
        assert api_sum(trace, show_internal=False)["cuLaunchKernel"]["Num Calls"] == 8, name
    solver, sparse = split_by_library(program_calls(expected))
    # -t cusparse alone: the cuSPARSE calls cuSOLVER made are not inside a recorded call, so they are at
    # depth 0 beside the program's own.
    assert count_by_name([r for r in rows if r["Domain"] == "cusparse" and r["Depth"] == 0]) == {
        n: c + (1 if n in ("cusparseCreate", "cusparseSetStream", "cusparseDestroy") else 0) for n, c in sparse.items()}

    # nsys's spellings are accepted whatever their case; the verbose variants are not recorded yet.
    proc, trace = profile(tmp_path, command, options=["-t", "CUSOLVER,cuSPARSE"], name="case")
    assert {r["Domain"] for r in api_trace(trace)} & {"cusolver", "cusparse"} == {"cusolver", "cusparse"}
    proc, _ = profile(tmp_path, command, options=["-t", "cusolver-verbose"], name="verbose", check=False)
    assert proc.returncode != 0 and proc.stdout == ""
    assert "-t cusolver-verbose is not supported yet by cutrace" in proc.stderr
    assert "cublas, cudnn, cusolver, cusparse, cufft and mpi" in proc.stderr


def test_a_loaded_library_without_calls_is_no_warning(tmp_path):
    # cuSOLVER loads cuBLAS and cuSPARSE; none is called, which is no blind spot, whatever -t selects.
    script = [sys.executable, "-c", "import ctypes; ctypes.CDLL('libcusolver.so.12')"]
    for name, options in (("loaded", ["-t", "cusolver"]), ("both", ["-t", "cusolver,cusparse"]), ("not_selected", [])):
        proc, _ = profile(tmp_path, script, options=options, name=name)
        assert warnings(proc.stderr) == [], proc.stderr


def test_the_real_libraries_are_recorded_with_their_status(tmp_path):
    # The toolkit's libcusolver.so.12 and libcusparse.so.12 with no driver: each handle's creation
    # fails, and the status the program sees is the one recorded.
    lib_dir = os.environ.get("CUDA_LIB_DIR", "/usr/local/cuda/lib64")
    script = [sys.executable, "-c",
              "import ctypes, sys\n"
              "solver = ctypes.CDLL('libcusolver.so.12'); sparse = ctypes.CDLL('libcusparse.so.12')\n"
              "h = ctypes.c_void_p()\n"
              "print(solver.cusolverDnCreate(ctypes.byref(h)), sparse.cusparseCreate(ctypes.byref(h)))\n"]
    env = dict(os.environ, LD_LIBRARY_PATH=lib_dir)
    plain = subprocess.run(script, env=env, capture_output=True, text=True, timeout=120)
    proc, trace = profile(tmp_path, script, env=env, options=["-t", "cusolver,cusparse"], check=False)
    assert proc.stdout == plain.stdout and proc.returncode == plain.returncode == 0
    solver_status, sparse_status = map(int, proc.stdout.split())
    assert solver_status != 0 and sparse_status != 0
    rows = [r for r in api_trace(trace) if r["Depth"] == 0 and r["Domain"] in ("cusolver", "cusparse")]
    assert [(r["Name"], r["Result"].split(" ")[-1]) for r in rows] == [
        ("cusolverDnCreate", f"({solver_status})"), ("cusparseCreate", f"({sparse_status})")]
    assert rows[0]["Result"].startswith("CUSOLVER_STATUS_") and rows[1]["Result"].startswith("CUSPARSE_STATUS_")


MULTI_GPU = """
import ctypes
mg = ctypes.CDLL("libcusolverMg.so.12")
handle, grid, desc = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
devices = (ctypes.c_int * 2)(0, 1)
print(mg.cusolverMgCreate(ctypes.byref(handle)),
      mg.cusolverMgCreateDeviceGrid(ctypes.byref(grid), 1, 2, devices, 0),
      mg.cusolverMgCreateMatrixDesc(ctypes.byref(desc), ctypes.c_int64(1024), ctypes.c_int64(512),
                                    ctypes.c_int64(1024), ctypes.c_int64(256), 0, grid),
      mg.cusolverMgDestroyMatrixDesc(desc), mg.cusolverMgDestroyGrid(grid))
"""


def test_the_real_multi_gpu_solver_is_recorded_under_cusolver(tmp_path):
    # cuSOLVERMg (libcusolverMg.so.12) belongs to -t cusolver: its grid and matrix descriptors are
    # host objects, so their calls succeed without a driver, with their shapes recorded; the handle's
    # creation needs the driver and fails with the status the program sees.
    lib_dir = os.environ.get("CUDA_LIB_DIR", "/usr/local/cuda/lib64")
    env = dict(os.environ, LD_LIBRARY_PATH=lib_dir)
    script = [sys.executable, "-c", MULTI_GPU]
    plain = subprocess.run(script, env=env, capture_output=True, text=True, timeout=120)
    proc, trace = profile(tmp_path, script, env=env, options=["-t", "cusolver"], check=False)
    assert proc.stdout == plain.stdout and proc.returncode == plain.returncode == 0, proc.stderr
    statuses = list(map(int, proc.stdout.split()))
    rows = [r for r in api_trace(trace) if r["Depth"] == 0 and r["Domain"] == "cusolver"]
    assert [r["Name"] for r in rows] == ["cusolverMgCreate", "cusolverMgCreateDeviceGrid", "cusolverMgCreateMatrixDesc",
                                         "cusolverMgDestroyMatrixDesc", "cusolverMgDestroyGrid"]
    assert [int(r["Result"].split("(")[-1].rstrip(")")) for r in rows] == statuses
    grid, matrix = rows[1]["args"], rows[2]["args"]
    assert (grid["numRowDevices"], grid["numColDevices"]) == ("1", "2"), grid
    assert [matrix[k] for k in ("numRows", "numCols", "rowBlockSize", "colBlockSize")] == ["1024", "512", "1024", "256"]


def test_cuda12_cusolver_loaded_locally_is_reached_not_ended(tmp_path):
    # CUDA 12's cuSOLVER is libcusolver.so.11, which cutrace has no wrappers of its own for. Loaded as
    # the dependency of a library dlopen()ed with RTLD_LOCAL (a framework's extension module), it is
    # outside the global scope, yet that library's calls bind to the shim's wrappers: they must reach
    # libcusolver.so.11 as they would without cutrace, not end the process as a missing symbol.
    library = os.path.join(os.path.dirname(app("sim_solver")), "libsolver11_user.so")
    script = [sys.executable, "-c",
              f"import ctypes; print(ctypes.CDLL({library!r}).solver11_user_run())"]
    plain = subprocess.run(script, env=sim_env(), capture_output=True, text=True, timeout=60)
    assert (plain.returncode, plain.stdout) == (0, "0\n"), plain.stderr
    for name, options in (("default", []), ("solver", ["-t", "cusolver"])):
        proc, trace = profile(tmp_path, script, options=options, name=name, check=False)
        assert (proc.returncode, proc.stdout) == (0, "0\n"), proc.stderr
        assert "symbol lookup error" not in proc.stderr
    # Reached through the wrappers, whose prototypes are CUDA 13's, the calls are recorded under them,
    # as the warning about that version says.
    (line,) = [w for w in warnings(proc.stderr) if "libcusolver.so.11" in w]
    assert "no wrappers of its own for: its calls were recorded only where they reached another version's" in line
    top = [r for r in api_trace(trace) if r["Domain"] == "cusolver"]
    assert [(r["Name"], r["Depth"], r["Result"]) for r in top] == [
        ("cusolverDnCreate", 0, "CUSOLVER_STATUS_SUCCESS (0)"), ("cusolverDnDestroy", 0, "CUSOLVER_STATUS_SUCCESS (0)")]
