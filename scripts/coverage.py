#!/usr/bin/env python3
"""Compares every function the installed CUDA libraries export with what the built shim wraps.

The exports are read from the installed libraries themselves (pyelftools, through the generator's ELF
reader preload/gen/elf_symbols.py), independently of the generator's output; the shim's exports from
the built libcutrace-preload.so. coverage.json (written by the
generator next to the wrappers) says which wrapped functions are forwarded untimed for want of a
prototype. cuDNN's parts (libcudnn_ops.so.9, ...) are compared too: libcudnn.so.9 must export every
public function they have.

  scripts/coverage.py --build build --check      exit 1 when an installed export is not wrapped
  scripts/coverage.py --build build --write docs/coverage.md

Needs pyelftools (python3-pyelftools), as the generator does.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

PROG = "coverage"

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "preload" / "gen"))
try:
    import elf_symbols  # noqa: E402  (the one Python ELF reader: exports and sonames)
except ImportError as e:
    sys.exit(f"{PROG}: error: {e}")

# Exports of cuDNN's parts that no header declares and libcudnn.so.9 does not re-export: the parts'
# own plumbing (engine registration, logging helpers, 9.28's NVRTC handle), never called by programs.
CUDNN_PART_INTERNALS_PREFIXES = ("dummy", "register", "__nvrtc")


def exported_functions(binary: Path, version: str | None = None) -> set[str]:
    """The functions `binary` exports; with `version`, only those defined under that symbol version."""
    try:
        exports = elf_symbols.exported_functions(binary)
    except (elf_symbols.ElfReadError, OSError) as e:
        raise SystemExit(f"{PROG}: error: cannot read the exports of {binary}: {e}") from None
    return {name for name, versions in exports.items() if version is None or version in versions}


def wrapped_names(lib: dict, shim_exports: set[str], versioned_lib: Path) -> set[str]:
    if lib.get("wrappers") == "versioned":
        return exported_functions(versioned_lib, lib["symbol_version"])
    return shim_exports


def soname_stem(soname: str) -> str:
    """libcudart.so.13 -> libcudart.so: the library whatever its major version."""
    return re.sub(r"(\.so)(\.\d+)*$", r"\1", soname)


def compare_libraries(args, libraries: list[dict], shim_exports: set[str], versioned_lib: Path) -> int:
    """Every CUDA library under args.libraries (the wheels a framework installed, say) whose soname this
    build wraps: its exported functions that have no wrapper, whose calls cutrace would not record.
    A newer minor version than the one cutrace was built from exports functions the build never saw."""
    wrapped = {lib["library"]: lib for lib in libraries}
    families = {soname_stem(s) for s in wrapped}
    unwrapped_total = 0
    for path in sorted(args.libraries.rglob("lib*.so*")):
        if path.is_symlink() or not path.is_file():
            continue
        try:
            soname = elf_symbols.soname(path)
        except (elf_symbols.ElfReadError, OSError):
            continue
        if soname is None:
            continue
        if soname not in wrapped:
            if soname_stem(soname) in families:
                print(f"{path}: {soname}: this build wraps no library of that major version; none of its calls "
                      f"would be recorded")
                unwrapped_total += 1
            continue
        installed = exported_functions(path)
        missing = sorted(installed - wrapped_names(wrapped[soname], shim_exports, versioned_lib))
        unwrapped_total += len(missing)
        print(f"{path}: {soname}: {len(installed)} exported functions, {len(installed) - len(missing)} wrapped"
              + (f", NOT wrapped ({len(missing)}): {' '.join(missing)}" if missing else ""))
    return 1 if unwrapped_total else 0


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", type=Path, required=True, help="the build directory")
    ap.add_argument("--check", action="store_true", help="fail when an installed export is not wrapped")
    ap.add_argument("--write", type=Path, help="write the coverage report (Markdown) here")
    ap.add_argument("--libraries", type=Path, metavar="DIR",
                    help="instead: compare the CUDA libraries found under DIR (a framework's wheels) with what "
                         "this build wraps, and list each function without a wrapper; exit 1 when there is one")
    args = ap.parse_args(argv)

    coverage_json = args.build / "preload" / "generated" / "coverage.json"
    shim = args.build / "lib" / "libcutrace-preload.so"
    for path in (coverage_json, shim):
        if not path.exists():
            print(f"{PROG}: error: {path} does not exist; build cutrace first", file=sys.stderr)
            return 2
    libraries = json.loads(coverage_json.read_text())
    shim_exports = exported_functions(shim)
    # The OS runtime wraps a chosen list of libc functions, in a library of its own (-t osrt): each
    # listed function must be exported there; libc's other exports are none of cutrace's business.
    osrt_libraries = [lib for lib in libraries if lib["domain"] == "os_runtime"]
    # MPI likewise: a chosen list per implementation, in libcutrace-mpi-<name>.so (-t mpi).
    mpi_libraries = [lib for lib in libraries if lib["domain"] == "mpi"]
    libraries = [lib for lib in libraries if lib["domain"] not in ("os_runtime", "mpi")]
    osrt_missing = []
    osrt_lib = args.build / "lib" / "libcutrace-osrt.so"
    if osrt_libraries:
        if not osrt_lib.exists():
            print(f"{PROG}: error: {osrt_lib} does not exist; build cutrace first", file=sys.stderr)
            return 2
        osrt_exports = exported_functions(osrt_lib)
        for lib in osrt_libraries:
            osrt_missing += [f"{lib['library']}: {n} (listed for -t osrt)" for n in lib["exports"]
                             if n not in osrt_exports]

    for lib in mpi_libraries:
        mpi_lib = args.build / "lib" / f"libcutrace-mpi-{lib['name']}.so"
        if not mpi_lib.exists():
            print(f"{PROG}: error: {mpi_lib} does not exist; build cutrace first", file=sys.stderr)
            return 2
        mpi_exports = exported_functions(mpi_lib)
        osrt_missing += [f"{lib['library']}: {n} (listed for -t mpi)" for n in lib["exports"] if n not in mpi_exports]

    # Another major version's wrappers (CUDA 12) are exported by libcutrace-cuda12.so under that
    # library's own symbol version.
    versioned_lib = args.build / "lib" / "libcutrace-cuda12.so"
    if any(lib.get("wrappers") == "versioned" for lib in libraries) and not versioned_lib.exists():
        print(f"{PROG}: error: {versioned_lib} does not exist; build cutrace first", file=sys.stderr)
        return 2

    if args.libraries:
        return compare_libraries(args, libraries, shim_exports, versioned_lib)

    rows = []
    missing_total = []
    for lib in libraries:
        binary = Path(lib["binary"])
        installed = exported_functions(binary)
        if lib.get("wrappers") == "versioned":
            wrapped = installed & exported_functions(versioned_lib, lib["symbol_version"])
        else:
            wrapped = installed & shim_exports
        missing = sorted(installed - wrapped)
        missing_total += [f"{lib['library']}: {m}" for m in missing]
        untimed = sorted(set(lib["untimed"]) & wrapped)
        rows.append((lib, binary, len(installed), len(wrapped), len(wrapped) - len(untimed), untimed, missing))

    # cuDNN's parts: programs reach them only through libcudnn.so.9, which must re-export their API.
    parts = []
    cudnn = next((r for r in rows if r[0]["library"] == "libcudnn.so.9"), None)
    if cudnn is not None:
        main_exports = exported_functions(cudnn[1])
        for part in sorted(cudnn[1].parent.glob("libcudnn_*.so.9")):
            own = {n for n in exported_functions(part) if not n.startswith("_Z")}
            not_reexported = sorted(own - main_exports)
            public = [n for n in not_reexported if n.startswith("cudnn")]
            plumbing = [n for n in not_reexported if not n.startswith("cudnn")]
            parts.append((part.name, len(own), len(own) - len(not_reexported), public, plumbing))

    if args.check:
        for m in missing_total + osrt_missing:
            print(f"{PROG}: not wrapped: {m}", file=sys.stderr)
        bad_plumbing = [(p, n) for p, _, _, _, plumbing in parts for n in plumbing
                        if not n.startswith(CUDNN_PART_INTERNALS_PREFIXES)]
        for p, n in bad_plumbing:
            print(f"{PROG}: {p} exports {n}, which libcudnn.so.9 does not re-export; decide whether it needs "
                  f"a wrapper", file=sys.stderr)
        for lib, binary, n_installed, n_wrapped, n_timed, untimed, missing in rows:
            print(f"{PROG}: {lib['library']}: {n_installed} exports, {n_wrapped} wrapped, {n_timed} timed")
        for lib in osrt_libraries:
            print(f"{PROG}: {lib['library']} (-t osrt): {len(lib['exports'])} functions listed and wrapped")
        for lib in mpi_libraries:
            print(f"{PROG}: {lib['library']} (-t mpi): {len(lib['exports'])} functions listed and wrapped")
        if missing_total or bad_plumbing or osrt_missing:
            return 1

    if args.write:
        out = ["# Coverage: the exports of the installed CUDA libraries and what cutrace does with them\n\n",
               "Written by `scripts/coverage.py --build build --write docs/coverage.md` from the libraries "
               "installed on the machine that built it (the exports are read with pyelftools, independently "
               "of the generator's output). The test `coverage.every_export_wrapped` fails when an installed export has no "
               "wrapper.\n\n",
               "- **wrapped**: the shim exports a function of that name, so every route "
               "(PLT, `dlsym`, `cuGetProcAddress`, redirected imports) reaches it.\n",
               "- **timed**: its wrapper times the call and writes a record (with the annotated arguments).\n",
               "- **untimed**: no header declares it, so its arguments are unknown; it is forwarded by a jump "
               "that leaves every register as the caller set it, and no record is written.\n\n",
               "| library | exports | wrapped | timed | untimed | annotated |\n",
               "|---|---:|---:|---:|---:|---:|\n"]
        for lib, binary, n_installed, n_wrapped, n_timed, untimed, missing in rows:
            out.append(f"| `{lib['library']}` | {n_installed} | {n_wrapped} | {n_timed} | {len(untimed)} | "
                       f"{len(lib['annotated'])} |\n")
        for lib in osrt_libraries:
            out.append(f"\n`-t osrt` wraps {len(lib['exports'])} functions of `{lib['library']}` "
                       f"(`preload/annotations/osrt.toml`, in `libcutrace-osrt.so`): "
                       + ", ".join(f"`{n}`" for n in lib["exports"]) + ".\n")
        for lib in mpi_libraries:
            out.append(f"\n`-t mpi --mpi-impl {lib['name']}` wraps {len(lib['exports'])} functions of `{lib['library']}` "
                       f"(`preload/annotations/{'mpi' if lib['name'] == 'openmpi' else lib['name']}.toml`, in "
                       f"`libcutrace-mpi-{lib['name']}.so`, each calling its `PMPI_` twin): "
                       + ", ".join(f"`{n}`" for n in lib["exports"]) + ".\n")
        out.append("\nThe driver's exports are read from the toolkit's stub (`lib64/stubs/libcuda.so`), which "
                   "carries the same symbols as the driver that comes with the GPU's kernel module. The other `.so.13` "
                   "libraries and `libcudnn.so.9`, with their headers, come from the newest CUDA 13 wheels "
                   "(`scripts/cuda13-wheels.txt`; the toolkit's own with `-DCUTRACE_CUDA13_WHEELS=OFF`). "
                   "So do `libcusolver.so.12`, `libcusolverMg.so.12`, `libcusparse.so.12` and `libcufft.so.12` (CUDA 13's, whatever "
                   "their sonames say); their wrappers are plain, as the CUDA 13 ones. The other "
                   "`.so.12` libraries come from the pinned CUDA 12 wheels (`scripts/cuda12-wheels.txt`); their "
                   "wrappers are `libcutrace-cuda12.so`'s, exported under each library's own symbol version.\n")
        for lib, binary, n_installed, n_wrapped, n_timed, untimed, missing in rows:
            if untimed:
                out.append(f"\n## `{lib['library']}`: forwarded untimed ({len(untimed)})\n\n")
                out.append(", ".join(f"`{n}`" for n in untimed) + "\n")
            if missing:
                out.append(f"\n## `{lib['library']}`: NOT wrapped ({len(missing)})\n\n")
                out.append(", ".join(f"`{n}`" for n in missing) + "\n")
        if parts:
            out.append("\n## cuDNN's parts\n\n`libcudnn.so.9` dlopen()s its parts; programs call them only through "
                       "it. Every C function a part exports is re-exported by `libcudnn.so.9` (and so wrapped), "
                       "except the ones listed, which no header declares.\n\n"
                       "| part | C exports | re-exported by libcudnn.so.9 | not re-exported |\n|---|---:|---:|---|\n")
            for name, n_own, n_re, public, plumbing in parts:
                listed = ", ".join(f"`{n}`" for n in public + plumbing) or "none"
                out.append(f"| `{name}` | {n_own} | {n_re} | {listed} |\n")
        args.write.write_text("".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
