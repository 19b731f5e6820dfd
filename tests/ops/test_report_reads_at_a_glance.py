"""The Markdown report reads at a glance: a headline first, "cannot evaluate" one line per
cause (not per rule and GPU), folded findings naming every subject they stand for."""

from __future__ import annotations

import re
from pathlib import Path

import pynvml

from gpu_triage.collectors.base import CollectContext
from gpu_triage.collectors.host import HostCollector
from gpu_triage.collectors.nvml import NvmlCollector
from gpu_triage.collectors.runner import collect_snapshot
from gpu_triage.engine.compiler import load_rulebook
from gpu_triage.engine.evaluate import evaluate
from gpu_triage.engine.findings import ExitCode, Finding
from gpu_triage.engine.occurrences import folded_subjects, index_ranges
from gpu_triage.engine.unknowns import group_unknowns
from gpu_triage.model.demos import demo_snapshot_path
from gpu_triage.model.snapshot import load_snapshot
from gpu_triage.ops.report import findings_markdown
from tests.collectors.fakeroot import build_fake_root
from tests.fakes import fake_nvml as fk


def gpu_less_live_report(tmp_path: Path) -> tuple[str, int]:
    """A live collection on a node with no NVIDIA device on its bus and no driver."""
    root = build_fake_root(tmp_path)
    for bus in ("0000:17:00.0", "0000:18:00.0", "0000:19:00.0"):
        root.remove(f"sys/bus/pci/devices/{bus}")
    root.remove("proc/driver/nvidia/version")
    nvml = fk.FakeNvml([], init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    ctx = CollectContext(window_s=0.0, root=tmp_path)
    snap = collect_snapshot(
        [NvmlCollector(nvml), HostCollector(sleep=root.sleep)], ctx, timeout_s=20
    )
    doc = evaluate(snap, load_rulebook(), engine="reference")
    return findings_markdown(doc), doc.exit_code


def section(text: str, title: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"## {title}"))
    body = []
    for line in lines[start + 1 :]:
        if line.startswith("## "):
            break
        if line.strip():
            body.append(line)
    return body


def test_gpu_less_node_has_a_headline_and_one_line_per_cause(tmp_path: Path) -> None:
    text, code = gpu_less_live_report(tmp_path)
    assert code == ExitCode.UNKNOWN
    headline = text.splitlines()[0]
    assert "UNKNOWN (exit 3)" in headline and "no NVIDIA GPU visible" in headline
    assert "NVML library not found" in headline  # says why, in words
    lines = section(text, "Cannot evaluate")
    causes = [re.match(r"- \*\*(.+?)\*\*(?: \(.*?\))?:", line) for line in lines]
    assert all(causes), lines
    names = [m.group(1) for m in causes if m]
    assert len(names) == len(set(names))  # one line per distinct cause
    # The NVML reason is said once, on one line, however many GPU rules it stopped.
    assert sum("NVML library not found" in line for line in lines) == 1
    assert len(lines) <= 3
    nvml_line = next(line for line in lines if "NVML library not found" in line)
    assert int(re.search(r"(\d+) rules", nvml_line).group(1)) >= 10  # type: ignore[union-attr]


def test_groups_put_a_finding_missing_answers_with_its_collected_cause() -> None:
    book = load_rulebook()
    snap = load_snapshot(demo_snapshot_path("incident"))
    snap.facts.gpus = []
    doc = evaluate(snap, book, engine="reference")
    groups = group_unknowns(doc.cannot_evaluate)
    # answers and conclusions are never a cause of their own beside a collected fact
    assert not any(g.cause.startswith(("answer.", "concl.")) for g in groups if len(g.rules) > 1)
    assert sum(len(g.rules) for g in groups) == len({f.rule_id for f in doc.cannot_evaluate})


def test_folded_findings_name_every_gpu() -> None:
    doc = evaluate(
        load_snapshot(demo_snapshot_path("cm1-input-bound-storage")),
        load_rulebook(),
        engine="reference",
    )
    folded = next(f for f in doc.findings if f.rule_id == "input-bound-pipeline")
    assert folded.occurrences == 8
    assert folded_subjects(folded) == "GPUs 0-7"
    text = findings_markdown(doc)
    assert "*GPUs 0-7* · 8 occurrences" in text


def finding(subject: str, others: list[str], occurrences: int | None = None) -> Finding:
    doc = evaluate(
        load_snapshot(demo_snapshot_path("incident")), load_rulebook(), engine="reference"
    )
    f = doc.findings[0].model_copy()
    f.subject, f.also_seen_on = subject, others
    f.occurrences = occurrences if occurrences is not None else 1 + len(others)
    return f


def test_folded_subjects_shapes() -> None:
    assert index_ranges([7, 0, 1, 2, 5, 3]) == "0-3, 5, 7"
    assert folded_subjects(finding("GPU 3 (0000:48:00.0)", [])) == "GPU 3 (0000:48:00.0)"
    f = finding("GPU 0 (0000:18:00.0)", ["GPU 1 (0000:28:00.0)", "GPU 4 (0000:58:00.0)"])
    assert folded_subjects(f) == "GPUs 0-1, 4"
    assert folded_subjects(f, brief=True) == "GPUs 0-1, 4"
    capped = finding("GPU 0 (a)", ["GPU 1 (b)"], occurrences=60)
    assert folded_subjects(capped) == "GPUs 0-1, +58 not listed"
    lines = finding(
        "XID 94 on 0000:52:00.0 (line 10)", [f"XID 94 on 0000:52:00.0 (line {n})" for n in (19, 28)]
    )
    assert folded_subjects(lines) == "XID 94 on 0000:52:00.0 (3 lines: 10, 19, 28)"
    assert folded_subjects(lines, brief=True) == "3 lines"
    mixed = finding("node a", ["node b"])
    assert folded_subjects(mixed) == "node a; node b (2 in all)"


def test_a_pasted_table_gives_a_few_causes_not_one_line_per_field(tmp_path: Path) -> None:
    """A pasted nvidia-smi table holds a handful of GPU fields: every rule reading another
    one is unknown for the same reason (the paste does not show it), said once per kind."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    table = sorted((ROOT / "tests/data/real-outputs/nvidia-smi").glob("table-8x-h100*.txt"))[0]
    snap = tmp_path / "pasted.json"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "gpu_triage",
            "collect",
            "--from-text",
            str(table),
            "--out",
            str(snap),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    doc = evaluate(load_snapshot(snap), load_rulebook(), engine="reference")
    assert len(doc.cannot_evaluate) > 40  # GPU x rule
    lines = section(findings_markdown(doc), "Cannot evaluate")
    assert len(lines) <= 6, lines
    gpu_line = next(line for line in lines if line.startswith("- **gpu facts not collected**"))
    assert "gpu.lost" in gpu_line.replace("\\_", "_")
