"""The exports and soname of an installed library, read by elf_symbols.py (pyelftools), with its errors
as the generator's. elf_symbols.py stays a module of its own beside gen_wrappers.py: scripts/coverage.py
and the tests read ELF files with it, without the generator."""

from __future__ import annotations

import sys
from pathlib import Path

from .common import GenError

try:
    import elf_symbols
except ImportError as e:
    sys.exit(f"gen_wrappers: error: {e}")


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
