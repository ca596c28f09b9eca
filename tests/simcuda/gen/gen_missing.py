#!/usr/bin/env python3
"""Completes a simulated CUDA library: generates, at build time, a definition of every function the real
library exports, so that a program or framework linked against the real library loads on the simulated
one whatever it binds.

The exports and their prototypes are read exactly as the wrapper generator of the shim reads them
(preload/gen/gen_wrappers.py, whose header reader and annotations this imports from its package,
preload/gen/cutrace_gen/): the real library's exported functions with pyelftools, their declarations
from the headers its annotations file names, parsed by libclang with the include path given here.

Every definition is WEAK: where the simulated library defines the function itself (the hand-written
sources beside this), the linker keeps that strong definition and drops the generated one, so the
simulated library needs no list of what it implements and can never define a function twice. What is
left answers as a library that lacks the feature: the library's "not supported" status

  libcudart   cudaErrorNotSupported, also recorded as the thread's last error (rt::record)
  libcuda     CUDA_ERROR_NOT_SUPPORTED
  cuBLAS(Lt)  CUBLAS_STATUS_NOT_SUPPORTED
  cuDNN       CUDNN_STATUS_NOT_SUPPORTED
  cuFFT       CUFFT_NOT_SUPPORTED

and a runtime or driver function that has a CUPTI callback id is reported to the simulated CUPTI under
it, as the hand-written functions are. A function returning no status returns: nothing (void), a
string saying it is not supported (const char*), a null pointer (other pointers), zero or a
value-initialised object (numbers, enumerations, structures).

Exports that no parsed header declares (the wrapper generator's "untimed" ones) have no known
prototype. The runtime's are the graphics interop functions (cuda_gl_interop.h, cuda_egl_interop.h,
cuda_vdpau_interop.h, which need GL's own headers) and a few internal entry points; every cuda* one of
them returns cudaError_t, so it gets a stub without parameters returning cudaErrorNotSupported (on
x86-64 a callee may ignore the arguments it is passed). Every other one is left out and listed in the
generated file's header comment: a program calling one fails to bind it, as it would with any library
lacking the function.

For the driver it also writes the table that lets cuGetProcAddress hand out every entry point
cudaTypedefs.h lists whose export exists (driver/api.cpp consults it for symbols its own table lacks).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "preload" / "gen"))
from cutrace_gen import source_files  # noqa: E402
from cutrace_gen.common import GenError  # noqa: E402
from cutrace_gen.emit_lookup import driver_versions  # noqa: E402
from cutrace_gen.headers import HeaderParser  # noqa: E402
from cutrace_gen.model import Api, LibraryModel, build_library  # noqa: E402
from cutrace_gen.output import c_string, write_output  # noqa: E402
from cutrace_gen.schema import load_library  # noqa: E402
from cutrace_gen.tokens import render  # noqa: E402

PROG = "gen_missing"

# domain of the annotations file -> (status type, not-supported value, include of the library's
# hand-written sources that declares its helpers, or None, CUPTI cbid domain or None)
KINDS = {
    "cuda_runtime": ("cudaError_t", "cudaErrorNotSupported", "cudart/runtime.h", "runtime"),
    "cuda_driver": ("CUresult", "CUDA_ERROR_NOT_SUPPORTED", "driver/driver.h", "driver"),
    "cublas": ("cublasStatus_t", "CUBLAS_STATUS_NOT_SUPPORTED", None, None),
    "cublaslt": ("cublasStatus_t", "CUBLAS_STATUS_NOT_SUPPORTED", None, None),
    "cudnn": ("cudnnStatus_t", "CUDNN_STATUS_NOT_SUPPORTED", None, None),
    "cufft": ("cufftResult", "CUFFT_NOT_SUPPORTED", None, None),
}
# Other spellings of the status types a prototype may use.
STATUS_ALIASES = {"enum cudaError": "cudaError_t", "cudaError": "cudaError_t", "enum cudaError_enum": "CUresult",
                  "cudaError_enum": "CUresult"}


def read_cbids(path: Path, domain: str) -> dict[str, int]:
    """{name: cbid} of CUPTI_<DOMAIN>_TRACE_CBID_<name> = <cbid> in a cbid header."""
    upper = domain.upper()
    pattern = re.compile(rf"CUPTI_{upper}_TRACE_CBID_([A-Za-z0-9_]+)\s*=\s*([0-9]+)")
    return {m.group(1): int(m.group(2)) for m in pattern.finditer(path.read_text())
            if m.group(1) not in ("INVALID", "SIZE", "FORCE_INT")}


def cbid_of(name: str, domain: str, cbids: dict[str, int]) -> str | None:
    """The cbid enumerator a call of export `name` is reported under, or None. The driver's cbids carry
    the export's own name (cuMemAlloc_v2); the runtime's add the version that introduced the prototype
    (cudaMalloc_v3020, cudaEventElapsedTime_v12080): the newest one is the export's."""
    if domain == "driver":
        return f"CUPTI_DRIVER_TRACE_CBID_{name}" if name in cbids else None
    pattern = re.compile(rf"{re.escape(name)}_v([0-9]+)")
    versions = [int(m.group(1)) for c in cbids if (m := pattern.fullmatch(c))]
    return f"CUPTI_RUNTIME_TRACE_CBID_{name}_v{max(versions)}" if versions else None


