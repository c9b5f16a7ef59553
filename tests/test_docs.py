"""The repository stands on its own: nothing in it points a reader at a file outside it."""

from __future__ import annotations

import re
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


def _readme() -> str:
    return (ROOT / "README.md").read_text()


def test_readme_links_every_docs_page() -> None:
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    assert "architecture.md" in pages
    readme = _readme()
    assert [p for p in pages if f"](docs/{p})" not in readme] == []


def test_readme_has_a_row_for_every_subcommand() -> None:
    """Each command `dflash-diag --help` lists has a row of its own in README's command table."""
    from dflash_diag.cli import _COMMANDS, _command_name

    names = [_command_name(cls) for _, cls in _COMMANDS]
    assert "detach" in names  # the list is the real one, attach's sibling included
    rows = [line for line in _readme().splitlines() if line.startswith("| `dflash-diag ")]
    missing = [n for n in names if not any(row.startswith(f"| `dflash-diag {n} ") for row in rows)]
    assert missing == []


def _link_targets(path: Path) -> list[str]:
    """Relative Markdown link targets of one file, without their #anchor (web links are not ours to check)."""
    targets = re.findall(r"\]\(([^)\s]+)\)", path.read_text())
    return [t.split("#", 1)[0] for t in targets if "://" not in t and not t.startswith(("#", "mailto:"))]


def test_every_relative_link_in_the_docs_resolves() -> None:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    dead = [f"{f.relative_to(ROOT)} -> {t}" for f in files for t in _link_targets(f) if not (f.parent / t).exists()]
    assert dead == []


def test_every_docs_path_named_anywhere_exists() -> None:
    """A page under docs/ named in code, a comment or a help text is a promise to the reader that it exists."""
    named = {
        (m, f.relative_to(ROOT))
        for f in _repo_text_files()
        for m in re.findall(r"\bdocs/[\w./-]+\.(?:md|json|svg)", f.read_text(errors="replace"))
    }
    assert any(m == "docs/states.md" for m, _ in named)
    assert sorted(f"{where}: {m}" for m, where in named if not (ROOT / m).exists()) == []


def test_every_test_file_named_in_code_or_docs_exists() -> None:
    """A comment that says which test holds a rule to account must point at a test that is there."""
    named = {
        (m, f.relative_to(ROOT))
        for f in _repo_text_files()
        if not f.is_relative_to(ROOT / "tests")
        for m in re.findall(r"\btests/[\w/]+\.py\b", f.read_text(errors="replace"))
    }
    assert any(m.startswith("tests/secrets/") for m, _ in named)
    assert sorted(f"{where}: {m}" for m, where in named if not (ROOT / m).exists()) == []
