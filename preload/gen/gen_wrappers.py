#!/usr/bin/env python3
"""Generates the interposing wrappers of libcutrace-preload.so at build time.

For every library given with --library it reads:
  * the functions the installed library exports (elf_symbols.py, with pyelftools): each one gets a
    wrapper;
  * their prototypes, from the library's headers as libclang parses them with the include path, the
    defines and the system directories of the compile of the wrappers (so macros, default arguments
    and per-version #ifdefs are resolved exactly as there), plus the prototypes nvcc's host pass sees
    (crt/host_runtime.h and the __CUDACC__-only parts of crt/device_functions.h, where __cudaGetKernel
    and __cudaLaunchKernel are declared);
  * the reviewed annotations file (docs/annotations.md): what to record of each call.

and writes into --out-dir:
  api_ids.h             one id per wrapped function, one id space across all libraries
  api_table.cpp         cutrace::kApiTable / kApiTableSize (include/cutrace/api_table.h)
  real_functions.cpp    cutrace::preload::g_real_functions, kept apart so that the recorder can link the
                        table without the shim's state
  wrappers_<name>.cpp   the wrappers of one library, in the shape documented in preload/runtime.h
  coverage.json         each library's exports, which are forwarded untimed and which annotated
  api_lookup.cpp        the tables behind preload/api_lookup.h: wrappers by name, and the driver entry
                        point versions that cuGetProcAddress hands out (from cudaTypedefs.h)

Any inconsistency between the annotations and what the headers and the library really contain stops
the build with a message naming the file, the function and what to change.

Needs Python 3.11+ (tomllib), libclang's Python bindings (python3-clang-14, or the pinned `libclang`
wheel) and pyelftools (python3-pyelftools); the compiler given with --cxx only lists its include
directories.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

import cutrace_gen
from cutrace_gen import cache
from cutrace_gen.common import ARG_FORMATS, DOMAINS_FILE, PROG, GenError
from cutrace_gen.elf import exported_functions
from cutrace_gen.emit_coverage import emit_coverage
from cutrace_gen.emit_interposers import emit_mpi_wrapper, emit_mpi_wrappers, emit_osrt_wrappers
from cutrace_gen.emit_lookup import driver_versions, emit_lookup, graphics_interop_symbols
from cutrace_gen.emit_tables import emit_ids, emit_real_functions, emit_table
from cutrace_gen.emit_wrappers import emit_version_script, emit_wrappers
from cutrace_gen.headers import HeaderParser, collect_c_prototypes, defined_macros, macro_probes
from cutrace_gen.model import (Api, LibraryModel, build_library, header_declared_exports, mark_abi_changes,
                               validate_function)
from cutrace_gen.output import c_string, write_output
from cutrace_gen.schema import _IDENT_RE, load_library
from cutrace_gen.tokens import Param, Prototype, Token, render

# The generator's parts are the modules of cutrace_gen/ beside this file (its __init__.py lists them).
# What tests and tools imported from this file before the split stays importable from here.
__all__ = ["ARG_FORMATS", "Api", "GenError", "HeaderParser", "LibraryModel", "Param", "Prototype", "Token",
           "build_library", "c_string", "collect_c_prototypes", "defined_macros", "driver_versions",
           "emit_mpi_wrapper", "exported_functions", "header_declared_exports", "load_library", "macro_probes",
           "main", "render", "validate_function", "write_output"]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    ap.add_argument("--library", nargs=3, action="append", required=True, metavar=("NAME", "ANNOTATIONS", "BINARY"),
                    help="a library to wrap: a short name (it names wrappers_NAME.cpp), its annotations file and "
                         "the installed shared library whose exports are wrapped (-: none, the exports are those "
                         "its headers declare, [library] header_exports); repeat for more libraries")
    ap.add_argument("--include-dir", action="append", default=[], help="include directory of the headers")
    ap.add_argument("--library-include", nargs=2, action="append", default=[], metavar=("NAME", "DIR"),
                    help="an include directory for library NAME alone, in place of --include-dir (the headers of "
                         "another major version); repeat for more directories")
    ap.add_argument("--cxx", default=os.environ.get("CXX", "c++"),
                    help="the C++ compiler of the wrappers: its system include directories are the parser's")
    ap.add_argument("--cxx-flag", action="append", default=[], help="flag for the parser, e.g. -std=c++20")
    ap.add_argument("--out-dir", required=True, type=Path)
    ap.add_argument("--depfile", type=Path, help="write the files read, as a make rule for api_ids.h")
    ap.add_argument("--cache-dir", type=Path,
                    help="reuse the outputs of an earlier run with the same arguments whose inputs are as they "
                         "were, and leave this run's there (cutrace_gen/cache.py)")
    args = ap.parse_args(argv)
    entry = None
    if args.cache_dir:
        sources = cutrace_gen.source_files() | {os.path.abspath(__file__)}
        # Where the outputs go is no input; the compiler is known by the file it is (c++ and g++ alike).
        same_run = {k: v for k, v in vars(args).items() if k not in ("out_dir", "depfile", "cache_dir")}
        same_run["cxx"] = os.path.realpath(shutil.which(args.cxx) or args.cxx)
        entry = cache.entry_dir(args.cache_dir, same_run, sources)
        if (cached := cache.load(entry)) is not None:
            outputs, deps, summary = cached
            write_outputs(args, outputs, set(deps))
            print(summary, end="")
            return 0
    outputs, deps, summary = generate(args)
    write_outputs(args, outputs, deps)
    print(summary, end="")
    if entry is not None:
        cache.store(entry, outputs, deps, summary)
    return 0


def write_outputs(args: argparse.Namespace, outputs: dict[str, str], deps: set[str]) -> None:
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for name, text in outputs.items():
        write_output(args.out_dir / name, text)
    if args.depfile:
        target = os.path.abspath(args.out_dir / "api_ids.h")
        escape = lambda p: p.replace(" ", "\\ ")  # noqa: E731
        args.depfile.write_text(f"{escape(target)}: " + " \\\n  ".join(escape(d) for d in sorted(deps)) + "\n")


def generate(args: argparse.Namespace) -> tuple[dict[str, str], set[str], str]:
    """The outputs by file name, the files read and the summary of each library."""
    names = [lib[0] for lib in args.library]
    for name in names:
        if not _IDENT_RE.fullmatch(name):
            raise GenError(f"library name '{name}' must be an identifier (it names wrappers_{name}.cpp)")
    if len(set(names)) != len(names):
        raise GenError("each --library needs a different NAME")

    own_includes: dict[str, list[str]] = {}
    for name, directory in args.library_include:
        if name not in names:
            raise GenError(f"--library-include names '{name}', which no --library has")
        own_includes.setdefault(name, []).append(directory)
    pre = HeaderParser([args.cxx], args.include_dir, args.cxx_flag)
    preprocessors = {tuple(args.include_dir): pre}
    models: list[LibraryModel] = []
    # Plain and versioned wrappers are different symbols (cudaMalloc, cudaMalloc@libcudart.so.12): the same
    # name may be wrapped once as each.
    owner: dict[tuple[str, str], str] = {}
    apis: list[Api] = []
    for name, annotations, binary in args.library:
        spec = load_library(name, Path(annotations), None if binary == "-" else Path(binary))
        dirs = own_includes.get(name, args.include_dir)
        spec.include_dirs = dirs
        if tuple(dirs) not in preprocessors:
            preprocessors[tuple(dirs)] = HeaderParser([args.cxx], dirs, args.cxx_flag, foreign_dirs=args.include_dir)
        lib_pre = preprocessors[tuple(dirs)]
        model = build_library(spec, lib_pre)
        for a in model.apis:
            key = (a.name, f"mpi:{spec.name}" if spec.domain == "mpi" else spec.wrappers)
            if key in owner:
                raise GenError(f"{a.name} is exported by both {owner[key]} and {model.spec.soname}; a process can "
                               f"interpose only one of them, so wrap them in separate builds")
            owner[key] = model.spec.soname
            a.id = len(apis)
            apis.append(a)
        models.append(model)
    mark_abi_changes(models)

    outputs = {"api_ids.h": emit_ids(apis), "api_table.cpp": emit_table(apis),
               "real_functions.cpp": emit_real_functions(apis)}
    for model in models:
        emit = {"os_runtime": emit_osrt_wrappers, "mpi": emit_mpi_wrappers}.get(model.spec.domain, emit_wrappers)
        outputs[f"wrappers_{model.spec.name}.cpp"] = emit(model)
    has_driver = any(m.spec.domain == "cuda_driver" for m in models)
    versions = driver_versions(pre, args.include_dir) if has_driver else []
    wrapped = {a.name for a in apis}
    interop = graphics_interop_symbols(args.include_dir) if has_driver else set()
    untimed_interop = {s for s in interop if not any(v[0] == s and v[3] in wrapped for v in versions)}
    outputs["api_lookup.cpp"] = emit_lookup(apis, versions, untimed_interop)
    outputs["coverage.json"] = emit_coverage(models)
    if any(m.spec.wrappers == "versioned" for m in models):
        outputs["versioned.map"] = emit_version_script(models)
    deps = set().union(*(p.dependencies for p in preprocessors.values()))
    deps |= {os.path.abspath(a[1]) for a in args.library}
    deps |= {os.path.abspath(m.spec.annotations.parent / m.spec.extends) for m in models if m.spec.extends}
    deps |= {os.path.realpath(a[2]) for a in args.library if a[2] != "-"} | {os.path.abspath(__file__), str(DOMAINS_FILE)}
    deps |= cutrace_gen.source_files()
    summary = "".join(model.summary() + "\n" for model in models)
    return outputs, deps, summary


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except GenError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        sys.exit(1)
