"""A build without the CUDA toolkit takes the driver's exports from cuda.h and cudaProfiler.h
(driver.toml's header_exports), having no stub of libcuda.so.1 to read them from. This holds only
while the headers declare exactly what the driver exports: compares the two for the toolkit's own
headers and stub, with the generator's own code.
Usage: driver_header_exports_test.py LIBCUDA_STUB INCLUDE_DIR CXX"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "preload" / "gen"))
from cutrace_gen.elf import exported_functions  # noqa: E402
from cutrace_gen.headers import HeaderParser  # noqa: E402
from cutrace_gen.model import header_declared_exports  # noqa: E402
from cutrace_gen.schema import load_library  # noqa: E402

ANNOTATIONS = Path(__file__).resolve().parents[3] / "preload" / "annotations" / "driver.toml"


def main(stub, include_dir, cxx):
    stub_exports, _ = exported_functions(Path(stub))
    spec = load_library("driver", ANNOTATIONS, None)
    from_headers = header_declared_exports(spec, HeaderParser([cxx], [include_dir], ["-std=c++20"]))
    only_stub = sorted(set(stub_exports) - set(from_headers))
    only_headers = sorted(set(from_headers) - set(stub_exports))
    for name in only_stub:
        print(f"{name}: exported by {stub}, declared by no header driver.toml reads")
    for name in only_headers:
        print(f"{name}: declared by the headers, not exported by {stub}")
    print(f"{len(stub_exports)} exports in the stub, {len(from_headers)} from the headers; "
          f"{len(only_stub)} only in the stub, {len(only_headers)} only in the headers")
    return 1 if only_stub or only_headers or len(stub_exports) < 500 else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
