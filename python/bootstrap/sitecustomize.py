# cutrace's start-up hook for `cutrace profile --pytorch` (docs/pytorch.md). The launcher puts this
# directory first on PYTHONPATH, so every Python of the command (torchrun's children, spawned and
# forked workers) runs it from site.py, with no change to the program. It does two things and nothing
# else, so a program that never imports torch runs as it would without cutrace:
#  - runs the sitecustomize this one hides (the environment's or the user's), under that name;
#  - arranges for _cutrace_pytorch to switch on the annotations once torch has been imported.
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


class _CutraceTorchFinder:
    """Finds nothing itself: when `torch` is imported, it wraps the loader the other finders give, so
    that the annotations start right after torch's own __init__ has run. It leaves sys.meta_path at
    that point, so later imports pay nothing."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader

        class _Loader:
            def create_module(self, spec):
                return loader.create_module(spec)

            def exec_module(self, module):
                loader.exec_module(module)
                # torch's own loader from here on, for whatever reads __loader__ or __spec__.loader.
                module.__loader__ = loader
                if getattr(module, "__spec__", None) is not None:
                    module.__spec__.loader = loader
                import _cutrace_pytorch

                _cutrace_pytorch.start(module)

            def __getattr__(self, attribute):
                return getattr(loader, attribute)

        spec.loader = _Loader()
        return spec

    def find_module(self, name, path=None):  # Python 3.8-3.11 callers that predate find_spec
        return None


def _cutrace_install():
    import os

    if not os.environ.get("CUTRACE_PYTORCH"):
        return
    torch = sys.modules.get("torch")
    if torch is not None:  # imported before site (a .pth file that imports it)
        import _cutrace_pytorch

        _cutrace_pytorch.start(torch)
    elif not any(isinstance(finder, _CutraceTorchFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _CutraceTorchFinder())


try:
    _cutrace_install()
finally:
    _cutrace_run_hidden_sitecustomize()
