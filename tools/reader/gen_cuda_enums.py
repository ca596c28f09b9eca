#!/usr/bin/env python3
"""Generates the name tables of CUDA enums (error codes, memcpy kinds, cuBLAS and cuDNN enums) from the
installed CUDA headers.

The tools print `cudaErrorInsufficientDriver` rather than 35 and `CUBLAS_OP_T` rather than 1; taking
the names from the headers at build time means a new CUDA release brings its new values without anyone
editing a table.

usage: gen_cuda_enums.py OUTPUT.inc --headers HEADER... --enums ENUM[=ALIAS,...]...

Each ENUM is looked up in the headers by its tag (`enum cudaError {`) or its typedef name
(`typedef enum {...} cublasOperation_t;`); ALIASes are the other spellings of the type that api tables
may use (cudaError_t for cudaError). An ENUM written `?ENUM` is optional: when no header defines it
(cuDNN not installed, say) it is left out and its values print as numbers. The output holds one table
per enum, sorted by value, keeping the first name where the header gives several names one value
(later ones are aliases), and `kEnumTables`, every type spelling with its table, sorted by spelling.
"""

import re
import sys

_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
# NAME, then markers such as CUDNN_DEPRECATED_ENUM or __attribute__((deprecated)), then `= value`.
_ENTRY = re.compile(r"^\s*([A-Za-z_]\w*)(?:\s+(?:__attribute__\s*\(\(.*?\)\)|[A-Za-z_]\w*(?:\s*\(.*?\))?))*"
                    r"\s*(?:=\s*(.+?))?\s*$", re.S)
_ENUM_HEAD = re.compile(r"\benum\b([^{;()]*)\{")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NAME = re.compile(r"(?<![0-9A-Za-z_])[A-Za-z_][A-Za-z0-9_]*")  # an identifier, not a literal's tail
# What an enumerator's value may be made of once names are replaced by numbers: literals, shifts, or,
# sums and parentheses, as in `CUDNN_STATUS_BAD_PARAM_NULL_POINTER = 2002` or `X = 1 << 3 | Y`.
_SAFE_EXPR = re.compile(r"^[0-9a-fA-FxX\s()|&^~<>+\-*]*$")


def enum_bodies(text: str):
    """Yields (names, body) for every enum definition: names holds its tag and typedef name."""
    for head in _ENUM_HEAD.finditer(text):
        end = text.find("}", head.end())
        if end < 0:
            return
        semi = text.find(";", end)
        tail = text[end + 1:semi if semi >= 0 else end + 1]
        names = set(_WORD.findall(head.group(1))) | set(_WORD.findall(tail))
        yield names, text[head.end():end]


class Enumerators(dict):
    """Every enumerator value met so far, across enums: some are defined by another enum's
    (CUBLASLT_POINTER_MODE_HOST = CUBLAS_POINTER_MODE_HOST), so a name not seen yet is looked up in the
    enum of the headers that declares it."""

    def __init__(self, texts):
        super().__init__()
        self.texts = texts

    def __missing__(self, name):
        for _, text in self.texts:
            for _, body in enum_bodies(text):
                if re.search(r"(^|,)\s*" + re.escape(name) + r"\b", body):
                    parse_enum(body, name, self)
                    if dict.__contains__(self, name):
                        return dict.__getitem__(self, name)
        raise KeyError(name)


def parse_value(expr: str, known: dict, enum: str) -> int:
    expr = expr.strip()
    for w in _NAME.findall(expr):
        try:
            known[w]
        except KeyError:
            pass
    if expr in known:
        return known[expr]
    # Casts and integer suffixes the headers use around literals.
    expr = re.sub(r"\(\s*(?:int|unsigned|unsigned int|long|long long)\s*\)", " ", expr)
    expr = re.sub(r"\b(0[xX][0-9a-fA-F]+|\d+)[uUlL]+\b", r"\1", expr)
    expr = _NAME.sub(lambda m: str(dict.get(known, m.group(0), m.group(0))), expr)
    if not _SAFE_EXPR.match(expr):
        sys.exit(f"gen_cuda_enums.py: cannot evaluate '{expr}' in enum {enum}; extend the generator.")
    try:
        return int(eval(expr, {"__builtins__": {}}, {}))  # only digits and operators reach here
    except Exception:  # noqa: BLE001 - any failure means the generator needs extending
        sys.exit(f"gen_cuda_enums.py: cannot evaluate '{expr}' in enum {enum}; extend the generator.")


def parse_enum(body: str, enum: str, known: dict) -> list:
    entries, next_value = [], 0
    for item in body.split(","):
        if not item.strip():
            continue
        m = _ENTRY.match(item)
        if not m:
            sys.exit(f"gen_cuda_enums.py: cannot parse '{item.strip()}' in enum {enum}.")
        name, expr = m.group(1), m.group(2)
        value = parse_value(expr, known, enum) if expr else next_value
        known[name] = value
        entries.append((value, name))
        next_value = value + 1
    if not entries:
        sys.exit(f"gen_cuda_enums.py: enum {enum} is empty.")
    first = {}
    for value, name in entries:
        first.setdefault(value, name)
    return sorted(first.items())


def main(argv: list) -> int:
    if len(argv) < 5 or argv[2] != "--headers" or "--enums" not in argv:
        sys.exit(__doc__)
    split = argv.index("--enums")
    headers, specs = argv[3:split], argv[split + 1:]
    texts = []
    for path in headers:
        with open(path, encoding="utf-8", errors="replace") as f:
            texts.append((path, _COMMENT.sub(" ", f.read())))
    known = Enumerators(texts)

    out = [
        "// Generated by tools/reader/gen_cuda_enums.py from the CUDA headers at build time; do not edit.",
        "#pragma once",
        "",
    ]
    spellings = []
    for spec in specs:
        optional = spec.startswith("?")
        enum, _, aliases = spec.lstrip("?").partition("=")
        found = None
        for path, text in texts:
            found = next(((path, body) for names, body in enum_bodies(text) if enum in names), None)
            if found:
                break
        if not found:
            if optional:
                continue
            sys.exit(f"gen_cuda_enums.py: enum {enum} not found in {' '.join(headers)}; check the CUDA toolkit headers.")
        table = f"kEnum_{enum}"
        out.append(f"// enum {enum} of {found[0]}")
        out.append(f"inline constexpr EnumName {table}[] = {{")
        out.extend(f'    {{{value}, "{name}"}},' for value, name in parse_enum(found[1], enum, known))
        out.append("};")
        out.append("")
        for spelling in [enum] + [a for a in aliases.split(",") if a]:
            spellings.append((spelling, table))
    spellings.sort()
    out.append("inline constexpr EnumTable kEnumTables[] = {")
    out.extend(f'    {{"{s}", {t}, std::size({t})}},' for s, t in spellings)
    out.append("};")
    out.append("")
    content = "\n".join(out)
    # Rewrite only on change so an unchanged toolkit does not rebuild everything that includes it.
    try:
        with open(argv[1], encoding="utf-8") as f:
            if f.read() == content:
                return 0
    except OSError:
        pass
    with open(argv[1], "w", encoding="utf-8") as f:
        f.write(content)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
