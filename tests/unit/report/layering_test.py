"""The tools depend one way: the reader and the shared command code under everything, the model on
them, reports and exports on the model and never on each other, the launcher and the `cutrace` main on
top. A file that includes across the grain fails here, naming the file, the line and the rule.

usage: layering_test.py TOOLS_DIR"""
import re
import sys
from pathlib import Path

# For each folder of tools/, the folders of tools/ it may include from (besides itself and include/).
ALLOWED = {
    "common": {"reader"},
    "reader": {"common"},
    "model": {"common", "reader"},
    "report": {"common", "reader", "model"},
    "export": {"common", "reader", "model"},
    "launcher": {"common", "reader", "model", "report", "export"},
    "cli": {"common", "reader", "model", "report", "export", "launcher"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/')


def main():
    tools = Path(sys.argv[1])
    folders = {p.name for p in tools.iterdir() if p.is_dir()}
    unknown = folders - set(ALLOWED)
    broken = [f"tools/{name}/ is not in layering_test.py's table; add it with the folders it may use"
              for name in sorted(unknown)]
    for folder, allowed in ALLOWED.items():
        for path in sorted((tools / folder).glob("*")):
            if path.suffix not in (".h", ".cpp"):
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                m = INCLUDE.match(line)
                if m and m.group(1) in folders and m.group(1) != folder and m.group(1) not in allowed:
                    broken.append(f"tools/{folder}/{path.name}:{number} includes {m.group(1)}/, which "
                                  f"tools/{folder}/ may not use (it may use: {', '.join(sorted(allowed)) or 'nothing'})")
    for line in broken:
        print(line)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
