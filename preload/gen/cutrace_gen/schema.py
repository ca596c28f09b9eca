"""The annotations files (preload/annotations/*.toml, docs/annotations.md), read strictly: an unknown
key, a wrong type or an option in the wrong domain stops the build with the file and the entry."""

from __future__ import annotations

import dataclasses
import difflib
import re
import tomllib
from pathlib import Path

from .common import ARG_FORMATS, CLASSES, DOMAINS, MAX_ARGS, MPI_FORMATS, RESULT_KINDS, GenError
from .headers import lex
from .tokens import type_spelling

@dataclasses.dataclass
class ArgSpec:
    param: str
    fmt: str
    out: bool
    field: list[str]
    label: str
    type_name: str | None = None  # the C type of an enum argument, set when checked against the prototype
    components: list[str] = dataclasses.field(default_factory=list)  # x, y, z parameters of a dim3


@dataclasses.dataclass
class HookSpec:
    name: str
    args: list[str]


@dataclasses.dataclass
class FunctionSpec:
    name: str
    api_class: str = "other"
    args: list[ArgSpec] = dataclasses.field(default_factory=list)
    record_always: bool = False
    hook: HookSpec | None = None
    param_names: list[str] | None = None
    prototype: str | None = None
    missing: str | None = None
    report_name: str | None = None
    internal: bool | None = None
    variadic: str | None = None  # the one argument a variadic function's wrapper reads and forwards


@dataclasses.dataclass
class ResultSpec:
    kind: str
    missing: str | None


@dataclasses.dataclass
class LibrarySpec:
    name: str
    annotations: Path
    binary: Path
    soname: str
    domain: str
    headers: list[str]
    internal_headers: list[str]
    separate_headers: list[str]
    defines: list[str]
    internal_prefixes: list[str]
    success: str | None
    variant_suffixes: list[str]
    results: dict[str, ResultSpec]
    functions: dict[str, FunctionSpec]
    wrap: str = "exports"     # exports: every exported function; listed: only those under [functions]
    param_prefix: str = ""    # stripped from the headers' parameter names (glibc's __fd)
    # versioned: the wrappers are defined under the library's own symbol version (cudaMalloc@libcudart.so.12),
    # in libcutrace-cuda12.so, so that only references bound to that version reach them; plain: unversioned
    # definitions in the shim, which every other reference reaches.
    wrappers: str = "plain"
    include_dirs: list[str] | None = None  # the headers of this library's version; None: --include-dir
    extends: str | None = None             # the annotations file this one extends
    # Where the binary is not at hand (the driver, whose exports only the toolkit's stub or an installed
    # driver carries): the sets of defines, each beside `defines`, under which the headers declare every
    # export by its own name. None: the binary is required.
    header_exports: list[list[str]] | None = None
    symbol_version: str | None = None      # the version every export is defined under (set from the binary)


