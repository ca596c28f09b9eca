"""--pytorch: PyTorch's ops and modules annotated in every Python process of the command, with no change
to it (python/bootstrap/). Without torch: the start-up hook changes nothing a program sees (its output,
its exit, its own sitecustomize and that one's errors), and a torch without the interfaces the
annotations need says why in a warning and runs on. With real torch on the simulated device (the
frameworks venv of scripts/check-frameworks.sh; skipped without it): each kernel's op and module, shapes,
DataLoader workers, autograd's threads, and the program's own torch.profiler beside the annotations."""
import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BUILD, info, profile, run_tool, sim_env

TORCH_VENV_PYTHON = Path.home() / ".cache" / "cutrace" / "frameworks-cuda13" / "bin" / "python"


def _program_output(tmp_path, script, env, options=None, python=sys.executable, args=()):
    """(exit, stdout, stderr) of the program alone: the traced run's stderr also holds cutrace's lines,
    so the program writes its stderr to a file of its own."""
    err = tmp_path / "program.stderr"
    # Kineto's lines carry the time and the pid: compared without them.
    def program_stderr():
        return re.sub(r"^USDT:\S+ \S+ \d+:\d+ ", "USDT: ", err.read_text(), flags=re.M)
    command = ["sh", "-c", f'exec "$0" "$@" 2>"{err}"', python, str(script), *args]
    if options is None:
        proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        return proc.returncode, proc.stdout, program_stderr(), None
    proc, trace = profile(tmp_path, command, env=env, options=["-f", "true", *options], check=False, timeout=300)
    return proc.returncode, proc.stdout, program_stderr(), proc


def test_a_program_without_torch_sees_nothing_of_the_hook(tmp_path):
    script = tmp_path / "plain.py"
    script.write_text("import sys\n"
                      "print('torch' in sys.modules, [m for m in sys.modules if 'cutrace' in m])\n"
                      "print('to stderr', file=sys.stderr)\n"
                      "sys.exit(3)\n")
    plain = _program_output(tmp_path, script, sim_env())
    traced = _program_output(tmp_path, script, sim_env(), ["--pytorch", "autograd-nvtx,functions-trace"])
    assert plain[:3] == (3, "False []\n", "to stderr\n")
    assert traced[:3] == plain[:3]
    assert "cutrace: warning: --pytorch autograd-nvtx,functions-trace was given, but no process of the command " \
           "imported torch" in traced[3].stderr


