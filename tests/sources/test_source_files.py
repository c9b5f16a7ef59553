"""The one cache of program files on disk (sources/lines.SourceFiles), which serves the classifier's line lookups
(LineCache) and the outside evidence's parsed files (OutsideReader): read once per mtime, bounded, regular files
only, a failed read never cached."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dflash_diag.sources import lines as lines_module
from dflash_diag.sources.lines import MAX_FILE_BYTES, LineCache, SourceFiles


def _counting() -> tuple[SourceFiles[tuple[str, ...]], list[str]]:
    built: list[str] = []

    def build(path: str, text: str) -> tuple[str, ...]:
        built.append(path)
        return tuple(text.splitlines())

    return SourceFiles(build, max_files=2), built


def test_a_file_is_built_once_until_its_mtime_changes(tmp_path: Path) -> None:
    files, built = _counting()
    path = tmp_path / "a.py"
    path.write_text("x = 1\n")
    os.utime(path, (1_000_000, 1_000_000))
    assert files.get(str(path)) == (("x = 1",), 1_000_000, True)
    assert files.get(str(path))[0] == ("x = 1",) and built == [str(path)]
    path.write_text("x = 2\ny = 3\n")
    os.utime(path, (1_000_005, 1_000_005))
    assert files.get(str(path)) == (("x = 2", "y = 3"), 1_000_005, True)
    assert files.cached(str(path)) == ("x = 2", "y = 3") and len(built) == 2


def test_the_least_recently_used_file_goes_past_the_bound(tmp_path: Path) -> None:
    files, built = _counting()
    paths = [tmp_path / f"{n}.py" for n in "abc"]
    for p in paths:
        p.write_text(p.name)
    a, b, c = (str(p) for p in paths)
    files.get(a), files.get(b), files.get(a), files.get(c)  # b is the least recently used
    assert files.cached(b) is None and files.cached(a) == ("a.py",) and files.cached(c) == ("c.py",)
    files.get(b)
    assert built == [a, b, c, b]


def test_missing_odd_and_oversized_files_are_not_read(tmp_path: Path) -> None:
    files, built = _counting()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    big = tmp_path / "big.py"
    with open(big, "wb") as fh:
        fh.truncate(MAX_FILE_BYTES + 1)
    assert files.get(str(tmp_path / "gone.py")) == (None, None, False)
    assert files.get(str(fifo))[0::2] == (None, True)  # opening a FIFO would block: never opened
    assert files.get(str(big))[0::2] == (None, True)
    assert files.get(str(tmp_path))[0::2] == (None, True)
    assert built == []


def test_a_failed_read_is_not_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files, built = _counting()
    path = tmp_path / "m.py"
    path.write_text("x = 1\n")
    # open() failing after stat() succeeded (permissions, a file replaced meanwhile): root reads any mode, so the
    # failure is planted in the module's open.
    monkeypatch.setattr(lines_module, "open", _refuse, raising=False)
    assert files.get(str(path)) == (None, path.stat().st_mtime, True) and files.cached(str(path)) is None
    monkeypatch.undo()
    assert files.get(str(path))[0] == ("x = 1",) and built == [str(path)]


def _refuse(*args: object, **kwargs: object) -> None:
    raise PermissionError(13, "Permission denied")


def test_line_cache_answers_absolute_paths_and_lines_in_range(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("def f():\n    return q.get(timeout=1)   \n")
    lines = LineCache()
    assert lines(str(path), 2) == "return q.get(timeout=1)"
    assert lines(str(path), 3) is None and lines(str(path), 0) is None
    assert lines("m.py", 1) is None  # relative to whose directory? no answer
