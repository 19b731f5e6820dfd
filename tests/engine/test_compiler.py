"""The compiler's record of what each rule reads, the fact -> rules index built on it,
the commands that show them, and the declared-question check."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gpu_triage.engine.compiler import compile_rulebook
from gpu_triage.engine.loader import RawRulebook, load_text

RULE = """\
id: probe
title: GPU {gpu.index} probe
version: 1
severity: info
stage: FD1
symptom: s
cause: c
fix: f
when: gpu.pcie_link_width < 16 and count(pcie, width < width_max) > 0 and max(gpu, power_draw_w) > 1
evidence: [gpu.pcie_link_gen]
references: [guide/T1]
runbook:
  - title: look
    meaning: m
    decision: d
    confirms_when: host.cpu_count > 0
"""

ASKS = """\
id: asks
title: asks
version: 1
severity: info
stage: FD1
symptom: s
cause: c
fix: f
when: answer.gpu_ok == true
questions:
  - {{id: {qid}, text: "ok?", type: yes_no}}
  - {{id: gpu_ok, text: "gpu ok?", type: yes_no}}
references: [guide/T1]
"""


def compile_text(text: str):  # type: ignore[no-untyped-def]
    raw = RawRulebook()
    load_text(text, "t.yaml", "t", raw)
    assert raw.diagnostics == []
    return compile_rulebook(raw)


def test_reads_every_field_including_inside_aggregates() -> None:
    book, diags = compile_text(RULE)
    assert [d for d in diags if d.level == "error"] == []
    assert book.rules[0].reads == (
        "gpu.index",  # the title
        "gpu.pcie_link_gen",  # evidence
        "gpu.pcie_link_width",
        "gpu.power_draw_w",  # an aggregate's own field
        "host.cpu_count",  # a step's confirms_when
        "pcie.width",  # bare names inside count(pcie, ...)
        "pcie.width_max",
    )
    assert book.readers()["pcie.width_max"] == ["probe"]


def test_builtin_index_finds_aggregate_only_fields(builtin_book) -> None:
    readers = builtin_book.readers()
    assert "pcie-link-downgraded" in readers["pcie.width_max"]  # only inside count(pcie, ...)
    assert "pcie-link-downgraded" in readers["gpu.pcie_link_width"]


def test_a_question_is_used_only_by_its_own_reference() -> None:
    # 'answer.gpu_ok' contains the text 'answer.gpu' but does not read question 'gpu'.
    _, diags = compile_text(ASKS.format(qid="gpu"))
    assert [d.message for d in diags] == ["question 'gpu' is declared but answer.gpu is unused"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpu_triage", *args], capture_output=True, text=True
    )


def test_facts_who_lists_the_rules_reading_a_field() -> None:
    r = run("facts", "who", "gpu.pcie_link_width")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("gpu.pcie_link_width (integer, lanes)")
    assert "made by: nvml" in r.stdout
    assert "pcie-link-downgraded" in r.stdout and "rulebook/hardware.yaml:" in r.stdout


def test_facts_who_on_an_unknown_field_suggests_and_fails() -> None:
    r = run("facts", "who", "gpu.pcie_width")
    assert r.returncode == 64 and "did you mean gpu.pcie_link_width" in r.stderr


def test_rules_show_prints_the_fields_a_rule_reads(tmp_path: Path) -> None:
    r = run("rules", "show", "pcie-link-downgraded")
    assert r.returncode == 0, r.stderr
    assert "- **When:** `gpu.pcie_link_width < gpu.pcie_link_width_max`" in r.stdout
    assert "`pcie.width_max`" in r.stdout and "rulebook/hardware.yaml:2" in r.stdout
    assert run("rules", "show", "no-such-rule").returncode == 64
