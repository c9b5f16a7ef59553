"""The values of the configuration keys a program's catalogued settings are read from, out of the configuration
files named on its command line.

``sources.outside`` records where the program passes a catalogued setting (``KnobUse``) and, where the value is not
a literal, the configuration key it is read from (``cfg["statement_cache"]``). The process was started with its
configuration files on its command line (``--config configs/live.toml``, ``run.json``): each such file (TOML,
JSON, INI: what the standard library parses; YAML through PyYAML's safe loader where it is installed), resolved
against the process's working
directory, is parsed, and a key found
at one value (at any depth: a table's ``[store] statement_cache = 0``) gives the setting its value. Only the keys
the catalogue's uses name are looked up, and only a short literal is kept (a number, a word): no other part of the
file is read out. Files are bounded in size and parsed once per (path, mtime).
"""

from __future__ import annotations

import configparser
import json
import os
import re
import stat
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

CONFIG_SUFFIXES = (".toml", ".json", ".ini", ".cfg", ".yaml", ".yml")
MAX_NODES = 20_000  # values visited in one file's tree: a YAML file's aliases may share one subtree many times
MAX_CONFIG_BYTES = 256 * 1024
MAX_CONFIG_FILES = 4
MAX_DEPTH = 8
_SHOWN = re.compile(r"^[\w.+-]{1,40}$")
# A relative path (``env/site_modules.sh``): a file of the program's own tree, shown; an absolute one may name a
# person's home and is not.
_RELATIVE_PATH = re.compile(r"^[\w.+-]+(/[\w.+-]+)+$")


def config_paths(argv: tuple[str, ...], cwd: str) -> tuple[str, ...]:
    """The configuration files named on the command line (an argument, or the value of ``--opt=path``), resolved
    against ``cwd``; at most MAX_CONFIG_FILES."""
    out: list[str] = []
    for arg in argv[1:]:
        value = arg.split("=", 1)[1] if arg.startswith("-") and "=" in arg else arg
        if value.lower().endswith(CONFIG_SUFFIXES) and not value.startswith("-"):
            path = value if value.startswith("/") else os.path.join(cwd, value)
            if path not in out:
                out.append(path)
    return tuple(out[:MAX_CONFIG_FILES])


def default_config_paths(argv: tuple[str, ...], cwd: str, declared: tuple[str, ...]) -> tuple[str, ...]:
    """Where no configuration file is named on the command line: the ones the program's script declares as its
    option's default (``--config`` with ``default=os.path.join("configs", "fleet.toml")``: ``declared``), resolved
    against ``cwd``, that exist; () where the command line names one (it wins) or none is found."""
    if config_paths(argv, cwd):
        return ()
    out = []
    for value in declared:
        path = value if value.startswith("/") else os.path.join(cwd, value)
        if value.lower().endswith(CONFIG_SUFFIXES) and os.path.isfile(path) and path not in out:
            out.append(path)
    return tuple(out[:MAX_CONFIG_FILES])


def parse_config(path: str, text: str) -> Mapping[str, Any] | None:
    """The file's settings as nested mappings; None where it does not parse as its suffix says."""
    suffix = path.lower().rsplit(".", 1)[-1]
    try:
        if suffix == "toml":
            return tomllib.loads(text)
        if suffix == "json":
            value = json.loads(text)
            return value if isinstance(value, Mapping) else None
        if suffix in ("yaml", "yml"):
            return _parse_yaml(text)
        parser = configparser.ConfigParser(interpolation=None)
        parser.read_string(text)
        return {section: dict(parser[section]) for section in parser.sections()}
    except (ValueError, configparser.Error, RecursionError):
        return None


def _parse_yaml(text: str) -> Mapping[str, Any] | None:
    """A YAML file's settings through PyYAML's safe loader (no object is constructed from a tag), where PyYAML is
    installed (the trainer's extras bring it); None where it is not, or the file is not a mapping."""
    try:
        import yaml
    except ImportError:
        return None
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        value = yaml.load(text, Loader=loader)  # a safe loader: plain data only
    except yaml.YAMLError:
        return None
    return value if isinstance(value, Mapping) else None


def _read_regular(path: str) -> str | None:
    """The file's text, opened without blocking (a FIFO on the command line must never stall us) and read only where
    the opened descriptor is a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, MAX_CONFIG_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None
    finally:
        os.close(fd)


def _values(tree: Mapping[str, Any], key: str, depth: int = 0, budget: list[int] | None = None) -> Iterator[Any]:
    """The values of ``key`` at any depth (up to MAX_DEPTH), visiting at most MAX_NODES entries in all."""
    budget = budget if budget is not None else [MAX_NODES]
    if depth > MAX_DEPTH:
        return
    for k, v in tree.items():
        budget[0] -= 1
        if budget[0] < 0:
            return
        if k == key and not isinstance(v, Mapping | list):
            yield v
        if isinstance(v, Mapping):
            yield from _values(v, key, depth + 1, budget)


def is_relative_path(text: str) -> bool:
    """A value as Python writes it that is a relative path with a directory (``'env/site_modules.sh'``)."""
    return bool(_RELATIVE_PATH.match(text.strip("'\"")))


def shown_value(value: Any) -> str:
    """The value as Python writes it (``0``, ``'python-re'``, ``''``, ``True``, JSON's null as ``None``); "" for
    anything not a short literal."""
    if value is None or isinstance(value, bool | int | float):
        text = repr(value)
    elif isinstance(value, str) and (not value or _SHOWN.match(value) or _RELATIVE_PATH.match(value)):
        # '' turns an option off: a value too
        text = repr(value)
    else:
        return ""
    return text if len(text) <= 42 else ""


class ConfigReader:
    """The configuration keys' values of one process, from the files on its command line (cached by mtime)."""

    def __init__(self) -> None:
        self._parsed: dict[str, tuple[float, Mapping[str, Any] | None]] = {}

    def lookup(self, paths: tuple[str, ...], key: str) -> tuple[str, str] | None:
        """(the value as Python writes it, the file's name) where exactly one value is found for ``key`` across the
        files; None where none, several, or not a short literal."""
        found: list[tuple[str, str]] = []
        for path in paths:
            tree = self._tree(path)
            if tree is None:
                continue
            found += [(shown_value(v), Path(path).name) for v in _values(tree, key)]
        values = {v for v, _ in found}
        if len(values) != 1 or "" in values:
            return None
        return found[0]

    def _tree(self, path: str) -> Mapping[str, Any] | None:
        try:
            st = os.stat(path)
        except OSError:
            return None
        cached = self._parsed.get(path)
        if cached is not None and cached[0] == st.st_mtime:
            return cached[1]
        tree = None
        if stat.S_ISREG(st.st_mode) and st.st_size <= MAX_CONFIG_BYTES:
            text = _read_regular(path)
            tree = parse_config(path, text) if text is not None else None
        if len(self._parsed) > 64:
            self._parsed.clear()
        self._parsed[path] = (st.st_mtime, tree)
        return tree
