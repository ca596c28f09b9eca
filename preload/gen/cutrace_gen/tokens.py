"""The C++ tokens of a declaration, and the parameters and prototypes made of them: what the header
reader produces, the annotations are checked against and the emitters print. Needs no libclang."""

from __future__ import annotations

import dataclasses
import re

from .common import GenError

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
