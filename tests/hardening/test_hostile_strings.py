"""A property test: hostile strings in every node-supplied field of a snapshot (GPU
names, hostnames, process names, log lines, collector errors ...) change no output's
structure. JSON and every JSONL line parse back, prometheus_client's parser reads the
textfile with no duplicate series, the Markdown report renders (markdown-it) with its
tables and headings intact and no HTML element from the input, and terminal renderings
(CLI text, TUI panes) hold no escape or other control character."""

from __future__ import annotations

import json
import re
from collections import Counter
from html.parser import HTMLParser
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from prometheus_client.parser import text_string_to_metric_families
from pydantic import BaseModel

from gpu_triage.engine.compiler import load_rulebook
from gpu_triage.engine.evaluate import evaluate
from gpu_triage.engine.explain import explain, render_explanation
from gpu_triage.engine.inputs import EvalInput, kind_availability
from gpu_triage.io.escape import visible
from gpu_triage.model.snapshot import Snapshot, load_snapshot
from gpu_triage.ops.unattended import render
from gpu_triage.tui import render as tui
from tests.conftest import ROOT

DEMO = ROOT / "gpu_triage" / "data" / "demo-incident.json"
BOOK = load_rulebook()
BASE = load_snapshot(DEMO)

HOSTILE = [
    "two\nlines",
    "cr\rreturn",
    "crlf\r\nx",
    "a | b | c",
    "<script>alert(1)</script>",
    '<img src=x onerror="alert(1)">',
    "<b>bold</b>&amp;&lt;i&gt;",
    "\x1b[31mred\x1b[0m\x1b]0;title\x07",
    "\x9b2J c1",
    "nul\x00byte",
    "lone \ud800 surrogate \udfff",
    "line\u2028sep\u2029par",
    "\u202eevil",
    "# heading",
    "> quote",
    "1. list",
    "`code` ``two``",
    "*em* _u_ [link](javascript:alert(1))",
    "back\\slash\\",
    '"quoted"',
    "x" * 20_000,
]
hostile = st.one_of(st.sampled_from(HOSTILE), st.text(max_size=40))
CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
MD_TAGS = {
    "h1",
    "h2",
    "p",
    "ul",
    "ol",
    "li",
    "strong",
    "em",
    "code",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
}


def _models(snap: Snapshot) -> list[BaseModel]:
    """Every model a node fills: the facts of every kind, collector statuses, raw outputs."""
    out: list[BaseModel] = [snap, *snap.collectors, *snap.raw]
    for name in type(snap.facts).model_fields:
        value = getattr(snap.facts, name)
        items = value if isinstance(value, list) else [value]
        out += [v for v in items if isinstance(v, BaseModel)]
    return out


def _poison(snap: Snapshot, values: list[str]) -> int:
    """Set every string field, empty optional ones too, to one of ``values``."""
    n = 0
    for model in _models(snap):
        for name, field in type(model).model_fields.items():
            if name in ("schema_version", "tool_version"):
                continue
            if field.annotation not in (str, str | None):
                continue
            value = values[n % len(values)]
            setattr(model, name, value)
            n += 1
    return n


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: Counter[str] = Counter()

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        self.tags[tag] += 1


def _check_markdown(text: str, doc: Any) -> None:
    for line in text.splitlines():
        assert not CONTROL.search(line)
    tables = [ln for ln in text.splitlines() if ln.startswith("|")]
    for ln in tables:  # every row has its header's cells: no pipe split one
        assert len(re.findall(r"(?<!\\)\|", ln.replace("\\\\", ""))) == 5, ln
    html = MarkdownIt("commonmark").enable("table").render(text)
    parser = _Tags()
    parser.feed(html)
    assert set(parser.tags) <= MD_TAGS, set(parser.tags) - MD_TAGS
    assert parser.tags["h1"] == 1
    sections = int(bool(doc.needs_confirmation)) + int(bool(doc.cannot_evaluate))
    assert parser.tags["h2"] == len(doc.findings) + sections
    rows = 1 + len(doc.collectors) if doc.collectors else 0
    rows += sum(1 + len(f.evidence) for f in doc.findings)
    assert parser.tags["tr"] == rows


def _check_prometheus(text: str) -> None:
    assert "\r" not in text and "\x1b" not in text
    seen = Counter(
        (s.name, tuple(sorted(s.labels.items())))
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    )
    assert [k for k, n in seen.items() if n > 1] == []


def _check_terminal(snap: Snapshot, doc: Any) -> None:
    texts: list[str] = []
    for f in [*doc.findings, *doc.needs_confirmation, *doc.cannot_evaluate]:
        texts.append(tui.detail_text(f, [], {}).plain)
        texts.append(tui.finding_line(f).plain)
    texts.append(tui.summary_text(doc, host=snap.hostname, source="x").plain)
    texts += [" ".join(row) for row in tui.fact_rows(snap, kind_availability(snap))]
    if doc.findings:  # what `gpu-triage explain` prints
        x = explain(EvalInput.from_snapshot(snap), BOOK, doc.findings[0].rule_id)
        texts.append(visible(render_explanation(x), multiline=True))
    for t in texts:
        assert not CONTROL.search(t), repr(CONTROL.search(t))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(hostile, min_size=1, max_size=6))
def test_hostile_node_strings_change_no_output_structure(values: list[str]) -> None:
    snap = BASE.model_copy(deep=True)
    assert _poison(snap, values) > 100
    doc = evaluate(snap, BOOK, engine="reference", source="hostile")

    text = render(doc, snap.facts, "json")
    text.encode("utf-8")
    json.loads(text)
    jsonl = render(doc, snap.facts, "jsonl")
    assert jsonl.endswith("\n") and jsonl.count("\n") == 1
    for line in jsonl.splitlines():
        json.loads(line)
    _check_prometheus(render(doc, snap.facts, "prometheus"))
    _check_markdown(render(doc, snap.facts, "markdown"), doc)
    _check_terminal(snap, doc)
