"""Library constants the program changed at run time (``probes.libsettings``), for real: a package imported from a
``site-packages`` directory has its source parsed, a class constant and a module constant the program assigns are
reported with their source's value, and what is state rather than a setting (a name a function rebinds, a counter,
an enum's members, a placeholder filled in later) is not. The settings probe publishes the rows."""

from __future__ import annotations

import importlib
import json
import sys
import threading
import time
from pathlib import Path

import pytest

from dflash_contract.board import SettingsKeys as K
from probes.libsettings import Config, LibrarySettings, constants_of, shown
from probes.settings import Config as SettingsConfig
from probes.settings import SettingsProbe

FAKELIB = '''\
import enum
DEFAULT_MODE = "fast"
LIMIT = 1000
NEG = -2
ALIAS = LIMIT
_cache_size = 16
COUNTER = 0
COUNTER += 1
TWICE = 1
TWICE = 2
STATE = None
PLACEHOLDER = None
try:
    ACCEL = True
except ImportError:
    pass

class Pool:
    DEFAULT_LOAD_FACTOR = 1000
    name = "pool"

class Color(enum.Enum):
    RED = 1

def set_state(value):
    global STATE
    STATE = value

def hold(event):
    event.wait(30)
'''


@pytest.fixture()
def fakelib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    site = tmp_path / "venv" / "lib" / "site-packages"
    (site / "fakelib_ls").mkdir(parents=True)
    (site / "fakelib_ls" / "__init__.py").write_text(FAKELIB)
    monkeypatch.syspath_prepend(str(site))
    module = importlib.import_module("fakelib_ls")
    # a thread runs its code, as a slow library call would: the reader parses the running modules first (of the
    # thousands a test process has loaded, it is among the first)
    release = threading.Event()
    runner = threading.Thread(target=module.hold, args=(release,), daemon=True)
    runner.start()
    yield module
    release.set()
    runner.join(5)
    sys.modules.pop("fakelib_ls", None)


def test_the_constants_a_source_assigns_once() -> None:
    found = {(c.owner, c.name): c.value for c in constants_of(FAKELIB)}
    assert found == {("", "DEFAULT_MODE"): "fast", ("", "LIMIT"): 1000, ("", "NEG"): -2, ("", "ALIAS"): 1000,
                     ("", "PLACEHOLDER"): None, ("Pool", "DEFAULT_LOAD_FACTOR"): 1000,
                     ("Color", "RED"): 1}
    # left out: lowercase names, a counter, a name assigned twice, a name a function rebinds (global), and what a
    # top-level try/if assigns (read line by line, an indented line outside a class could be a function's)


def test_a_changed_class_constant_and_module_constant_are_reported_with_the_sources_value(fakelib) -> None:
    reader = LibrarySettings(Config(budget_s=60.0))  # the whole scan: a loaded box reads slowly
    reader.scan()
    assert reader.changed() == []  # nothing changed yet: no row for the enum, the lowercase or the counter
    fakelib.Pool.DEFAULT_LOAD_FACTOR = 16
    fakelib.DEFAULT_MODE = "portable"
    fakelib.set_state(3)  # the library's own state: not a setting
    fakelib.PLACEHOLDER = object()  # filled in at run time: not a setting
    rows = reader.changed()
    assert ["fakelib_ls/__init__.py", "Pool.DEFAULT_LOAD_FACTOR", "16", "1000"] in rows
    assert ["fakelib_ls/__init__.py", "DEFAULT_MODE", "'portable'", "'fast'"] in rows
    assert len(rows) == 2


def test_the_budget_parses_one_module_a_call_at_least_and_bounds_the_rest(fakelib) -> None:
    reader = LibrarySettings(Config(budget_s=0.0))
    reader.scan()
    assert reader.modules_read <= 1 and reader._seen  # one module at most, then the next publish
    bounded = LibrarySettings(Config(budget_s=5.0, max_modules=3))
    bounded.scan()
    assert bounded.modules_read == 3


def test_the_settings_probe_publishes_the_rows(fakelib) -> None:
    fakelib.Pool.DEFAULT_LOAD_FACTOR = 32
    probe = SettingsProbe(SettingsConfig())
    try:
        payload = {}
        deadline = time.monotonic() + 60.0
        while time.monotonic() < deadline:  # a publish reads within its budget, the test process has thousands
            payload = probe.snapshot(0.0)
            if any(r[1] == "Pool.DEFAULT_LOAD_FACTOR" for r in payload[K.LIBRARY_CHANGES]):
                break
    finally:
        probe.close()
    assert ["fakelib_ls/__init__.py", "Pool.DEFAULT_LOAD_FACTOR", "32", "1000"] in payload[K.LIBRARY_CHANGES]
    assert payload[K.LIBRARY_MODULES_READ] >= 1 and payload[K.LIBRARY_PARSE_MS] >= 0.0
    json.dumps(payload)


def test_once_every_module_is_read_a_publish_reads_nothing_until_an_import(fakelib, tmp_path: Path) -> None:
    reader = LibrarySettings(Config(budget_s=30.0))
    reader.scan()
    read, spent_s = reader.modules_read, reader.read_s
    assert read > 0 and reader._scan_complete
    reader.scan()
    assert reader.modules_read == read and reader.read_s == spent_s  # nothing new: nothing done, not even timed
    site = Path(fakelib.__file__).parents[1]
    (site / "fakelib_ls_late.py").write_text("LATE_LIMIT = 3\n")
    late = importlib.import_module("fakelib_ls_late")
    try:
        late.LATE_LIMIT = 4
        reader.scan()
        assert ["fakelib_ls_late.py", "LATE_LIMIT", "4", "3"] in reader.changed()
    finally:
        sys.modules.pop("fakelib_ls_late", None)


def test_a_secret_or_a_path_set_into_a_library_constant_is_never_shown(fakelib) -> None:
    reader = LibrarySettings(Config(budget_s=60.0))  # the whole scan: a loaded box reads slowly
    reader.scan()
    fakelib.DEFAULT_MODE = "/home/alice/private/run.cfg"  # a path: more than a setting's value should say
    fakelib.Pool.DEFAULT_LOAD_FACTOR = 16
    rows = {r[1]: r for r in reader.changed()}
    assert rows["DEFAULT_MODE"][2] == "<set>" and "alice" not in str(rows)
    assert rows["Pool.DEFAULT_LOAD_FACTOR"][2] == "16"
    assert shown("sk-live-abc", "API_TOKEN") == "<set>" and shown(16, "SESSION_KEY") == "<set>"
    assert shown("fast", "MODE") == "'fast'" and shown(None) == "None"
