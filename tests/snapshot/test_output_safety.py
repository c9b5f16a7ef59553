"""`snapshot -o` never destroys what dflash-diag did not write (docs/security.md).

Every case plants a real file where the bundle would go and checks it survives, byte for byte. The refusals
happen before any sampling, so most cases run the real CLI against this test process (a Python process that
exists) and return at once; the replacements that must succeed snapshot a real child.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from conftest_snapshot import Spawn

from dflash_diag.cli import main
from dflash_diag.errors import CommandError, ExitCode
from dflash_diag.snapshot.bundle import MANIFEST_NAME, prepare_output, write_dir, write_tar
from dflash_diag.snapshot.output import OLD_PREFIX, TMP_PREFIX, protected_reason

FILES = {"report.md": b"# report\n", "snapshot.json": b'{"schema": "dflash-diag.snapshot/1"}\n'}
SELF = str(os.getpid())  # a live Python process: every refusal below happens before it would be sampled


def _plant(path: Path, text: str = "precious, written by the user") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its content (what must survive)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


# --- the protected places: /, home, the working directory (and what holds them) ---------------------------


@pytest.mark.parametrize("flags", [["--dir", "--force"], ["--dir"], ["--force"], []])
def test_working_directory_is_never_an_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str], flags: list[str]) -> None:
    work = tmp_path / "work"
    _plant(work / "train.py", "print('mine')")
    _plant(work / "data" / "shard0.bin", "bytes")
    monkeypatch.chdir(work)
    before = _tree(work)
    for target in (".", str(work), "./", "data/.."):
        code = main(["snapshot", SELF, "-o", target, *flags])
        assert code in (ExitCode.UNSAFE_OUTPUT, ExitCode.USAGE), target
        if code == ExitCode.UNSAFE_OUTPUT:
            assert "working directory" in _one_line_error(capsys)
        else:
            _one_line_error(capsys)  # a non-.tar.gz name without --dir is a usage error first
    assert _tree(work) == before


def test_a_directory_holding_the_working_directory_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    _plant(tmp_path / "sibling.txt")
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    before = _tree(tmp_path)
    for target in ("..", "../..", str(tmp_path)):
        assert main(["snapshot", SELF, "--dir", "--force", "-o", target]) == ExitCode.UNSAFE_OUTPUT
        assert "holds the working directory" in _one_line_error(capsys)
    assert _tree(tmp_path) == before


def test_home_is_never_an_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    _plant(home / ".bashrc", "export PS1=x")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    before = _tree(home)
    assert main(["snapshot", SELF, "--dir", "--force", "-o", str(home)]) == ExitCode.UNSAFE_OUTPUT
    assert "home directory" in _one_line_error(capsys)
    with pytest.raises(CommandError) as err:
        write_dir(home, FILES, force=True)  # the library call refuses too, not only the CLI
    assert err.value.exit_code == ExitCode.UNSAFE_OUTPUT
    assert _tree(home) == before


def test_root_and_the_real_home_are_refused_by_the_check_itself() -> None:
    # Never run a snapshot at / in a test: the check that stands between it and the disk is tested directly.
    assert protected_reason(Path("/")) == "is the root directory"
    assert protected_reason(Path("/.")) == "is the root directory"
    assert protected_reason(Path("//")) == "is the root directory"
    assert protected_reason(Path(os.path.expanduser("~"))) == "is your home directory"
    assert protected_reason(Path("/tmp/some-new-bundle")) is None


# --- --force replaces only a bundle this tool wrote --------------------------------------------------------


def test_force_refuses_a_foreign_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "results"
    _plant(out / "model.safetensors", "weights")
    _plant(out / "nested" / "notes.txt", "notes")
    before = _tree(out)
    assert main(["snapshot", SELF, "--dir", "-o", str(out)]) == ExitCode.EXISTS
    assert "--force" in _one_line_error(capsys)
    assert main(["snapshot", SELF, "--dir", "--force", "-o", str(out)]) == ExitCode.UNSAFE_OUTPUT
    assert "not a bundle dflash-diag wrote" in _one_line_error(capsys)
    assert _tree(out) == before


def test_force_refuses_a_directory_with_a_fake_or_foreign_manifest(tmp_path: Path) -> None:
    out = tmp_path / "looks-like-a-bundle"
    _plant(out / MANIFEST_NAME, json.dumps({"schema": "something else", "files": {"a": {"sha256": "0"}}}))
    _plant(out / "snapshot.json", "{}")
    before = _tree(out)
    with pytest.raises(CommandError) as err:
        write_dir(out, FILES, force=True)
    assert err.value.exit_code == ExitCode.UNSAFE_OUTPUT
    assert _tree(out) == before


def test_force_replaces_its_own_bundle_but_not_one_with_a_file_added_or_edited(tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    write_dir(out, FILES, force=False)
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST_NAME, "report.md", "snapshot.json"]
    write_dir(out, {"report.md": b"# second\n"}, force=True)  # ours, intact: replaced
    assert (out / "report.md").read_text() == "# second\n" and not (out / "snapshot.json").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["bundle"]  # no temporary or old sibling left

    _plant(out / "my-notes.txt", "what I found")  # the user added a file: no longer only ours
    before = _tree(out)
    with pytest.raises(CommandError) as err:
        write_dir(out, FILES, force=True)
    assert err.value.exit_code == ExitCode.UNSAFE_OUTPUT and "my-notes.txt" in str(err.value)
    assert _tree(out) == before
    (out / "my-notes.txt").unlink()

    (out / "report.md").write_text("# second\nmy analysis\n")  # the user edited a file we wrote
    before = _tree(out)
    with pytest.raises(CommandError) as err:
        write_dir(out, FILES, force=True)
    assert "report.md changed" in str(err.value)
    assert _tree(out) == before


def test_force_refuses_a_foreign_tar_and_a_directory_named_like_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    foreign = _plant(tmp_path / "x.tar.gz", "not even a tar")
    as_dir = tmp_path / "y.tar.gz"
    _plant(as_dir / "inside.txt")
    other_tar = tmp_path / "z.tar.gz"
    with tarfile.open(other_tar, "w:gz") as tar:  # a real archive, just not ours
        tar.add(_plant(tmp_path / "src" / "a.txt"), arcname="proj/a.txt")
    before = _tree(tmp_path)
    for target in (foreign, as_dir, other_tar):
        assert main(["snapshot", SELF, "-o", str(target)]) == ExitCode.EXISTS
        _one_line_error(capsys)
        assert main(["snapshot", SELF, "-o", str(target), "--force"]) == ExitCode.UNSAFE_OUTPUT
        _one_line_error(capsys)
    assert _tree(tmp_path) == before


def test_force_replaces_its_own_tar(tmp_path: Path) -> None:
    out = tmp_path / "b.tar.gz"
    write_tar(out, "b", FILES, force=False, mtime_s=0.0)
    write_tar(out, "b", {"report.md": b"again\n"}, force=True, mtime_s=0.0)
    with tarfile.open(out) as tar:
        assert sorted(tar.getnames()) == [f"b/{MANIFEST_NAME}", "b/report.md"]
    assert [p.name for p in tmp_path.iterdir()] == ["b.tar.gz"]


def test_symlinks_are_never_followed_or_replaced(tmp_path: Path) -> None:
    victim = _plant(tmp_path / "victim" / "important.txt")
    link_dir = tmp_path / "link-dir"
    link_dir.symlink_to(victim.parent)
    link_file = tmp_path / "link.tar.gz"
    link_file.symlink_to(victim)
    for call in (lambda: write_dir(link_dir, FILES, force=True),
                 lambda: write_tar(link_file, "t", FILES, force=True, mtime_s=0.0)):
        with pytest.raises(CommandError) as err:
            call()
        assert err.value.exit_code == ExitCode.UNSAFE_OUTPUT
    assert victim.read_text() == "precious, written by the user" and link_dir.is_symlink() and link_file.is_symlink()


def test_something_appearing_while_sampling_is_never_overwritten(tmp_path: Path) -> None:
    for as_dir, name in ((True, "d"), (False, "f.tar.gz")):
        out = tmp_path / name
        prepared = prepare_output(out, as_dir=as_dir, force=False)
        _plant(out / "theirs.txt" if as_dir else out, "appeared meanwhile")
        with pytest.raises(CommandError) as err:
            prepared.commit(FILES, top="t", mtime_s=0.0)
        assert err.value.exit_code == ExitCode.EXISTS
        assert (out / "theirs.txt" if as_dir else out).read_text() == "appeared meanwhile"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith((TMP_PREFIX, OLD_PREFIX))]


def test_own_bundle_edited_while_sampling_is_not_replaced(tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    write_dir(out, FILES, force=False)
    prepared = prepare_output(out, as_dir=True, force=True)
    _plant(out / "added-meanwhile.txt")
    with pytest.raises(CommandError) as err:
        prepared.commit(FILES, top="", mtime_s=0.0)
    assert err.value.exit_code == ExitCode.UNSAFE_OUTPUT
    assert (out / "added-meanwhile.txt").exists() and (out / "report.md").read_bytes() == FILES["report.md"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle"]


@pytest.mark.slow
def test_end_to_end_force_replaces_a_real_bundle_and_nothing_else(spawn: Spawn, tmp_path: Path) -> None:
    child = spawn()
    where = tmp_path / "out"
    keep = _plant(where / "keep.txt")
    out = where / "bug"
    for _ in range(2):
        assert main(["snapshot", str(child.pid), "--dir", "--force", "-o", str(out), "--duration", "0.5"]) == 0
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    assert set(manifest["files"]) == {p.name for p in out.iterdir()} - {MANIFEST_NAME}
    assert keep.read_text() == "precious, written by the user"
    assert sorted(p.name for p in where.iterdir()) == ["bug", "keep.txt"]


# --- outputs that cannot be written: refused before sampling, in one line ----------------------------------


@pytest.mark.parametrize("target", ["/proc/x.tar.gz", "/proc/self/x.tar.gz", "no-such-dir/x.tar.gz",
                                    "a" * 300 + ".tar.gz", "keep.txt/x.tar.gz"])
def test_unwritable_outputs_fail_before_sampling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str], target: str) -> None:
    monkeypatch.chdir(tmp_path)
    _plant(tmp_path / "keep.txt")
    t0 = time.monotonic()
    assert main(["snapshot", SELF, "-o", target, "--duration", "30"]) == ExitCode.CANNOT_WRITE
    assert time.monotonic() - t0 < 15.0  # no 30 s sampling window was spent
    _one_line_error(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]


def _mount_tmpfs(mnt: Path, options: str) -> None:
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mnt)],
                                           capture_output=True).returncode != 0:
        pytest.skip("needs root to mount a tmpfs")


def test_unwritable_directory_is_refused_before_sampling(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    if os.geteuid() == 0:  # root writes through modes: a read-only file system is really unwritable
        _mount_tmpfs(locked, "size=64k")
        _plant(locked / "keep.txt")
        subprocess.run(["mount", "-o", "remount,ro", str(locked)], check=True)
    else:
        _plant(locked / "keep.txt")
        locked.chmod(0o555)
    try:
        for flags in ([], ["--dir"]):
            out = locked / ("x" if flags else "x.tar.gz")
            t0 = time.monotonic()
            assert main(["snapshot", SELF, "-o", str(out), "--duration", "30", *flags]) == ExitCode.CANNOT_WRITE
            assert time.monotonic() - t0 < 15.0
            err = _one_line_error(capsys)
            assert "read-only" in err or "permission denied" in err
            assert sorted(p.name for p in locked.iterdir()) == ["keep.txt"]
    finally:
        if os.geteuid() == 0:
            subprocess.run(["umount", str(locked)], check=True)
        else:
            locked.chmod(0o755)


def test_disk_full_leaves_nothing_and_says_so(tmp_path: Path) -> None:
    mnt = tmp_path / "small"
    mnt.mkdir()
    _mount_tmpfs(mnt, "size=64k")  # a real full disk
    try:
        _plant(mnt / "keep.txt")
        big = {"report.md": os.urandom(256 * 1024)}  # incompressible: cannot fit in 64 KiB
        for call in (lambda: write_tar(mnt / "x.tar.gz", "x", big, force=False, mtime_s=0.0),
                     lambda: write_dir(mnt / "d", big, force=False)):
            with pytest.raises(CommandError) as err:
                call()
            assert err.value.exit_code == ExitCode.CANNOT_WRITE and "no space left" in str(err.value)
            assert sorted(p.name for p in mnt.iterdir()) == ["keep.txt"]
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_failed_write_leaves_nothing_behind(tmp_path: Path) -> None:
    class Exploding(dict):  # type: ignore[type-arg]
        def items(self):  # type: ignore[no-untyped-def]
            yield "report.md", b"partial"
            raise OSError(errno.EIO, "I/O error")

    _plant(tmp_path / "keep.txt")
    for call in (lambda: write_tar(tmp_path / "out.tar.gz", "top", Exploding(), force=False, mtime_s=0.0),
                 lambda: write_dir(tmp_path / "out", Exploding(), force=False)):
        with pytest.raises(CommandError) as err:
            call()
        assert err.value.exit_code == ExitCode.CANNOT_WRITE
        assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]


def test_top_child_log_never_overwrites(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _plant(tmp_path / "child.log", "an older log I keep")
    code = main(["top", "--batch", "--duration", "0.5", "--child-log", str(log), "--", sys.executable, "-c", "pass"])
    assert code == ExitCode.EXISTS
    _one_line_error(capsys)
    assert log.read_text() == "an older log I keep"
