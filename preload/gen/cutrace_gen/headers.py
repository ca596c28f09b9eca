"""Reads the prototypes from the headers with libclang, exactly as the compile of the wrappers sees them:
its include path, defines and system directories, and every macro expanded."""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import subprocess
import sys

from .common import GenError
from .tokens import (_DECL_SPECIFIERS_TO_DROP, _OPEN, Param, Prototype, Token, matching, split_top_level,
                     strip_attributes)

# libclang's own Python bindings (python3-clang-14; `pip install libclang==14.0.6` elsewhere), imported
# on first use so that the ELF reader's users (scripts/coverage.py) need no libclang.
_cindex = None


def cindex():
    """clang.cindex with its library loaded: $CUTRACE_LIBCLANG, else where the bindings look themselves
    (the PyPI wheel's own copy, or Debian's libclang-14.so with libclang-14-dev), else Debian's runtime
    library alone."""
    global _cindex
    if _cindex is not None:
        return _cindex
    try:
        import clang.cindex as ci
    except ImportError:
        raise GenError(f"the Python bindings of libclang (clang.cindex) are missing for {sys.executable}: install "
                       f"python3-clang-14 (Debian 12) or `pip install libclang==14.0.6`") from None
    override = os.environ.get("CUTRACE_LIBCLANG")
    candidates = [override] if override else [None, "/usr/lib/llvm-14/lib/libclang.so.1",
                                              "/usr/lib/x86_64-linux-gnu/libclang-14.so.1"]
    errors = []
    for candidate in candidates:
        if candidate is not None:
            ci.Config.library_file = candidate  # set directly: set_library_file refuses once a load failed
        try:
            ci.conf.lib  # noqa: B018  (loads the library)
            break
        except ci.LibclangError as e:
            errors.append(str(e).splitlines()[0])
            ci.conf.__dict__.pop("lib", None)
    else:
        where = "$CUTRACE_LIBCLANG" if override else "the usual places"
        raise GenError(f"cannot load libclang from {where} ({'; '.join(errors)}); install libclang1-14 or set "
                       f"CUTRACE_LIBCLANG to the path of libclang.so")
    _cindex = ci
    return ci


def lex(text: str) -> list[str]:
    """The C++ tokens of a snippet of an annotations file (a type name), as libclang's lexer splits them."""
    ci = cindex()
    tu = ci.Index.create().parse("cutrace-lex.cpp", args=["-x", "c++"], unsaved_files=[("cutrace-lex.cpp", text)],
                                 options=0)
    end = tu.get_location("cutrace-lex.cpp", len(text.encode()))
    start = tu.get_location("cutrace-lex.cpp", 0)
    return [t.spelling for t in tu.get_tokens(extent=ci.SourceRange.from_locations(start, end))]


