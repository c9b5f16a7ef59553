"""The repository stands on its own: nothing in it points a reader at a file outside it."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Notes the tool was designed from live beside the repository, not in it: a reader of a clone cannot open them,
# so each fact they gave is stated where it is used, or in docs/. Spelled in pieces so this file is no match.
OUTSIDE = tuple(
    "".join(parts)
    for parts in (
        ("../", "shared"), ("shared/", "reference"), ("shared/", "seeds"), ("shared/", "fixtures"),
        ("DESIGN", ".md"), ("DEVELOPERS", ".md"), ("probe-apis", ".md"), ("dflash-domain", ".md"),
        ("gpu-stack", ".md"), ("aesthetics-anchors", ".md"),
    )
)


def _repo_text_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    files = [ROOT / name for name in out.split("\0") if name]
    return [f for f in files if f.is_file() and f.suffix not in {".svg", ".png", ".gz"}]


def test_nothing_points_outside_the_repo() -> None:
    files = _repo_text_files()
    assert any(f.name == "README.md" for f in files)  # git answered with the real file list
    hits = [
        f"{f.relative_to(ROOT)}:{n}: {needle}"
        for f in files
        for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1)
        for needle in OUTSIDE
        if needle in line
    ]
    assert hits == []
