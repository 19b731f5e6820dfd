"""Rule texts: optional segments, titles of rules that did not fire, and the lint's proof
that a bare placeholder has a value whenever its rule fires."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpu_triage.collectors.parsers.registry import PARSERS
from gpu_triage.engine import expr as E
from gpu_triage.engine import templates as T
from gpu_triage.engine.lint import lint

VALUES: dict[str, Any] = {"gpu.index": 3, "gpu.temperature_gpu_c": 86.0, "xid.site_action": None}


def lookup(ref: E.Ref) -> tuple[bool, Any]:
    v = VALUES.get(ref.path)
    return v is not None, v


def fmt(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def render(text: str, **kw: Any) -> str:
    return T.render(text, lookup, fmt, **kw)


def test_a_segment_with_its_values_is_shown() -> None:
    assert render("GPU {gpu.index} throttles[[ at {gpu.temperature_gpu_c} °C]].") == (
        "GPU 3 throttles at 86 °C."
    )


def test_a_segment_missing_a_value_is_left_out_and_the_sentence_still_reads() -> None:
    text = "Drain the GPU.[[ Site action: {xid.site_action}.]] Then reset it."
    assert render(text) == "Drain the GPU. Then reset it."
    assert render("Xid 79 on GPU {gpu.index}[[; site: {xid.site_action}]].") == "Xid 79 on GPU 3."


def test_the_title_of_a_rule_that_did_not_fire_names_no_value() -> None:
    title = "GPU {gpu.index} throttles[[ at {gpu.temperature_gpu_c} °C]]"
    assert render(title, with_segments=False) == "GPU 3 throttles"
    assert render("Core {host.busiest_core} saturated", with_segments=False) == "Core saturated"


def test_a_missing_bare_value_of_an_unfired_rule_is_said_in_words() -> None:
    text = "GPU {gpu.index} draws {gpu.power_draw_pct}% of its limit."
    out = render(text, on_missing=T.not_seen)
    assert "?" not in out and "gpu.power_draw_pct" in out and out.startswith("Not observed")


def test_a_question_mark_the_rule_wrote_stays() -> None:
    assert render("Is GPU {gpu.index} shared?") == "Is GPU 3 shared?"


@pytest.mark.parametrize(
    ("when", "proven", "not_proven"),
    [
        ("gpu.a > 1 and gpu.b < 2", {"gpu.a", "gpu.b"}, set()),
        ("gpu.a > 1 or gpu.b < 2", set(), {"gpu.a", "gpu.b"}),
        ("(gpu.a > 1 or gpu.a < 0) and gpu.b == 2", {"gpu.a", "gpu.b"}, set()),
        ("available(gpu.a) and gpu.b", {"gpu.a", "gpu.b"}, set()),
        ("unavailable(gpu.a) or gpu.b > 1", set(), {"gpu.a", "gpu.b"}),
        ("not unavailable(gpu.a)", {"gpu.a"}, set()),
        ("not (gpu.a > 1 or gpu.b > 1)", {"gpu.a", "gpu.b"}, set()),  # both were false
        ("count(xid, code == 79 and pci_bus_id == gpu.b) > 0", set(), {"gpu.b"}),
        ("gpu.a * 2 > gpu.b + 1", {"gpu.a", "gpu.b"}, set()),
    ],
)
def test_what_a_true_condition_proves(when: str, proven: set[str], not_proven: set[str]) -> None:
    got = T.guaranteed(E.parse_expr(when))
    assert proven <= got and not (not_proven & got)


def test_a_computed_value_proves_its_inputs() -> None:
    got = T.guaranteed(E.parse_expr("gpu.memory_used_pct > 90"))
    assert {"gpu.memory_used_mib", "gpu.memory_total_mib"} <= got


RULE = """\
id: t-rule
title: {title}
version: 1
severity: warning
stage: FD3
symptom: {symptom}
cause: c
fix: f
when: {when}
references: [guide/T9]
tests:
  - name: fires
    facts: {{host: {{net_throughput_gbps: 1, cpu_count: 2}}}}
    expect: {{fires: true}}
  - name: quiet
    facts: {{host: {{net_throughput_gbps: 100, cpu_count: 2}}}}
    expect: {{fires: false}}
"""


def _lint(tmp_path: Path, **kw: str) -> list[str]:
    p = tmp_path / "r.yaml"
    p.write_text(RULE.format(**kw))
    return [d.message for d in lint(PARSERS, [p])]


def test_lint_accepts_proven_and_optional_values(tmp_path: Path) -> None:
    assert (
        _lint(
            tmp_path,
            title="'Throughput is low[[: {host.net_throughput_gbps} Gb/s]]'",
            symptom="'{host.net_throughput_gbps} Gb/s[[ on {host.cpu_count} cores]]'",
            when="host.net_throughput_gbps < 10",
        )
        == []
    )


def test_lint_refuses_a_value_in_a_title(tmp_path: Path) -> None:
    msgs = _lint(
        tmp_path,
        title="'Throughput is {host.net_throughput_gbps} Gb/s'",
        symptom="s",
        when="host.net_throughput_gbps < 10",
    )
    assert any("title names the value {host.net_throughput_gbps}" in m for m in msgs)


def test_lint_refuses_a_value_the_condition_may_not_have(tmp_path: Path) -> None:
    msgs = _lint(
        tmp_path,
        title="the title",
        symptom="'{host.cpu_count} cores, {host.net_throughput_gbps} Gb/s'",
        when="host.net_throughput_gbps < 10 or site.rdma_configured == true",
    )
    assert any("{host.net_throughput_gbps} may have no value" in m for m in msgs)
    assert any("{host.cpu_count} may have no value" in m for m in msgs)


def test_lint_refuses_unbalanced_segments(tmp_path: Path) -> None:
    msgs = _lint(
        tmp_path, title="the title", symptom="'a [[b [[c]] d]]'", when="host.cpu_count > 1"
    )
    assert any("unbalanced" in m for m in msgs)
