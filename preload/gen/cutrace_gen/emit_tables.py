"""api_ids.h, api_table.cpp and real_functions.cpp: the tables indexed by api id, which every library's
wrappers, the recorder and the readers share."""

from __future__ import annotations

import hashlib

from .common import ARG_FORMATS, CLASSES, DOMAINS, RESULT_KINDS
from .model import Api, resolve_result
from .output import HEADER_NOTE, c_string, id_name

def emit_ids(apis: list[Api]) -> str:
    out = [HEADER_NOTE, "#pragma once\n\n#include <cstdint>\n\nnamespace cutrace {\n\n",
           "// Index into kApiTable and g_real_functions. Ids are stable within one build only: every trace\n",
           "// carries the table it was recorded with.\n",
           "enum ApiId : uint32_t {\n"]
    out += [f"  {id_name(a)} = {a.id},\n" for a in apis]
    out.append("};\n\n")
    out.append(f"inline constexpr uint32_t kApiCount = {len(apis)};\n\n}}  // namespace cutrace\n")
    return "".join(out)


def emit_table(apis: list[Api]) -> str:
    out = [HEADER_NOTE, '#include "cutrace/api_table.h"\n\n#include "api_ids.h"\n\n',
           "namespace cutrace {\nnamespace {\n\n"]
    for a in apis:
        if a.proto is not None and a.spec and a.spec.args:
            items = ", ".join(f"{{{c_string(x.label)}, abi::ArgFormat::{ARG_FORMATS[x.fmt]}, "
                              f"{'format::kArgFlagOut' if x.out else '0'}, "
                              f"{c_string(x.type_name) if x.type_name else 'nullptr'}}}" for x in a.spec.args)
            out.append(f"constexpr ApiArgInfo kArgs_{id_name(a)}[] = {{{items}}};\n")
    out.append("\n}  // namespace\n\nconst ApiInfo kApiTable[] = {\n")
    for a in apis:
        lib = a.library
        api_class, nargs, args = "other", 0, "nullptr"
        if a.proto is None:
            # Untimed: no record is ever written, the entry only names the symbol to resolve.
            result_kind = "kVoid"
        else:
            kind, _ = resolve_result(lib, a.proto)
            result_kind = "kVoid" if kind == "void" else RESULT_KINDS[kind][0]
            if a.spec:
                api_class = a.spec.api_class
                if a.spec.args:
                    nargs, args = len(a.spec.args), f"kArgs_{id_name(a)}"
        display = c_string(a.report_name) if a.report_name else "nullptr"
        flags = "format::kApiFlagInternal" if a.internal else "0"
        out.append(f"    {{{c_string(a.name)}, {c_string(lib.soname)}, abi::ApiDomain::{DOMAINS[lib.domain]}, "
                   f"abi::ApiClass::{CLASSES[api_class]}, format::ResultKind::{result_kind}, {nargs}, {args}, "
                   f"{display}, {flags}}},\n")
    out.append("};\n\nconst uint32_t kApiTableSize = sizeof(kApiTable) / sizeof(kApiTable[0]);\n")
    out.append("static_assert(sizeof(kApiTable) / sizeof(kApiTable[0]) == kApiCount);\n")
    # The table's identity: a shim and a recorder of different builds would name each other's api ids
    # wrongly, so the recorder puts this in the session and a shim with another one stays out.
    digest = int.from_bytes(hashlib.sha256("".join(out).encode()).digest()[:4], "little") or 1
    out.append(f"const uint32_t kApiTableHash = 0x{digest:08x};\n\n}}  // namespace cutrace\n")
    return "".join(out)


def emit_real_functions(apis: list[Api]) -> str:
    versions = ",\n".join(f"    {c_string(a.library.symbol_version) if a.library.symbol_version else 'nullptr'}"
                          for a in apis)
    # A versioned wrapper is reached only through its own version, whose library is then loaded.
    fallback = ",\n".join(f"    {'true' if not a.versioned and not a.abi_changed else 'false'}" for a in apis)
    return HEADER_NOTE + r"""#include "runtime.h"

#include "api_ids.h"

namespace cutrace::preload {

// Filled lazily by resolve_real(); null means "not resolved yet".
std::atomic<void*> g_real_functions[kApiCount];

}  // namespace cutrace::preload

// Exported for libcutrace-cuda12.so (shim_names.h), as an alias: the shim's own reads stay direct.
extern "C" {
extern __typeof__(cutrace::preload::g_real_functions) cutrace_shim_real_functions
    __attribute__((alias("_ZN7cutrace7preload16g_real_functionsE"), visibility("default")));
}

namespace cutrace::preload {

// The symbol version each real function is looked up under (its library's, e.g. libcudart.so.13), or
// nullptr for an unversioned library.
const char* const g_real_versions[] = {
""" + versions + r"""};
static_assert(sizeof(g_real_versions) / sizeof(g_real_versions[0]) == kApiCount);

// Whether the wrapper may call another major version's function of the same name when its own
// version is not loaded: a plain wrapper whose prototype that version declares alike.
const bool g_may_fall_back[] = {
""" + fallback + r"""};
static_assert(sizeof(g_may_fall_back) / sizeof(g_may_fall_back[0]) == kApiCount);

}  // namespace cutrace::preload

// Called by the trampolines of functions without a prototype (wrappers_*.cpp) on their first call.
extern "C" __attribute__((visibility("hidden"))) void* cutrace_gen_resolve_untyped(uint32_t api_id) {
  return cutrace::preload::real_function<void*>(api_id);
}
"""
