"""The probes pane's one line per probe (view/text.py): what `top` and `top --batch` print of a board."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "findings"))

from findings_builders import board

from dflash_diag.view.text import probe_summary

_NO_MODEL = {"status": "ok", "fla_importable": False, "gdn_kernels": {}, "gdn_fast_path": None, "fallback": False,
             "gdn_reason": "flash-linear-attention (fla) is not installed", "flex_attention": "unused"}


def _fastpath_line(payload: dict) -> str:
    return dict(probe_summary(board(probes={"fastpath": payload})))["fastpath"]


def test_a_program_without_gatednet_shows_no_slow_fallback() -> None:
    """A program with no GatedDeltaNet, attached on a box without fla (a board written before the probe's reason
    was fixed says "fla is not installed"): nothing is slow, the line says there is no such model."""
    line = _fastpath_line(_NO_MODEL)
    assert line.startswith("no GatedDeltaNet model") and "SLOW" not in line


def test_the_fallback_and_the_fast_path_still_read_as_before() -> None:
    slow = {**_NO_MODEL, "gdn_kernels": {"modeling_qwen3_next.chunk_gated_delta_rule": "torch_fallback"},
            "gdn_fast_path": False, "fallback": True}
    assert _fastpath_line(slow).startswith("GDN SLOW fallback (flash-linear-attention (fla) is not installed)")
    fast = {**slow, "gdn_kernels": {"modeling_qwen3_next.chunk_gated_delta_rule": "fla"}, "gdn_fast_path": True}
    assert _fastpath_line(fast).startswith("GDN fast path")
    unknown = {**slow, "gdn_kernels": {"modeling_qwen3_next.chunk_gated_delta_rule": None}, "gdn_fast_path": None,
               "gdn_reason": "this transformers version does not show which kernel it bound"}
    assert _fastpath_line(unknown).startswith("GDN kernel not known (this transformers version")
