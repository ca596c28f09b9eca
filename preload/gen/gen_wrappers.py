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
import hashlib
import dataclasses
import difflib
import functools
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

try:
    import elf_symbols
except ImportError as e:
    sys.exit(f"gen_wrappers: error: {e}")

PROG = "gen_wrappers"


class GenError(Exception):
    """A problem the user has to fix; printed as one message, exit status 1."""


# ---------------------------------------------------------------------------------------------
# Vocabulary shared with include/cutrace/abi.h and format.h
# ---------------------------------------------------------------------------------------------

DOMAINS_FILE = Path(__file__).resolve().parents[2] / "include" / "cutrace" / "domains.def"


def read_domains(path: Path) -> dict[str, str]:
    """{name: ApiDomain enumerator} from the rows of domains.def, the list the C++ side includes."""
    row = re.compile(r'CUTRACE_DOMAIN\(\s*(k\w+)\s*,\s*(\d+)\s*,\s*"(\w+)"\s*,.*\)\s*$')
    domains = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.startswith("CUTRACE_DOMAIN("):
            continue
        m = row.match(line)
        if not m:
            raise GenError(f"{path}:{number}: a row is CUTRACE_DOMAIN(kName, id, \"name\", ...) on one line")
        domains[m.group(3)] = m.group(1)
    if not domains:
        raise GenError(f"{path}: no CUTRACE_DOMAIN rows")
    return domains


DOMAINS = read_domains(DOMAINS_FILE)

CLASSES = {"other": "kOther", "sync": "kSync", "memory": "kMemory", "kernel": "kKernel"}

ARG_FORMATS = {
    "unsigned": "kUnsigned",
    "signed": "kSigned",
    "bytes": "kBytes",
    "pointer": "kPointer",
    "memcpy_kind": "kMemcpyKind",
    "stream": "kStream",
    "device": "kDevice",
    "kernel_stub": "kKernelStub",
    "kernel_handle": "kKernelHandle",
    "dim3": "kDim3",
    "flags": "kFlags",
    "function": "kFunction",
    "enum": "kEnum",
}

# The MPI wrappers' formats (domain = "mpi"): a slot computed from one or more parameters by a function of
# preload/mpi_runtime.h, cutrace::mpi::FUNCTION(param, components[1:]...). Each is
# format -> (abi::ArgFormat, function, the parameters it takes, what they are).
MPI_FORMATS = {
    "mpi_comm": ("kUnsigned", "comm_id", 1, "the communicator"),
    "mpi_comm_size": ("kUnsigned", "comm_size", 1, "the communicator"),
    "mpi_rank": ("kMpiRank", "world_rank", 2, "the rank and its communicator"),
    "mpi_datatype": ("kMpiDatatype", "datatype_id", 1, "the datatype"),
    "mpi_bytes": ("kBytes", "bytes", 2, "the count and its datatype"),
    "mpi_status_source": ("kMpiRank", "status_source", 2, "the status and the communicator"),
    "mpi_status_tag": ("kSigned", "status_tag", 1, "the status"),
}
ARG_FORMATS.update({name: f[0] for name, f in MPI_FORMATS.items()})

# How a return value is recorded (format::ResultKind) and flagged (abi::kCallFlag*).
RESULT_KINDS = {
    "error": ("kErrorCode", None),
    "pointer": ("kPointer", "cutrace::abi::kCallFlagResultIsPointer"),
    "unsigned": ("kUnsigned", None),
    # A signed integer or an enum that is no error code (a count, a version, -1 for failure).
    "signed": ("kSigned", None),
    # A value the record cannot hold (a struct): recorded like a void function.
    "none": ("kVoid", "cutrace::abi::kCallFlagNoResult"),
}

MAX_ARGS = 12  # abi::kMaxApiArgs

# ---------------------------------------------------------------------------------------------
# Tokens of the declarations
# ---------------------------------------------------------------------------------------------

_IDENT_TOKEN_RE = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")


