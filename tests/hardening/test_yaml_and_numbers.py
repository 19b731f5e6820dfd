"""Duplicate keys and non-finite numbers are refused wherever YAML or JSON is read, with
FILE:LINE:COL: a reviewer must read the rule the engine runs, and NaN must not switch a
threshold off silently."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_triage.collectors.parsers.registry import PARSERS
from gpu_triage.engine.lint import lint
from gpu_triage.io import jsonio
from gpu_triage.io.yamlio import YamlError, load_one
from gpu_triage.model.snapshot import SnapshotError, parse_snapshot
from gpu_triage.model.supplied import read_answers, read_job, read_site
from tests.conftest import ROOT
from tests.engine.test_lint import GOOD

DEMO = ROOT / "gpu_triage" / "data" / "demo-incident.json"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpu_triage", *args], capture_output=True, text=True, timeout=120
    )


def diags(tmp_path: Path, name: str, text: str) -> list[str]:
    p = tmp_path / name
    p.write_text(text)
    return [str(d) for d in lint(set(PARSERS), [p]) if d.level == "error"]


def test_duplicate_severity_is_an_error_at_the_second_key(tmp_path: Path) -> None:
    text = GOOD.replace("severity: warning\n", "severity: critical\nseverity: info\n")
    errors = diags(tmp_path, "dup.yaml", text)
    assert any(
        e.startswith(f"{tmp_path / 'dup.yaml'}:5:1: error: duplicate key 'severity'")
        and "first at line 4" in e
        for e in errors
    ), errors


def test_two_whens_and_nested_duplicates_are_errors(tmp_path: Path) -> None:
    text = GOOD.replace(
        "when: gpu.temperature_gpu_c > params.max_c\n",
        "when: gpu.temperature_gpu_c > params.max_c\nwhen: 'false'\n",
    )
    assert any(":10:1: error: duplicate key 'when'" in e for e in diags(tmp_path, "w.yaml", text))
    nested = GOOD.replace("{default: 85, min: 40,", "{default: 85, default: 20, min: 40,")
    errors = diags(tmp_path, "n.yaml", nested)
    assert any(":11:24: error: duplicate key 'default'" in e for e in errors), errors


@pytest.mark.parametrize("value", [".nan", ".NaN", ".inf", "-.Inf", "1.0e+999"])
def test_a_non_finite_default_is_an_error(tmp_path: Path, value: str) -> None:
    text = GOOD.replace("{default: 85,", f"{{default: {value},")
    errors = diags(tmp_path, "nan.yaml", text)
    assert any(":11:20: error:" in e and "not a finite number" in e for e in errors), errors


def test_a_nan_overlay_param_cannot_switch_a_critical_rule_off(tmp_path: Path) -> None:
    overlay = "overlay: site\nparams:\n  gpu-ecc-uncorrectable.max_uncorrected: .nan\n"
    p = tmp_path / "site.yaml"
    p.write_text(overlay)
    errors = [str(d) for d in lint(set(PARSERS), [p], include_builtin=True)]
    assert any(f"{p}:3:42: error:" in e and "not a finite" in e for e in errors), errors
    r = cli("run", "--demo", "--rules", str(p), "--allow-untrusted-rules")
    assert r.returncode == 3 and f"{p}:3:42" in r.stderr


def test_lint_cli_reports_them(tmp_path: Path) -> None:
    p = tmp_path / "r.yaml"
    p.write_text(GOOD.replace("version: 1\n", "version: 1\nversion: 2\n"))
    r = cli("rules", "lint", str(p))
    assert r.returncode == 1 and f"{p}:4:1: error: duplicate key 'version'" in r.stdout


def test_the_shipped_rulebook_has_no_duplicate_keys() -> None:
    assert [d for d in lint(set(PARSERS), [], include_builtin=True) if d.level == "error"] == []
    text = (ROOT / "rulebook" / "readiness.yaml").read_text()
    for doc in text.split("\n---"):
        if "id: vbios-mixed-on-node" in doc:
            assert doc.count("\ngroup_by:") == 1


def test_yaml_adapter_refuses_duplicates_anywhere() -> None:
    with pytest.raises(YamlError) as exc:
        load_one("a: 1\nb:\n  c: 1\n  c: 2\n", "x.yaml")
    assert (exc.value.line, exc.value.col) == (4, 3)
    assert load_one("a: 1\nb: {c: .5}\n", "x.yaml") == {"a": 1, "b": {"c": 0.5}}
    assert load_one("name: .nan-ish\nt: '.nan'\n", "x.yaml") == {"name": ".nan-ish", "t": ".nan"}


# --------------------------------------------------------------------------- supplied facts


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("rack: r1\nrack: r2\n", "2:1"),
        ("expected_pcie_width: .nan\n", "1:22"),
    ],
)
def test_site_file_refuses_duplicates_and_nan(tmp_path: Path, text: str, where: str) -> None:
    p = tmp_path / "site.yaml"
    p.write_text(text)
    with pytest.raises(ValueError, match=rf"{p}:{where}:"):
        read_site(p)
    r = cli("run", "--demo", "--site", str(p))
    assert r.returncode == 64 and f"{p}:{where}:" in r.stderr


def test_nan_as_text_in_a_number_field_is_refused(tmp_path: Path) -> None:
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"step_time_ms": "nan"}))
    with pytest.raises(ValueError, match="step_time_ms: not a finite number"):
        read_job(job)
    ans = tmp_path / "answers.yaml"
    ans.write_text("some_question: -.inf\n")
    with pytest.raises(ValueError, match=r":1:16:.*not a finite"):
        read_answers(ans)


# --------------------------------------------------------------------------- JSON input


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity", "1e999", "-2.5E+400"])
def test_snapshot_refuses_non_finite_numbers_with_position(token: str) -> None:
    text = '{"schema_version": 1,\n "facts": {"gpus": [{"index": 0, "temperature_gpu_c": %s}]}}'
    pattern = rf"^s\.json:2:\d+: {re.escape(token)} is not a finite number"
    with pytest.raises(SnapshotError, match=pattern):
        parse_snapshot(text % token, "s.json")


def test_snapshot_refuses_nan_given_as_text() -> None:
    text = json.dumps({"schema_version": 1, "facts": {"gpus": [{"temperature_gpu_c": "NaN"}]}})
    with pytest.raises(SnapshotError, match=r"facts\.gpus\[0\]\.temperature_gpu_c: not a finite"):
        parse_snapshot(text, "s.json")


def test_strings_that_look_like_constants_are_fine() -> None:
    assert jsonio.loads('{"a": "NaN", "b": "1e999", "c": 1e5}') == {
        "a": "NaN",
        "b": "1e999",
        "c": 100000.0,
    }


def test_fleet_counts_a_nan_line_as_unreadable(tmp_path: Path) -> None:
    hist = tmp_path / "h.jsonl"
    r = cli("run", "--demo", "--format", "jsonl", "--out", str(hist))
    assert r.returncode == 2
    hist.write_text(hist.read_text() + '{"v": 1, "exit": NaN}\n')
    r = cli("fleet", str(hist), "--format", "json")
    assert r.returncode == 0, r.stderr
    errors = json.loads(r.stdout)["errors"]
    assert any("h.jsonl:2:" in e and "NaN" in e for e in errors), errors
