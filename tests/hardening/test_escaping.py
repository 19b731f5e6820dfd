"""Escaping at every output boundary: node strings cannot change the structure of a report
(Markdown, Prometheus, JSON, JSONL) or reach a terminal as control sequences."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from markdown_it import MarkdownIt
from prometheus_client.parser import text_string_to_metric_families

from gpu_triage.engine.compiler import load_rulebook
from gpu_triage.io import jsonio
from gpu_triage.io.escape import md_code, md_text, prom_label, visible
from gpu_triage.model.snapshot import HISTORY_SOURCE, CollectorState, CollectorStatus, load_snapshot
from gpu_triage.ops.history import History
from gpu_triage.ops.unattended import RunSpec, render, run_once
from tests.conftest import ROOT

DEMO = ROOT / "gpu_triage" / "data" / "demo-incident.json"
BOOK = load_rulebook()


def series(text: str) -> list[tuple[str, tuple[tuple[str, str], ...]]]:
    return [
        (s.name, tuple(sorted(s.labels.items())))
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    ]


def run_demo(tmp_path: Path, mutate=lambda snap: None):
    snap = load_snapshot(DEMO)
    mutate(snap)
    spec = RunSpec(
        BOOK,
        "reference",
        "json",
        tmp_path / "f.json",
        "info",
        lambda: (snap, "t"),
        History(path=tmp_path / "state.json"),
    )
    return run_once(spec), snap


def test_a_saved_snapshot_with_a_history_status_gives_unique_series(tmp_path: Path) -> None:
    def with_history(snap) -> None:
        snap.collectors.append(CollectorStatus(name=HISTORY_SOURCE, state=CollectorState.OK))

    doc, snap = run_demo(tmp_path, with_history)
    assert sum(c.name == HISTORY_SOURCE for c in doc.collectors) == 2  # the case of issue 13
    found = series(render(doc, snap.facts, "prometheus"))
    assert [k for k, n in Counter(found).items() if n > 1] == []
    up = [
        k for k in found if k[0] == "gpu_triage_collector_up" and ("collector", "history") in k[1]
    ]
    assert len(up) == 1


def test_gpus_without_or_sharing_a_bus_id_get_distinct_series(tmp_path: Path) -> None:
    def odd_gpus(snap) -> None:
        snap.facts.gpus[0].pci_bus_id = None
        snap.facts.gpus[1].pci_bus_id = None
        snap.facts.gpus[1].index = None
        snap.facts.gpus[3].pci_bus_id = snap.facts.gpus[2].pci_bus_id

    doc, snap = run_demo(tmp_path, odd_gpus)
    found = series(render(doc, snap.facts, "prometheus"))
    assert [k for k, n in Counter(found).items() if n > 1] == []
    info = [dict(k[1])["gpu"] for k in found if k[0] == "gpu_triage_gpu_info"]
    assert len(info) == len(snap.facts.gpus) == len(set(info))


def test_prometheus_labels_keep_no_raw_control_character(tmp_path: Path) -> None:
    def evil(snap) -> None:
        snap.facts.gpus[0].name = 'H100\r\nfake_metric 1\x1b[2J"\\'

    doc, snap = run_demo(tmp_path, evil)
    text = render(doc, snap.facts, "prometheus")
    assert "\r" not in text and "\x1b" not in text
    assert "\nfake_metric" not in text
    names = [dict(k[1])["name"] for k in series(text) if k[0] == "gpu_triage_gpu_info"]
    assert 'H100\\r\nfake_metric 1\\x1b[2J"\\' in names
    assert prom_label("a\rb\x00c\nd") == "a\\rb\\x00c\nd"


def test_json_and_jsonl_survive_lone_surrogates_and_nan(tmp_path: Path) -> None:
    def evil(snap) -> None:
        snap.hostname = "node\ud800x"
        snap.facts.gpus[0].name = "gpu\udfff"
        snap.facts.gpus[0].temperature_gpu_c = float("nan")

    doc, snap = run_demo(tmp_path, evil)
    text = render(doc, snap.facts, "json")
    text.encode("utf-8")  # strict: no surrogate left
    assert json.loads(text)["hostname"] == "node\ufffdx"
    line = render(doc, snap.facts, "jsonl")
    assert line.count("\n") == 1 and "NaN" not in line
    rec = json.loads(line)
    assert rec["gpus"][0]["temp"] is None and rec["gpus"][0]["name"] == "gpu\ufffd"
    assert jsonio.dumps({"a": "\x9b\u2028\u202e"}) == '{"a": "\\u009b\\u2028\\u202e"}'


def test_markdown_cells_and_headings_hold() -> None:
    md = MarkdownIt("commonmark").enable("table")
    row = f"| {md_text('a|b<script>x</script>')} | {md_code('`x`|y', in_table=True)} |"
    html = md.render(f"| h1 | h2 |\n|---|---|\n{row}\n")
    assert html.count("<td>") == 2 and "<script" not in html
    assert md.render(md_text("# not a heading\nsecond line")).startswith("<p>")
    assert "<img" not in md.render(md_text("<img src=x onerror=alert(1)>"))


def test_visible_shows_every_control_character() -> None:
    assert visible("a\x1b[31mb\x07\x9b\u2028\u202ec") == "a\\x1b[31mb\\x07\\x9b\\u2028\\u202ec"
    assert visible("one\ntwo\r", multiline=True) == "one\ntwo\\r"
    assert visible("one\ntwo") == "one\\ntwo"
    assert visible("\ud800") == "\ufffd"