class MacroExpander:
    """The tokens of a declaration as the compiler sees them after preprocessing.

    libclang gives a declaration's tokens as spelled in the header, and its preprocessing record says
    which of them are macro names the preprocessor expanded and by which definition, but it gives no
    expanded token stream. The generator prints the types exactly as the compile of the wrappers sees
    them (`__SOCKADDR_ARG` is `struct sockaddr* __restrict` there, `__dv(0)` a default argument), so the
    expansions the record names are replayed here from their definitions' tokens; a name an expansion
    produces is expanded by the definition in effect at that place. Stringizing (#) and pasting (##)
    are in no declaration the generator reads: they stop it with a message naming the macro."""

    def __init__(self, tu):
        ci = cindex()
        self.expansions = {}  # (file, offset) of a macro name the preprocessor expanded -> (expansion, order)
        self.definitions: dict[str, list[tuple[int, object]]] = {}  # name -> [(order, definition)]
        macro_definition, macro_expansion = ci.CursorKind.MACRO_DEFINITION, ci.CursorKind.MACRO_INSTANTIATION
        for k, c in enumerate(tu.cursor.get_children()):
            if c.kind == macro_definition:
                self.definitions.setdefault(c.spelling, []).append((k, c))
            elif c.kind == macro_expansion:
                start = c.location
                if start.file is not None:
                    self.expansions[(start.file.name, start.offset)] = (c, k)  # c.referenced when needed
        self.parsed: dict[int, tuple[list[str] | None, list[str]]] = {}

    def definition_at(self, name: str, order: int):
        """The last definition of `name` before the expansion with that order, or None."""
        best = None
        for k, d in self.definitions.get(name, ()):
            if k > order:
                break
            best = d
        return best

    def parse_definition(self, d) -> tuple[list[str] | None, list[str]]:
        """(parameters, or None for an object-like macro; replacement tokens) of a definition."""
        if d.hash not in self.parsed:
            tokens = list(d.get_tokens())
            params, body = None, tokens[1:]
            # Function-like only when the parenthesis touches the name.
            if len(tokens) > 1 and tokens[1].spelling == "(" and \
                    tokens[1].extent.start.offset == tokens[0].extent.end.offset:
                close = next(k for k, t in enumerate(tokens) if t.spelling == ")")
                params = [t.spelling for t in tokens[2:close] if t.spelling != ","]
                body = tokens[close + 1:]
            self.parsed[d.hash] = (params, [t.spelling for t in body])
        return self.parsed[d.hash]

    def source(self, clang_tokens, file: str) -> list[Token]:
        """libclang's tokens of a range of `file` as spelled, each macro name with its definition."""
        out = []
        for t in clang_tokens:
            text = t.spelling
            if text.startswith(("//", "/*")):
                continue  # a comment (cheaper to tell by its spelling than to ask libclang its kind)
            loc = t.location
            expansion, order = self.expansions.get((file, loc.offset), (None, None))
            macro = expansion.referenced if expansion is not None else None
            if macro is None:
                order = None
            out.append(Token(text, file, loc.line, loc.offset, frozenset(), macro, order))
        return out

    def expand(self, tokens: list[Token]) -> list[Token]:
        """The tokens the preprocessor makes of `tokens` (from source())."""
        return self._expand(tokens)

    def _expand(self, tokens: list[Token]) -> list[Token]:
        out: list[Token] = []
        pending = list(tokens)
        i = 0
        while i < len(pending):
            t = pending[i]
            d = t.macro
            if d is None and t.order is not None and t.offset < 0 and t.is_ident:
                d = self.definition_at(t.text, t.order)
            if d is None or t.text in t.hidden:
                out.append(t)
                i += 1
                continue
            params, body = self.parse_definition(d)
            if "#" in body or "##" in body:
                raise GenError(f"{t.file}:{t.line}: the generator cannot expand macro {t.text}, which stringizes or "
                               f"pastes tokens, in a declaration it reads")
            hidden = t.hidden | {t.text}

            def produced(text: str) -> Token:
                return Token(text, t.file, t.line, -1, hidden, None, t.order)

            end = i + 1
            if params is None:
                replacement = [produced(x) for x in body]
            else:
                if end >= len(pending) or pending[end].text != "(":
                    out.append(t)  # a function-like macro's name without arguments is not expanded
                    i += 1
                    continue
                close = matching(pending, end)
                args = split_top_level(pending[end + 1: close], ",") if close > end + 1 else []
                named = [p for p in params if p != "..."]
                values = {p: self._expand(args[n]) if n < len(args) else [] for n, p in enumerate(named)}
                if "..." in params:
                    rest = [self._expand(a) for a in args[len(named):]]
                    values["__VA_ARGS__"] = [x for n, a in enumerate(rest) for x in ([produced(",")] if n else []) + a]
                replacement = []
                for x in body:
                    if x in values:
                        replacement += [dataclasses.replace(v, hidden=v.hidden | hidden) for v in values[x]]
                    else:
                        replacement.append(produced(x))
                end = close + 1
            pending[i:end] = replacement
        return out


def _unnamed_position(tokens: list[Token]) -> int:
    """Where the name of an unnamed parameter goes: `void (*NAME)(int)`, `int NAME[4]`, `T* NAME`."""
    texts = [t.text for t in tokens]
    for i, t in enumerate(texts):
        if t == "(" and i + 1 < len(texts) and texts[i + 1] in ("*", "&", "^"):
            end = matching(tokens, i)
            insert = i + 1
            while insert < end and texts[insert] in ("*", "&", "^", "const", "volatile"):
                insert += 1
            return insert
    return texts.index("[") if "[" in texts else len(texts)


# The in-memory source each parse starts from: the #includes, the annotations' own declarations, probes.
PROBE_FILE = "cutrace-gen-probe.cpp"


