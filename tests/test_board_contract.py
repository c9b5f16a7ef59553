"""One home for each shared idea (dflash_contract): the board schema, the probe names, the payload keys,
strict JSON, /proc identity and the redactor are defined once, and writers and readers use them."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import probes
from dflash_contract import board as contract

ROOT = Path(__file__).resolve().parents[1]
CODE = [p for d in ("dflash_diag", "probes", "dflash_contract", "reference_trainer")
        for p in sorted((ROOT / d).rglob("*.py"))]
KEY_CLASSES = {
    "gil": contract.GilKeys, "allocator": contract.AllocatorKeys, "queues": contract.QueueKeys,
    "checkpoint": contract.CheckpointKeys, "compile": contract.CompileKeys, "cudagraphs": contract.CudagraphsKeys,
    "fastpath": contract.FastpathKeys, "codedrift": contract.CodedriftKeys, "threads": contract.ThreadsKeys,
    "collectives": contract.CollectivesKeys,
}
READERS = [ROOT / "dflash_diag/analysis/pipeline.py", ROOT / "dflash_diag/view/text.py", ROOT / "dflash_diag/analysis/job.py",
           *sorted((ROOT / "dflash_diag/analysis/findings").glob("*.py"))]
# Keys too generic to tell which probe a literal means (they are also app, snapshot or thread fields).
GENERIC = {"threads", "status", "reason", "step", "window_s", "site", "fallback", "file", "cuda_available",
           "function", "thread", "module", "torch", "tid", "samples", "calls", "limit", "how", "active", "rank"}
READER_CALLS = {"num", "sub", "items", "pct", "text", "flag", "get", "_num", "_get", "_sub", "_items"}


def _constants(cls: type) -> dict[str, str]:
    return {k: v for k, v in vars(cls).items() if k.isupper() and isinstance(v, str)}


def _source(path: Path) -> str:
    return path.read_text()


def test_probe_names_are_defined_once_and_used_everywhere() -> None:
    assert set(contract.PROBE_NAMES) == set(_constants(contract.ProbeName).values()) == probes.ALL_PROBES
    from dflash_diag.cli import attach, run
    from dflash_diag.sources import inject

    assert run.KNOWN_PROBES is contract.PROBE_NAMES and attach.KNOWN_PROBES is contract.PROBE_NAMES
    assert inject.KNOWN_PROBES is contract.PROBE_NAMES
    listed = re.compile(r'\(\s*"gil",\s*"allocator"')
    assert [str(p.relative_to(ROOT)) for p in CODE if listed.search(_source(p))] == ["dflash_contract/board.py"]


def test_every_payload_key_is_written_by_its_probe() -> None:
    for probe, cls in KEY_CLASSES.items():
        text = _source(ROOT / "probes" / f"{probe}.py")
        unused = [name for name in _constants(cls) if f"{cls.__name__}.{name}" not in text]
        assert unused == [], f"{cls.__name__}: keys the {probe} probe never writes: {unused}"


def test_readers_name_payload_keys_by_their_constants() -> None:
    specific = {v for cls in KEY_CLASSES.values() for v in _constants(cls).values()} - GENERIC
    found = []
    for path in READERS:
        for node in ast.walk(ast.parse(_source(path))):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name not in READER_CALLS:
                continue
            for arg in node.args:
                if isinstance(arg, ast.Constant) and arg.value in specific:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {arg.value!r}")
    assert found == [], "payload keys spelled as literals (use the dflash_contract.board constants):\n" + "\n".join(found)


def test_one_definition_of_the_schema_strict_json_stat_and_the_redactor() -> None:
    def where(pattern: str) -> list[str]:
        rx = re.compile(pattern)
        return sorted(str(p.relative_to(ROOT)) for p in CODE if rx.search(_source(p)))

    assert where(r'"dflash-diag\.board/1"') == ["dflash_contract/board.py"]
    assert where(r"def _reject_constant") == ["dflash_contract/board.py"]
    assert where(r"split\(\)\[19\]|rest\[19\]") == ["dflash_contract/proc.py"]  # /proc stat field 22
    assert where(r"(?m)^def (redact_\w+|scrub_\w+)") == ["dflash_contract/redact.py"]
    assert where(r"(?m)^def (process_alive|process_exists)\b") == ["dflash_contract/proc.py"]
    assert where(r"(?m)^class BoardWriter\b") == []  # the model's is WriterIdentity, the probes' BoardPublisher