@dataclasses.dataclass(frozen=True)
class Token:
    text: str
    file: str
    line: int
    offset: int = -1  # in `file`, for a token spelled there; -1 for one a macro expansion produced
    # The macros whose expansion produced the token, which a rescan must not expand again.
    hidden: frozenset = frozenset()
    # A macro name the preprocessor expanded here: its definition (a libclang cursor), and the place of
    # the expansion among the definitions, inherited by the tokens the expansion produces.
    macro: object = dataclasses.field(default=None, compare=False)
    order: int | None = dataclasses.field(default=None, compare=False)

    @property
    def is_ident(self) -> bool:
        return _IDENT_TOKEN_RE.fullmatch(self.text) is not None


_OPEN = {"(": ")", "[": "]", "{": "}"}

# Words that can precede a declarator's name without being a type of their own.
_QUALIFIERS = {"const", "volatile", "struct", "union", "enum", "class", "typename", "restrict", "__restrict",
               "__restrict__", "register"}
_DECL_SPECIFIERS_TO_DROP = {"extern", "static", "inline", "__inline", "__inline__", "__extension__",
                            "constexpr", "thread_local"}
_ATTRIBUTE_WORDS = {"__attribute__", "__attribute", "__declspec", "alignas", "_Alignas", "__asm__", "__asm", "asm"}
_BUILTIN_TYPE_WORDS = {"void", "char", "short", "int", "long", "float", "double", "signed", "unsigned", "bool",
                       "_Bool", "wchar_t", "char8_t", "char16_t", "char32_t", "__int128", "auto"}


def matching(tokens: list[Token], i: int) -> int:
    """Index of the bracket closing the one at tokens[i]."""
    stack = [_OPEN[tokens[i].text]]
    j = i + 1
    while j < len(tokens):
        t = tokens[j].text
        if t in _OPEN:
            stack.append(_OPEN[t])
        elif t in (")", "]", "}"):
            if t != stack[-1]:
                raise GenError(f"{tokens[j].file}:{tokens[j].line}: unbalanced '{t}' in a declaration")
            stack.pop()
            if not stack:
                return j
        j += 1
    raise GenError(f"{tokens[i].file}:{tokens[i].line}: '{tokens[i].text}' is never closed")


def strip_attributes(tokens: list[Token]) -> list[Token]:
    """Removes GNU/C++11 attributes, alignas and asm labels."""
    out: list[Token] = []
    i = 0
    while i < len(tokens):
        t = tokens[i].text
        if t in _ATTRIBUTE_WORDS and i + 1 < len(tokens) and tokens[i + 1].text == "(":
            i = matching(tokens, i + 1) + 1
            continue
        if t == "[" and i + 1 < len(tokens) and tokens[i + 1].text == "[":
            i = matching(tokens, i) + 1
            continue
        out.append(tokens[i])
        i += 1
    return out


def split_top_level(tokens: list[Token], sep: str) -> list[list[Token]]:
    parts: list[list[Token]] = [[]]
    depth = 0
    for t in tokens:
        if t.text in _OPEN:
            depth += 1
        elif t.text in (")", "]", "}"):
            depth -= 1
        if t.text == sep and depth == 0:
            parts.append([])
        else:
            parts[-1].append(t)
    return parts


def render(tokens: list[Token] | list[str]) -> str:
    """Joins tokens into readable C++: `const char* name`, `void (*fn)(void*)`, `f(int a, int b)`."""
    texts = [t.text if isinstance(t, Token) else t for t in tokens]
    out: list[str] = []
    for i, t in enumerate(texts):
        if i:
            prev = texts[i - 1]
            if t in (",", ")", "]", ";", "[", "::") or prev in ("(", "[", "::"):
                glue = ""
            elif t in ("*", "&", "&&"):
                glue = ""
            elif prev in ("*", "&", "&&"):
                # `char* p` and `char* const`, but `(*fn)`.
                j = i - 1
                while j > 0 and texts[j - 1] in ("*", "&", "&&"):
                    j -= 1
                glue = "" if j > 0 and texts[j - 1] == "(" else " "
            elif t == "(":
                glue = " " if prev in _BUILTIN_TYPE_WORDS or prev in _QUALIFIERS else ""
            else:
                glue = " "
            out.append(glue)
        out.append(t)
    return "".join(out)