class HeaderParser:
    """Reads the C-linkage function declarations of headers with libclang, as C++ with the include path,
    the defines and the language standard of the compile of the wrappers, and the compiler's own system
    directories (so that `#include <stddef.h>` finds the header the compile finds, whatever libclang's
    own installation lacks)."""

    def __init__(self, cxx: list[str], include_dirs: list[str], flags: list[str], foreign_dirs: list[str] = ()):
        self.cxx = cxx
        self.include_dirs = include_dirs
        self.flags = flags
        self.dependencies: set[str] = set()
        # Header directories of another version that no header read here may come from: a header missing
        # from include_dirs would otherwise be found on the compiler's own path (/usr/local/include may hold
        # the toolkit's) and mix two versions' declarations without a word.
        self.foreign_dirs = [os.path.realpath(d) + os.sep for d in foreign_dirs]
        self._compiler_args: list[str] | None = None

    def compiler_args(self) -> list[str]:
        """The compiler's system include directories and GNU version, as libclang arguments."""
        if self._compiler_args is None:
            cmd = [*self.cxx, "-x", "c++", *self.flags, "-E", "-dM", "-v", os.devnull]
            try:
                proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
            except OSError as e:
                raise GenError(f"cannot run {self.cxx[0]} to find its include directories ({e.strerror}); "
                               f"pass the C++ compiler with --cxx") from None
            if proc.returncode != 0:
                raise GenError(f"{self.cxx[0]} failed to list its include directories: "
                               f"{'; '.join(proc.stderr.strip().splitlines()[-3:])}")
            lines = proc.stderr.splitlines()
            try:
                first = lines.index("#include <...> search starts here:") + 1
                last = lines.index("End of search list.", first)
            except ValueError:
                raise GenError(f"{self.cxx[0]} -v printed no include search list; pass a GCC or Clang "
                               f"compatible C++ compiler with --cxx") from None
            args = ["-nostdinc", "-nostdinc++"]
            for d in lines[first:last]:
                args += ["-isystem", d.strip().removesuffix(" (framework directory)")]
            macros = dict(re.findall(r"^#define (__GNUC(?:_MINOR|_PATCHLEVEL)?__) (\d+)$", proc.stdout, re.M))
            if "__GNUC__" in macros:
                # The headers test the GNU version (glibc's __GNUC_PREREQ): answer as the compiler does.
                args.append("-fgnuc-version=" + ".".join(macros.get(m, "0") for m in
                                                        ("__GNUC__", "__GNUC_MINOR__", "__GNUC_PATCHLEVEL__")))
            self._compiler_args = args
        return self._compiler_args

    def parse(self, source: str, extra_flags: list[str], what: str, own_lines: dict[int, str] | None = None):
        """The translation unit of `source`. A fatal error (a header not found) stops the generator, and so
        does an error on a line of `source` itself; `own_lines` says what to blame for one (an annotation).
        Other errors are the headers' business: nvcc's host pass, for one, declares things that only a
        GCC-compatible compiler lets pass, with no effect on the declarations read here."""
        ci = cindex()
        name = PROBE_FILE
        user, system = [], []
        k = 0
        while k < len(extra_flags):  # -isystem directories come before the compiler's own, as in a compile
            if extra_flags[k] == "-isystem":
                system += extra_flags[k: k + 2]
                k += 2
            else:
                user.append(extra_flags[k])
                k += 1
        args = ["-x", "c++", *self.flags, *user, "-ferror-limit=0", "-w"]
        for d in self.include_dirs:
            args += ["-I", d]
        compiler = self.compiler_args()
        args += compiler[:2] + system + compiler[2:]
        options = ci.TranslationUnit.PARSE_DETAILED_PROCESSING_RECORD | ci.TranslationUnit.PARSE_SKIP_FUNCTION_BODIES
        try:
            tu = ci.Index.create().parse(name, args=args, unsaved_files=[(name, source)], options=options)
        except ci.TranslationUnitLoadError:
            raise GenError(f"libclang could not parse {what} (arguments: {' '.join(args)})") from None
        for d in tu.diagnostics:
            loc = d.location
            own = loc.file is not None and loc.file.name == name
            if own and d.severity >= ci.Diagnostic.Error and (own_lines or {}).get(loc.line):
                raise GenError(f"{own_lines[loc.line]} ({d.spelling})")
            if d.severity >= ci.Diagnostic.Fatal or (own and d.severity >= ci.Diagnostic.Error):
                place = f"{loc.file.name}:{loc.line}: " if loc.file is not None and not own else ""
                raise GenError(f"parsing {what} with the headers in {', '.join(self.include_dirs)}: {place}{d.spelling}")
        for inclusion in tu.get_includes():
            path = inclusion.include.name
            self.dependencies.add(os.path.abspath(path))
            real = os.path.realpath(path)
            foreign = next((d for d in self.foreign_dirs if real.startswith(d)), None)
            if foreign:
                raise GenError(f"parsing {what} with the headers in {', '.join(self.include_dirs)} read "
                               f"{path} ({real}), which belongs to {foreign.rstrip(os.sep)}: the headers "
                               f"are incomplete; fetch them again (scripts/fetch-cuda-wheels.sh)")
        return tu

    def macro_value(self, header: str, macro: str) -> int | None:
        src = f"#include <{header}>\n#ifdef {macro}\nenum : long long {{ cutrace_value_of_macro = {macro} }};\n#endif\n"
        tu = self.parse(src, [], f"{header} for {macro}")
        for c in tu.cursor.get_children():
            if c.kind == cindex().CursorKind.ENUM_DECL and c.location.file and c.location.file.name == PROBE_FILE:
                for e in c.get_children():
                    if e.spelling == "cutrace_value_of_macro":
                        return e.enum_value
        return None

    def nvcc_host_flags(self) -> list[str]:
        """The macros nvcc's host pass defines (see `nvcc --dryrun`), for the toolkit of these headers."""
        version = self.macro_value("cuda_runtime_api.h", "CUDART_VERSION")
        if version is None:
            raise GenError("cannot read CUDART_VERSION from cuda_runtime_api.h; pass the CUDA include directory "
                           "with --include-dir")
        major, minor = version // 1000, version % 1000 // 10
        flags = ["-D__CUDACC__", "-D__NVCC__", f"-D__CUDACC_VER_MAJOR__={major}",
                 f"-D__CUDACC_VER_MINOR__={minor}", "-D__CUDACC_VER_BUILD__=0",
                 f"-D__CUDA_API_VER_MAJOR__={major}", f"-D__CUDA_API_VER_MINOR__={minor}",
                 # nvcc's generated code defines this before it includes crt/host_runtime.h, which
                 # otherwise warns that it is an internal header.
                 "-D__CUDA_INCLUDE_COMPILER_INTERNAL_HEADERS__"]
        for d in self.include_dirs:
            if os.path.isdir(os.path.join(d, "cccl")):
                flags += ["-isystem", os.path.join(d, "cccl")]
        return flags


