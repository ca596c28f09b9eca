"""wrappers_<name>.cpp of the libraries the shim and libcutrace-cuda12.so interpose, in the shape of
preload/runtime.h: a timed wrapper per prototype, an assembly trampoline for an export without one,
and a versioned library's symbol versions (versioned.map). The interposers reuse its slot code."""

from __future__ import annotations

from .common import DOMAINS, MPI_FORMATS, RESULT_KINDS
from .model import Api, LibraryModel, resolve_result
from .output import HEADER_NOTE, id_name
from .schema import ArgSpec
from .tokens import render

WRAPPER_SUPPORT = r"""
namespace cutrace::gen {

// One argument slot of a record. Anything that is not an integer, an enum or a pointer must be
// annotated by one of its fields (field = "...") or as a dim3. By value, so that deduction drops a
// __restrict qualifier (glibc's prototypes), which would hide that the type is a pointer.
template <class T>
inline uint64_t arg_slot(T value) {
  if constexpr (std::is_pointer_v<T> || std::is_enum_v<T> || std::is_integral_v<T>) {
    return cutrace::preload::as_result(value);
  } else {
    static_assert(sizeof(T) == 0, "annotated argument is not an integer, enum or pointer: record a field of it");
    return 0;
  }
}

// A launch configuration passed as three integers (the driver's gridDimX, gridDimY, gridDimZ).
struct Dim3 {
  uint32_t x, y, z;
};

// format = "enum": the tools print the value by the enumerator names of the argument's type.
template <class T>
inline uint64_t enum_slot(const T& value) {
  static_assert(std::is_enum_v<T>, "format = \"enum\" names an argument that is not of an enum type");
  return cutrace::preload::as_result(value);
}

}  // namespace cutrace::gen
"""

# A function no header declares cannot be timed: its arguments are unknown, so it is forwarded with a
# jump that leaves the argument registers and the stack exactly as the caller set them. The first call
# resolves the real address with every argument register saved around the call (SysV x86-64: rdi, rsi,
# rdx, rcx, r8, r9, al for variadic calls, xmm0-7); the stack stays 16-byte aligned for the call.
# endbr64 (a no-op without CET) keeps the trampolines valid targets where indirect branch tracking is on.
TRAMPOLINE_ASM = r"""    .p2align 4
    .globl %(name)s
    .type %(name)s, @function
%(name)s:
    .cfi_startproc
    endbr64
    movq %(real_functions)s@GOTPCREL(%%rip), %%r11
    movq %(offset)d(%%r11), %%r11
    testq %%r11, %%r11
    jz 1f
    jmp *%%r11
1:
    pushq %%rdi
    .cfi_adjust_cfa_offset 8
    pushq %%rsi
    .cfi_adjust_cfa_offset 8
    pushq %%rdx
    .cfi_adjust_cfa_offset 8
    pushq %%rcx
    .cfi_adjust_cfa_offset 8
    pushq %%r8
    .cfi_adjust_cfa_offset 8
    pushq %%r9
    .cfi_adjust_cfa_offset 8
    pushq %%rax
    .cfi_adjust_cfa_offset 8
    subq $128, %%rsp
    .cfi_adjust_cfa_offset 128
    movdqu %%xmm0, 0(%%rsp)
    movdqu %%xmm1, 16(%%rsp)
    movdqu %%xmm2, 32(%%rsp)
    movdqu %%xmm3, 48(%%rsp)
    movdqu %%xmm4, 64(%%rsp)
    movdqu %%xmm5, 80(%%rsp)
    movdqu %%xmm6, 96(%%rsp)
    movdqu %%xmm7, 112(%%rsp)
    movl $%(id)d, %%edi
    call cutrace_gen_resolve_untyped
    movq %%rax, %%r11
    movdqu 0(%%rsp), %%xmm0
    movdqu 16(%%rsp), %%xmm1
    movdqu 32(%%rsp), %%xmm2
    movdqu 48(%%rsp), %%xmm3
    movdqu 64(%%rsp), %%xmm4
    movdqu 80(%%rsp), %%xmm5
    movdqu 96(%%rsp), %%xmm6
    movdqu 112(%%rsp), %%xmm7
    addq $128, %%rsp
    .cfi_adjust_cfa_offset -128
    popq %%rax
    .cfi_adjust_cfa_offset -8
    popq %%r9
    .cfi_adjust_cfa_offset -8
    popq %%r8
    .cfi_adjust_cfa_offset -8
    popq %%rcx
    .cfi_adjust_cfa_offset -8
    popq %%rdx
    .cfi_adjust_cfa_offset -8
    popq %%rsi
    .cfi_adjust_cfa_offset -8
    popq %%rdi
    .cfi_adjust_cfa_offset -8
    testq %%r11, %%r11
    jz 2f
    jmp *%%r11
2:
    movl $%(id)d, %%edi
    movq (%%rsp), %%rsi
    subq $8, %%rsp
    .cfi_adjust_cfa_offset 8
    call %(missing)s
    .cfi_endproc
    .size %(name)s, .-%(name)s
"""