def type_spelling(tokens: list[Token] | list[str]) -> str:
    """Canonical spelling of a type, used as a key: `const char*`, `void**`, `struct X`."""
    text = " ".join(t.text if isinstance(t, Token) else t for t in tokens)
    text = re.sub(r"\s*\*\s*", "*", text)
    text = re.sub(r"\*(?=[A-Za-z_])", "* ", text)
    return text.strip()


@dataclasses.dataclass
class Param:
    tokens: list[Token]   # the declaration without its default argument
    name: str | None      # None when the header leaves it unnamed
    name_index: int       # where the name is (or would be inserted) within `tokens`
    is_pointer: bool      # the declarator has a pointer level of its own (`T* p`, not `cudaStream_t s`)

    def declaration(self, name: str) -> str:
        """The parameter's declaration with `name` as its name."""
        toks = [t.text for t in self.tokens]
        if self.name is not None:
            toks[self.name_index] = name
            return render(toks)
        return render(toks[: self.name_index] + [name] + toks[self.name_index:])

    def type_text(self) -> str:
        toks = [t.text for t in self.tokens]
        if self.name is not None:
            del toks[self.name_index]
        return type_spelling(toks)


@dataclasses.dataclass
class Prototype:
    name: str
    ret: list[Token]
    params: list[Param]
    variadic: bool
    file: str
    line: int
    from_header: bool = True  # False for a prototype given in an annotations file

    @property
    def ret_spelling(self) -> str:
        return type_spelling(self.ret)

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def signature_key(self) -> tuple:
        return (self.ret_spelling, tuple(p.type_text() for p in self.params), self.variadic)


# ---------------------------------------------------------------------------------------------
# Reading the headers with libclang
# ---------------------------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------------------------
# The installed libraries
# ---------------------------------------------------------------------------------------------

def exported_functions(binary: Path) -> tuple[list[str], str | None]:
    """The exported functions, and the symbol version they are all defined under (None: unversioned,
    as the driver and libc's mix of versions are for this purpose)."""
    try:
        exports = elf_symbols.exported_functions(binary)
    except (elf_symbols.ElfReadError, OSError) as e:
        raise GenError(f"cannot read the exports of {binary}: {e}") from None
    if not exports:
        raise GenError(f"{binary} exports no functions; is it the right library?")
    versions = set().union(*exports.values())
    version = versions.pop() if len(versions) == 1 else None
    return sorted(exports), version or None


def elf_soname(binary: Path) -> str | None:
    """DT_SONAME of an ELF shared library, or None if it has none."""
    try:
        return elf_symbols.soname(binary)
    except elf_symbols.ElfReadError as e:
        raise GenError(str(e)) from None


# ---------------------------------------------------------------------------------------------
# Annotations
# ---------------------------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------------------------
# The model: one Api per exported function
# ---------------------------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------------

HEADER_NOTE = ("// Generated by preload/gen/gen_wrappers.py from the installed headers, the exports of the\n"
               "// intercepted libraries and preload/annotations/*.toml. Do not edit: change those instead.\n")


def c_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


# Domains whose wrappers live in a library of their own, which the launcher preloads only when -t asks.
OWN_LIBRARY_DOMAINS = ("os_runtime", "mpi")


