"""The `cutrace` command of a pip-installed cutrace: runs the native program the package carries
(cutrace/_native/bin/cutrace) in place of this process. It is a module of its own, outside the
`cutrace` package, so that starting it imports nothing but os and sys."""
import os
import sys


def main():
    native = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cutrace", "_native", "bin", "cutrace")
    # The commands that hand over to the package (export to Parquet, recipe, analyze, view) run it with
    # this interpreter, whose environment has the package; the launcher keeps the variable out of the
    # profiled program's environment.
    os.environ["CUTRACE_PACKAGE_PYTHON"] = sys.executable
    try:
        os.execv(native, [sys.argv[0], *sys.argv[1:]])
    except OSError as e:
        print(f"cutrace: cannot run {native} ({e.strerror}); reinstall cutrace into this environment "
              f"(pip install --force-reinstall cutrace-*.whl).", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main())