def returned_value(api: Api, status_type: str, status_value: str) -> str | None:
    """The expression a stub returns (None for void)."""
    ret = api.proto.ret_spelling
    ret = STATUS_ALIASES.get(ret, ret)
    if ret == "void":
        return None
    if ret == status_type:
        return status_value
    if ret in ("const char*", "char const*"):
        return c_string(f"{api.name} is not supported by the simulated device")
    if "*" in ret:
        return "nullptr"
    return "{}"


def emit(model: LibraryModel, cbids: dict[str, int], binary: Path) -> tuple[str, list[str]]:
    lib = model.spec
    status_type, status_value, helpers, cbid_domain = KINDS[lib.domain]
    weak = 'extern "C" __attribute__((visibility("default"), weak))'
    out = [f"// Generated by tests/simcuda/gen/gen_missing.py from the exports of {binary} and the",
           f"// declarations of {', '.join(lib.headers + lib.internal_headers + lib.separate_headers)}: a weak",
           f"// definition of every export, which the simulated library's own definitions replace. Do not edit.",
           ""]
    left_out = [a.name for a in model.apis if a.proto is None and not
                (lib.domain == "cuda_runtime" and a.name.startswith("cuda"))]
    if left_out:
        out.append("// Left out, for want of a prototype: " + ", ".join(left_out) + ".")
        out.append("")
    if helpers:
        out.append(f'#include "{helpers}"')
    # The headers' view the shim's wrappers are compiled with ([library] defines), where the helpers
    # (which include the headers themselves) have not set it.
    for define in lib.defines:
        macro = define.split("=", 1)[0]
        out += [f"#ifndef {macro}", f"#define {define.replace('=', ' ', 1)}", "#endif"]
    out += [f"#include <{h}>" for h in lib.headers]
    out.append("")
    for api in model.apis:
        if api.proto is None:
            if api.name in left_out:
                continue
            # No prototype; a runtime function all the same: see the module comment.
            out.append(f'extern "C" cudaError_t {api.name}();')
            out.append(f"{weak} cudaError_t {api.name}() {{ return simcuda::rt::record({status_value}); }}")
            continue
        if api.name in model.shadowed:
            out.append(f"#undef {api.name}")  # a macro naming the newer export (cublasSgemm -> cublasSgemm_v2)
        params = ", ".join(p.declaration(n) for p, n in zip(api.proto.params, api.param_names))
        ret = render(api.proto.ret)
        value = returned_value(api, status_type, status_value)
        # Declared again, whether or not an included header declares it (an internal header's, a variant's
        # or a legacy function's declaration is not seen here): the compiler then checks the definition
        # against the header's wherever there is one, and -Werror=missing-declarations passes.
        out.append(f'extern "C" {ret} {api.name}({params});')
        body = f"return {value};" if value is not None else ""
        cbid = cbid_of(api.name, cbid_domain, cbids) if cbid_domain else None
        if value == status_value and lib.domain == "cuda_runtime":
            inner = f"return simcuda::rt::record({status_value});"
        else:
            inner = body
        if cbid and value == status_value:
            space = "rt" if cbid_domain == "runtime" else "drv"
            body = f"return simcuda::{space}::traced({cbid}, []() -> {status_type} {{ {inner} }});"
        else:
            body = inner
        out.append(f"{weak} {ret} {api.name}({params}) {{ {body} }}")
    out.append("")
    return "\n".join(out), left_out


