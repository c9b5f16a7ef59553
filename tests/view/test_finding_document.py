"""One finding, one document, one wording: the same analysis through every output that shows findings.

The analysis is a real one (the recorded tiny-trainer stacks and a healthy board through ``analyse``) with three
findings added that use every part of the document: causal links both ways, stages, a note without evidence,
and evidence that gives one name twice (two stale modules), which an object keyed by name would collapse.
"""

from __future__ import annotations

import asyncio
import io
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS / "findings"))
sys.path.insert(0, str(TESTS / "tui"))

from findings_builders import HEALTHY_APP, HEALTHY_PROBES, board  # noqa: E402
from top_fakes import FakeSource  # noqa: E402

from dflash_diag.analysis import analyse  # noqa: E402
from dflash_diag.cli._output import dump_json, print_lines  # noqa: E402
from dflash_diag.cli.top_live import process_frame  # noqa: E402
from dflash_diag.export.trace import chrome_trace  # noqa: E402
from dflash_diag.model import NA, Analysis, Finding, Headline, Observation, Severity  # noqa: E402
from dflash_diag.snapshot.build import build_files  # noqa: E402
from dflash_diag.snapshot.gather import Gathered  # noqa: E402
from dflash_diag.snapshot.report import markdown_lines  # noqa: E402
from dflash_diag.sources.pyspy_json import load_recorded_dumps  # noqa: E402
from dflash_diag.view.doctor import doctor_doc  # noqa: E402
from dflash_diag.view.findings import (  # noqa: E402
    BADGE,
    PLAIN,
    Line,
    finding_json,
    findings_lines,
    headline_json,
    plain_lines,
)
from dflash_diag.view.frame import TopFrame  # noqa: E402
from dflash_diag.view.report import frame_to_json, frame_to_text  # noqa: E402

WALL0 = 1_764_412_345.0
PID = 23071
STALE = Finding("stale-code", Severity.CRITICAL, "2 modules changed on disk after import: the process runs old code",
                (("stale module", "trainer.loss"), ("stale module", "trainer.model"), ("changed", "3.2 s after start")),
                "restart the trainer [then check `git status`]", 0.3, "cause", (), (), ("pipeline-bottleneck-drafter",))
BOTTLENECK = Finding("pipeline-bottleneck-drafter", Severity.WARNING, "the drafter stage limits throughput",
                     (("q_hs depth", "4 / 4 items"), ("target blocked in put", "81%")), "speed up the drafter",
                     0.6123456, "symptom", ("drafter",), ("stale-code",), ())
NOTE = Finding("no-probes", Severity.INFO, "no probe board: stack- and /proc-based rules ran", (),
               "dflash-diag attach PID", 0.0, "note")
HEADLINE = Headline("pipeline-bottleneck-drafter", Severity.WARNING,
                    "the drafter stage limits throughput, because the process runs old code", "restart the trainer",
                    ("stale-code",))


@pytest.fixture(scope="module")
def analysis() -> Analysis:
    stacks = load_recorded_dumps(TESTS / "fixtures" / "cpu" / "pyspy_tiny_trainer.json", start_monotonic_s=100.0,
                                 start_wall_s=WALL0)
    obs = Observation(pid=PID, cmdline=("python", "-m", "reference_trainer"), started_wall_s=WALL0, window_s=3.6,
                      stacks=stacks, proc=(), gpus=NA("no NVML"),
                      boards=(board(HEALTHY_PROBES, HEALTHY_APP, wall_time_s=WALL0 + 3.4),), process_alive=True,
                      warnings=())
    real = analyse(replace(obs, now_wall_s=WALL0 + 3.6))
    assert not isinstance(real.pipeline, NA), real.pipeline  # top shows findings only beside a pipeline
    return replace(real, findings=(STALE, BOTTLENECK, *real.findings, NOTE), headline=HEADLINE)


def _printed(doc: Any) -> Any:
    """What a command prints with --json (the last redaction gate included), read back."""
    out = io.StringIO()
    dump_json(doc, out)
    return json.loads(out.getvalue())


