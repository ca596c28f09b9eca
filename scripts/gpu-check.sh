#!/usr/bin/env bash
# The checks of cutrace against a real GPU and driver, run on a machine that has one, from the folder
# scripts/gpu-bundle.sh made (no build there): the real-GPU end-to-end tests (the runtime, the static
# runtime, cuBLAS, CUDA 12 beside 13, backtraces, a PyTorch training step checked against PyTorch's own
# profiler, JAX with XLA's op and module names on its kernels, GPU activity from CUPTI), the bundled
# example's GPU reports, a training loop profiled with stacks, Python frames, Python and CPU samples,
# context switches and GPU activity,
# the overhead benchmarks on the real runtime and through PyTorch (with and without GPU activity),
# the CUPTI probe (its kinds, clocks and costs), and the wheel of scripts/build-wheel.sh installed into a
# virtual environment and profiling a PyTorch step there.
# Everything goes to RESULTS (default /tmp/gpu-check): log.txt, and the tests' measurements as JSON.
# GPU_CHECK_STEPS picks steps, so that a short device lease can be spent in parts: a comma-separated
# list of example, cuda13.2, activity-tests, other-tests, train, pytorch (--pytorch's ops and modules of
# each kernel), outputs (the train step's trace through SQLite, analyze, recipes, a merged timeline and
# Kineto/HTA), bench, torch-bench, probe, wheel (default: all of them).
#
# usage: [GPU_CHECK_STEPS=example,activity-tests] scripts/gpu-check.sh [BUNDLE_DIR=.gpu] [RESULTS=/tmp/gpu-check]
set -uo pipefail
cd "$(dirname "$0")/.."
bundle=$(realpath "${1:-.gpu}")
results=${2:-/tmp/gpu-check}
mkdir -p "$results"
exec > >(tee "$results/log.txt") 2>&1
step() { echo; echo "=== $* ($(date +%T))"; }
python=${PYTHON:-python3}
steps=,${GPU_CHECK_STEPS:-example,graphs,cuda13.2,activity-tests,other-tests,train,pytorch,outputs,bench,torch-bench,probe,wheel},
wanted() { [[ $steps == *,$1,* ]]; }

# Runs a command for at most LIMIT seconds. One still running then has the stacks of every thread of
# its processes printed (eu-stack, from the bundle) before it is killed: a hang on a lent GPU is
# diagnosed from the one run. Returns the command's exit code, or 124.
watched() {
  local limit=$1 waited=0
  shift
  setsid "$@" &
  local leader=$!
  while kill -0 "$leader" 2>/dev/null && (( waited < limit )); do sleep 1; waited=$((waited + 1)); done
  if kill -0 "$leader" 2>/dev/null; then
    echo "=== still running after $limit s: the stacks of its processes"
    for pid in $(pgrep -s "$leader"); do
      echo "--- pid $pid: $(tr '\0' ' ' < "/proc/$pid/cmdline" | cut -c1-200)"
      [[ -x $bundle/eu-stack ]] && timeout 30 "$bundle/eu-stack" -p "$pid" -m -b -n 40 2>&1 | cut -c1-300
    done
    kill -KILL -- -"$leader" 2>/dev/null
    wait "$leader" 2>/dev/null
    return 124
  fi
  wait "$leader"
}

step machine
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
uname -r
$python -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'

# The libraries the bundle brings that the machine may lack, where the dynamic linker looks.
for lib in "$bundle"/libs/lib{zstd.so.1,dw.so.1,elf.so.1,bz2.so.1.0,lzma.so.5,protobuf-lite.so.32}; do
  ldconfig -p | grep -q "$(basename "$lib") " || cp "$lib" /usr/local/lib/
done
ldconfig

