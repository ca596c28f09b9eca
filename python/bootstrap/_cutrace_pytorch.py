# The annotations of `cutrace profile --pytorch MODES` (docs/pytorch.md), started by sitecustomize.py
# in each Python of the command right after torch is imported. Every range goes through torch's own
# NVTX calls, which cutrace records as it records any program's NVTX (it is the NVTX tool), so the
# trace needs nothing new to hold them:
#   autograd-nvtx         each op as torch.autograd.profiler.emit_nvtx(record_shapes=False) names it,
#                         on the importing thread and on autograd's threads for its backward ops
#   autograd-shapes-nvtx  the same with the shapes of the op's inputs (record_shapes=True)
#   functions-trace       each module's forward as its path in the model and its class
#                         ("layers.3.self_attn (MultiheadAttention)"), autograd's backward calls and
#                         optimizer steps, each with the shapes of its tensor inputs
# Whether they started, and why not, goes to the trace through the shim (cutrace_pytorch_status); the
# program's output, its exit and what its own code sees of torch stay as without cutrace.
import os
import sys
import threading

_OPS_MODES = ("autograd-nvtx", "autograd-shapes-nvtx")


def _say(code, text):
    """Tells the recorder through the shim; nothing when the shim is not in this process."""
    try:
        import ctypes

        status = ctypes.CDLL(None).cutrace_pytorch_status
    except (AttributeError, OSError):
        return
    status.argtypes = (ctypes.c_uint32, ctypes.c_char_p)
    status.restype = None
    status(code, text.encode("utf-8", "replace"))


_started = False


def start(torch):
    """Once per process: a forked child has its parent's annotations already."""
    global _started
    if _started:
        return
    _started = True
    modes = [m for m in os.environ.get("CUTRACE_PYTORCH", "").split(",") if m and m != "none"]
    version = str(getattr(torch, "__version__", "of an unknown version"))
    started = []
    try:
        ops = [m for m in modes if m in _OPS_MODES]
        if ops:
            _OpAnnotations(torch, record_shapes="autograd-shapes-nvtx" in ops).start()
            started.append(ops[-1])
        if "functions-trace" in modes:
            _FunctionsTrace(torch).start()
            started.append("functions-trace")
    except Exception as e:  # an interface this torch lacks: say so, never fail the program's import
        _say(1, f"torch {version}: {', '.join(modes)} could not start ({type(e).__name__}: {e})")
        return
    _say(0, f"torch {version}: {', '.join(started)}")


def _shapes(values):
    """[[32, 8], [], [16]]: each tensor's shape, [] for anything else, as emit_nvtx writes sizes."""
    out = []
    for v in values:
        shape = getattr(v, "shape", None)
        out.append(list(shape) if shape is not None and hasattr(v, "dim") else [])
    return str(out)