def _top_frame(a: Analysis) -> TopFrame:
    return replace(process_frame(a, native=False), rate_hz=5.0)


def test_every_output_holds_the_same_finding_documents(analysis: Analysis) -> None:
    """doctor --json, top --batch --json, snapshot.json and the trace (record's, and the bundle's trace.json)."""
    expected = [finding_json(f) for f in analysis.findings]
    doctor = _printed(doctor_doc(analysis))
    top = _printed(frame_to_json(_top_frame(analysis)))
    gathered = Gathered(pid=PID, started_wall_s=WALL0, observation=analysis.observation,
                        board=analysis.observation.board, cmdline=analysis.observation.cmdline, environ={})
    files = build_files(gathered, analysis, WALL0 + 4.0)
    snapshot = json.loads(files["snapshot.json"])
    record = json.loads(json.dumps(chrome_trace(analysis.observation, analysis.threads, analysis.findings,
                                                tool_version="t")))

    def trace_findings(trace: dict[str, Any]) -> list[Any]:
        return [e["args"] for e in trace["traceEvents"] if e.get("cat") == "finding"]

    assert doctor["findings"] == expected
    assert top["findings"]["items"] == expected
    assert snapshot["findings"] == expected
    assert trace_findings(record) == expected
    assert trace_findings(json.loads(files["trace.json"])) == expected
    assert doctor["headline"] == top["headline"] == snapshot["headline"] == headline_json(HEADLINE)
    # The documented keys (docs/findings.md), in every finding, the real rules' included.
    keys = {"rule_id", "severity", "kind", "claim", "evidence", "remedy", "impact", "stages", "because", "explains"}
    assert all(set(f) == keys for f in expected) and len(expected) > 3
    assert set(doctor["headline"]) == {"rule_id", "severity", "text", "remedy", "because"}


def test_duplicate_evidence_names_survive_every_output(analysis: Analysis) -> None:
    stale = finding_json(STALE)
    assert stale["evidence"][:2] == [{"name": "stale module", "value": "trainer.loss"},
                                     {"name": "stale module", "value": "trainer.model"}]
    assert stale["explains"] == ["pipeline-bottleneck-drafter"] and stale["kind"] == "cause"
    assert finding_json(BOTTLENECK)["impact"] == 0.612  # 3 decimals, as doctor has always written it
    text = frame_to_text(_top_frame(analysis))
    assert "      stale module: trainer.loss\n      stale module: trainer.model\n" in text


def _shows(line: Line, drawn: str) -> bool:
    """Every word-carrying span of ``line`` appears in ``drawn``, in order (punctuation and framing are the
    adapter's: a grid column for ': ', brackets or colour around a badge, backticks around a rule id)."""
    at = 0
    for span in line.spans:
        if span.tag == PLAIN:
            continue
        at = drawn.find(span.text, at)
        if at < 0:
            return False
        at += len(span.text)
    return True


def _assert_draws(lines: list[Line], drawn: list[str]) -> None:
    """Each line is drawn, in order, each on a line of its own (blank lines and headings of the adapter between)."""
    rows = iter(drawn)
    for line in lines:
        assert any(_shows(line, row) for row in rows), f"{line.text!r} not drawn in order in:\n" + "\n".join(drawn)


def _lines(a: Analysis) -> list[Line]:
    return findings_lines(headline_json(a.headline), [finding_json(f) for f in a.findings])


def test_the_rich_adapter_draws_the_lines(analysis: Analysis) -> None:
    from rich.console import Console

    lines = _lines(analysis)
    console = Console(file=io.StringIO(), record=True, width=400, color_system=None)
    print_lines(console, lines)
    drawn = console.export_text().splitlines()
    _assert_draws(lines, drawn)
    assert drawn[2] == "" and drawn[3].startswith(" CRITICAL  stale-code: 2 modules changed")  # a blank before each
    assert drawn[4].split() == ["stale", "module", "trainer.loss"]  # evidence as an aligned grid
    assert "restart the trainer [then check `git status`]" in "\n".join(drawn)  # text, never markup