def slot_expr(api: Api, a: ArgSpec, result_ok: str | None) -> str:
    params, names = api.recordable_params()
    param = params[names.index(a.param)]
    guards = []
    if a.out:
        # Read only what the call wrote: a failed call may have left the out-parameter untouched.
        if result_ok:
            guards.append(result_ok)
        guards.append(a.param)
        access = f"{a.param}->{'.'.join(a.field)}" if a.field else f"*{a.param}"
    elif a.field:
        if param.is_pointer:
            guards.append(a.param)
            access = f"{a.param}->{'.'.join(a.field)}"
        else:
            access = f"{a.param}.{'.'.join(a.field)}"
    else:
        access = a.param
    if a.fmt in MPI_FORMATS:
        # The function takes the parameter itself, a pointer included, and checks it (MPI_STATUS_IGNORE
        # is a pointer that cannot be read); out = true only says it is read after a successful call.
        value = f"cutrace::mpi::{MPI_FORMATS[a.fmt][1]}({', '.join(a.components)})"
        return f"{result_ok} ? {value} : 0" if a.out and result_ok else value
    if a.components:
        x, y, z = a.components
        value = f"cutrace::preload::pack_dim3(cutrace::gen::Dim3{{{x}, {y}, {z}}})"
    elif a.fmt == "dim3":
        value = f"cutrace::preload::pack_dim3({access})"
    elif a.fmt == "enum":
        value = f"cutrace::gen::enum_slot({access})"
    else:
        value = f"cutrace::gen::arg_slot({access})"
    if not guards:
        return value
    return f"{' && '.join(guards)} ? {value} : 0"


