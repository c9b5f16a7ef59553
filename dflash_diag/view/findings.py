"""A finding as one JSON document and as one list of lines: every output that shows a finding goes through here.

- :func:`finding_json` and :func:`headline_json` write the one document shape (docs/findings.md, "The finding
  document"): ``doctor --json``, ``top --batch --json``, ``snapshot.json``, ``snapshot --json`` and the trace's
  finding events all hold exactly these objects. Evidence stays a list of ``{name, value}`` pairs in the rule's
  order: a rule may give two values under one name (two stale modules), and a dict would keep only the last.
- :func:`finding_lines`, :func:`headline_lines` and :func:`findings_lines` turn those documents into
  presentation-neutral lines: text spans, each with a tag that says what it is (a severity badge, a rule id, an
  evidence name, the fix). Thin adapters draw them: rich for ``doctor`` (``cli/_output.py``), Textual for ``top``'s
  findings tab and probes pane (``tui/render.py``), markdown for ``report.md`` (``snapshot/report.py``) and
  :func:`plain_lines` for ``top --batch``. An adapter chooses colours, indentation and emphasis; the words are
  these, so no output words a finding its own way.

The lines are built from the document, not from the :class:`Finding`, so that ``report.md`` can be drawn from the
redacted ``snapshot.json`` alone and every output shows what the JSON holds. No rich, no Textual.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypedDict

from dflash_diag.model import NA, Finding, Headline, Maybe


class EvidenceDoc(TypedDict):
    name: str
    value: str  # with its unit, as the rule wrote it


class FindingDoc(TypedDict):
    """One finding (docs/findings.md, "The finding document")."""

    rule_id: str
    severity: str  # info | warning | critical
    kind: str  # symptom | cause | state | note
    claim: str
    evidence: list[EvidenceDoc]
    remedy: str
    impact: float  # share of lost throughput it explains, 0..1, 3 decimals
    stages: list[str]
    because: list[str]  # on a symptom: the rule ids of the causes that explain it, best first
    explains: list[str]  # on a cause: the rule ids of the symptoms it explains


class HeadlineDoc(TypedDict):
    rule_id: str
    severity: str
    text: str
    remedy: str
    because: list[str]


def finding_json(f: Finding) -> FindingDoc:
    """The one JSON document of a finding."""
    return {
        "rule_id": f.rule_id,
        "severity": f.severity.label,
        "kind": f.kind,
        "claim": f.claim,
        "evidence": [{"name": name, "value": value} for name, value in f.evidence],
        "remedy": f.remedy,
        "impact": round(f.impact, 3),
        "stages": list(f.stages),
        "because": list(f.because),
        "explains": list(f.explains),
    }


def headline_json(h: Headline | None) -> HeadlineDoc | None:
    """The one JSON document of the headline; None when nothing was found."""
    if h is None:
        return None
    return {"rule_id": h.rule_id, "severity": h.severity.label, "text": h.text, "remedy": h.remedy,
            "because": list(h.because)}


# --- lines ----------------------------------------------------------------------------------------------------

# What a span is. An adapter maps each tag to its own look and draws the text as it is (a badge may be framed:
# `[WARNING]` in markdown, a coloured ` WARNING ` in a terminal).
BADGE = "badge"  # the severity, upper case; Line.severity says which
RULE = "rule"  # a rule id
CLAIM = "claim"
HEADLINE = "headline"  # the headline's sentence
LINK = "link"  # the causal links: (because: ...) (explains: ...)
LABEL = "label"  # an evidence name
VALUE = "value"  # an evidence value
FIX = "fix"  # the word "fix"
REMEDY = "remedy"
NOTE = "note"  # a line about the list itself: why there are none to show (an N/A)
CLEAR = "clear"  # the line that says nothing was found
TITLE = "title"  # a report's name (``dflash-diag doctor``)
ALERT = "alert"  # what the reader must not miss beside it (the process exited)
SUMMARY = "summary"  # the counts of findings by severity
PLAIN = ""  # punctuation between the others

# The terminal look of each tag (Rich style names, as view/text.py's STATE_STYLE): doctor's rich adapter and top's
# Textual one draw alike. A badge takes its severity's style.
SEVERITY_STYLE: Mapping[str, str] = {"critical": "bold white on red", "warning": "bold black on yellow",
                                     "info": "bold cyan"}
TAG_STYLE: Mapping[str, str] = {RULE: "bold", HEADLINE: "bold", LINK: "dim", LABEL: "dim", FIX: "green", NOTE: "dim",
                                CLEAR: "bold green", TITLE: "bold", ALERT: "red", SUMMARY: "bold"}

# What a line is: the first line of a finding or of the headline, an evidence pair, a fix, a note.
Role = Literal["finding", "headline", "evidence", "fix", "note"]
Detail = Literal["full", "fix", "claim"]  # every line; the first line and the fix; the first line only

NO_FINDINGS = "no findings: nothing known to be wrong was seen in this window"


@dataclass(frozen=True, slots=True)
class Span:
    text: str
    tag: str = PLAIN


@dataclass(frozen=True, slots=True)
class Line:
    role: Role
    spans: tuple[Span, ...]
    severity: str = ""  # the finding's or the headline's (info | warning | critical); empty on a note
    depth: int = 0  # 0: a finding's first line; 1: its evidence and fix, drawn indented under it

    @property
    def text(self) -> str:
        return "".join(span.text for span in self.spans)

    def tagged(self, tag: str) -> str:
        """The text of this line's spans with ``tag`` (an evidence line's name or value)."""
        return "".join(span.text for span in self.spans if span.tag == tag)


def _badge(severity: str) -> Span:
    return Span(severity.upper(), BADGE)


def _fix(remedy: str, severity: str) -> Line:
    return Line("fix", (Span("fix", FIX), Span(": "), Span(remedy, REMEDY)), severity, depth=1)


def finding_lines(doc: FindingDoc, detail: Detail = "full") -> list[Line]:
    """A finding: ``SEVERITY rule-id: claim (because: ...) (explains: ...)``, its evidence, its fix."""
    severity = doc["severity"]
    head = [_badge(severity), Span(" "), Span(doc["rule_id"], RULE), Span(": "), Span(doc["claim"], CLAIM)]
    if doc["because"]:
        head.append(Span(f" (because: {', '.join(doc['because'])})", LINK))
    if doc["explains"]:
        head.append(Span(f" (explains: {', '.join(doc['explains'])})", LINK))
    lines = [Line("finding", tuple(head), severity)]
    if detail == "full":
        lines += [Line("evidence", (Span(e["name"], LABEL), Span(": "), Span(e["value"], VALUE)), severity, depth=1)
                  for e in doc["evidence"]]
    if detail != "claim":
        lines.append(_fix(doc["remedy"], severity))
    return lines


HEADLINE_BADGE = "HEADLINE"


def headline_lines(doc: HeadlineDoc, detail: Detail = "full") -> list[Line]:
    """The headline: ``HEADLINE sentence`` (the badge in its severity's colour), then its fix. Its badge is not a
    severity: the headline restates findings listed below it, and a reader counting INFO badges against the summary
    ("4 informational") must count the findings only."""
    severity = doc["severity"]
    lines = [Line("headline", (Span(HEADLINE_BADGE, BADGE), Span(" "), Span(doc["text"], HEADLINE)), severity)]
    if detail != "claim":
        lines.append(_fix(doc["remedy"], severity))
    return lines


def findings_lines(headline: HeadlineDoc | None, findings: Sequence[FindingDoc], detail: Detail = "full") -> list[Line]:
    """The headline, then every finding (most severe first, as the analysis ordered them), or the note that there
    are none."""
    if not findings and headline is None:
        return [Line("note", (Span(NO_FINDINGS, CLEAR),))]
    # A headline that is one finding's claim word for word (no cause linked: "where the time goes: ...") is that
    # finding, listed first below: said once, not twice.
    restated = headline is not None and any(
        doc["rule_id"] == headline["rule_id"] and doc["claim"] == headline["text"] for doc in findings)
    lines = headline_lines(headline, detail) if headline is not None and not restated else []
    for doc in findings:
        lines += finding_lines(doc, detail)
    return lines


def maybe_findings_lines(findings: Maybe[tuple[Finding, ...]], headline: Headline | None,
                         detail: Detail = "full") -> list[Line]:
    """``top``'s findings (its frame's, an N/A when there was no pipeline to judge) as lines: the reason, or
    :func:`findings_lines` of their documents."""
    if isinstance(findings, NA):
        return [note_line(str(findings))]
    return findings_lines(headline_json(headline), [finding_json(f) for f in findings], detail)


def note_line(text: str) -> Line:
    """A line about the list (no findings, or the reason there are none to show: an N/A)."""
    return Line("note", (Span(text, NOTE),))


def plain_lines(lines: Iterable[Line], indent: str = "", step: str = "    ") -> list[str]:
    """The plain-text adapter (``top --batch``, ``snapshot``'s summary): a badge as ``[WARNING]``."""
    out = []
    for line in lines:
        text = "".join(f"[{s.text}]" if s.tag == BADGE else s.text for s in line.spans)
        out.append(f"{indent}{step * line.depth}{text}")
    return out