def test_the_programs_own_sitecustomize_runs_and_fails_as_without_cutrace(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import sys\nWHO = 'the program'\nprint('site ran', file=sys.stderr)\n")
    script = tmp_path / "who.py"
    script.write_text("import sitecustomize\nprint(sitecustomize.WHO, sitecustomize.__file__)\n")
    env = sim_env(PYTHONPATH=str(site))
    plain = _program_output(tmp_path, script, env)
    traced = _program_output(tmp_path, script, env, ["--pytorch", "functions-trace"])
    assert plain[:3] == (0, f"the program {site / 'sitecustomize.py'}\n", "site ran\n")
    assert traced[:3] == plain[:3]
    # site.py reports an exception in sitecustomize and goes on; so it does behind cutrace's.
    (site / "sitecustomize.py").write_text("WHO = 1 / 0\n")
    script.write_text("print('ran')\n")
    plain = _program_output(tmp_path, script, env)
    traced = _program_output(tmp_path, script, env, ["--pytorch", "functions-trace"])
    assert plain[0] == 0 and "ZeroDivisionError" in plain[2] and plain[1] == "ran\n"
    assert traced[:3] == plain[:3]


def _stub_torch(tmp_path):
    """A `torch` that is only a version: what an interface the annotations need looks like when missing."""
    stub = tmp_path / "stub"
    (stub / "torch").mkdir(parents=True)
    (stub / "torch" / "__init__.py").write_text("__version__ = '0.0-stub'\n")
    return stub


def test_a_torch_without_the_interfaces_says_why_in_each_process(tmp_path):
    stub = _stub_torch(tmp_path)
    script = tmp_path / "spawned.py"
    script.write_text("import multiprocessing as mp\n"
                      "def child():\n"
                      "    import torch\n"
                      "if __name__ == '__main__':\n"
                      "    import torch\n"
                      "    p = mp.get_context('spawn').Process(target=child)\n"
                      "    p.start(); p.join()\n"
                      "    print('torch', torch.__version__, p.exitcode)\n")
    env = sim_env(PYTHONPATH=str(stub))
    plain = _program_output(tmp_path, script, env)
    traced = _program_output(tmp_path, script, env, ["--pytorch", "autograd-nvtx"])
    assert plain[:3] == (0, "torch 0.0-stub 0\n", "")
    assert traced[:3] == plain[:3]
    trace = tmp_path / "trace.cutrace"
    why = "torch 0.0-stub: autograd-nvtx could not start (ModuleNotFoundError: No module named 'torch.autograd')"
    warnings = [line for line in traced[3].stderr.splitlines() if "--pytorch" in line]
    assert len(warnings) == 1, traced[3].stderr
    assert warnings[0].startswith("cutrace: warning: 2 processes (")
    assert warnings[0].endswith(f"): --pytorch's annotations did not start, so their kernels have no PyTorch op or "
                                f"module: {why}.")
    text = info(trace)
    section = text[text.index("PyTorch annotations (2):"):].split("\n\n")[0].splitlines()
    assert [line.split(None, 3)[1:] for line in section[2:]] == [["not", "started", why]] * 2


# --- real torch on the simulated device ------------------------------------------------------------

# The simulated libraries are preloaded: torch's wheel finds its nvidia-* libraries by RUNPATH, and a
# soname already loaded satisfies every later reference (tests/unit/simcuda/torch_test.py).
SIMULATED = ("libcudart.so.13", "libcuda.so.1", "libcublasLt.so.13", "libcublas.so.13", "libcudnn.so.9",
             "libcupti.so.13")

TRAIN = r"""
import sys
import torch

class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(16, 16)
        self.act = torch.nn.GELU()
    def forward(self, x):
        return self.act(self.fc(x))

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = torch.nn.Linear(8, 16)
        self.layers = torch.nn.ModuleList([Block() for _ in range(2)])
        self.out = torch.nn.Linear(16, 4)
    def forward(self, x):
        x = self.inp(x)
        for layer in self.layers:
            x = layer(x)
        return self.out(x)

class Data(torch.utils.data.Dataset):
    def __len__(self):
        return 64
    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.randn(8, generator=g), torch.randn(4, generator=g)

if __name__ == "__main__":
    torch.manual_seed(0)
    model = Net().cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(Data(), batch_size=32, num_workers=2)
    for x, y in loader:
        x, y = x.cuda(), y.cuda()
        optimizer.zero_grad()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.mse_loss(model(x).float(), y)
        loss.backward()
        optimizer.step()
    # The program's own profiler, on the thread the annotations started on: it must work as without
    # cutrace, and see the same ops. The program marks it, for the test to find.
    torch.cuda.nvtx.range_push("the program's profiler")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        model(torch.ones(2, 8, device="cuda")).sum().item()
    torch.cuda.nvtx.range_pop()
    names = sorted({e.key for e in prof.key_averages() if e.key.startswith("aten::")})
    torch.cuda.synchronize()
    print("ops seen by the program's profiler:", len(names), "addmm" in str(names))
    print("trained", tuple(model.out.weight.grad.shape))
"""


@pytest.fixture(scope="module")
def torch_env():
    if not TORCH_VENV_PYTHON.exists():
        pytest.skip(f"no frameworks venv with torch ({TORCH_VENV_PYTHON}); scripts/check-frameworks.sh creates it")
    lib = BUILD / "simcuda" / "lib"
    return sim_env(LD_PRELOAD=" ".join(str(lib / name) for name in SIMULATED), PYTHONWARNINGS="ignore")


def _kernels_and_ranges(tmp_path, trace):
    """Each kernel with the NVTX ranges open on the thread that launched it, at the launch: the
    launch is the runtime or driver call of the kernel's correlation id."""
    db = tmp_path / "trace.sqlite"
    run_tool("export", "--type", "sqlite", "-f", "true", "-o", db, trace)
    con = sqlite3.connect(db)
    launches = con.execute(
        "SELECT k.correlationId, a.globalTid, a.start FROM CUPTI_ACTIVITY_KIND_KERNEL k "
        "JOIN (SELECT correlationId, globalTid, start FROM CUPTI_ACTIVITY_KIND_RUNTIME) a "
        "ON a.correlationId = k.correlationId").fetchall()
    ranges = con.execute("SELECT globalTid, start, end, text FROM NVTX_EVENTS WHERE end IS NOT NULL "
                         "AND text IS NOT NULL").fetchall()
    kernels = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    out = []
    for _, tid, start in launches:
        out.append([text for (t, b, e, text) in ranges if t == tid and b <= start < e])
    return kernels, out


def test_real_torch_names_each_kernels_op_and_module(tmp_path, torch_env):
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    python = str(TORCH_VENV_PYTHON)
    plain = _program_output(tmp_path, script, torch_env, python=python)
    assert plain[0] == 0, plain
    assert plain[1].endswith("True\ntrained (4, 16)\n"), plain[1]
    traced = _program_output(tmp_path, script, torch_env, ["--pytorch", "autograd-shapes-nvtx,functions-trace"],
                             python=python)
    assert traced[:3] == plain[:3], traced[3].stderr[-3000:]
    assert "--pytorch" not in traced[3].stderr, traced[3].stderr
    trace = tmp_path / "trace.cutrace"
    # The main process started the annotations; its DataLoader workers, forked, have them from it.
    text = info(trace)
    section = text[text.index("PyTorch annotations (1):"):].split("\n\n")[0].splitlines()[2:]
    assert len(section) == 1 and " started  torch 2.15" in section[0], section
    assert section[0].endswith(": autograd-shapes-nvtx, functions-trace"), section
    kernels, ranges = _kernels_and_ranges(tmp_path, trace)
    assert kernels >= 40 and len(ranges) == kernels
    has_op = [any(t.startswith(("aten::", "autograd::", "Optimizer.")) for t in r) for r in ranges]
    aside = ["the program's profiler" in r for r in ranges]
    trained = [op for op, inside in zip(has_op, aside) if not inside]
    assert sum(trained) >= 0.95 * len(trained), f"{sum(trained)} of {len(trained)} kernels have an op"
    # While the program's own profiler holds the thread, the ops are its; the modules stay named.
    profiled = [r for r, inside in zip(ranges, aside) if inside]
    assert len(profiled) == 8 and not any(op for op, inside in zip(has_op, aside) if inside)
    assert sum(any(t.startswith("Net [[2, 8]]") for t in r) for r in profiled) == 6
    # Forward kernels carry their module's path and class; shapes are in the op names.
    flat = {t for r in ranges for t in r}
    assert any(t.startswith("layers.1.fc (Linear) [[32, 16]]") for t in flat), sorted(flat)[:40]
    assert any(t.startswith("aten::addmm") and "sizes = [[16], [32, 8], [8, 16]" in t for t in flat)
    # Backward kernels run on autograd's thread, under the backward op that launched them.
    assert any(t.startswith("autograd::engine::evaluate_function: AddmmBackward0") for t in flat)
    assert any(t == "AdamW.step" for t in flat)
    # nsys's projection of the ranges onto the GPU has each module's and op's GPU time.
    out = run_tool("stats", "-q", "-r", "nvtx_gpu_proj_sum", "-f", "csv", trace).stdout.splitlines()
    assert out[0].startswith("Range,Style,Total Proj Time (ns)")
    assert sum(line.startswith('":layers.1.fc (Linear) [[32, 16]]",PushPop,') for line in out) == 1, out[:20]
    # The Kineto export has the ops as torch.profiler writes them, and HTA links each to its kernels.
    run_tool("export", "--type", "kineto", "-o", tmp_path / "hta", trace)
    hta = pytest.importorskip("hta.trace_analysis")
    found = hta.TraceAnalysis(trace_dir=str(tmp_path / "hta")).get_aten_op_kernels_and_delay(ranks=[0])[0]
    assert {"aten::addmm", "aten::mm", "aten::gelu"} <= set(found["aten_op_name"]), found.to_string()


BESIDE = r"""
import torch
x = torch.zeros(256, device="cuda")
for _ in range(10):
    x.add_(1.0)
torch.cuda.synchronize()
activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
with torch.profiler.profile(activities=activities) as prof:
    for _ in range(7):
        x.mul_(2.0)
    torch.cuda.synchronize()
kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
print("the program's profiler saw", len(kernels), "kernels")
for _ in range(5):
    x.sub_(1.0)
torch.cuda.synchronize()
"""


def test_beside_torch_profiler_the_program_keeps_its_kernels_and_the_trace_has_them_all(tmp_path, torch_env):
    """torch.profiler in the script profiles 7 of its 22 kernels: its profile is what it is without
    cutrace (7 kernels), and the trace has all 22, with no warning of missing GPU activity. The shim is
    put first here (its CUPTI interposers must come before the simulated CUPTI, which the test preloads;
    PyTorch's own CUPTI, found by its RPATH, comes after the shim anyway)."""
    script = tmp_path / "beside.py"
    script.write_text(BESIDE)
    env = dict(torch_env, LD_PRELOAD=f"{BUILD / 'lib' / 'libcutrace-preload.so'} {torch_env['LD_PRELOAD']}")
    plain = _program_output(tmp_path, script, torch_env, python=str(TORCH_VENV_PYTHON))
    assert plain[:2] == (0, "the program's profiler saw 7 kernels\n"), plain
    traced = _program_output(tmp_path, script, env, ["-t", "cuda"], python=str(TORCH_VENV_PYTHON))
    assert traced[:3] == plain[:3], traced[3].stderr[-2000:]
    out = run_tool("stats", "-q", "-r", "cuda_gpu_kern_sum:base", "-f", "csv", tmp_path / "trace.cutrace").stdout
    assert sum(int(line.split(",")[2]) for line in out.splitlines()[1:]) == 22, out
    assert "GPU activity" not in traced[3].stderr, traced[3].stderr


ORACLE = r"""
import sys
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
x, y = torch.randn(32, 8).cuda(), torch.randn(32, 4).cuda()

def step():
    optimizer.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    optimizer.step()

step()
torch.cuda.synchronize()
if sys.argv[1] == "profiler":
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        step()
        torch.cuda.synchronize()
    prof.export_chrome_trace(sys.argv[2])
else:
    torch.cuda.nvtx.range_push("measured step")
    step()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
"""


def kernel_ops(path, window=None):
    """Each kernel's op, by kernel start, in a Kineto JSON: the cpu_op whose External id the kernel
    carries. With `window`, only kernels whose launch began inside the user_annotation of that name."""
    events = json.loads(Path(path).read_text())["traceEvents"]
    ops = {e["args"]["External id"]: e["name"] for e in events if e.get("cat") == "cpu_op"}
    launches = {e["args"]["correlation"]: float(e["ts"]) for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    kernels = sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: float(e["ts"]))
    if window:
        (span,) = [e for e in events if e.get("cat") == "user_annotation" and e["name"] == window]
        start, end = float(span["ts"]), float(span["ts"]) + float(span["dur"])
        kernels = [k for k in kernels if start <= launches.get(k["args"].get("correlation"), -1) <= end]
    return [(k["name"], ops.get(k["args"].get("External id"))) for k in kernels]


def test_each_kernels_op_is_the_one_torch_profiler_gives_it(tmp_path, torch_env):
    """The independent oracle: torch.profiler's own trace of a training step (on the simulated CUPTI,
    without cutrace) names each kernel's op; cutrace with --pytorch autograd-nvtx, its Kineto export,
    names the same op for each kernel of the same step, in the same order."""
    script = tmp_path / "oracle.py"
    script.write_text(ORACLE)
    python = str(TORCH_VENV_PYTHON)
    oracle_json = tmp_path / "torch_profiler.json"
    run = subprocess.run([python, str(script), "profiler", str(oracle_json)], env=torch_env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    expected = kernel_ops(oracle_json)
    assert len(expected) >= 15 and all(op for _, op in expected), expected
    traced = _program_output(tmp_path, script, torch_env, ["--pytorch", "autograd-nvtx"], python=python,
                             args=["nvtx"])
    assert traced[0] == 0, traced[3].stderr[-2000:]
    run_tool("export", "--type", "kineto", "-f", "true", "-o", tmp_path / "cutrace.json", tmp_path / "trace.cutrace")
    assert kernel_ops(tmp_path / "cutrace.json", window="measured step") == expected


FUNCTIONS_MODULE = '''
import time

def compute(n):
    return sum(range(n))

class Model:
    def step(self, n):
        return compute(n) + 1

    @staticmethod
    def helper():
        return "helper"

    @classmethod
    def build(cls):
        return cls()

def untraced():
    return 0
'''

FUNCTIONS_SCRIPT = '''
import multiprocessing as mp
import mymod

def child():
    mymod.compute(10)

if __name__ == "__main__":
    model = mymod.Model.build()
    print(model.step(100), mymod.Model.helper(), mymod.untraced(), mymod.compute.__name__)
    p = mp.get_context("spawn").Process(target=child)
    p.start(); p.join()
'''


def test_python_functions_trace_annotates_the_named_functions_in_every_process(tmp_path):
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "mymod.py").write_text(FUNCTIONS_MODULE)
    script = tmp_path / "uses.py"
    script.write_text(FUNCTIONS_SCRIPT)
    spec = tmp_path / "functions.json"
    spec.write_text(json.dumps([
        {"_comment": "as nsys's files are", "module": "mymod", "domain": "Mine", "color": "E8B795",
         "functions": ["compute", "Model.step", "Model.helper", "Model.build", "no_such_function"]},
    ]))
    env = sim_env(PYTHONPATH=str(tmp_path / "mods"))
    plain = _program_output(tmp_path, script, env)
    traced = _program_output(tmp_path, script, env, ["--python-functions-trace", str(spec)])
    assert plain[:3] == (0, "4951 helper 0 compute\n", "")
    assert traced[:3] == plain[:3]
    rows = run_tool("stats", "-q", "-r", "nvtx_sum", "-f", "csv", tmp_path / "trace.cutrace").stdout.splitlines()
    counts = {line.rsplit(",", 1)[1]: int(line.split(",")[2]) for line in rows[1:]}
    # compute once in the main process (inside Model.step, through the module's name) and once in the
    # spawned child; the name that is not in the module is skipped, as nsys skips it.
    assert counts == {"Mine:compute": 2, "Mine:Model.step": 1, "Mine:Model.helper": 1, "Mine:Model.build": 1}
    # A file that is not what nsys takes is refused before anything runs, in one sentence.
    spec.write_text('[{"module": "mymod"}]')
    proc, _ = profile(tmp_path, [sys.executable, str(script)], options=["--python-functions-trace", str(spec)],
                      check=False, name="refused")
    assert proc.returncode != 0 and proc.stdout == ""
    assert proc.stderr == (f"cutrace profile: --python-functions-trace {spec}: entry 1 (mymod) has no \"functions\" "
                           f"list.\n"), proc.stderr
