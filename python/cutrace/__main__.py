"""`python3 -m cutrace export ...`: the exports the package writes (cutrace export runs it for them);
`python3 -m cutrace recipe ...`: the recipes over many traces (cutrace recipe runs it);
`python3 -m cutrace analyze ...`: the expert-system rules (cutrace analyze runs it);
`python3 -m cutrace view ...`: a trace opened in the Perfetto UI (cutrace view runs it)."""
import sys


def main(argv):
    if len(argv) >= 1 and argv[0] == "export":
        import cutrace
        if cutrace.pa is None:
            print(f"cutrace export: this export needs the Python package pyarrow, which {sys.executable} cannot "
                  f"import ({cutrace._PYARROW_ERROR}); pip install pyarrow, or pip install . from a cutrace checkout.",
                  file=sys.stderr)
            return 1
        from .export import main as export_main
        return export_main(argv[1:])
    if len(argv) >= 1 and argv[0] == "recipe":
        import cutrace
        if cutrace.pa is None:
            print(f"cutrace recipe: recipes need the Python package pyarrow, which {sys.executable} cannot import "
                  f"({cutrace._PYARROW_ERROR}); pip install 'cutrace[recipes]'.", file=sys.stderr)
            return 1
        try:
            import duckdb  # noqa: F401
        except ImportError as e:
            print(f"cutrace recipe: recipes need the Python package duckdb, which {sys.executable} cannot import "
                  f"({e}); pip install 'cutrace[recipes]'.", file=sys.stderr)
            return 1
        from .recipes.cli import main as recipe_main
        return recipe_main(argv[1:])
    if len(argv) >= 1 and argv[0] == "analyze":
        import cutrace
        missing = None
        if cutrace.pa is None:
            missing = ("pyarrow", cutrace._PYARROW_ERROR)
        else:
            try:
                import duckdb  # noqa: F401
            except ImportError as e:
                missing = ("duckdb", e)
        if missing:
            print(f"cutrace analyze: the rules need the Python package {missing[0]}, which {sys.executable} cannot "
                  f"import ({missing[1]}); pip install 'cutrace[recipes]'.", file=sys.stderr)
            return 1
        from .analyze import main as analyze_main
        return analyze_main(argv[1:])
    if len(argv) >= 1 and argv[0] == "view":
        from .view import main as view_main
        return view_main(argv[1:])
    print("usage: python3 -m cutrace view [options] TRACE|DIR|EXPORT", file=sys.stderr)
    print("usage: python3 -m cutrace analyze [-r RULE[,RULE...]] [options] TRACE|DIR...", file=sys.stderr)
    print("usage: python3 -m cutrace recipe NAME --input DIR|FILE... [options]", file=sys.stderr)
    print("usage: python3 -m cutrace export --type parquetdir|arrowdir|arrow [options] FILE.cutrace", file=sys.stderr)
    return 2


sys.exit(main(sys.argv[1:]))