class _OpAnnotations:
    """emit_nvtx without its torch.cuda.synchronize(), which would initialise CUDA in every process that
    imports torch (a DataLoader worker forked before CUDA, a CPU-only tool): the ops' NVTX profiler is
    switched on directly. torch allows one profiler per thread, so when the program starts its own
    (torch.profiler, emit_nvtx, emit_itt) on the same thread this one steps aside until that one
    stops, and the program's profile is what it would be without cutrace."""

    def __init__(self, torch, record_shapes):
        from torch.autograd import profiler

        self.profiler = profiler
        self.autograd = torch.autograd
        self.enable_original = profiler._enable_profiler
        self.disable_original = profiler._disable_profiler
        self.config = profiler.ProfilerConfig(profiler.ProfilerState.NVTX, record_shapes, False, False, False, False,
                                              profiler._ExperimentalConfig())
        self.thread = threading.get_ident()
        self.on = False
        self.stepped_aside = 0

    def start(self):
        import atexit

        self.enable_original(self.config, set())
        self.on = True
        # Left on at exit, torch would warn of a leaked callback on stderr, which the program never does.
        atexit.register(self._stop)
        for module in (self.profiler, self.autograd):
            if getattr(module, "_enable_profiler", None) is self.enable_original:
                module._enable_profiler = self._enable
            if getattr(module, "_disable_profiler", None) is self.disable_original:
                module._disable_profiler = self._disable

    def _enable(self, *args, **kwargs):
        aside = self.on and threading.get_ident() == self.thread
        if aside:
            self.disable_original()
            self.on = False
            self.stepped_aside += 1
        try:
            return self.enable_original(*args, **kwargs)
        except BaseException:
            if aside:
                self._resume()
            raise

    def _disable(self, *args, **kwargs):
        result = self.disable_original(*args, **kwargs)
        if not self.on and threading.get_ident() == self.thread:
            self._resume()
        return result

    def _stop(self):
        if self.on and threading.get_ident() == self.thread:
            self.on = False
            try:
                self.disable_original()
            except Exception:
                pass

    def _resume(self):
        try:
            self.enable_original(self.config, set())
            self.on = True
        except Exception:  # another profiler still holds the thread: stay aside
            pass


class _FunctionsTrace:
    """Modules by their path in the model: the first time a module with no name yet runs outside any
    other, it is a model's root and every module under it is named by named_modules(); a larger model
    run later renames the parts it holds. Ranges pop in an always-called hook, so an exception in a
    forward leaves none open."""

    def __init__(self, torch):
        import weakref

        # torch.cuda.nvtx's functions of a build without CUDA raise at each call: a forward must never
        # meet that, so such a torch is refused here, once.
        from torch._C import _nvtx

        self.torch = torch
        self.push = _nvtx.rangePushA
        self.pop = _nvtx.rangePop
        self.names = weakref.WeakKeyDictionary()
        self.local = threading.local()

    def start(self):
        from torch.nn.modules import module as nn_module
        from torch.optim import optimizer

        nn_module.register_module_forward_pre_hook(self._module_enter)
        nn_module.register_module_forward_hook(self._module_exit, always_call=True)
        optimizer.register_optimizer_step_pre_hook(self._step_enter)
        optimizer.register_optimizer_step_post_hook(self._step_exit)
        backward = self.torch.autograd.backward
        push, pop = self.push, self.pop

        def traced_backward(tensors, *args, **kwargs):
            push("autograd.backward " + _shapes(tensors if isinstance(tensors, (list, tuple)) else [tensors]))
            try:
                return backward(tensors, *args, **kwargs)
            finally:
                pop()

        traced_backward.__wrapped__ = backward
        traced_backward.__name__ = backward.__name__
        traced_backward.__doc__ = backward.__doc__
        self.torch.autograd.backward = traced_backward

    def _stack(self):
        stack = getattr(self.local, "modules", None)
        if stack is None:
            stack = self.local.modules = []
        return stack

    def _name(self, module, stack):
        if stack:
            parent = stack[-1]
            prefix = self.names.get(parent, "")
            for name, child in parent.named_modules():
                if name and child not in self.names:
                    self.names[child] = f"{prefix}.{name}" if prefix else name
        else:
            for name, child in module.named_modules():
                self.names[child] = name
        return self.names.setdefault(module, "")

    def _module_enter(self, module, args):
        stack = self._stack()
        name = self.names.get(module)
        if name is None:
            name = self._name(module, stack)
        kind = type(module).__name__
        self.push(f"{name} ({kind}) {_shapes(args)}" if name else f"{kind} {_shapes(args)}")
        stack.append(module)

    def _module_exit(self, module, args, output):
        stack = self._stack()
        if stack and stack[-1] is module:
            stack.pop()
            self.pop()

    def _step_enter(self, optimizer, args, kwargs):
        self.push(f"{type(optimizer).__name__}.step")

    def _step_exit(self, optimizer, args, kwargs):
        self.pop()
