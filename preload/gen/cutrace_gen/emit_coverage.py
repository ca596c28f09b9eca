"""coverage.json: data about what the build wrapped, for scripts/coverage.py and docs/coverage.md, not
code; kept apart from the C++ emitters."""

from __future__ import annotations

import json

from .model import LibraryModel

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
