"""Slow cudaMemcpy calls from Python code of every shape, for test_python_frames.py: each call's line
of the script and the functions around it must be in its trace's python_stack, whether the thread held
the GIL or not. Before each call the script takes its own stack from CPython (sys._getframe, the
names and lines a traceback shows; co_qualname from 3.11), and prints it with the thread's id as one
JSON line per call: {"tid": ..., "route": ..., "expected": ["function (file:line)", ...]}.

usage: frames.py SCENARIO [ARG]
  routes      one call per route: the C extension releasing the GIL, ctypes.CDLL, ctypes.PyDLL
  shapes      generators, async code, comprehensions, a class's __init__, lambdas, exec'd code,
              non-ASCII names and files, recursion ARG deep (default 900)
  threads     ARG threads (default 4) making slow calls while two others run pure Python
  traced      the routes under sys.settrace (coverage's and debuggers' way), then, on 3.12+, under
              sys.monitoring with line events
  daemon      2 daemon threads in slow calls, over and over, while the main thread exits after ARG ms
              (default 50): the interpreter finalises with them inside the call
  churn       ARG slow calls per thread from 4 threads while 3 others create and drop functions,
              code objects, frames, generators and modules as fast as they can, with gc.collect()
The simulated device makes a copy slow (SIMCUDA_COPY_GBPS); `releasing` must be importable."""
import asyncio
import ctypes
import gc
import json
import os
import sys
import threading
import types

import releasing

BYTES = 1 << 20
LIB_CDLL = ctypes.CDLL("libcudart.so.13")
LIB_PYDLL = ctypes.PyDLL("libcudart.so.13")
MEMCPY = ctypes.cast(LIB_CDLL.cudaMemcpy, ctypes.c_void_p).value
PRINT = threading.Lock()
HOST = ctypes.create_string_buffer(BYTES)
DEVICE = ctypes.c_void_p()
assert LIB_PYDLL.cudaMalloc(ctypes.byref(DEVICE), ctypes.c_size_t(BYTES)) == 0


def stack_here():
    """The caller's stack as the trace should name it: innermost first, at the caller's line."""
    frames, frame = [], sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        name = getattr(code, "co_qualname", code.co_name)
        frames.append(f"{name} ({os.path.basename(code.co_filename)}:{frame.f_lineno})")
        frame = frame.f_back
    return frames


def say(route, expected):
    with PRINT:
        print(json.dumps({"tid": threading.get_native_id(), "route": route, "expected": expected}), flush=True)


def copy_releasing():
    say("extension", stack_here()); r = releasing.memcpy(MEMCPY, DEVICE.value, ctypes.addressof(HOST), BYTES, 1)
    assert r == 0, r


def copy_cdll():
    say("cdll", stack_here()); r = LIB_CDLL.cudaMemcpy(DEVICE, HOST, ctypes.c_size_t(BYTES), 1)
    assert r == 0, r


def copy_pydll():
    say("pydll", stack_here()); r = LIB_PYDLL.cudaMemcpy(DEVICE, HOST, ctypes.c_size_t(BYTES), 1)
    assert r == 0, r


def routes():
    for copy in (copy_releasing, copy_cdll, copy_pydll):
        copy()


# --- shapes ---

def generator(n):
    for _ in range(n):
        copy_releasing()
        yield


async def leaf():
    copy_releasing()
    await asyncio.sleep(0)


async def middle():
    await leaf()


class Model:
    def __init__(self):
        copy_releasing()

    def forward(self):
        return [copy_releasing() for _ in range(1)]


def données_имя_𠀀():
    copy_releasing()


def recurse(n):
    if n == 0:
        copy_releasing()
        return
    recurse(n - 1)


def shapes(depth):
    for _ in generator(2):
        pass
    asyncio.run(middle())
    Model().forward()
    (lambda: copy_releasing())()
    exec(compile("def from_exec():\n    copy_releasing()\nfrom_exec()\n", "ünï_𠀀.py", "exec"), globals())
    données_имя_𠀀()
    sys.setrecursionlimit(depth + 200)
    recurse(depth)


# --- tracing ---

def traced():
    def tracer(frame, event, arg):
        return tracer
    sys.settrace(tracer)
    routes()
    sys.settrace(None)
    if hasattr(sys, "monitoring"):
        tool = sys.monitoring.DEBUGGER_ID
        sys.monitoring.use_tool_id(tool, "frames.py")
        sys.monitoring.register_callback(tool, sys.monitoring.events.LINE, lambda code, line: None)
        sys.monitoring.set_events(tool, sys.monitoring.events.LINE)
        routes()
        sys.monitoring.set_events(tool, 0)
        sys.monitoring.free_tool_id(tool)


# --- threads ---

def spin(stop):
    def leaf(x):
        return x * 2
    while not stop.is_set():
        sum(leaf(i) for i in range(100))


def worker(calls, index):
    def deep(n):
        if n == 0:
            for _ in range(calls):
                (copy_releasing if index % 2 else copy_cdll)()
            return
        deep(n - 1)
    deep(index)


def churn_forever(stop, seed):
    n = seed
    while not stop.is_set():
        n += 1
        namespace = {}
        exec(compile(f"def f_{n}(k):\n    return k if k == 0 else f_{n}(k - 1)\n", f"churn_{n}.py", "exec"), namespace)
        namespace[f"f_{n}"](20)
        module = types.ModuleType(f"churned_{n}")
        exec(compile(f"x = [i for i in range({n % 50})]\ndef g():\n    yield from x\n", f"mod_{n}.py", "exec"),
             module.__dict__)
        sum(module.g())
        del namespace, module
        if n % 50 == 0:
            gc.collect()


def threads(count, calls, background):
    stop = threading.Event()
    others = [threading.Thread(target=background, args=(stop, i * 100000) if background is churn_forever else (stop,))
              for i in range(3 if background is churn_forever else 2)]
    for t in others:
        t.start()
    workers = [threading.Thread(target=worker, args=(calls, i), name=f"worker-{i}") for i in range(count)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    stop.set()
    for t in others:
        t.join()


scenario = sys.argv[1]
arg = int(sys.argv[2]) if len(sys.argv) > 2 else None
if scenario == "routes":
    routes()
elif scenario == "shapes":
    shapes(arg or 900)
elif scenario == "traced":
    traced()
elif scenario == "threads":
    threads(arg or 4, 3, spin)
elif scenario == "daemon":
    def forever():
        while True:
            copy_releasing()
    for _ in range(2):
        threading.Thread(target=forever, daemon=True).start()
    threading.Event().wait((arg or 50) / 1000)
    with PRINT:
        print(json.dumps({"exit": True}), flush=True)
elif scenario == "churn":
    threads(4, arg or 25, churn_forever)
else:
    sys.exit(f"unknown scenario {scenario}")
