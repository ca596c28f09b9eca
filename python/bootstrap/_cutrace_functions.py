# `cutrace profile --python-functions-trace FILE` (docs/pytorch.md): each function the file names
# becomes an NVTX range, in every Python process of the command, once its module is imported. The
# file has nsys's format, which the launcher checked before the program started:
#   [{"module": "torch.amp", "functions": ["GradScaler.step", "GradScaler.update"],
#     "domain": "PyTorch", "color": "E8B795"}, ...]
# ("domain" and "color" optional; a function is a name in the module, or a dotted path through its
# classes and submodules). The ranges go to the shim through ctypes (cutrace_nvtx_push/pop), so the
# program's Python needs no NVTX package. A name the module lacks is skipped, as nsys skips it.
import functools
import json
import os

# nsys's files name colours by word or by six hex digits.
_COLORS = {"black": 0x000000, "white": 0xFFFFFF, "red": 0xFF0000, "green": 0x00FF00, "blue": 0x0000FF,
           "yellow": 0xFFFF00, "cyan": 0x00FFFF, "magenta": 0xFF00FF, "orange": 0xFFA500, "purple": 0x800080,
           "gray": 0x808080, "grey": 0x808080, "brown": 0xA52A2A, "pink": 0xFFC0CB}


def _argb(color):
    if not isinstance(color, str) or not color:
        return None
    text = color.lower().lstrip("#")
    if text in _COLORS:
        return 0xFF000000 | _COLORS[text]
    try:
        value = int(text, 16)
    except ValueError:
        return None
    return value if len(text) == 8 else 0xFF000000 | (value & 0xFFFFFF)


def _shim():
    import ctypes

    try:
        lib = ctypes.CDLL(None)
        push, pop, domain = lib.cutrace_nvtx_push, lib.cutrace_nvtx_pop, lib.cutrace_nvtx_domain
    except (AttributeError, OSError):
        return None
    domain.argtypes, domain.restype = (ctypes.c_char_p,), ctypes.c_void_p
    push.argtypes, push.restype = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint32, ctypes.c_int), ctypes.c_int
    pop.argtypes, pop.restype = (ctypes.c_void_p,), ctypes.c_int
    return push, pop, domain


def _wrap(function, name, push, pop, domain, argb):
    message = name.encode("utf-8", "replace")
    color, has_color = (argb or 0), int(argb is not None)

    @functools.wraps(function)
    def traced(*args, **kwargs):
        push(domain, message, color, has_color)
        try:
            return function(*args, **kwargs)
        finally:
            pop(domain)

    traced.__cutrace_traced__ = True
    return traced


def _trace(module, path, push, pop, domain, argb):
    """Replaces the function at `path` in `module` by one inside a range; staticmethods and
    classmethods stay what they are."""
    parts = path.split(".")
    owner = module
    for part in parts[:-1]:
        owner = getattr(owner, part, None)
        if owner is None:
            return
    name = parts[-1]
    raw = vars(owner).get(name) if hasattr(owner, "__dict__") else None
    if raw is None:
        raw = getattr(owner, name, None)
    if raw is None:
        return
    if isinstance(raw, (staticmethod, classmethod)):
        inner = raw.__func__
        if getattr(inner, "__cutrace_traced__", False):
            return
        setattr(owner, name, type(raw)(_wrap(inner, path, push, pop, domain, argb)))
    elif callable(raw) and not getattr(raw, "__cutrace_traced__", False):
        setattr(owner, name, _wrap(raw, path, push, pop, domain, argb))


def install(add_hook):
    """Registers, for each module the file names, the hook that traces its functions once imported."""
    shim = _shim()
    if shim is None:
        return
    push, pop, create_domain = shim
    with open(os.environ["CUTRACE_PYTHON_FUNCTIONS"], encoding="utf-8") as f:
        entries = json.load(f)
    domains = {}
    for entry in entries:
        name = entry.get("domain") or ""
        if name not in domains:
            domains[name] = create_domain(name.encode("utf-8")) if name else None
        domain, argb = domains[name], _argb(entry.get("color"))
        functions = list(entry["functions"])

        def hook(module, functions=functions, domain=domain, argb=argb):
            for path in functions:
                _trace(module, path, push, pop, domain, argb)

        add_hook(entry["module"], hook)
