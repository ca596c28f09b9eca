"""The driver (libcuda.so.1) is one library for CUDA 12 and 13 programs, wrapped once from CUDA 13's
headers: this holds only while every export CUDA 12's cuda.h declares has the same prototype in CUDA
13's. Compares them with the generator's own reader (libclang).
Usage: driver_prototypes_test.py LIBCUDA_STUB CUDA13_INCLUDE CUDA12_INCLUDE CXX"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "preload" / "gen"))
from cutrace_gen.elf import exported_functions  # noqa: E402
from cutrace_gen.headers import HeaderParser, collect_c_prototypes  # noqa: E402


def prototypes(cxx, include_dir, names):
    parser = HeaderParser([cxx], [include_dir], ["-std=c++20"])
    # As driver.toml reads the headers: every entry point's own name, the legacy ones included.
    tu = parser.parse("#define __CUDA_API_VERSION_INTERNAL 1\n#include <cuda.h>\n", [], "cuda.h")
    return {name: protos[0] for name, protos in collect_c_prototypes(tu, names).items()}


def main(stub, include13, include12, cxx):
    exports, _ = exported_functions(Path(stub))
    cuda13 = prototypes(cxx, include13, set(exports))
    cuda12 = prototypes(cxx, include12, set(exports))
    assert len(cuda12) > 500, f"CUDA 12's cuda.h declares only {len(cuda12)} of the driver's exports"
    missing = sorted(set(cuda12) - set(cuda13))
    differ = sorted(n for n in cuda12 if n in cuda13 and cuda12[n].signature_key() != cuda13[n].signature_key())
    for name in missing:
        print(f"{name}: declared by CUDA 12's cuda.h ({cuda12[name].where}), not by CUDA 13's")
    for name in differ:
        print(f"{name}: CUDA 12 {cuda12[name].signature_key()} ({cuda12[name].where}), "
              f"CUDA 13 {cuda13[name].signature_key()} ({cuda13[name].where})")
    print(f"{len(cuda12)} driver exports declared by CUDA 12's cuda.h, {len(cuda13)} by CUDA 13's; "
          f"{len(differ)} differ, {len(missing)} only in CUDA 12")
    return 1 if missing or differ else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