def emit_proc_table(pre: HeaderParser, include_dirs: list[str], model: LibraryModel) -> str:
    """The driver's entry point versions whose export exists here, for cuGetProcAddress."""
    stubbed = {a.name for a in model.apis if a.proto is not None}
    rows = [v for v in driver_versions(pre, include_dirs) if v[3] in stubbed]
    out = ["", "// Every entry point version cudaTypedefs.h lists whose export is defined here (sorted by symbol,",
           "// then version): what cuGetProcAddress hands out for a symbol its own table lacks.",
           "namespace simcuda::drv {",
           "extern const GeneratedProcVersion kGeneratedProcVersions[] = {"]
    out += [f'    {{"{s}", {v}, {"true" if pt else "false"}, reinterpret_cast<void*>(&::{e})}},'
            for s, v, pt, e in rows]
    out += ["};", f"extern const size_t kGeneratedProcVersionCount = {len(rows)};", "}  // namespace simcuda::drv", ""]
    return "\n".join(out)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    ap.add_argument("--library", nargs=3, required=True, metavar=("NAME", "ANNOTATIONS", "BINARY"),
                    help="the real library: a short name, the shim's annotations file (its headers and "
                         "defines) and the installed library whose exports the simulated one must have")
    ap.add_argument("--include-dir", action="append", default=[], help="include directory of the headers")
    ap.add_argument("--cbid-dir", type=Path, help="the directory of cupti_runtime_cbid.h and cupti_driver_cbid.h")
    ap.add_argument("--cxx", default=os.environ.get("CXX", "c++"))
    ap.add_argument("--cxx-flag", action="append", default=[])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--depfile", type=Path)
    args = ap.parse_args(argv)

    name, annotations, binary = args.library
    binary = Path(binary)
    spec = load_library(name, Path(annotations), binary)
    if spec.domain not in KINDS:
        raise GenError(f"{annotations}: domain '{spec.domain}' is none of the simulated libraries' "
                       f"({', '.join(KINDS)})")
    spec.include_dirs = args.include_dir
    if spec.domain == "cuda_runtime" and "__CUDA_API_VERSION_INTERNAL" not in spec.defines:
        # As the runtime's own sources see the headers (cudart/runtime.h): every export of an older ABI
        # (CUDA 12's cudaGetDeviceProperties beside cudaGetDeviceProperties_v2) is then declared.
        spec.defines.append("__CUDA_API_VERSION_INTERNAL")
    pre = HeaderParser([args.cxx], args.include_dir, args.cxx_flag)
    model = build_library(spec, pre)
    cbid_domain = KINDS[spec.domain][3]
    cbids: dict[str, int] = {}
    if cbid_domain:
        if args.cbid_dir is None:
            raise GenError(f"{spec.soname} reports its calls to CUPTI: pass --cbid-dir")
        cbids = read_cbids(args.cbid_dir / f"cupti_{cbid_domain}_cbid.h", cbid_domain)
    text, left_out = emit(model, cbids, binary)
    if spec.domain == "cuda_driver":
        text += emit_proc_table(pre, args.include_dir, model)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_output(args.out, text)
    if args.depfile:
        deps = set(pre.dependencies) | {os.path.abspath(annotations), os.path.realpath(binary),
                                        os.path.abspath(__file__)} | source_files()
        if spec.extends:
            deps.add(os.path.abspath(Path(annotations).parent / spec.extends))
        escape = lambda p: p.replace(" ", "\\ ")  # noqa: E731
        args.depfile.write_text(f"{escape(os.path.abspath(args.out))}: "
                                + " \\\n  ".join(escape(d) for d in sorted(deps)) + "\n")
    defined = sum(1 for a in model.apis) - len(left_out)
    print(f"{PROG}: {spec.soname}: {len(model.apis)} exports, {defined} defined "
          f"({len(left_out)} left out for want of a prototype)")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except GenError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        sys.exit(1)
