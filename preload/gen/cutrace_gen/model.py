"""One Api per exported function: a library's exports, their prototypes and their annotations, checked
against one another before anything is written, so that an emitter never meets an inconsistency."""

from __future__ import annotations

import dataclasses
import difflib
import re
from pathlib import Path

from .common import PROG, GenError
from .elf import elf_soname, exported_functions
from .headers import (HeaderParser, MacroExpander, c_function_decls, cindex, collect_c_prototypes, defined_macros,
                      macro_probes, prototype_of)
from .schema import FunctionSpec, LibrarySpec, ResultSpec, read_toml
from .tokens import Param, Prototype, render

@dataclasses.dataclass
class Api:
    name: str
    library: LibrarySpec
    proto: Prototype | None       # None: no prototype anywhere, forwarded untimed by a trampoline
    spec: FunctionSpec | None     # its own annotation or, for a _ptsz/_ptds variant, its base's
    origin: str = "header"        # header | internal | annotation | variant
    base: str | None = None       # the base function of a variant
    id: int = -1
    variadic_param: Param | None = None  # os_runtime: the argument read from a variadic call's `...`
    # A plain wrapper whose function another major version (a versioned library of the same name) declares
    # with another prototype: it must never call that version's function.
    abi_changed: bool = False

    @property
    def versioned(self) -> bool:
        return self.library.wrappers == "versioned"

    @property
    def symbol(self) -> str:
        """The C name the wrapper is defined under: the export's own, or for a versioned wrapper one that
        .symver then exports as NAME@VERSION."""
        return f"cutrace_{self.library.name}_{self.name}" if self.versioned else self.name

    @property
    def param_names(self) -> list[str]:
        if self.spec and self.spec.param_names:
            return list(self.spec.param_names)
        prefix = self.library.param_prefix
        return [(p.name[len(prefix):] if prefix and p.name.startswith(prefix) and len(p.name) > len(prefix)
                 else p.name) if p.name is not None else f"arg{k}" for k, p in enumerate(self.proto.params)]

    def recordable_params(self) -> tuple[list[Param], list[str]]:
        """The parameters an annotation may record: the prototype's, then a variadic function's extra one."""
        params, names = list(self.proto.params), self.param_names
        if self.variadic_param is not None:
            params.append(self.variadic_param)
            names.append(self.variadic_param.name)
        return params, names

    @property
    def annotated(self) -> bool:
        s = self.spec
        return s is not None and bool(s.args or s.api_class != "other" or s.record_always or s.hook
                                      or s.report_name or s.internal is not None)

    @property
    def report_name(self) -> str | None:
        return self.spec.report_name if self.spec else None

    @property
    def internal(self) -> bool:
        if self.spec and self.spec.internal is not None:
            return self.spec.internal
        return any(self.name.startswith(p) for p in self.library.internal_prefixes)

    def declaration(self) -> str:
        params = ", ".join(p.declaration(n) for p, n in zip(self.proto.params, self.param_names))
        return f'extern "C" {render(self.proto.ret)} {self.name}({params});'


def describe(proto: Prototype, names: list[str]) -> str:
    return f"{proto.name}({', '.join(names)})"


def resolve_result(lib: LibrarySpec, proto: Prototype) -> tuple[str, str | None]:
    """(kind, value returned when the real function is missing) of a prototype's return type."""
    ret = proto.ret_spelling
    if ret == "void":
        return "void", None
    spec = lib.results.get(ret)
    if spec is None and "*" in ret:
        spec = ResultSpec("pointer", "nullptr")
    if spec is None:
        known = ", ".join(f'"{k}"' for k in sorted(lib.results)) or "none"
        raise GenError(f"{lib.annotations}: [library.results]: {proto.name} ({proto.where}) returns '{ret}', which "
                       f"has no entry (known: {known}); add one saying how to record it and what to return when "
                       f"the real function is missing")
    return spec.kind, spec.missing


@dataclasses.dataclass
class LibraryModel:
    spec: LibrarySpec
    apis: list[Api]
    shadowed: set[str]   # exported names the compile view defines as macros

    def summary(self) -> str:
        untimed = sum(1 for a in self.apis if a.proto is None)
        annotated = sum(1 for a in self.apis if a.annotated)
        return (f"{PROG}: {self.spec.soname}: {len(self.apis)} exports, {len(self.apis)} wrapped "
                f"({len(self.apis) - untimed} timed, {untimed} forwarded untimed for want of a prototype), "
                f"{annotated} annotated")