@functools.cache
def _file_size(path: str) -> int:
    return os.path.getsize(path)


def prototype_of(cursor, expander: MacroExpander, origin: str | None = None) -> Prototype | None:
    """The prototype of a function declaration cursor, its types spelled as the compile sees them; None
    for a declaration the wrappers cannot repeat (an asm label renames the symbol, the declarator is
    parenthesised: a function returning a function pointer)."""
    ci = cindex()
    if any(c.kind == ci.CursorKind.ASM_LABEL_ATTR for c in cursor.get_children()):
        return None
    # The tokens from the declaration's start to past its parameter list. Not cursor.get_tokens(): a range
    # that starts or ends in a macro expansion (`__host__ unsigned f(...)`) tokenizes to nothing.
    start, end = cursor.extent.start, cursor.extent.end
    if start.file is None or end.file is None or start.file.name != end.file.name:
        return None
    tu = cursor.translation_unit
    file = start.file.name
    # A little past the end too: the parse skips function bodies, so only the `{` after the declarator
    # tells a definition (an inline helper of the header's, never an export) from a declaration.
    past = end.offset if file == PROBE_FILE else min(end.offset + 64, _file_size(file))
    source = expander.source(tu.get_tokens(extent=ci.SourceRange.from_locations(
        tu.get_location(file, start.offset), tu.get_location(file, past))), file)
    loc = cursor.location
    position = {t.offset: k for k, t in enumerate(source)}

    def index_of(location) -> int | None:
        return position.get(location.offset) if location.file is not None and location.file.name == file else None

    at = index_of(loc)
    if at is None or at + 1 >= len(source) or source[at + 1].text != "(":
        return None  # no plain declarator: a parenthesised one, or one a macro writes
    ret = [t for t in strip_attributes(expander.expand(source[:at]))
           if t.text not in _DECL_SPECIFIERS_TO_DROP and t.text not in ('"C"', '"C++"')]
    if not ret or any(t.text in _OPEN or t.text in (")", "]", "}", "=", ",") for t in ret):
        return None
    try:
        close = matching(source, at + 1)
    except GenError:
        return None  # the parameter list ends in a macro expansion: no plain declarator
    if next((t.text for t in source[close + 1:] if t.text in (";", ",", "{")), None) == "{":
        return None
    arguments = list(cursor.get_arguments())
    starts = [index_of(p.extent.start) for p in arguments]
    if any(k is None or not at + 1 < k < close for k in starts):
        return None  # a parameter list a macro writes: not what the header spells
    params: list[Param] = []
    pointer_kinds = {ci.TypeKind.POINTER, ci.TypeKind.CONSTANTARRAY, ci.TypeKind.INCOMPLETEARRAY,
                     ci.TypeKind.VARIABLEARRAY, ci.TypeKind.DEPENDENTSIZEDARRAY, ci.TypeKind.BLOCKPOINTER}
    # A parameter's tokens run to the next one's start: libclang's extent of one whose default argument
    # is a macro (`__dv(0)`) ends inside the macro's arguments.
    for p, start, end in zip(arguments, starts, starts[1:] + [close]):
        piece = split_top_level(source[start:end], ",")[0]  # without `, ...` after the last one
        ptoks = expander.expand(piece)
        # Without its default argument (`size_t sharedMem = 0`): a redeclaration may not repeat it.
        depth = 0
        for k, t in enumerate(ptoks):
            if t.text in _OPEN:
                depth += 1
            elif t.text in (")", "]", "}"):
                depth -= 1
            elif t.text == "=" and depth == 0:
                ptoks = ptoks[:k]
                break
        ptoks = strip_attributes(ptoks)
        pointer = p.type.kind in pointer_kinds
        ploc = p.location
        named = bool(p.spelling) and ploc.file is not None
        index = next((k for k, t in enumerate(ptoks) if named and t.offset == ploc.offset
                      and t.file == ploc.file.name), None)
        if index is None:
            params.append(Param(ptoks, None, _unnamed_position(ptoks), pointer))
        else:
            params.append(Param(ptoks, p.spelling, index, pointer))
    variadic = cursor.type.kind == ci.TypeKind.FUNCTIONPROTO and cursor.type.is_function_variadic()
    if origin is not None:
        return Prototype(cursor.spelling, ret, params, variadic, origin, loc.line)
    return Prototype(cursor.spelling, ret, params, variadic, file, loc.line)