def test_the_markdown_adapter_draws_the_lines(analysis: Analysis) -> None:
    lines = _lines(analysis)
    drawn = markdown_lines(lines)
    _assert_draws(lines, drawn)
    assert "### [CRITICAL] `stale-code`: 2 modules changed on disk after import: the process runs old code " \
           "(explains: pipeline-bottleneck-drafter)" in drawn
    assert "- stale module: trainer.loss" in drawn and "- stale module: trainer.model" in drawn
    assert "- **fix**: speed up the drafter" in drawn
    # The bundle's report.md is drawn so, from the redacted snapshot.json.
    gathered = Gathered(pid=PID, started_wall_s=WALL0, observation=analysis.observation,
                        board=analysis.observation.board, cmdline=analysis.observation.cmdline, environ={})
    report = build_files(gathered, analysis, WALL0 + 4.0)["report.md"].decode()
    assert "\n".join(drawn) in report


def test_the_plain_adapter_draws_the_lines(analysis: Analysis) -> None:
    lines = _lines(analysis)
    drawn = plain_lines(lines)
    _assert_draws(lines, drawn)
    assert drawn[0] == "[HEADLINE] the drafter stage limits throughput, because the process runs old code"
    assert all(s.text.isupper() for line in lines for s in line.spans if s.tag == BADGE)


def test_the_textual_adapter_draws_the_lines(analysis: Analysis) -> None:
    """top's Findings tab, really rendered by Textual (App.run_test): the same lines as doctor's."""
    from textual.geometry import Region
    from textual.widgets import Static

    from dflash_diag.tui.app import TopApp

    frame = _top_frame(analysis)
    lines = _lines(analysis)

    async def run() -> list[str]:
        app = TopApp(FakeSource([frame]), initial_frame=frame, start_sampler=False)
        async with app.run_test(size=(300, 60)) as pilot:
            await pilot.press("5")
            await pilot.pause()
            tab = app.query_one("#findings", Static)
            width, height = tab.size
            return [strip.text.rstrip() for strip in tab.render_lines(Region(0, 0, width, height))]

    drawn = asyncio.run(run())
    _assert_draws(lines, drawn)
    assert any(row.startswith(" CRITICAL  stale-code: ") for row in drawn)


def test_a_headline_that_is_one_findings_claim_is_listed_once() -> None:
    """top's Findings tab listed "where the time goes" twice: as the headline and as the finding it restates."""
    where = Finding("where-time-goes", Severity.INFO, "where the time goes: worker-1 spends work (w.py:9) 90%",
                    (("path (root last)", "worker-1"),), "look at the root's functions", kind="cause")
    headline = Headline("where-time-goes", Severity.INFO, where.claim, where.remedy)
    text = "\n".join(plain_lines(findings_lines(headline_json(headline), [finding_json(where)])))
    assert text.count("where the time goes") == 1
    # A headline that says more (a symptom with its cause) stays above the findings it joins.
    composed = Headline("pipeline-bottleneck-drafter", Severity.WARNING, HEADLINE.text, "restart", ("stale-code",))
    drawn = plain_lines(findings_lines(headline_json(composed), [finding_json(BOTTLENECK), finding_json(STALE)]))
    assert drawn[0].startswith("[HEADLINE] the drafter stage limits throughput, because")


def test_doctors_summary_counts_what_it_printed(analysis: Analysis, capsys: pytest.CaptureFixture[str]) -> None:
    """ "no findings ... (4 informational)" after five INFO blocks: the headline's badge now says HEADLINE, so the
    severity badges on screen are the findings the summary counts."""
    from dflash_diag.cli._output import console
    from dflash_diag.view.doctor import doctor_lines

    infos = tuple(replace(f, severity=Severity.INFO) for f in (STALE, BOTTLENECK, NOTE))
    info_headline = replace(HEADLINE, severity=Severity.INFO)
    print_lines(console(), doctor_lines(_printed(doctor_doc(replace(analysis, findings=infos, headline=info_headline)))))
    out = capsys.readouterr().out
    assert "(3 informational)" in out
    assert out.count(" INFO ") == 3 and "HEADLINE" in out
