"""Outputs of earlier runs, reused by a build directory whose run would read the same inputs.

The test suite builds the shim in several directories (plain, two sanitizers, the pip route), each of
which runs the generator on the same headers, libraries and annotations: 14 s of one CPU each time. A
run given --cache-dir looks for an entry made by a run with the same arguments (the output directory
aside) and the same generator sources; the entry lists every file that run read (its depfile), and is
used only when each of them still has the size and modification time it had, the test the build
tool itself applies to them. Otherwise the run generates as ever and leaves an entry for the next.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

_FORMAT = 1


def _stamp(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


def entry_dir(cache_dir: Path, arguments: dict, sources: set[str]) -> Path:
    """The entry of a run with these arguments (where its outputs go left out) and generator sources
    (their contents)."""
    key = hashlib.sha256(json.dumps([_FORMAT, arguments], sort_keys=True, default=str).encode())
    for source in sorted(sources):
        key.update(source.encode() + b"\0" + Path(source).read_bytes() + b"\0")
    return cache_dir / key.hexdigest()[:32]


def load(entry: Path) -> tuple[dict[str, str], list[str], str] | None:
    """The outputs (name: text), the files read and the summary printed by the run that made `entry`,
    when every file it read is as it was; else None."""
    try:
        manifest = json.loads((entry / "manifest.json").read_text())
        if manifest.get("format") != _FORMAT:
            return None
        for path, stamp in manifest["inputs"].items():
            if _stamp(path) != stamp:
                return None
        outputs = {name: (entry / "outputs" / name).read_text() for name in manifest["outputs"]}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return outputs, sorted(manifest["inputs"]), manifest["summary"]


def store(entry: Path, outputs: dict[str, str], inputs: set[str], summary: str) -> None:
    """Leaves an entry for a later run. Two builds may store the same entry at once: each writes a
    directory of its own and renames it into place; the second rename finds the first's and gives way.
    An entry that cannot be written is no error: the build has its outputs."""
    stamps = {path: _stamp(path) for path in sorted(inputs)}
    if any(stamp is None for stamp in stamps.values()):
        return
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=entry.name + ".", dir=entry.parent))
        (staging / "outputs").mkdir()
        for name, text in outputs.items():
            (staging / "outputs" / name).write_text(text)
        manifest = {"format": _FORMAT, "inputs": stamps, "outputs": sorted(outputs), "summary": summary}
        (staging / "manifest.json").write_text(json.dumps(manifest))
        # An entry of the same key whose inputs have changed since (a header updated in place) gives way.
        shutil.rmtree(entry, ignore_errors=True)
        try:
            os.rename(staging, entry)
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
    except OSError:
        pass