def c_function_decls(parent):
    """The function declarations with C linkage in the global namespace under `parent`, through
    extern "C" blocks."""
    ci = cindex()
    for c in parent.get_children():
        if c.kind in (ci.CursorKind.LINKAGE_SPEC, ci.CursorKind.UNEXPOSED_DECL):
            yield from c_function_decls(c)
        elif c.kind == ci.CursorKind.FUNCTION_DECL and c.mangled_name == c.spelling:
            yield c


def collect_c_prototypes(tu, wanted: set[str]) -> dict[str, list[Prototype]]:
    """The declarations (not definitions) of `wanted` with C linkage in the global namespace."""
    expander = None
    found: dict[str, list[Prototype]] = {}
    for c in c_function_decls(tu.cursor):
        if c.spelling not in wanted:
            continue
        if expander is None:
            expander = MacroExpander(tu)
        proto = prototype_of(c, expander)
        if proto is not None:
            found.setdefault(proto.name, []).append(proto)
    return found


def defined_macros(tu, names: set[str]) -> set[str]:
    """Which of `names` are macros at the end of the translation unit, from the probes that
    `macro_probes(names)` appended to it."""
    found = set()
    for c in tu.cursor.get_children():
        if c.kind == cindex().CursorKind.VAR_DECL and c.spelling.startswith("cutrace_macro_probe_"):
            found.add(c.spelling[len("cutrace_macro_probe_"):])
    return found & names


def macro_probes(names: set[str]) -> str:
    return "".join(f"#ifdef {n}\nextern int cutrace_macro_probe_{n};\n#endif\n" for n in sorted(names))
