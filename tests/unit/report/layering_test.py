"""The tools depend one way: the reader and the shared command code under everything, the model on
them, reports and exports on the model and never on each other, the launcher and the `cutrace` main on
top. A file that includes across the grain fails here, naming the file, the line and the rule; so does
one that declares its names in a namespace other than its folder's.

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

# For each folder of tools/, the namespaces under cutrace:: its files may open at the top level (nested
# ones such as cutrace::reader::detail count as their first part). export/'s is `exporting`, `export`
# being a keyword; common/ holds the command-line plumbing (cli) and the JSON text the tables and the
# Perfetto export write (json); cli/ is the `cutrace` main, which declares no names of its own.
NAMESPACES = {
    "common": {"cli", "json"},
    "reader": {"reader"},
    "model": {"model"},
    "report": {"report"},
    "export": {"exporting"},
    "launcher": {"launcher"},
    "cli": set(),
}
# Files that may also open the namespaces of other folders, and which: common/commands.h declares each
# subcommand's main in the namespace of the library that carries it out, so that one header reaches
# them all.
ALSO_DECLARES = {
    "common/commands.h": {"report", "exporting"},
}
NAMESPACE = re.compile(r'^namespace\s+cutrace(?:::(\w+))?[\s:{]')


def main():
    tools = Path(sys.argv[1])
    folders = {p.name for p in tools.iterdir() if p.is_dir()}
    unknown = folders - (set(ALLOWED) & set(NAMESPACES))
    broken = [f"tools/{name}/ is not in layering_test.py's tables; add it with the folders it may use and the "
              f"namespaces it may declare" for name in sorted(unknown)]
    for folder, allowed in ALLOWED.items():
        for path in sorted((tools / folder).glob("*")):
            if path.suffix not in (".h", ".cpp"):
                continue
            declares = NAMESPACES[folder] | ALSO_DECLARES.get(f"{folder}/{path.name}", set())
            for number, line in enumerate(path.read_text().splitlines(), 1):
                m = INCLUDE.match(line)
                if m and m.group(1) in folders and m.group(1) != folder and m.group(1) not in allowed:
                    broken.append(f"tools/{folder}/{path.name}:{number} includes {m.group(1)}/, which "
                                  f"tools/{folder}/ may not use (it may use: {', '.join(sorted(allowed)) or 'nothing'})")
                m = NAMESPACE.match(line)
                if m and m.group(1) not in declares:
                    name = "cutrace" + (f"::{m.group(1)}" if m.group(1) else "")
                    broken.append(f"tools/{folder}/{path.name}:{number} declares namespace {name}, which "
                                  f"tools/{folder}/ may not declare (it may declare: "
                                  f"{', '.join('cutrace::' + n for n in sorted(declares)) or 'nothing'})")
    for line in broken:
        print(line)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
