"""The exported functions and the DT_SONAME of an ELF shared library, read with pyelftools: the one
Python ELF reader of the wrapper generator and scripts/coverage.py (the recorder and the shim read ELF
in C++, recorder/library_exports.cpp and preload/modules.cpp; tests/unit/gen/elf_symbols_test.py
checks that the recorder's reader and this one agree).

An exported function is what `nm -D --defined-only` prints as T, W or i: a defined, global or weak
dynamic symbol in an executable section, a weak symbol that is no object, or a GNU indirect function.
"""

from __future__ import annotations

import sys
from pathlib import Path

try:
    from elftools.common.exceptions import ELFError
    from elftools.elf.constants import SH_FLAGS
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile
    from elftools.elf.gnuversions import GNUVerSymSection
except ImportError:
    raise ImportError(f"the Python module elftools (pyelftools) is missing for {sys.executable}: install "
                      f"python3-pyelftools (Debian 12) or `pip install pyelftools==0.29`") from None


class ElfReadError(Exception):
    """The file is no ELF shared library this reader can read."""


def _open(binary: Path, f) -> ELFFile:
    try:
        return ELFFile(f)
    except ELFError as e:
        raise ElfReadError(f"{binary} is not an ELF shared library ({e})") from None


def exported_functions(binary: Path) -> dict[str, set[str]]:
    """{name: the symbol versions it is defined under ('' for none)} of every exported function."""
    with open(binary, "rb") as f:
        elf = _open(binary, f)
        dynsym = elf.get_section_by_name(".dynsym")
        if dynsym is None:
            return {}
        versym = next((s for s in elf.iter_sections() if isinstance(s, GNUVerSymSection)), None)
        verdef = elf.get_section_by_name(".gnu.version_d")
        # Version index -> name; only definitions name a defined symbol's version (needs are imports).
        names_by_index = {}
        if verdef is not None:
            for definition, aux in verdef.iter_versions():
                if not definition["vd_flags"] & 1:  # VER_FLG_BASE: the file's own name, no version
                    names_by_index[definition["vd_ndx"]] = next(aux).name
        sections = list(elf.iter_sections())
        exports: dict[str, set[str]] = {}
        versions = versym.iter_symbols() if versym is not None else iter(())
        for sym in dynsym.iter_symbols():
            version_entry = next(versions, None)
            shndx = sym["st_shndx"]
            if shndx == "SHN_UNDEF" or not sym.name:
                continue
            kind, bind = sym["st_info"]["type"], sym["st_info"]["bind"]
            if kind == "STT_LOOS":  # STT_GNU_IFUNC shares the number: nm's 'i'
                function = bind in ("STB_GLOBAL", "STB_WEAK")
            elif bind == "STB_WEAK":
                function = kind != "STT_OBJECT"  # 'W'; a weak object is 'V'
            elif bind == "STB_GLOBAL":
                function = isinstance(shndx, int) and bool(sections[shndx]["sh_flags"] & SH_FLAGS.SHF_EXECINSTR)
            else:
                function = False
            if not function:
                continue
            version = ""
            if version_entry is not None and isinstance(version_entry["ndx"], int):
                version = names_by_index.get(version_entry["ndx"] & 0x7FFF, "")
            exports.setdefault(sym.name, set()).add(version)
        return exports


def soname(binary: Path) -> str | None:
    """DT_SONAME, or None when the file has none."""
    with open(binary, "rb") as f:
        elf = _open(binary, f)
        for section in elf.iter_sections():
            if isinstance(section, DynamicSection):
                for tag in section.iter_tags():
                    if tag.entry.d_tag == "DT_SONAME":
                        return tag.soname
        return None


if __name__ == "__main__":
    # `elf_symbols.py LIBRARY`: its soname, then its exported functions, one a line (for the test that
    # compares this reader with the recorder's, tests/unit/recorder/library_exports_test.cpp).
    if len(sys.argv) != 2:
        sys.exit("usage: elf_symbols.py LIBRARY")
    try:
        print(f"soname {soname(Path(sys.argv[1])) or ''}")
        print("\n".join(sorted(exported_functions(Path(sys.argv[1])))))
    except (ElfReadError, OSError) as e:
        sys.exit(f"elf_symbols: error: {e}")