_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class TomlChecker:
    """Strict reading of an annotations file: unknown keys and wrong types are errors, never ignored."""

    def __init__(self, path: Path):
        self.path = path

    def fail(self, where: str, message: str) -> GenError:
        return GenError(f"{self.path}: {where}: {message}")

    def table(self, value, where: str, allowed: set[str], required: set[str] = frozenset()) -> dict:
        if not isinstance(value, dict):
            raise self.fail(where, "expected a table")
        for key in value:
            if key not in allowed:
                close = difflib.get_close_matches(key, sorted(allowed), n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else f"; allowed: {', '.join(sorted(allowed))}"
                raise self.fail(where, f"unknown key '{key}'{hint}")
        for key in sorted(required):
            if key not in value:
                raise self.fail(where, f"missing required key '{key}'")
        return value

    def string(self, value, where: str) -> str:
        if not isinstance(value, str) or not value:
            raise self.fail(where, "expected a non-empty string")
        return value

    def ident(self, value, where: str) -> str:
        s = self.string(value, where)
        if not _IDENT_RE.fullmatch(s):
            raise self.fail(where, f"'{s}' is not an identifier")
        return s

    def strings(self, value, where: str) -> list[str]:
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self.fail(where, "expected a list of non-empty strings")
        return list(value)

    def boolean(self, value, where: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(where, "expected true or false")
        return value

    def choice(self, value, where: str, choices) -> str:
        s = self.string(value, where)
        if s not in choices:
            raise self.fail(where, f"'{s}' is not one of {', '.join(choices)}")
        return s


def read_toml(path: Path) -> dict:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as e:
        raise GenError(f"cannot read {path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise GenError(f"{path}: not valid TOML: {e}") from None


def merge_extended(doc: dict, annotations: Path, c: TomlChecker) -> dict:
    """An annotations file that `extends` another (another major version of the same library) takes the
    other's [library] keys and [functions] entries, overrides what it sets itself (a function entry as a
    whole), and drops the functions it lists under `omit`: those its version does not export."""
    lib = c.table(doc.get("library"), "[library]", set(doc.get("library") or {}))
    if "extends" not in lib:
        return doc
    base_path = annotations.parent / c.string(lib["extends"], "[library] extends")
    base = read_toml(base_path)
    bc = TomlChecker(base_path)
    bc.table(base, "top level", {"library", "functions"}, {"library"})
    base_lib = bc.table(base["library"], "[library]", set(base["library"]))
    if "extends" in base_lib or "omit" in base_lib:
        raise c.fail("[library] extends", f"{base_path.name} extends another file itself; extend the file it extends")
    functions = dict(bc.table(base.get("functions", {}), "[functions]", set(base.get("functions", {}))))
    for fname in c.strings(lib.get("omit", []), "[library] omit"):
        if fname not in functions:
            raise c.fail("[library] omit", f"{base_path.name} has no [functions.{fname}]; remove '{fname}' from omit")
        del functions[fname]
    functions.update(c.table(doc.get("functions", {}), "[functions]", set(doc.get("functions", {}))))
    merged = {k: v for k, v in base_lib.items()}
    merged.update({k: v for k, v in lib.items() if k not in ("extends", "omit")})
    return {"library": merged, "functions": functions, "extends": base_path.name}


NO_MISSING_VALUE = ("a CUDA wrapper whose real function the library lacks fails as the loader's lazy binding "
                    "would (its message, exit 127), so it returns nothing of its own; remove the key")


def load_library(name: str, annotations: Path, binary: Path | None) -> LibrarySpec:
    doc = read_toml(annotations)
    c = TomlChecker(annotations)
    c.table(doc, "top level", {"library", "functions"}, {"library"})
    doc = merge_extended(doc, annotations, c)
    lib = c.table(doc["library"], "[library]",
                  {"soname", "domain", "headers", "internal_headers", "separate_headers", "defines", "internal_prefixes", "success",
                   "variant_suffixes", "results", "wrap", "param_prefix", "wrappers", "header_exports"},
                  {"soname", "domain", "headers", "results"})
    spec = LibrarySpec(
        name=name,
        annotations=annotations,
        binary=binary,
        soname=c.string(lib["soname"], "[library] soname"),
        domain=c.choice(lib["domain"], "[library] domain", DOMAINS),
        headers=c.strings(lib["headers"], "[library] headers"),
        internal_headers=c.strings(lib.get("internal_headers", []), "[library] internal_headers"),
        separate_headers=c.strings(lib.get("separate_headers", []), "[library] separate_headers"),
        defines=c.strings(lib.get("defines", []), "[library] defines"),
        internal_prefixes=c.strings(lib.get("internal_prefixes", []), "[library] internal_prefixes"),
        success=c.ident(lib["success"], "[library] success") if "success" in lib else None,
        variant_suffixes=c.strings(lib.get("variant_suffixes", []), "[library] variant_suffixes"),
        results={},
        functions={},
        wrap=c.choice(lib.get("wrap", "exports"), "[library] wrap", ("exports", "listed")),
        param_prefix=c.string(lib["param_prefix"], "[library] param_prefix") if "param_prefix" in lib else "",
        wrappers=c.choice(lib.get("wrappers", "plain"), "[library] wrappers", ("plain", "versioned")),
    )
    spec.extends = doc.get("extends")
    if "header_exports" in lib:
        sets = lib["header_exports"]
        if not isinstance(sets, list) or not all(isinstance(x, list) for x in sets):
            raise c.fail("[library] header_exports", "expected a list of lists of defines, such as [[], [\"NAME\"]]")
        spec.header_exports = [c.strings(x, "[library] header_exports") for x in sets]
    if spec.wrappers == "versioned" and spec.domain == "os_runtime":
        raise c.fail("[library] wrappers", "the OS runtime's wrappers are unversioned; remove the key")
    if spec.wrap == "listed" and spec.domain not in ("os_runtime", "mpi"):
        raise c.fail("[library] wrap", "\"listed\" is for the OS runtime and MPI (domain = \"os_runtime\" or "
                                       "\"mpi\"), whose wrappers live in libraries of their own")
    if spec.domain == "mpi" and (spec.wrap != "listed" or spec.wrappers != "plain"):
        raise c.fail("[library]", "an mpi library wraps only the functions it lists, unversioned: set "
                                  "wrap = \"listed\" and leave wrappers out")
    if spec.domain == "os_runtime" and spec.wrap != "listed":
        raise c.fail("[library] wrap", "an os_runtime library wraps only the functions it lists: set wrap = \"listed\"")
    for key, defines in [("defines", spec.defines)] + [("header_exports", x) for x in spec.header_exports or []]:
        for d in defines:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(=.*)?", d):
                raise c.fail(f"[library] {key}", f"'{d}' is not NAME or NAME=VALUE")
    results = c.table(lib["results"], "[library.results]", set(lib["results"]))
    for type_name, value in results.items():
        where = f"[library.results] \"{type_name}\""
        r = c.table(value, where, {"kind", "missing"}, {"kind"})
        kind = c.choice(r["kind"], where + " kind", RESULT_KINDS)
        missing = c.string(r["missing"], where + " missing") if "missing" in r else None
        if missing is not None and spec.domain != "os_runtime":
            raise c.fail(where + " missing", NO_MISSING_VALUE)
        spec.results[type_spelling(lex(type_name))] = ResultSpec(kind, missing)
    if any(r.kind == "error" for r in spec.results.values()) and spec.success is None:
        raise c.fail("[library]", "results of kind \"error\" need 'success', the value of a successful call")

    functions = c.table(doc.get("functions", {}), "[functions]", set(doc.get("functions", {})))
    for fname, body in functions.items():
        where = f"[functions.{fname}]"
        if not _IDENT_RE.fullmatch(fname):
            raise c.fail(where, f"'{fname}' is not a function name")
        f = c.table(body, where, {"class", "args", "record_always", "hook", "param_names", "prototype", "missing",
                                  "report_name", "internal", "variadic"})
        fs = FunctionSpec(fname)
        if "class" in f:
            fs.api_class = c.choice(f["class"], where + " class", CLASSES)
        fs.record_always = c.boolean(f.get("record_always", False), where + " record_always")
        if "param_names" in f:
            fs.param_names = [c.ident(v, f"{where} param_names") for v in c.strings(f["param_names"],
                                                                                    where + " param_names")]
        if "prototype" in f:
            fs.prototype = c.string(f["prototype"], where + " prototype")
        if "missing" in f:
            if spec.domain != "os_runtime":
                raise c.fail(where + " missing", NO_MISSING_VALUE)
            fs.missing = c.string(f["missing"], where + " missing")
        if "report_name" in f:
            fs.report_name = c.ident(f["report_name"], where + " report_name")
        if "internal" in f:
            fs.internal = c.boolean(f["internal"], where + " internal")
        if "variadic" in f:
            if spec.domain != "os_runtime":
                raise c.fail(where + " variadic", "only the OS runtime's wrappers forward a variadic argument "
                                                  "(domain = \"os_runtime\"); remove the key")
            fs.variadic = c.string(f["variadic"], where + " variadic")
        if "hook" in f:
            h = c.table(f["hook"], where + " hook", {"name", "args"}, {"name", "args"})
            fs.hook = HookSpec(c.ident(h["name"], where + " hook.name"),
                               [c.ident(a, where + " hook.args") for a in c.strings(h["args"], where + " hook.args")])
        args = f.get("args", [])
        if not isinstance(args, list):
            raise c.fail(where, "args must be a list of tables")
        if len(args) > MAX_ARGS:
            raise c.fail(where, f"{len(args)} args, but a record holds at most {MAX_ARGS}")
        for k, a in enumerate(args):
            aw = f"{where} args[{k}]"
            a = c.table(a, aw, {"param", "format", "out", "field", "name", "components"}, {"param", "format"})
            param = c.ident(a["param"], aw + " param")
            components = []
            fmt = c.choice(a["format"], aw + " format", ARG_FORMATS)
            if fmt in MPI_FORMATS:
                if spec.domain != "mpi":
                    raise c.fail(aw + " format", f"\"{fmt}\" is for the MPI wrappers (domain = \"mpi\")")
                _, _, arity, meaning = MPI_FORMATS[fmt]
                components = [c.ident(v, aw + " components") for v in c.strings(a.get("components", [param]),
                                                                                  aw + " components")]
                if len(components) != arity or components[0] != param:
                    raise c.fail(aw, f"format \"{fmt}\" takes {meaning}: components names {arity} parameter"
                                     f"{'s' if arity > 1 else ''}, param being the first")
                if "field" in a:
                    raise c.fail(aw, f"format \"{fmt}\" takes the parameter itself; remove field")
            elif "components" in a:
                components = [c.ident(v, aw + " components") for v in c.strings(a["components"], aw + " components")]
                if len(components) != 3 or a["format"] != "dim3" or components[0] != param:
                    raise c.fail(aw, "components names the x, y and z parameters of a dim3 passed as three "
                                     "integers; param must be the first of them and format \"dim3\"")
            field = []
            if "field" in a:
                field = c.string(a["field"], aw + " field").split(".")
                for part in field:
                    if not _IDENT_RE.fullmatch(part):
                        raise c.fail(aw, f"field '{a['field']}' is not a member path such as 'extent.width'")
            label = c.string(a["name"], aw + " name") if "name" in a else (field[-1] if field else param)
            fs.args.append(ArgSpec(param, c.choice(a["format"], aw + " format", ARG_FORMATS),
                                   c.boolean(a.get("out", False), aw + " out"), field, label,
                                   components=components))
        spec.functions[fname] = fs
    return spec
