"""api_lookup.cpp (preload/api_lookup.h): the wrappers by name, which dlsym hands out, and the driver's
entry point versions from cudaTypedefs.h, which cuGetProcAddress hands out. tests/simcuda reads the
same versions for the simulated driver."""

from __future__ import annotations

import re
from pathlib import Path

from .common import GenError
from .headers import HeaderParser
from .model import Api
from .output import HEADER_NOTE, c_string

# Domains whose wrappers live in a library of their own, which the launcher preloads only when -t asks.
OWN_LIBRARY_DOMAINS = ("os_runtime", "mpi")


_PFN_RE = re.compile(r"\bPFN_([A-Za-z][A-Za-z0-9]*)_v([0-9]+)(_ptds|_ptsz)?\b")


def driver_versions(pre: HeaderParser, include_dirs: list[str]) -> list[tuple[str, int, bool, str]]:
    """(symbol, version, per-thread, export) for every entry point version cudaTypedefs.h lists.

    cuGetProcAddress takes a symbol without version suffix and a CUDA version, and returns the newest
    version of the entry point not newer than that. cudaTypedefs.h names each version's function type
    PFN_<symbol>_v<cuda version>[_ptds|_ptsz]; the k-th legacy-stream version of a symbol is exported as
    <symbol>, <symbol>_v2, ... <symbol>_v<k>, and a per-thread version as the export of the newest legacy
    version not newer than it, plus its suffix. The header is read as text (not preprocessed) because
    the oldest versions sit behind #if blocks that a normal compile skips. The entry points of the
    profiler and graphics interop headers are listed in typedef headers of their own beside it
    (cudaProfilerTypedefs.h: cuProfilerStart, which a library may well look up)."""
    path = next((Path(d) / "cudaTypedefs.h" for d in include_dirs if (Path(d) / "cudaTypedefs.h").exists()), None)
    if path is None:
        raise GenError("cannot find cudaTypedefs.h, which lists the driver's entry point versions; pass the CUDA "
                       "include directory with --include-dir")
    paths = sorted(path.parent.glob("cuda*Typedefs.h"))
    text = ""
    for p in paths:
        pre.dependencies.add(str(p.resolve()))
        text += p.read_text(errors="replace") + "\n"
    legacy: dict[str, set[int]] = {}
    per_thread: dict[str, dict[int, str]] = {}
    for m in _PFN_RE.finditer(text):
        symbol, version, suffix = m.group(1), int(m.group(2)), m.group(3)
        if suffix:
            per_thread.setdefault(symbol, {})[version] = suffix
        else:
            legacy.setdefault(symbol, set()).add(version)
    out = []
    for symbol, versions in legacy.items():
        ordered = sorted(versions)
        names = {v: symbol if k == 0 else f"{symbol}_v{k + 1}" for k, v in enumerate(ordered)}
        out += [(symbol, v, False, names[v]) for v in ordered]
        for v, suffix in per_thread.get(symbol, {}).items():
            older = [x for x in ordered if x <= v]
            if older:
                out.append((symbol, v, True, names[older[-1]] + suffix))
    return sorted(out)


# The graphics interop headers (cudaGL.h, cudaEGL.h, cudaVDPAU.h) need GL's, EGL's and VDPAU's own
# development headers, which the build does without (annotations.md); their typedef headers name the
# entry points, which the driver hands out to every runtime at start-up.
GRAPHICS_INTEROP_TYPEDEFS = ("cudaGLTypedefs.h", "cudaEGLTypedefs.h", "cudaVDPAUTypedefs.h")


def graphics_interop_symbols(include_dirs: list[str]) -> set[str]:
    """The entry points (symbols without version suffix) the graphics interop typedef headers list."""
    symbols = set()
    for d in include_dirs:
        for name in GRAPHICS_INTEROP_TYPEDEFS:
            path = Path(d) / name
            if path.exists():
                symbols |= {m.group(1) for m in _PFN_RE.finditer(path.read_text(errors="replace"))}
    return symbols