def emit_wrapper(api: Api) -> str:
    """The wrapper of one function, in the shape documented in preload/runtime.h. Its locals carry the
    cutrace_ prefix, which no parameter name may have (checked in validate_function)."""
    lib, proto, spec = api.library, api.proto, api.spec
    names = api.param_names
    params = ", ".join(p.declaration(n) for p, n in zip(proto.params, names))
    call = ", ".join(names)
    kind, _ = resolve_result(lib, proto)
    is_void = kind == "void"
    flags = ("cutrace::abi::kCallFlagNoResult" if is_void else RESULT_KINDS[kind][1]) or "0"
    api_id = f"cutrace::{id_name(api)}"
    result_ok = f"cutrace_result == {lib.success}" if kind == "error" else None
    hook = f"cutrace::preload::hooks::{spec.hook.name}({', '.join(spec.hook.args)});" if spec and spec.hook else ""
    if hook and result_ok:
        # A failed call may leave its out-parameters as the caller's uninitialised memory.
        hook = f"if ({result_ok}) {hook}"

    b = [f'extern "C" CUTRACE_EXPORT {render(proto.ret)} {api.symbol}({params}) {{\n',
         # Spelled out rather than decltype(&::name): a C++ header may add overloads (cublas_api.h does).
         f"  using CutraceFn = {render(proto.ret)} (*)({', '.join(p.declaration('') for p in proto.params)});\n",
         f"  CutraceFn cutrace_real = cutrace::preload::real_function<CutraceFn>({api_id});\n",
         # As the loader's lazy binding fails when the library lacks the function: no invented result.
         f"  if (CUTRACE_UNLIKELY(!cutrace_real)) cutrace::preload::missing_function({api_id}, __builtin_return_address(0));\n",
         "  auto& cutrace_ts = cutrace::preload::t_thread;\n"]
    domain = f"cutrace::abi::domain_bit(cutrace::abi::ApiDomain::{DOMAINS[lib.domain]})"
    if spec and spec.record_always:
        b.append(f"  uint8_t cutrace_flags = {flags};\n")
        test = f"cutrace::preload::should_record_always(cutrace_ts, {domain}, cutrace_flags)"
        flags = "cutrace_flags"
    else:
        test = f"cutrace::preload::should_record(cutrace_ts, {domain})"
    real_call = f"cutrace_real({call})"
    if hook:
        # The hook runs whether or not the call is recorded, and leaves errno as the real call left it.
        b.append(f"  if (!{test}) {{\n")
        b.append(f"    {real_call};\n" if is_void else f"    auto cutrace_result = {real_call};\n")
        b.append(f"    const int cutrace_errno = errno;\n    {hook}\n    errno = cutrace_errno;\n")
        b.append("    return;\n" if is_void else "    return cutrace_result;\n")
        b.append("  }\n")
    else:
        b.append(f"  if (!{test}) return {real_call};\n")
    b.append(f"  cutrace::preload::CallScope cutrace_scope(cutrace_ts, {domain}, {api_id});\n")
    b.append(f"  {real_call};\n" if is_void else f"  auto cutrace_result = {real_call};\n")
    b.append("  cutrace_scope.finish();\n")
    if hook:
        b.append(f"  {hook}\n")
    args = spec.args if spec else []
    if args:
        slots = ",\n      ".join(slot_expr(api, a, result_ok) for a in args)
        b.append(f"  const uint64_t cutrace_args[{len(args)}] = {{\n      {slots}}};\n")
    result = "0" if is_void or kind == "none" else "cutrace::preload::as_result(cutrace_result)"
    b.append(f"  cutrace_scope.emit({result}, {flags}, {'cutrace_args' if args else 'nullptr'}, "
             f"{len(args)});\n")
    if not is_void:
        b.append("  return cutrace_result;\n")
    b.append("}\n")
    return "".join(b)


