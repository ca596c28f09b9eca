"""The wrappers of the interposers apart from the shim, libcutrace-osrt.so (preload/osrt.h) and
libcutrace-mpi-*.so (preload/mpi_runtime.h): each finds its real functions by an index of its own and
records on its own terms (a time threshold, the profiling interface)."""

from __future__ import annotations

from .common import DOMAINS, RESULT_KINDS, GenError
from .emit_wrappers import WRAPPER_SUPPORT, slot_expr
from .model import Api, LibraryModel, resolve_result
from .output import HEADER_NOTE, c_string, id_name
from .tokens import render

def emit_osrt_wrapper(api: Api, index: int) -> str:
    """An OS runtime wrapper (preload/osrt.h): times every call while -t osrt is captured and records
    those that reach the session's threshold. The C++ name differs from the symbol, which an assembler
    name gives, because the libc headers declare the same functions with exception specifications of
    their own."""
    lib, proto, spec = api.library, api.proto, api.spec
    names = api.param_names
    fixed = [p.declaration(n) for p, n in zip(proto.params, names)]
    vp = api.variadic_param
    params = ", ".join(fixed + (["..."] if vp else []))
    fn_params = ", ".join([p.declaration("") for p in proto.params] + (["..."] if vp else []))
    call = ", ".join(names + ([vp.name] if vp else []))
    kind, missing = resolve_result(lib, proto)
    if spec and spec.missing is not None:
        missing = spec.missing
    if kind == "void":
        raise GenError(f"{lib.annotations}: [functions.{api.name}]: an OS runtime wrapper records the result; "
                       f"{api.name} returns nothing")
    flags = RESULT_KINDS[kind][1] or "0"
    ret = render(proto.ret)
    local = f"cutrace_osrt_{api.name}"
    b = [f'extern "C" CUTRACE_EXPORT {ret} {local}({params}) __asm__({c_string(api.name)});\n',
         f'extern "C" {ret} {local}({params}) {{\n']
    if vp:
        # Read whether or not the caller passed it: x86-64 keeps every integer register in the save
        # area, so the value is only garbage the real function ignores (open without O_CREAT).
        last = names[-1]
        b += ["  va_list cutrace_va;\n", f"  va_start(cutrace_va, {last});\n",
              f"  {vp.declaration(vp.name)} = va_arg(cutrace_va, {vp.type_text()});\n", "  va_end(cutrace_va);\n"]
    b += [f"  using CutraceFn = {ret} (*)({fn_params});\n",
          f"  CutraceFn cutrace_real = cutrace::osrt::real_function<CutraceFn>({index});\n",
          f"  if (CUTRACE_UNLIKELY(!cutrace_real)) {{\n    errno = ENOSYS;\n    return {missing};\n  }}\n",
          "  auto& cutrace_ts = cutrace::preload::t_thread;\n",
          f"  if (!cutrace::osrt::should_time(cutrace_ts)) return cutrace_real({call});\n",
          "  const uint64_t cutrace_begin = cutrace::preload::now();\n",
          f"  auto cutrace_result = cutrace_real({call});\n",
          "  const uint64_t cutrace_end = cutrace::preload::now();\n",
          "  if (CUTRACE_LIKELY(!cutrace::osrt::reaches_threshold(cutrace_begin, cutrace_end))) return cutrace_result;\n"]
    args = spec.args if spec else []
    if args:
        slots = ",\n      ".join(slot_expr(api, a, None) for a in args)
        b.append(f"  const uint64_t cutrace_args[{len(args)}] = {{\n      {slots}}};\n")
    result = "0" if kind == "none" else "cutrace::preload::as_result(cutrace_result)"
    b.append(f"  cutrace::osrt::record(cutrace_ts, cutrace::{id_name(api)}, cutrace_begin, cutrace_end, {result}, "
             f"{flags}, {'cutrace_args' if args else 'nullptr'}, {len(args)}, __builtin_return_address(0));\n")
    b.append("  return cutrace_result;\n}\n")
    return "".join(b)


