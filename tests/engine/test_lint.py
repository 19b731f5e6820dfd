from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from gpu_triage.collectors.parsers.registry import PARSERS
from gpu_triage.engine.lint import lint

GOOD = """\
id: site-hot-gpu
title: GPU {gpu.index} runs hot
version: 1
severity: warning
stage: FD1
symptom: hot
cause: cooling
fix: fix cooling
when: gpu.temperature_gpu_c > params.max_c
params:
  max_c: {default: 85, min: 40, max: 100, unit: "°C"}
references: [guide/T2]
tests:
  - name: hot fires
    facts: {gpus: [{index: 0, temperature_gpu_c: 90}]}
    expect: {fires: true}
  - name: cool is quiet
    facts: {gpus: [{index: 0, temperature_gpu_c: 50}]}
    expect: {fires: false}
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_clean_file_has_no_diagnostics(tmp_path: Path) -> None:
    assert lint(PARSERS, [write(tmp_path, "good.yaml", GOOD)]) == []


def test_schema_error_bad_expression_and_duplicate_id(tmp_path: Path) -> None:
    bad_schema = GOOD.replace("severity: warning", "severity: loud").replace(
        "site-hot-gpu", "site-a"
    )
    bad_expr = GOOD.replace("site-hot-gpu", "site-b").replace(
        "when: gpu.temperature_gpu_c > params.max_c",
        "when: gpu.temperature_gpu_c > 1 and __import__('os').system('id')",
    )
    dup = GOOD  # site-hot-gpu twice
    f = write(tmp_path, "rules.yaml", "\n---\n".join([GOOD, bad_schema, bad_expr, dup]))
    diags = lint(PARSERS, [f])
    lines = [str(d) for d in diags]
    assert len(lines) == 3, lines
    pattern = re.compile(rf"^{re.escape(str(f))}:\d+:\d+: error: ")
    assert all(pattern.match(line) for line in lines), lines
    by_msg = {d.message.split(":")[0]: d for d in diags}
    text = "\n".join(lines)
    assert "severity" in text and "duplicate rule id 'site-hot-gpu'" in text
    assert "only the functions of the rule language may be called" in text
    # positions point at the offending line of the file
    src = f.read_text().splitlines()
    for d in diags:
        line = src[d.line - 1]
        assert any(k in line for k in ("severity", "when", "id:")), (d, line)
    assert by_msg


def test_attribute_walk_rejected_with_position(tmp_path: Path) -> None:
    text = GOOD.replace("gpu.temperature_gpu_c > params.max_c", "gpu.__class__ == 1")
    diags = lint(PARSERS, [write(tmp_path, "walk.yaml", text)])
    assert len(diags) == 1
    d = diags[0]
    assert d.line == 9 and d.col == 7 and "'__class__' is not allowed" in d.message


def test_unknown_fact_param_and_type_errors(tmp_path: Path) -> None:
    cases = {
        "gpu.temprature_gpu_c > 1": "did you mean 'temperature_gpu_c'",
        "gpu.temperature_gpu_c > params.nope": "unknown param 'params.nope'",
        "gpu.name > 3": "compares numbers",
        "gpu.temperature_gpu_c": "must be true or false",
        "gpu.recovery_action == 'reboot_now'": "not one of",
        "widget.size > 1": "unknown fact kind 'widget'",
        "concl.nobody_says_this": "no rule concludes",
        "answer.q1 == true": "unknown question",
    }
    for i, (expr, needle) in enumerate(cases.items()):
        text = GOOD.replace("gpu.temperature_gpu_c > params.max_c", expr).replace(
            "site-hot-gpu", f"r{i}x"
        )
        diags = lint(PARSERS, [write(tmp_path, f"c{i}.yaml", text)])
        assert any(needle in d.message for d in diags), (expr, [str(d) for d in diags])


def test_missing_tests_and_yaml_errors(tmp_path: Path) -> None:
    no_tests = GOOD.split("tests:")[0]
    diags = lint(PARSERS, [write(tmp_path, "nt.yaml", no_tests)])
    assert [d.message for d in diags] == ["rule 'site-hot-gpu' has no tests"]
    broken = write(tmp_path, "broken.yaml", "id: x\n  title: [unclosed\n")
    (d,) = lint(PARSERS, [broken])
    assert d.file == str(broken) and d.line >= 1 and "YAML" in d.message


def test_yaml_aliases_are_refused(tmp_path: Path) -> None:
    bomb = "a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n"
    (d,) = lint(PARSERS, [write(tmp_path, "bomb.yaml", bomb)])
    assert "not allowed" in d.message and d.line == 1


def test_cli_lint_exit_codes(tmp_path: Path) -> None:
    good = write(tmp_path, "good.yaml", GOOD)
    bad = write(tmp_path, "bad.yaml", GOOD.replace("version: 1", "version: zero"))
    ok = subprocess.run(
        [sys.executable, "-m", "gpu_triage", "rules", "lint", str(good)],
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    ko = subprocess.run(
        [sys.executable, "-m", "gpu_triage", "rules", "lint", str(bad)],
        capture_output=True,
        text=True,
    )
    assert ko.returncode == 1
    assert re.match(rf"{re.escape(str(bad))}:3:10: error: version", ko.stdout), ko.stdout


def test_builtin_rulebook_lints_clean() -> None:
    from gpu_triage.collectors.parsers.registry import PARSERS
    from gpu_triage.engine.lint import lint as lint_

    assert [str(d) for d in lint_(PARSERS, [], include_builtin=True)] == []