def emit_wrappers(model: LibraryModel) -> str:
    lib, apis = model.spec, model.apis
    out = [HEADER_NOTE]
    if lib.defines:
        out.append("// The headers' view the library itself is built with ([library] defines).\n")
        out += [f"#define {d.replace('=', ' ', 1)}\n" for d in lib.defines]
    out.append("#include <cerrno>\n#include <cstdint>\n#include <type_traits>\n\n")
    out += [f"#include <{h}>\n" for h in lib.headers]
    out.append('\n#include "api_ids.h"\n#include "runtime.h"\n')
    if model.shadowed:
        out.append("\n// Exported names the headers turn into macros: the wrappers define the symbols themselves.\n")
        out += [f"#undef {n}\n" for n in sorted(model.shadowed)]
    declared = [a for a in apis if a.proto is not None and a.origin in ("internal", "annotation")]
    if declared:
        out.append("\n// Prototypes the public headers do not declare: nvcc's host pass sees them in crt/, a header that\n"
                   "// cannot be included with the others declares them, or the annotations give them.\n")
        for a in declared:
            where = a.proto.where if a.origin == "internal" else str(lib.annotations.name)
            out.append(f"{a.declaration()}  // {where}\n")
    variants = [a for a in apis if a.proto is not None and a.origin == "variant"]
    if variants:
        out.append("\n// Per-thread default stream variants: the prototype of their base function.\n")
        out += [f'extern "C" decltype(::{a.base}) {a.name};\n' for a in variants]
    out.append(WRAPPER_SUPPORT)
    for a in apis:
        if a.proto is None:
            continue
        out.append("\n")
        if a.origin == "variant":
            out.append(f"// Variant of {a.base}.\n")
        elif a.proto.from_header:
            out.append(f"// {a.proto.where}\n")
        out.append(emit_wrapper(a))
    untimed = [a for a in apis if a.proto is None]
    if untimed:
        missing_fn = f"cutrace_gen_missing_{lib.name}"
        out.append(f"""
// Exported functions that no header given for {lib.soname} declares: forwarded untimed.
extern "C" void* cutrace_gen_resolve_untyped(uint32_t api_id);

// A trampoline whose library lacks its function fails as the loader's lazy binding would.
extern "C" __attribute__((visibility("hidden"), used, noreturn)) void {missing_fn}(uint32_t api_id, const void* caller) {{
  cutrace::preload::missing_function(api_id, caller);
}}

asm(R"(
    .text
""")
        # A library of versioned wrappers reaches the shim's table through the name the shim exports it by.
        table = "cutrace_shim_real_functions" if lib.wrappers == "versioned" else "_ZN7cutrace7preload16g_real_functionsE"
        for a in untimed:
            out.append(TRAMPOLINE_ASM % {"name": a.symbol, "id": a.id, "offset": 8 * a.id, "missing": missing_fn,
                                         "real_functions": table})
        out.append(')");\n')
    if lib.wrappers == "versioned":
        out.append(emit_versioned_exports(model))
    return "".join(out)


def emit_versioned_exports(model: LibraryModel) -> str:
    """Exports a versioned library's wrappers as NAME@VERSION (hidden versions: an unversioned lookup such as
    dlsym(RTLD_DEFAULT, NAME) passes them by), and hands their addresses to the shim, whose dlsym gives
    them out for lookups through a handle of this library."""
    lib, apis = model.spec, model.apis
    out = [f"\n// {lib.soname}'s own symbol version: only references bound to it reach these wrappers.\nasm(R\"(\n"]
    out += [f"    .symver {a.symbol}, {a.name}@{lib.symbol_version}\n" for a in apis]
    out.append(')");\n\n')
    untimed = [a for a in apis if a.proto is None]
    out += [f'extern "C" char {a.symbol}[];  // a trampoline\n' for a in untimed]
    out.append(f"\nextern \"C\" void cutrace_shim_register_wrappers(uint32_t first_id, uint32_t count, "
               f"void* const* addresses);\n\nnamespace {{\n\nvoid* const kWrappers[] = {{\n")
    out += [f"    reinterpret_cast<void*>(&{a.symbol}),\n" for a in apis]
    first = apis[0].id
    assert [a.id for a in apis] == list(range(first, first + len(apis)))
    out.append(f"}};\n\n__attribute__((constructor)) void register_wrappers() {{\n"
               f"  cutrace_shim_register_wrappers({first}, {len(apis)}, kWrappers);\n}}\n\n}}  // namespace\n")
    return "".join(out)


def emit_version_script(models: list[LibraryModel]) -> str:
    """versioned.map: the version nodes of the versioned libraries' wrappers, and nothing else exported."""
    out = ["# Generated by preload/gen/gen_wrappers.py: the symbol versions of libcutrace-cuda12.so's wrappers.\n"]
    versioned = [m for m in models if m.spec.wrappers == "versioned"]
    for k, m in enumerate(versioned):
        out.append(f"{m.spec.symbol_version} {{\n  global:\n")
        out += [f"    {a.name};\n" for a in m.apis]
        out.append("  local:\n    *;\n};\n" if k == len(versioned) - 1 else "};\n")
    return "".join(out)