def emit_interposer(model: LibraryModel, namespace: str, runtime_header: str, system_includes: list[str],
                    names_comment: str, real_name, emit_one) -> str:
    """An interposer library's wrappers (libcutrace-osrt.so, libcutrace-mpi-*.so): the library's own
    defines and headers, the names of the real functions the wrappers find by index, then the wrappers."""
    lib, apis = model.spec, model.apis
    out = [HEADER_NOTE]
    out += [f"#define {d.replace('=', ' ', 1)}\n" for d in lib.defines]
    out.append("".join(f"#include <{h}>\n" for h in system_includes) + "\n")
    out += [f"#include <{h}>\n" for h in lib.headers]
    out.append(f'\n#include "api_ids.h"\n#include "{runtime_header}"\n')
    out.append(WRAPPER_SUPPORT)
    out.append(f"\nnamespace {namespace} {{\n\n// {names_comment}\nconst char* const kFunctionNames[] = {{\n")
    out += [f"    {c_string(real_name(a))},\n" for a in apis]
    out.append(f"}};\nconst uint32_t kFunctionCount = {len(apis)};\nstd::atomic<void*> g_real_functions[{len(apis)}];\n\n"
               f"}}  // namespace {namespace}\n")
    for k, a in enumerate(apis):
        out.append(f"\n// {a.proto.where}\n")
        out.append(emit_one(a, k))
    return "".join(out)


def emit_osrt_wrappers(model: LibraryModel) -> str:
    return emit_interposer(model, "cutrace::osrt", "osrt.h", ["cerrno", "cstdarg", "cstdint", "type_traits"],
                           "What the wrappers below call, by their index here.", lambda a: a.name, emit_osrt_wrapper)


def emit_mpi_wrapper(api: Api, index: int) -> str:
    """An MPI wrapper (preload/mpi_runtime.h): the program's MPI_X, timed and recorded like a CUDA call, that
    calls the implementation's PMPI_X (the MPI profiling interface). The argument slots that describe the
    call's inputs are read before the call, outside its time: the call may free what they name
    (MPI_Comm_free, a request that MPI_Wait completes). Out-parameters are read after a successful call.
    A hook runs before the call, whether or not the call is recorded."""
    lib, proto, spec = api.library, api.proto, api.spec
    names = api.param_names
    params = ", ".join(p.declaration(n) for p, n in zip(proto.params, names))
    call = ", ".join(names)
    kind, _ = resolve_result(lib, proto)
    if kind == "void":
        raise GenError(f"{lib.annotations}: [functions.{api.name}]: an MPI wrapper records the result; "
                       f"{api.name} returns nothing")
    flags = RESULT_KINDS[kind][1] or "0"
    api_id = f"cutrace::{id_name(api)}"
    result_ok = f"cutrace_result == {lib.success}" if kind == "error" else None
    domain = f"cutrace::abi::domain_bit(cutrace::abi::ApiDomain::{DOMAINS[lib.domain]})"
    hook = f"cutrace::mpi::hooks::{spec.hook.name}({', '.join(spec.hook.args)});" if spec and spec.hook else ""
    real_call = f"cutrace_real({call})"
    b = [f'extern "C" CUTRACE_EXPORT {render(proto.ret)} {api.name}({params}) {{\n',
         f"  using CutraceFn = {render(proto.ret)} (*)({', '.join(p.declaration('') for p in proto.params)});\n",
         f"  CutraceFn cutrace_real = cutrace::mpi::real_function<CutraceFn>({index});\n",
         f"  if (CUTRACE_UNLIKELY(!cutrace_real)) cutrace::mpi::missing_function({api_id}, __builtin_return_address(0));\n",
         "  auto& cutrace_ts = cutrace::preload::t_thread;\n",
         f"  if (!cutrace::preload::should_record(cutrace_ts, {domain})) {{\n"]
    if hook:
        b.append(f"    {hook}\n")
    b += [f"    return {real_call};\n", "  }\n"]
    args = spec.args if spec else []
    if args:
        b.append(f"  uint64_t cutrace_args[{len(args)}];\n")
        for k, a in enumerate(args):
            if not a.out:
                b.append(f"  cutrace_args[{k}] = {slot_expr(api, a, None)};\n")
    if hook:
        b.append(f"  {hook}\n")
    b.append(f"  cutrace::preload::CallScope cutrace_scope(cutrace_ts, {domain}, {api_id});\n")
    b.append(f"  auto cutrace_result = {real_call};\n")
    b.append("  cutrace_scope.finish();\n")
    for k, a in enumerate(args):
        if a.out:
            b.append(f"  cutrace_args[{k}] = {slot_expr(api, a, result_ok)};\n")
    result = "0" if kind == "none" else "cutrace::preload::as_result(cutrace_result)"
    b.append(f"  cutrace_scope.emit({result}, {flags}, {'cutrace_args' if args else 'nullptr'}, "
             f"{len(args)});\n")
    b.append("  return cutrace_result;\n}\n")
    return "".join(b)


def emit_mpi_wrappers(model: LibraryModel) -> str:
    return emit_interposer(model, "cutrace::mpi", "mpi_runtime.h", ["cerrno", "cstdint", "type_traits"],
                           "The profiling interface's functions the wrappers below call, by their index here.",
                           lambda a: "P" + a.name, emit_mpi_wrapper)
