# cutrace's start-up hook for `cutrace profile --pytorch` and `--python-functions-trace`
# (docs/pytorch.md). The launcher puts this directory first on PYTHONPATH, so every Python of the
# command (torchrun's children, spawned and forked workers) runs it from site.py, with no change to the
# program. It does two things and nothing else, so a program that imports none of the modules named
# runs as it would without cutrace:
#  - runs the sitecustomize this one hides (the environment's or the user's), under that name;
#  - arranges for the annotations to start once the modules they need have been imported: torch for
#    --pytorch (_cutrace_pytorch), the modules the --python-functions-trace file names
#    (_cutrace_functions).
import sys


def _cutrace_run_hidden_sitecustomize():
    import importlib.machinery
    import importlib.util
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        # This module stays as sys.modules["sitecustomize"]: the import under way reads it back, and
        # fails without it.
        return
    module = importlib.util.module_from_spec(spec)
    # Later imports of sitecustomize find the program's own, as they would without cutrace. An error
    # in it reaches site.py, which reports it as it would have.
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


class _CutraceImportHooks:
    """Finds nothing itself: when a module it has hooks for is imported, it wraps the loader the other
    finders give, so that the hooks run right after the module's own code. It leaves sys.meta_path once
    every hooked module was imported, so later imports pay nothing."""

    def __init__(self):
        self.hooks = {}  # module name -> [callable(module)]

    def add(self, name, hook):
        module = sys.modules.get(name)
        if module is not None:  # imported already (by site, or before this hook was asked for)
            hook(module)
            return
        self.hooks.setdefault(name, []).append(hook)
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def find_spec(self, name, path=None, target=None):
        hooks = self.hooks.pop(name, None)
        if hooks is None:
            return None
        if not self.hooks and self in sys.meta_path:
            sys.meta_path.remove(self)
        import importlib.util

        # The other finders', found without this one: it has no hooks left for `name`.
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader

        class _Loader:
            def create_module(self, spec):
                return loader.create_module(spec)

            def exec_module(self, module):
                loader.exec_module(module)
                # The module's own loader from here on, for whatever reads __loader__ or __spec__.loader.
                module.__loader__ = loader
                if getattr(module, "__spec__", None) is not None:
                    module.__spec__.loader = loader
                for hook in hooks:
                    hook(module)

            def __getattr__(self, attribute):
                return getattr(loader, attribute)

        spec.loader = _Loader()
        return spec

    def find_module(self, name, path=None):  # Python 3.8-3.11 callers that predate find_spec
        return None


def _cutrace_install():
    import os

    hooks = next((f for f in sys.meta_path if isinstance(f, _CutraceImportHooks)), None) or _CutraceImportHooks()
    if os.environ.get("CUTRACE_PYTORCH"):
        def start_pytorch(torch):
            import _cutrace_pytorch

            _cutrace_pytorch.start(torch)

        hooks.add("torch", start_pytorch)
    if os.environ.get("CUTRACE_PYTHON_FUNCTIONS"):
        import _cutrace_functions

        _cutrace_functions.install(hooks.add)


try:
    _cutrace_install()
finally:
    _cutrace_run_hidden_sitecustomize()
