"""codedrift: a module rewritten on disk after import is reported; untouched modules are not."""

from __future__ import annotations

import importlib
import os
import sys
import time
from pathlib import Path

from probes.codedrift import CodedriftProbe, Config, install_import_hook


def _import_fresh(tmp_path: Path, name: str) -> object:
    (tmp_path / f"{name}.py").write_text("VALUE = 1\n")
    sys.path.insert(0, str(tmp_path))
    try:
        importlib.invalidate_caches()
        __import__(name)  # like an import statement: raises the "import" audit event
        return sys.modules[name]
    finally:
        sys.path.remove(str(tmp_path))


def test_module_rewritten_after_import_is_stale(tmp_path: Path) -> None:
    install_import_hook()
    mod = _import_fresh(tmp_path, "drift_target_a")
    probe = CodedriftProbe(Config(check_interval_s=0.0))
    try:
        before = probe.check()
        assert not [s for s in before["stale"] if s["module"] == "drift_target_a"]
        path = Path(mod.__file__)
        path.write_text("VALUE = 2  # edited while the process runs\n")
        future_ns = time.time_ns() + 2_000_000_000
        os.utime(path, ns=(future_ns, future_ns))
        after = probe.snapshot(time.monotonic())
        stale = [s for s in after["stale"] if s["module"] == "drift_target_a"]
        assert stale and stale[0]["how"] == "mtime>import" and stale[0]["file"] == str(path)
        assert stale[0]["mtime_wall_s"] > stale[0]["import_wall_s"]
        assert after["checked_modules"] > 50 and after["check_cost_ms"] < 1000
    finally:
        probe.close()
        sys.modules.pop("drift_target_a", None)


def test_importlib_import_module_is_timed_too(tmp_path: Path) -> None:
    """The seed's hot-fix path: a module loaded with importlib.import_module, then edited on disk."""
    install_import_hook()
    (tmp_path / "drift_target_c.py").write_text("VALUE = 1\n")
    sys.path.insert(0, str(tmp_path))
    try:
        importlib.invalidate_caches()
        mod = importlib.import_module("drift_target_c")
    finally:
        sys.path.remove(str(tmp_path))
    path = Path(mod.__file__)
    path.write_text("VALUE = 2  # edited before the probe ever looked\n")
    future_ns = time.time_ns() + 2_000_000_000
    os.utime(path, ns=(future_ns, future_ns))
    probe = CodedriftProbe(Config(check_interval_s=0.0))
    try:
        stale = [s for s in probe.check()["stale"] if s["module"] == "drift_target_c"]
        assert stale and stale[0]["how"] == "mtime>import"
    finally:
        probe.close()
        sys.modules.pop("drift_target_c", None)


def test_same_stat_different_content_is_caught_by_hash(tmp_path: Path) -> None:
    mod = _import_fresh(tmp_path, "drift_target_b")
    probe = CodedriftProbe(Config(check_interval_s=0.0))
    try:
        path = Path(mod.__file__)
        st = path.stat()
        path.write_text("VALUE = 3\n")  # same size as "VALUE = 1\n"
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        stale = [s for s in probe.check()["stale"] if s["module"] == "drift_target_b"]
        assert stale and stale[0]["how"] == "content"
    finally:
        probe.close()
        sys.modules.pop("drift_target_b", None)


def test_untouched_process_has_no_drift() -> None:
    probe = CodedriftProbe(Config())
    try:
        reading = probe.check()
        assert reading["stale"] == [] and reading["stale_count"] == 0
    finally:
        probe.close()
