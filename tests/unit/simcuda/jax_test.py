"""Real JAX on the simulated device: jax[cuda13] 0.10.2's CUDA plug-in (or jax[cuda12] 0.7.2's, on the
CUDA 12 libraries) starts on the simulated libraries, lists the simulated GPU, and compiles and runs a
jitted step with its gradient, an FFT and a step XLA runs as a command buffer to the end, the same with
cutrace as without; the trace holds the kernels XLA compiled, named by their fusions, and XLA's own NVTX
ranges (XlaModule, Thunk with the HLO op), which need no flag: cutrace is an NVTX tool.

The simulated libraries are preloaded, as torch_test.py does, NVML among them: XLA's plug-in enumerates
devices only through libnvidia-ml.so.1. JAX tries the CUDA plug-in only where a device node exists
(/dev/nvidia0, /dev/nvidiactl); the simulated device has none, so the script points that check at
/dev/null before importing the rest of JAX. Kernels never execute (simcuda.h), so the step's values
are not printed: only what the device and the compilation decide. Skipped (exit 77) without the
frameworks venv (scripts/check-frameworks.sh creates it).
Usage: jax_test.py cuda13|cuda12 SIMCUDA_LIB_DIR[:SIMCUDA_LIB12_DIR] CUTRACE [PYTHON]"""
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from torch_test import stats  # the same report rows as JSON, beside this file

# The simulated device has no device node: JAX's check for one is pointed at /dev/null first.
SCRIPT = ('import jax._src.hardware_utils as hardware_utils\n'
          'hardware_utils._NVIDIA_GPU_DEVICES = ["/dev/null"]\n' +
          (Path(__file__).resolve().parents[3] / "scripts/frameworks/jax_ops.py").read_text())
JAX = {"cuda13": "0.10.2", "cuda12": "0.7.2"}
EXPECTED = ("jax {version} backend gpu devices [CudaDevice(id=0)]\n"
            "step (64, 64) float32 on gpu\n"
            "fft (32, 33) complex64\n"
            "deep step (64, 64)\n")
# The simulated libraries each stack preloads: (directory index, soname). cuDNN 9, the driver and NVML
# are one library for both.
LIBRARIES = {
    "cuda13": ((0, "libcudart.so.13"), (0, "libcuda.so.1"), (0, "libcublasLt.so.13"), (0, "libcublas.so.13"),
               (0, "libcudnn.so.9"), (0, "libcupti.so.13"), (0, "libnvidia-ml.so.1"), (0, "libcufft.so.12")),
    "cuda12": ((1, "libcudart.so.12"), (0, "libcuda.so.1"), (1, "libcublasLt.so.12"), (1, "libcublas.so.12"),
               (0, "libcudnn.so.9"), (1, "libcupti.so.12"), (0, "libnvidia-ml.so.1"), (1, "libcufft.so.11")),
}