# One folder with the real CUDA 13 libraries, wherever this machine keeps them (the toolkit, or the
# wheels beside PyTorch).
cudalib=/tmp/cutrace-cudalib
mkdir -p "$cudalib"
site=$($python -c 'import site; print(" ".join(site.getsitepackages()))')
for name in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcupti.so.13; do
  found=$(find /usr/local/cuda/lib64/ /usr/local/cuda/targets/x86_64-linux/lib/ $site -name "$name" 2>/dev/null | head -1)
  [[ -n $found ]] && ln -sf "$(realpath "$found")" "$cudalib/$name"
  echo "$name: ${found:-not found}"
done

export CUTRACE_BUILD_DIR=$bundle/build
printf 'CUTRACE_CUDA12:BOOL=ON\nCUTRACE_CUDA12_ROOT:PATH=%s\n' "$bundle/cuda12" > "$bundle/build/CMakeCache.txt"
apps=$bundle/build/tests/bin
cutrace=$bundle/build/bin/cutrace

if wanted example; then
step the bundled example on the real runtime
LD_LIBRARY_PATH=$cudalib watched 120 "$cutrace" profile -f true -o "$results/example" --stats true -- "$apps/sim_vector_add" 10
echo "exit $?"

step GPU activity of the bundled example, from the real CUPTI
for report in cuda_gpu_kern_sum cuda_gpu_mem_time_sum cuda_api_gpu_sum; do
  timeout 60 "$cutrace" stats -r $report -f csv "$results/example.cutrace" | head -12
done
timeout 60 "$cutrace" stats -r cuda_gpu_trace -f csv "$results/example.cutrace" | head -8
timeout 60 "$cutrace" stats -r cuda_kern_exec_trace -f csv "$results/example.cutrace" | head -6
timeout 60 "$cutrace" info "$results/example.cutrace" | grep -E "gpu_activity|warning"
fi

if wanted graphs; then
# Issue 32: what the real CUPTI gives for graph launches in each mode (the simulated one's rules,
# test_graphs.py): with graph, one GRAPH_TRACE row per launch and no node records; with node, every
# node with graphId/graphNodeId; and whether CUPTI took GRAPH_TRACE beside CONCURRENT_KERNEL.
for mode in graph node; do
  step "CUDA graphs, --cuda-graph-trace $mode"
  LD_LIBRARY_PATH=$cudalib watched 120 "$cutrace" profile -f true -o "$results/graphs-$mode" --cuda-graph-trace $mode \
    -- "$apps/sim_graphs" 3 | head -4
  echo "exit ${PIPESTATUS[0]}"
  timeout 60 "$cutrace" info "$results/graphs-$mode.cutrace" | grep -E "gpu_activity|warning"
  timeout 120 "$cutrace" export --type sqlite -f true -o "$results/graphs-$mode.sqlite" "$results/graphs-$mode.cutrace"
  $python - "$results/graphs-$mode.sqlite" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
