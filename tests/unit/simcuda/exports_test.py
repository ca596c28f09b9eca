"""Every function a real CUDA library exports, as the build reads it, is exported by the matching simulated
library under the same symbol version (tests/simcuda/gen/gen_missing.py), except the few no header
declares, which the wrapper generator's coverage.json lists as "untimed" and which only a runtime
(cuda*, all returning cudaError_t) may still define.

Usage: exports_test.py COVERAGE_JSON NAME REAL SIMULATED [NAME REAL SIMULATED ...]
(NAME: the library's name in coverage.json, REAL and SIMULATED: the two shared libraries)"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "preload" / "gen"))
import elf_symbols  # noqa: E402


def compare(name, real, simulated, untimed):
    real_exports = elf_symbols.exported_functions(Path(real))
    sim_exports = elf_symbols.exported_functions(Path(simulated))
    failures = []
    missing = sorted(set(real_exports) - set(sim_exports))
    not_allowed = [m for m in missing if m not in untimed or (name.startswith("cudart") and m.startswith("cuda"))]
    if not_allowed:
        failures.append(f"{simulated} lacks {len(not_allowed)} functions {real} exports: {', '.join(not_allowed[:20])}")
    wrong = [f"{n} ({sorted(sim_exports[n])} for {sorted(v)})" for n, v in sorted(real_exports.items())
             if n in sim_exports and sim_exports[n] != v]
    if wrong:
        failures.append(f"{simulated} exports {len(wrong)} functions under another version than {real}: "
                        f"{', '.join(wrong[:10])}")
    print(f"{name}: {len(real_exports)} real exports, {len(real_exports) - len(missing)} simulated, "
          f"{len(missing)} left out for want of a prototype")
    return failures


def main(coverage, *triples):
    if len(triples) % 3 or not triples:
        sys.exit(__doc__)
    libraries = {lib["name"]: lib for lib in json.loads(Path(coverage).read_text())}
    failures = []
    for k in range(0, len(triples), 3):
        name, real, simulated = triples[k: k + 3]
        if name not in libraries:
            failures.append(f"{coverage} has no library {name}: build the whole project first")
            continue
        failures += compare(name, real, simulated, set(libraries[name]["untimed"]))
    for f in failures:
        print(f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