def emit_lookup(apis: list[Api], versions: list[tuple[str, int, bool, str]],
                untimed_interop: set[str] = frozenset()) -> str:
    """api_lookup.cpp: the tables behind preload/api_lookup.h."""
    ids = {a.name: a.id for a in apis}
    out = [HEADER_NOTE, '#include "api_lookup.h"\n\n#include <cstring>\n\n#include "api_ids.h"\n\n',
           "namespace {\n\n",
           "// The address of each wrapper, taken through an assembler name so that no C++ declaration (whose\n"
           "// types would need every header) is required; -Bsymbolic-functions binds them to the shim's own.\n"]
    # The OS runtime's wrappers live in libcutrace-osrt.so, which only -t osrt preloads, and the MPI
    # wrappers in libcutrace-mpi-*.so, which only -t mpi preloads: lookups through a handle hand out the
    # library's own functions, as without cutrace.
    apis_all = apis
    apis = [a for a in apis if a.library.domain not in OWN_LIBRARY_DOMAINS]
    out += [f'extern "C" const char cutrace_export_{a.id}[] __asm__({c_string(a.name)});\n' for a in apis
            if not a.versioned]
    out.append("\nstruct NamedApi {\n  const char* name;\n  int32_t id;\n};\n\n"
               "// Sorted by strcmp (a name wrapped for two major versions: the plain wrapper first), for a binary\n"
               "// search.\nconstexpr NamedApi kApisByName[] = {\n")
    out += [f"    {{{c_string(a.name)}, {a.id}}},\n" for a in sorted(apis, key=lambda a: (a.name.encode(), a.versioned))]
    out.append("};\n\nstruct DriverVersion {\n  const char* symbol;\n  int32_t version;\n  bool per_thread;\n"
               "  int32_t id;\n};\n\n"
               "// Sorted by symbol (strcmp), then version: what cuGetProcAddress hands out for each request.\n"
               "constexpr DriverVersion kDriverVersions[] = {\n")
    rows = [(s, v, pt, ids[e]) for s, v, pt, e in versions if e in ids]
    rows.sort(key=lambda r: (r[0].encode(), r[1], r[2]))
    out += [f"    {{{c_string(s)}, {v}, {'true' if pt else 'false'}, {i}}},\n" for s, v, pt, i in rows]
    if not rows:
        out.append("    {nullptr, 0, false, -1},\n")
    out.append(f"}};\nconstexpr size_t kDriverVersionCount = {len(rows)};\n\n")
    out.append("// Graphics interop entry points without a wrapper (their headers need GL, EGL and VDPAU), sorted.\n"
               "constexpr const char* kUntimedGraphicsInterop[] = {\n")
    out += [f"    {c_string(n)},\n" for n in sorted(untimed_interop, key=str.encode)]
    if not untimed_interop:
        out.append("    nullptr,\n")
    out.append(f"}};\nconstexpr size_t kUntimedGraphicsInteropCount = {len(untimed_interop)};\n\n}}  // namespace\n\n")
    out.append("namespace cutrace::preload {\n\n"
               "// The versioned wrappers' entries are filled when libcutrace-cuda12.so registers them.\n"
               "void* g_wrapper_addresses[] = {\n")
    out += [f"    const_cast<char*>(cutrace_export_{a.id}),\n" if a.library.domain not in OWN_LIBRARY_DOMAINS and not a.versioned
            else "    nullptr,\n" for a in apis_all]
    out.append("};\nstatic_assert(sizeof(g_wrapper_addresses) / sizeof(g_wrapper_addresses[0]) == kApiCount);\n\n")
    out.append(r"""size_t find_apis(const char* name, int32_t* ids, size_t capacity) {
  constexpr size_t count = sizeof(kApisByName) / sizeof(kApisByName[0]);
  size_t lo = 0, hi = count;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (std::strcmp(kApisByName[mid].name, name) < 0) lo = mid + 1; else hi = mid;
  }
  size_t found = 0;
  for (size_t k = lo; k < count && found < capacity && std::strcmp(kApisByName[k].name, name) == 0; ++k)
    ids[found++] = kApisByName[k].id;
  return found;
}

int32_t find_api(const char* name) {
  int32_t id = -1;
  return find_apis(name, &id, 1) ? id : -1;
}

int32_t driver_proc_api(const char* symbol, int cuda_version, uint64_t flags) {
  size_t lo = 0, hi = kDriverVersionCount;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (std::strcmp(kDriverVersions[mid].symbol, symbol) < 0) lo = mid + 1; else hi = mid;
  }
  // CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM asks for the per-thread flavour where one exists.
  const bool per_thread = (flags & 2) != 0;
  int32_t legacy = -1, threaded = -1;
  for (size_t k = lo; k < kDriverVersionCount && std::strcmp(kDriverVersions[k].symbol, symbol) == 0; ++k) {
    if (kDriverVersions[k].version > cuda_version) break;
    (kDriverVersions[k].per_thread ? threaded : legacy) = kDriverVersions[k].id;
  }
  return per_thread && threaded >= 0 ? threaded : legacy;
}

bool untimed_graphics_interop(const char* symbol) {
  size_t lo = 0, hi = kUntimedGraphicsInteropCount;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    const int order = std::strcmp(kUntimedGraphicsInterop[mid], symbol);
    if (order == 0) return true;
    if (order < 0) lo = mid + 1; else hi = mid;
  }
  return false;
}

}  // namespace cutrace::preload
""")
    return "".join(out)
