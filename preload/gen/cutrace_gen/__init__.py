"""The parts of the wrapper generator, whose command line is preload/gen/gen_wrappers.py (CMake runs it;
tests/simcuda/gen/gen_missing.py reuses the header reader and the annotations). Importing the package
loads no part: each module imports what it needs, so a user of tokens.py or elf.py needs no libclang.

  common.py            GenError, the program's name, the vocabulary of abi.h and format.h
  tokens.py            Token, Param, Prototype, render: the declarations as the wrappers repeat them
  headers.py           HeaderParser and the macro expansion: the prototypes, read with libclang
  elf.py               the exports and soname of an installed library (elf_symbols.py)
  schema.py            the annotations files, read strictly (load_library)
  model.py             Api and LibraryModel: exports, prototypes and annotations checked together
  output.py            what the emitters share: the header note, C strings, id names, write_output
  emit_tables.py       api_ids.h, api_table.cpp, real_functions.cpp
  emit_wrappers.py     wrappers_<name>.cpp of the shim and libcutrace-cuda12.so, versioned.map
  emit_interposers.py  wrappers_<name>.cpp of libcutrace-osrt.so and libcutrace-mpi-*.so
  emit_lookup.py       api_lookup.cpp, and the driver's entry point versions of cudaTypedefs.h
  emit_coverage.py     coverage.json
"""

import os


def source_files() -> set[str]:
    """The package's modules, which a generator's depfile lists beside its own file: a change to any of
    them regenerates what it may change."""
    here = os.path.dirname(os.path.abspath(__file__))
    return {os.path.join(here, name) for name in os.listdir(here) if name.endswith(".py")}