def header_declared_exports(lib: LibrarySpec, pre: HeaderParser) -> list[str]:
    """The exports of a library whose binary is not at hand: every function with external C linkage that
    its own headers declare (not define: cuda.h's static inline helpers are no exports), under
    `defines` and under each set of [library] header_exports beside them."""
    own = {Path(h).name for h in lib.headers}
    names: set[str] = set()
    for extra in [[]] + (lib.header_exports or []):
        src = "".join(f"#define {d.replace('=', ' ', 1)}\n" for d in lib.defines + extra)
        src += "".join(f"#include <{h}>\n" for h in lib.headers)
        names |= {c.spelling for c in c_function_decls(pre.parse(src, [], ", ".join(lib.headers)).cursor)
                  if not c.is_definition() and c.storage_class != cindex().StorageClass.STATIC
                  and c.location.file is not None and Path(c.location.file.name).name in own}
    if not names:
        raise GenError(f"{lib.annotations}: the headers {', '.join(lib.headers)} declare no function")
    return sorted(names)


def build_library(lib: LibrarySpec, pre: HeaderParser) -> LibraryModel:
    if lib.binary is None:
        if lib.header_exports is None:
            raise GenError(f"{lib.annotations}: no binary was given for {lib.soname}, and [library] has no "
                           f"header_exports to take its exports from the headers; point --library at the library")
        exports, lib.symbol_version = header_declared_exports(lib, pre), None
    else:
        if not lib.binary.exists():
            raise GenError(f"{lib.binary} does not exist; install the library or point --library at it")
        real_soname = elf_soname(lib.binary.resolve())
        if real_soname is not None and real_soname != lib.soname:
            raise GenError(f"{lib.annotations}: [library] soname is '{lib.soname}' but {lib.binary} is '{real_soname}'; "
                           f"use annotations written for this version of the library")
        exports, lib.symbol_version = exported_functions(lib.binary)
    export_set = set(exports)
    if lib.wrappers == "versioned" and lib.symbol_version is None:
        raise GenError(f"{lib.annotations}: [library] wrappers = \"versioned\", but {lib.binary} does not define all its "
                       f"functions under one symbol version; a versioned wrapper would never be bound")
    if lib.wrap == "listed" and not lib.functions:
        raise GenError(f"{lib.annotations}: wrap = \"listed\" but no [functions.NAME] entry lists a function to wrap")

    # Annotations may only name functions the library exports: anything else is a typo or an API that
    # this version of the library dropped, and silently wrapping nothing would hide either.
    for fname in lib.functions:
        if fname not in export_set:
            close = difflib.get_close_matches(fname, exports, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            where = f"the entry of {lib.extends}, which this file extends: list it under [library] omit" \
                if lib.extends and fname not in read_toml(lib.annotations).get("functions", {}) else "the entry"
            raise GenError(f"{lib.annotations}: [functions.{fname}]: {lib.soname} exports no function named "
                           f"'{fname}'{hint}; remove or rename {where}")

    if lib.wrap == "listed":
        exports = [n for n in exports if n in lib.functions]
        export_set = set(exports)

    compile_src = "".join(f"#define {d.replace('=', ' ', 1)}\n" for d in lib.defines)
    compile_src += "".join(f"#include <{h}>\n" for h in lib.headers)
    # The annotations' own declarations are read with the headers, whose types they use, each in a
    # namespace of its own so that it never clashes with a header's declaration of the same function.
    snippets: dict[str, tuple[str, str, str]] = {}  # namespace -> (function, origin, text)
    for fname, f in lib.functions.items():
        if f.prototype:
            snippets[f"cutrace_prototype_{fname}"] = (fname, f"{lib.annotations} [functions.{fname}] prototype",
                                                       f.prototype.strip().rstrip(";"))
        if f.variadic:
            snippets[f"cutrace_variadic_{fname}"] = ("cutrace_variadic", f"{lib.annotations} [functions.{fname}] variadic",
                                                      f"void cutrace_variadic({f.variadic})")
    own_lines: dict[int, str] = {}
    for namespace, (fname, origin, text) in snippets.items():
        text = " ".join(text.splitlines())
        own_lines[compile_src.count("\n") + 2] = (
            f"{origin.replace(' [', ': [', 1)}: '{text}' is not a C declaration of {fname}" if fname != "cutrace_variadic" else
            f"{origin}: '{text[len('void cutrace_variadic('):-1]}' needs a type and a name, such as \"mode_t mode\"")
        compile_src += f"namespace {namespace} {{\n{text};\n}}\n"
    compile_src += macro_probes(export_set)
    tu = pre.parse(compile_src, [], ", ".join(lib.headers), own_lines)
    public = collect_c_prototypes(tu, export_set)
    annotated: dict[str, Prototype | None] = {ns: None for ns in snippets}
    expander = MacroExpander(tu) if snippets else None
    for c in tu.cursor.get_children():
        if c.kind == cindex().CursorKind.NAMESPACE and c.spelling in snippets:
            fname, origin, _ = snippets[c.spelling]
            for d in c.get_children():
                if d.kind == cindex().CursorKind.FUNCTION_DECL and d.spelling == fname:
                    annotated[c.spelling] = prototype_of(d, expander, origin)
    shadowed = defined_macros(tu, export_set)
    internal: dict[str, list[Prototype]] = {}
    if lib.internal_headers:
        # nvcc force-includes cuda_runtime.h ahead of every translation unit.
        src = "#include <cuda_runtime.h>\n" + "".join(f"#include <{h}>\n" for h in lib.internal_headers)
        itu = pre.parse(src, pre.nvcc_host_flags(), ", ".join(lib.internal_headers))
        internal = collect_c_prototypes(itu, export_set - set(public))
    for header in lib.separate_headers:
        # A header that cannot be included beside `headers` (cublas.h's legacy API beside cublas_v2.h):
        # read on its own, for the prototypes of exports the others do not declare.
        src = "".join(f"#define {d.replace('=', ' ', 1)}\n" for d in lib.defines) + f"#include <{header}>\n"
        stu = pre.parse(src, [], header)
        for name, protos in collect_c_prototypes(stu, export_set - set(public) - set(internal)).items():
            internal[name] = protos

    def pick(name: str, candidates: list[Prototype]) -> Prototype:
        first = candidates[0]
        for other in candidates[1:]:
            if other.signature_key() != first.signature_key():
                raise GenError(f"{name} is declared differently at {first.where} and {other.where}; "
                               f"the include path mixes headers of different versions")
        return first

    apis: dict[str, Api] = {}
    for name in exports:
        own = lib.functions.get(name)
        if own and own.prototype:
            proto = annotated[f"cutrace_prototype_{name}"]
            if proto is None:
                raise GenError(f"{lib.annotations}: [functions.{name}] prototype: '{own.prototype}' is not a C "
                               f"declaration of {name}")
            proto.from_header = False
            apis[name] = Api(name, lib, proto, own, origin="annotation")
        elif name in public:
            apis[name] = Api(name, lib, pick(name, public[name]), own, origin="header")
        elif name in internal:
            apis[name] = Api(name, lib, pick(name, internal[name]), own, origin="internal")

    def base_of(name: str) -> str | None:
        for suffix in lib.variant_suffixes:
            if name.endswith(suffix) and name[: -len(suffix)] in export_set:
                return name[: -len(suffix)]
        return None

    for name in exports:
        base = base_of(name)
        if name in apis:
            # A variant with a prototype of its own (__cudaLaunchKernel_ptsz) still records what its
            # base does; its parameters are checked against the annotation like the base's.
            if apis[name].spec is None and base and base in lib.functions:
                apis[name].spec = lib.functions[base]
            continue
        own = lib.functions.get(name)
        if base and base in apis:
            apis[name] = Api(name, lib, apis[base].proto, own or apis[base].spec, origin="variant", base=base)
        else:
            apis[name] = Api(name, lib, None, own)

    for api in apis.values():
        if lib.wrap == "listed" and api.proto is None:
            raise GenError(f"{lib.annotations}: [functions.{api.name}]: no header in [library] headers declares "
                           f"{api.name}; add the header that does")
        if api.proto is not None and api.spec is not None and api.spec.variadic is not None:
            if not api.proto.variadic:
                raise GenError(f"{lib.annotations}: [functions.{api.name}] variadic: {api.name} is not variadic "
                               f"({api.proto.where}); remove the key")
            origin = f"{lib.annotations} [functions.{api.name}] variadic"
            variadic = annotated[f"cutrace_variadic_{api.spec.name}"]
            api.variadic_param = variadic.params[0] if variadic and len(variadic.params) == 1 else None
            if api.variadic_param is None or api.variadic_param.name is None:
                raise GenError(f"{origin}: '{api.spec.variadic}' needs a type and a name, such as \"mode_t mode\"")
            validate_function(api)
            continue
        if api.proto is not None and api.proto.variadic and lib.wrap == "listed":
            raise GenError(f"{lib.annotations}: [functions.{api.name}]: {api.name} is variadic ({api.proto.where}); "
                           f"say which argument its callers pass after the fixed ones with variadic = \"TYPE name\"")
        if api.proto is not None and api.proto.variadic:
            # A variadic call cannot be forwarded from C++ without a va_list twin: the trampoline does it.
            if api.annotated:
                raise GenError(f"{lib.annotations}: [functions.{api.name}]: {api.name} is variadic "
                               f"({api.proto.where}), so its calls cannot be timed or recorded; remove the entry")
            api.proto = None
        if api.proto is None:
            if api.annotated:
                raise GenError(f"{lib.annotations}: [functions.{api.name}]: no header declares {api.name}, so its "
                               f"calls cannot be timed or recorded; give its C declaration as prototype = \"...\"")
            continue
        validate_function(api)

    return LibraryModel(lib, [apis[n] for n in exports], shadowed)


def validate_function(api: Api) -> None:
    lib, proto, spec = api.library, api.proto, api.spec
    kind, missing = resolve_result(lib, proto)
    where = f"{lib.annotations}: [functions.{spec.name if spec else api.name}]"
    if spec and spec.param_names is not None and len(spec.param_names) != len(proto.params):
        raise GenError(f"{where} param_names: {len(spec.param_names)} names for the {len(proto.params)} parameters "
                       f"of {proto.name} ({proto.where})")
    names = api.param_names
    reserved = [n for n in names if n.startswith("cutrace")]
    if reserved:
        raise GenError(f"{where}: parameter '{reserved[0]}' of {proto.name} ({proto.where}) would clash with the "
                       f"wrapper's own names; rename it with param_names")
    if len(set(names)) != len(names):
        raise GenError(f"{where}: the parameter names of {describe(proto, names)} repeat; set param_names")
    needs_missing = lib.domain == "os_runtime"  # a CUDA wrapper without its function fails as the loader does
    if spec is None:
        if needs_missing and kind != "void" and missing is None:
            raise GenError(f"{lib.annotations}: [library.results] \"{proto.ret_spelling}\": no 'missing' value, "
                           f"which {proto.name} returns when the real function cannot be found")
        return
    params, names = api.recordable_params()
    sig = describe(proto, names)
    for k, a in enumerate(spec.args):
        for extra in a.components[1:]:
            if extra not in names:
                raise GenError(f"{where} args[{k}] components: '{extra}' is not a parameter of {sig}")
        if a.param not in names:
            close = difflib.get_close_matches(a.param, names, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise GenError(f"{where} args[{k}]: '{a.param}' is not a parameter of {sig}{hint}")
        param = params[names.index(a.param)]
        if a.out and not param.is_pointer:
            raise GenError(f"{where} args[{k}]: out = true reads *{a.param} after the call, but {a.param} is "
                           f"'{param.type_text()}', not a pointer")
        if a.fmt == "enum":
            if a.field:
                raise GenError(f"{where} args[{k}]: format \"enum\" takes the parameter's own type; record the "
                               f"field with another format")
            words = [w for w in re.split(r"[\s*]+", param.type_text()) if w and w not in ("const", "volatile", "enum")]
            if len(words) != 1 or (param.is_pointer and not a.out):
                raise GenError(f"{where} args[{k}]: format \"enum\" needs a parameter of an enum type (or, with "
                               f"out = true, a pointer to one), but {a.param} is '{param.type_text()}'")
            a.type_name = words[0]
    if spec.hook:
        for h in spec.hook.args:
            if h not in names:
                close = difflib.get_close_matches(h, names, n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                raise GenError(f"{where} hook.args: '{h}' is not a parameter of {sig}{hint}")
    if needs_missing and kind != "void" and missing is None and spec.missing is None:
        raise GenError(f"{where}: nothing to return when the real {proto.name} cannot be found; set 'missing' here "
                       f"or in [library.results] \"{proto.ret_spelling}\"")


def soname_stem(soname: str) -> str:
    """libcudart.so.13 -> libcudart.so: the library whatever its major version."""
    return re.sub(r"(\.so)(\.\d+)*$", r"\1", soname)


def mark_abi_changes(models: list[LibraryModel]) -> None:
    """Flags each plain wrapper whose function a versioned library of the same name (another major
    version) declares differently: resolving such a wrapper must never fall back to that version."""
    other: dict[tuple[str, str], Prototype | None] = {}
    for m in models:
        if m.spec.wrappers == "versioned":
            for a in m.apis:
                other[(soname_stem(m.spec.soname), a.name)] = a.proto
    for m in models:
        if m.spec.wrappers != "plain":
            continue
        for a in m.apis:
            twin = other.get((soname_stem(m.spec.soname), a.name))
            # Only two known prototypes can be compared; a trampoline forwards the registers untouched.
            if a.proto is not None and twin is not None and twin.signature_key() != a.proto.signature_key():
                a.abi_changed = True
