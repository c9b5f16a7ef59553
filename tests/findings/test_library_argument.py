"""`library-argument-at-hot-code` on real recordings (tests/casebook/observations): batch 27's DDP program, whose
dict-backed profile passes `forward_sync_buffers=cfg.ddp.sync_buffers` (True) to DistributedDataParallel with no
default of its own in the code, and whose trainer spends about half its samples in DDP's buffer sync; and its twin,
which passes False."""
from __future__ import annotations

import gzip
from dataclasses import replace
from pathlib import Path

from dflash_diag.analysis import analyse
from dflash_diag.analysis.findings.library_argument import _words
from dflash_diag.model import Observation, Severity
from dflash_diag.observe.codec import read_observation

RECORDED = Path(__file__).resolve().parents[1] / "casebook" / "observations"
RULE = "library-argument-at-hot-code"


def _obs(name: str) -> Observation:
    obs = read_observation(gzip.open(RECORDED / f"{name}.json.gz").read())
    assert isinstance(obs, Observation)
    return obs


def _with_passed(obs: Observation, argument: str, **changes: object) -> Observation:
    """``obs`` with the program's argument ``argument`` (``SourceFile.passed``) changed."""
    return replace(obs, files=tuple(replace(f, passed=tuple(replace(u, **changes) if u.name == argument else u  # type: ignore[arg-type]
                                                          for u in f.passed)) for f in obs.files))


def test_the_library_code_an_argument_from_the_profile_names_is_the_stages_because() -> None:
    for mode in ("outside", "probes", "attach"):
        report = analyse(_obs(f"settings27_whimbrel__{mode}"))
        assert report.headline is not None and report.headline.because == (RULE,), mode
        assert "of its samples in torch's `DistributedDataParallel._sync_module_buffers` (distributed.py:2429), the " \
               "code the program's `forward_sync_buffers=True` argument asks for (from `sync_buffers` in " \
               "flyway_strict.toml, passed at train.py:82); what the argument costs is not measured" \
               in report.headline.text, mode
        found = next(f for f in report.findings if f.rule_id == RULE)
        assert found.severity is Severity.INFO and found.remedy.startswith("Try the run with forward_sync_buffers off")


def test_an_argument_that_turns_the_code_off_a_size_or_one_word_draws_nothing() -> None:
    obs = _obs("settings27_whimbrel__outside")
    assert RULE not in {f.rule_id for f in analyse(_with_passed(obs, "forward_sync_buffers", value="False")).findings}
    assert RULE not in {f.rule_id for f in analyse(_with_passed(obs, "forward_sync_buffers", value="64")).findings}
    # An argument whose name says nothing once `forward` is dropped: one word (`sync`) is a whole code path.
    assert RULE not in {f.rule_id for f in analyse(_with_passed(obs, "forward_sync_buffers",
                                                                name="forward_sync")).findings}
    # The twin passes False: its trainer does not sync buffers in forward, and nothing is said.
    for mode in ("outside", "attach"):
        assert RULE not in {f.rule_id for f in analyse(_obs(f"settings27_whimbrel_fixed__{mode}")).findings}, mode


def test_an_arguments_words_drop_those_that_say_when_or_whether() -> None:
    assert _words("forward_sync_buffers") == {"sync", "buffers"}
    assert _words("use_deterministicAlgorithms") == {"deterministic", "algorithms"}
    assert _words("enable_fused") == {"fused"}