def id_name(api: Api) -> str:
    # Each MPI implementation has its own ids (kApi_openmpi_MPI_Send, kApi_mpich_MPI_Send): the same names,
    # two ABIs, two interposers.
    if api.versioned or api.library.domain == "mpi":
        return f"kApi_{api.library.name}_{api.name}"
    return f"kApi_{api.name}"


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
    b.append(f"  cutrace::preload::CallScope cutrace_scope(cutrace_ts, {domain});\n")
    b.append(f"  {real_call};\n" if is_void else f"  auto cutrace_result = {real_call};\n")
    b.append("  cutrace_scope.finish();\n")
    if hook:
        b.append(f"  {hook}\n")
    args = spec.args if spec else []
    if args:
        slots = ",\n      ".join(slot_expr(api, a, result_ok) for a in args)
        b.append(f"  const uint64_t cutrace_args[{len(args)}] = {{\n      {slots}}};\n")
    result = "0" if is_void or kind == "none" else "cutrace::preload::as_result(cutrace_result)"
    b.append(f"  cutrace_scope.emit({api_id}, {result}, {flags}, {'cutrace_args' if args else 'nullptr'}, "
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
    b.append(f"  cutrace::preload::CallScope cutrace_scope(cutrace_ts, {domain});\n")
    b.append(f"  auto cutrace_result = {real_call};\n")
    b.append("  cutrace_scope.finish();\n")
    for k, a in enumerate(args):
        if a.out:
            b.append(f"  cutrace_args[{k}] = {slot_expr(api, a, result_ok)};\n")
    result = "0" if kind == "none" else "cutrace::preload::as_result(cutrace_result)"
    b.append(f"  cutrace_scope.emit({api_id}, {result}, {flags}, {'cutrace_args' if args else 'nullptr'}, "
             f"{len(args)});\n")
    b.append("  return cutrace_result;\n}\n")
    return "".join(b)


def emit_mpi_wrappers(model: LibraryModel) -> str:
    return emit_interposer(model, "cutrace::mpi", "mpi_runtime.h", ["cerrno", "cstdint", "type_traits"],
                           "The profiling interface's functions the wrappers below call, by their index here.",
                           lambda a: "P" + a.name, emit_mpi_wrapper)



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


def emit_coverage(models: list[LibraryModel]) -> str:
    """coverage.json: what each library's exports became, for scripts/coverage.py and docs/coverage.md."""
    doc = []
    for m in models:
        doc.append({
            "name": m.spec.name,
            "library": m.spec.soname,
            "binary": str(m.spec.binary.resolve()) if m.spec.binary else None,
            "domain": m.spec.domain,
            "wrappers": m.spec.wrappers,
            "symbol_version": m.spec.symbol_version,
            "exports": [a.name for a in m.apis],
            "untimed": [a.name for a in m.apis if a.proto is None],
            "annotated": [a.name for a in m.apis if a.annotated],
            "internal": [a.name for a in m.apis if a.proto is not None and a.internal],
        })
    return json.dumps(doc, indent=1) + "\n"


def write_output(path: Path, text: str) -> None:
    # Always rewritten (not only when changed): the build tool compares its timestamp with the inputs.
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


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
    args = ap.parse_args(argv)

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

    args.out_dir.mkdir(parents=True, exist_ok=True)
    write_output(args.out_dir / "api_ids.h", emit_ids(apis))
    write_output(args.out_dir / "api_table.cpp", emit_table(apis))
    write_output(args.out_dir / "real_functions.cpp", emit_real_functions(apis))
    for model in models:
        emit = {"os_runtime": emit_osrt_wrappers, "mpi": emit_mpi_wrappers}.get(model.spec.domain, emit_wrappers)
        write_output(args.out_dir / f"wrappers_{model.spec.name}.cpp", emit(model))
    has_driver = any(m.spec.domain == "cuda_driver" for m in models)
    versions = driver_versions(pre, args.include_dir) if has_driver else []
    wrapped = {a.name for a in apis}
    interop = graphics_interop_symbols(args.include_dir) if has_driver else set()
    untimed_interop = {s for s in interop if not any(v[0] == s and v[3] in wrapped for v in versions)}
    write_output(args.out_dir / "api_lookup.cpp", emit_lookup(apis, versions, untimed_interop))
    write_output(args.out_dir / "coverage.json", emit_coverage(models))
    if any(m.spec.wrappers == "versioned" for m in models):
        write_output(args.out_dir / "versioned.map", emit_version_script(models))
    if args.depfile:
        deps = set().union(*(p.dependencies for p in preprocessors.values()))
        deps |= {os.path.abspath(a[1]) for a in args.library}
        deps |= {os.path.abspath(m.spec.annotations.parent / m.spec.extends) for m in models if m.spec.extends}
        deps |= {os.path.realpath(a[2]) for a in args.library if a[2] != "-"} | {os.path.abspath(__file__), str(DOMAINS_FILE)}
        target = os.path.abspath(args.out_dir / "api_ids.h")
        escape = lambda p: p.replace(" ", "\\ ")  # noqa: E731
        args.depfile.write_text(f"{escape(target)}: " + " \\\n  ".join(escape(d) for d in sorted(deps)) + "\n")
    for model in models:
        print(model.summary())
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except GenError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        sys.exit(1)