def main(stack, lib_dirs, cutrace, python=None):
    python = python or str(Path.home() / f".cache/cutrace/frameworks-{stack}/bin/python")
    if not Path(python).exists():
        print(f"skipped: no {stack} frameworks venv ({python}); scripts/check-frameworks.sh creates it")
        return 77
    dirs = lib_dirs.split(":")
    lib_dir = dirs[0]
    expected = EXPECTED.format(version=JAX[stack])
    if not (Path(lib_dir) / "libnvidia-ml.so.1").exists():
        print(f"skipped: the build made no simulated NVML ({lib_dir}/libnvidia-ml.so.1: nvml.h comes with the "
              "CUDA 13 wheels, -DCUTRACE_CUDA13_WHEELS=ON)")
        return 77
    env = dict(os.environ, LD_LIBRARY_PATH=":".join(reversed(dirs)), PYTHONWARNINGS="ignore", JAX_PLATFORMS="cuda",
               TF_CPP_MIN_LOG_LEVEL="3",
               LD_PRELOAD=" ".join(str(Path(dirs[i]) / name) for i, name in LIBRARIES[stack]))
    plain = subprocess.run([python, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    if plain.returncode != 0 or plain.stdout != expected:
        print(f"untraced: exit {plain.returncode}, expected:\n{expected}got:\n{plain.stdout}{plain.stderr[-3000:]}")
        return 1
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        trace = str(Path(tmp) / "step.cutrace")
        traced = subprocess.run([cutrace, "profile", "-o", trace, "-t", "cuda,cublas,cudnn,cufft,nvtx", "--", python, "-c",
                                 SCRIPT], env=env, capture_output=True, text=True, timeout=600)
        if (traced.returncode, traced.stdout) != (plain.returncode, plain.stdout):
            print(f"traced: exit {traced.returncode}, output:\n{traced.stdout}{traced.stderr[-3000:]}")
            return 1
        # Every CUDA library JAX loaded has its wrappers (CUDA 12's cuFFT is libcufft.so.11): no warning.
        failures += [line for line in traced.stderr.splitlines() if line.startswith("cutrace: warning:")]
        kernels = Counter()
        for row in stats(cutrace, trace, "cuda_gpu_kern_sum"):
            kernels[row["Name"]] += int(row["Instances"])
        # The step's two GEMMs (x @ w and its gradient's) are XLA's own fusions, compiled by ptxas and
        # loaded with cuModuleLoadFatBinary.
        for name in ("gemm_fusion_dot", "gemm_fusion_dot_general_2"):
            if kernels[name] == 0:
                failures.append(f"no kernel {name} ran: {dict(kernels)}")
        api = {row["Name"]: int(row["Num Calls"]) for row in stats(cutrace, trace, "cuda_api_sum")}
        if api.get("cuModuleLoadFatBinary", 0) == 0:
            failures.append("XLA's compiled kernels were never loaded (no cuModuleLoadFatBinary)")
        ranges = [row["Range"] for row in stats(cutrace, trace, "nvtx_sum")]
        for prefix in ("TSL:XlaModule:#hlo_module=jit_step,", "TSL:Thunk:#name=jit(step)"):
            if not any(r.startswith(prefix) for r in ranges):
                failures.append(f"no NVTX range {prefix}...: {len(ranges)} ranges")
        failures += attribution_failures(cutrace, trace)
        # jax.named_scope's names, with JAX's transformations around them, in the op ranges XLA opens
        # while it records the deep step's command buffer.
        for scope in ("TSL:Thunk:#name=jit(deep_step)/jvp(layer0)", "TSL:Thunk:#name=jit(deep_step)/transpose(jvp(layer1))"):
            if not any(r.startswith(scope) for r in ranges):
                failures.append(f"no op range of the named scope {scope}...")
        # jnp.fft.rfft: XLA's FFT thunk plans with cuFFT as it runs on a GPU (a plan made in steps, its
        # work area from XLA's allocator), one transform.
        fft = Counter(row["Name"] for row in stats(cutrace, trace, "api_trace") if row["Domain"] == "cufft")
        expected_fft = {"cufftGetVersion": 1, "cufftCreate": 1, "cufftSetAutoAllocation": 1, "cufftMakePlanMany64": 1,
                        "cufftSetWorkArea": 1, "cufftSetStream": 1, "cufftExecR2C": 1, "cufftDestroy": 1}
        if fft != expected_fft:
            failures.append(f"cuFFT calls {dict(fft)}, expected {expected_fft}")
        # The deep step: its graph built once (a node per kernel), each launch after its kernel nodes
        # were given that step's parameters.
        # (XLA 0.10 adds its nodes with cuGraphAddNode, 0.7 with cuGraphAddKernelNode.)
        graphs = {name: api.get(name, 0) for name in ("cuGraphInstantiateWithFlags", "cuGraphLaunch")}
        added = api.get("cuGraphAddNode_v2", 0) + api.get("cuGraphAddKernelNode_v2", 0)
        if graphs != {"cuGraphInstantiateWithFlags": 1, "cuGraphLaunch": 4} or added == 0 or \
                api.get("cuGraphExecKernelNodeSetParams_v2", 0) == 0:
            failures.append(f"the deep step's command buffer: {graphs}, {added} nodes added, "
                            f"cuGraphExecKernelNodeSetParams_v2 {api.get('cuGraphExecKernelNodeSetParams_v2')}")
    for failure in failures:
        print(failure)
    if not failures:
        print(plain.stdout, end="")
        print(f"traced alike; {sum(kernels.values())} kernels of {len(kernels)} names, {len(ranges)} NVTX ranges")
    return 1 if failures else 0


def attribution_failures(cutrace, trace):
    """Each kernel the program's thread launched is attributed to XLA's op and module through the NVTX
    projection (nvtx_kern_sum): the step's two GEMM fusions once per step under their Thunk range and
    under the jit_step module; the FFT under its own op. (This step is too small for XLA to run it as a
    command buffer, whose kernels are attributed to the command buffer's range and module only.)"""
    rows = stats(cutrace, trace, "nvtx_kern_sum")
    main = [r for r in rows if r["TID"] == r["PID"]]
    failures = []

    def instances(kernel, range_prefix, *parts):
        return sum(r["Kern Inst"] for r in main if r["Kernel Name"] == kernel and r["NVTX Range"].startswith(range_prefix)
                   and all(p in r["NVTX Range"] for p in parts))

    for kernel, op in (("gemm_fusion_dot", "hlo_op=gemm_fusion_dot#"), ("gemm_fusion_dot_general_2", "hlo_op=gemm_fusion_dot_general.2#")):
        under_op = instances(kernel, "TSL:Thunk:#name=jit(step),", op)
        under_module = instances(kernel, "TSL:XlaModule:#hlo_module=jit_step,")
        if (under_op, under_module) != (3, 3):
            failures.append(f"{kernel}: {under_op} instances under its op's range, {under_module} "
                            f"under jit_step; 3 and 3 expected: {[r for r in main if r['Kernel Name'] == kernel]}")
    if instances("cufft_regular_fft_sim", "TSL:Thunk:#name=", "/fft,hlo_op=fft") != 1:
        failures.append(f"the FFT's kernel is not under its op's range: "
                        f"{[r for r in main if r['Kernel Name'] == 'cufft_regular_fft_sim']}")
    return failures


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