for table in ("CUPTI_ACTIVITY_KIND_GRAPH_TRACE", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_MEMCPY"):
    if table not in tables:
        print(table, "absent"); continue
    cols = [c[1] for c in db.execute(f"PRAGMA table_info({table})")]
    graph = "graphId" if "graphId" in cols else "NULL"
    node = "graphNodeId" if "graphNodeId" in cols else "NULL"
    print(table, db.execute(f"SELECT COUNT(*), COUNT({graph}), COUNT(DISTINCT {node}), SUM(end - start) FROM {table}").fetchone())
PY
done
fi

if wanted cuda13.2 && [[ -f $bundle/cuda13.2/lib/libcupti.so.13 ]]; then
# PyTorch 2.15's runtime and CUPTI (13.2) on this driver, under cutrace's defaults and without it: the
# same exit code and output, and GPU activity from that CUPTI or the reason it gave. Then PyTorch as
# installed here on that runtime (its libraries find libcudart.so.13 on LD_LIBRARY_PATH first).
for command in "$apps/sim_vector_add 10" "$python -c 'import torch; x = torch.ones(1 << 20, device=\"cuda\"); print(torch.cuda.is_available(), float(x.sum()))'"; do
  step "on the CUDA 13.2 runtime and CUPTI: $command"
  LD_LIBRARY_PATH=$bundle/cuda13.2/lib:$cudalib bash -c "$command" > "$results/c132.plain" 2>&1
  echo "without cutrace: exit $?"
  LD_LIBRARY_PATH=$bundle/cuda13.2/lib:$cudalib watched 120 "$cutrace" profile -f true -o "$results/c132" -- bash -c "$command" \
    > "$results/c132.traced" 2>&1
  echo "with cutrace: exit $?"
  diff <(grep -v '^cutrace:' "$results/c132.traced") "$results/c132.plain" && echo "same output"
  grep '^cutrace' "$results/c132.traced"
  timeout 60 "$cutrace" info "$results/c132.cutrace" | grep -E "gpu_activity|CUDA runtime library|warning"
  timeout 60 "$cutrace" stats -r cuda_gpu_kern_sum -f csv "$results/c132.cutrace" | head -6
done
fi

# GPU activity's tests first: they are the ones the simulated CUPTI cannot settle.
activity="gpu_activity or pytorch_profiler"
for part in activity-tests other-tests; do
  wanted $part || continue
  step end-to-end tests on the GPU: $part
  selection=$activity
  [[ $part == other-tests ]] && selection="not ($activity)"
  (cd tests/e2e/profile && CUTRACE_GPU_TESTS=require CUDA_LIB_DIR=$cudalib CUTRACE_GPU_REPORT=$results/report \
    timeout 240 $python -m pytest -v -p no:cacheprovider -o addopts= --basetemp="$results/pytest-$part" \
    -k "$selection" test_real_gpu.py 2>&1)
  echo "exit $?"
done

if wanted train; then
step a PyTorch training loop with backtraces, Python frames, CPU samples and context switches
watched 180 "$cutrace" profile -f true -o "$results/train" -t cuda,nvtx,cublas,cudnn,osrt -s cpu \
  --cpuctxsw process-tree --cudabacktrace all:50000 --python-sampling true --cuda-memory-usage true \
  -- $python scripts/gpu/train_step.py 50
echo "exit $?"
for report in callsite_sum cpu_sample_sum cpu_ctxsw_sum python_sample_sum cuda_gpu_kern_sum cuda_api_gpu_sum; do
  timeout 60 "$cutrace" stats -r $report -f csv "$results/train.cutrace" | head -12 | cut -c1-600
done
timeout 60 "$cutrace" info "$results/train.cutrace" | grep -E "cpu_samples|python_samples|context_switches|gpu_activity|dropped|events"
fi

if wanted pytorch; then
# Issue 45: --pytorch on the GPU. The share of the step's kernels whose launch lies inside an op's
# range on its thread (through the launch's correlation id), and the module paths.
step "--pytorch autograd-shapes-nvtx,functions-trace: each kernel's op and module"
watched 180 "$cutrace" profile -f true -o "$results/pytorch" --pytorch autograd-shapes-nvtx,functions-trace \
  -- $python scripts/gpu/train_step.py 5
echo "exit $?"
timeout 60 "$cutrace" info "$results/pytorch.cutrace" | grep -A3 "PyTorch annotations"
timeout 120 "$cutrace" export --type sqlite -f true -o "$results/pytorch.sqlite" "$results/pytorch.cutrace"
$python - "$results/pytorch.sqlite" <<'PY'
import sqlite3, sys
con = sqlite3.connect(sys.argv[1])
launches = con.execute("SELECT a.globalTid, a.start FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME a "
                       "ON a.correlationId = k.correlationId").fetchall()
ranges = con.execute("SELECT globalTid, start, end, text FROM NVTX_EVENTS WHERE end IS NOT NULL AND text IS NOT NULL").fetchall()
ops = modules = 0
for tid, start in launches:
    open_ = [t for (g, b, e, t) in ranges if g == tid and b <= start < e]
    ops += any(t.startswith(("aten::", "autograd::", "Optimizer.")) for t in open_)
    modules += any(" (" in t and not t.startswith("aten::") for t in open_)
print(f"{len(launches)} kernels: {ops} inside an op, {modules} inside a module")
PY
step "torch.profiler beside cutrace: the program's profiler with its 7 kernels, the trace with all 22"
beside='import torch
x = torch.zeros(256, device="cuda")
for _ in range(10): x.add_(1.0)
torch.cuda.synchronize()
acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
with torch.profiler.profile(activities=acts) as prof:
    for _ in range(7): x.mul_(2.0)
    torch.cuda.synchronize()
print("program profiler kernels", len([e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]))
for _ in range(5): x.sub_(1.0)
torch.cuda.synchronize()'
$python -c "$beside" 2>&1 | grep -v USDT | tail -3
watched 120 "$cutrace" profile -f true -o "$results/beside" -- $python -c "$beside" 2>&1 | grep -v USDT | tail -6
timeout 60 "$cutrace" stats -q -r cuda_gpu_kern_sum:base -f csv "$results/beside.cutrace" | head -5
fi

if wanted outputs; then
# What the analysis layer makes of real GPU activity (issues 29-31): the SQLite tables against the
# reports, the rules and recipes, a two-rank timeline, and HTA where this Python has it. Needs the
# train step's trace; the Python parts need pyarrow and duckdb here, and say so when missing.
step outputs of the training trace: SQL, rules, recipes, merged timeline, Kineto for HTA
train=$results/train.cutrace
if [[ -f $train ]]; then
  timeout 300 "$cutrace" export --type sqlite -f true -o "$results/train.sqlite" "$train"; echo "exit $?"
  command -v sqlite3 >/dev/null && sqlite3 "$results/train.sqlite" \
    "SELECT 'kernels', count(*), sum(\"end\" - start) FROM CUPTI_ACTIVITY_KIND_KERNEL;
     SELECT 'copies', count(*), sum(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY;
     SELECT 'calls', count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME;
     SELECT 'samples', count(*) FROM COMPOSITE_EVENTS;
     SELECT 'gpus', id, name, smCount, computeMajor || '.' || computeMinor, uuid FROM TARGET_INFO_GPU;
     SELECT 'cuda devices', pid, cudaId, gpuId, uuid FROM TARGET_INFO_CUDA_DEVICE;"
  timeout 60 "$cutrace" stats -r cuda_gpu_kern_sum -f csv "$train" | awk -F, 'NR > 1 {n += $3; t += $2} END {print "cuda_gpu_kern_sum: kernels", n, "ns", t}'
  # The same trace twice stands for a two-rank job.
  mkdir -p "$results/job"
  cp "$train" "$results/job/rank0.cutrace"
  cp "$train" "$results/job/rank1.cutrace"
  timeout 300 "$cutrace" export --type perfetto -f true -o "$results/job.pftrace" "$results/job"/rank*.cutrace
  echo "exit $?"
  timeout 300 "$cutrace" export --type perfetto-json -f true -o "$results/job.json.gz" "$results/job"/rank*.cutrace
  echo "exit $?"
  ls -l "$results/job.pftrace" "$results/job.json.gz"
  export CUTRACE_TABLES_LIBRARY=$bundle/build/lib/libcutrace-tables.so PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
  if $python -c "import pyarrow, duckdb" 2>/dev/null; then
    timeout 300 "$cutrace" analyze "$train" | head -80; echo "exit $?"
    for recipe in cuda_gpu_kern_sum nvtx_gpu_proj_sum gpu_time_util; do
      timeout 300 "$cutrace" recipe $recipe --input "$results/job" --output "$results/recipe-$recipe" -f --mode none \
        | head -20; echo "exit $?"
    done
    timeout 300 "$cutrace" export --type kineto -f true -o "$results/kineto" "$train"; echo "exit $?"
    if $python -c "import hta" 2>/dev/null; then
      HTA_DISABLE_NS_ROUNDING=1 timeout 300 $python -c "
from hta.trace_analysis import TraceAnalysis
a = TraceAnalysis(trace_dir='$results/kineto')
print(a.get_temporal_breakdown(visualize=False))
print(a.get_gpu_kernel_breakdown(visualize=False)[0].head(10))"; echo "exit $?"
    else
      echo "holistictraceanalysis is not installed for $python: the HTA check is skipped"
    fi
  else
    echo "pyarrow or duckdb is missing for $python: analyze, recipes and kineto are skipped"
  fi
else
  echo "no $train: run the train step first"
fi
fi

if wanted bench; then
# cudaGetDevice of the real runtime asks the driver (cuCtxGetDevice, a second recorded call);
# cudaPeekAtLastError reads the thread's last error and nothing else.
for api in cudaGetDevice cudaPeekAtLastError; do
  step bench_overhead on the real runtime: $api
  CUTRACE_BENCH_APP=$apps/cheap_calls CUTRACE_BENCH_PRELOAD=$bundle/build/lib/libcutrace-preload.so \
  CUTRACE_BENCH_RECORDER=$bundle/build/bin/cutrace-recorder CUTRACE_BENCH_SIMLIB=$cudalib CUTRACE_BENCH_SIMLIB12= \
  CUTRACE_BENCH_CUTRACE=$cutrace timeout 120 "$bundle/build/bin/bench_overhead" --rounds 5 --api $api
  echo "exit $?"
done
step "what GPU activity adds to calls that give the GPU no work (issue 27: at most 5 ns)"
timeout 240 $python benchmarks/bench_gpu_activity.py --build "$bundle/build" --lib-dir "$cudalib" --rounds 5 --calls 1000000
echo "exit $?"
fi

if wanted torch-bench; then
step bench_torch
timeout 180 $python benchmarks/bench_torch.py --cutrace "$cutrace" --ops 20000 --rounds ${TORCH_ROUNDS:-5} --python "$python"
echo "exit $?"
fi

if wanted probe; then
step CUPTI probe
timeout 60 "$bundle/cupti_probe"; echo "exit $?"
step CUPTI probe with a CLOCK_MONOTONIC timestamp callback
timeout 60 "$bundle/cupti_probe" monotonic; echo "exit $?"
step CUPTI probe: what each activity kind adds to a launch and to a call
timeout 60 "$bundle/cupti_probe" costs; echo "exit $?"
fi

if wanted wheel && compgen -G "$bundle/wheel/cutrace-*.whl" >/dev/null; then
# Issue 42: the wheel, as a PyTorch user installs it (the machine reaches no index: its pyarrow is
# the system's, or the package's reading is skipped), profiles a PyTorch step on the real GPU with its
# own shim, recorder and vendored libraries.
step "the wheel in a virtual environment: a PyTorch step with GPU activity"
venv=/tmp/cutrace-wheel-venv
rm -rf "$venv"
$python -m venv --system-site-packages "$venv"
"$venv/bin/pip" install --quiet --no-index --no-deps "$bundle"/wheel/cutrace-*.whl
echo "installed: $("$venv/bin/cutrace" --version)"
step_script='import torch; x = torch.ones(1 << 20, device="cuda"); y = (x * 2).sum(); torch.cuda.synchronize(); print("sum", y.item())'
watched 300 "$venv/bin/cutrace" profile -f true -o "$results/wheel" --stats true -- "$venv/bin/python" -c "$step_script" | tail -30
echo "exit ${PIPESTATUS[0]}"
timeout 60 "$venv/bin/cutrace" info "$results/wheel.cutrace" | grep -E "gpu_activity|warning|complete"
timeout 120 "$venv/bin/python" -c 'import sys, cutrace; t = cutrace.open(sys.argv[1]); print("kernels", t.table("CUPTI_ACTIVITY_KIND_KERNEL").num_rows)' \
  "$results/wheel.cutrace" || echo "(the package could not read it here: pyarrow missing?)"
fi

step done
