"""Hostile inputs found or feared: each one a clear error with its position, no crash."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpu_triage.engine.loader import RawRulebook, load_text
from gpu_triage.model.snapshot import SnapshotError, parse_snapshot


@pytest.mark.parametrize(
    "text",
    [
        "[" * 200_000,
        "- " * 100_000 + "x",
        "{a: " * 20_000,
        "".join(" " * i + "k:\n" for i in range(3000)),
    ],
    ids=["flow-sequences", "block-sequences", "flow-mappings", "indented-mappings"],
)
def test_deep_yaml_is_refused_not_a_crash(text: str) -> None:
    # Run in a child: before the depth check, libyaml's C composer overflowed the stack.
    code = (
        "import sys; from gpu_triage.engine.loader import RawRulebook, load_text; "
        "raw = RawRulebook(); load_text(sys.stdin.read(), 'deep.yaml', 'x', raw); "
        "print(raw.diagnostics[0])"
    )
    r = subprocess.run([sys.executable, "-c", code], input=text, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-500:]
    assert r.stdout.startswith("deep.yaml:") and "YAML" in r.stdout


def test_yaml_bomb_and_control_characters() -> None:
    bomb = (
        "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
        "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
    )
    for text, needle in ((bomb, "aliases"), ("id: x\x06\n", "characters are not allowed")):
        raw = RawRulebook()
        load_text(text, "f.yaml", "f", raw)
        assert len(raw.diagnostics) == 1 and needle in raw.diagnostics[0].message


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[" * 100_000, "nested too deeply"),
        ('{"schema_version": ' + "9" * 50_000 + "}", "unreadable JSON value"),
        ('{"schema_version": 1, "facts": {"gpus": [{"index": 1e999}]}}', "1:52: 1e999 is not"),
        ("\x00\x01garbage", "not valid JSON"),
    ],
    ids=["deep", "huge-int", "infinite-float", "binary"],
)
def test_hostile_snapshots(text: str, needle: str) -> None:
    with pytest.raises(SnapshotError) as exc:
        parse_snapshot(text, "s.json")
    assert str(exc.value).startswith("s.json") and needle in str(exc.value)


def test_rule_expression_limits(tmp_path: Path) -> None:
    from gpu_triage.collectors.parsers.registry import PARSERS
    from gpu_triage.engine.lint import lint

    deep = "not " * 100 + "gpu.index > 1"
    rule = (
        "id: deep\ntitle: deep rule\nversion: 1\nseverity: info\nstage: FD1\n"
        f"symptom: s\ncause: c\nfix: f\nwhen: '{deep}'\nreferences: [guide/T1]\n"
    )
    (tmp_path / "deep.yaml").write_text(rule)
    diags = lint(PARSERS, [tmp_path / "deep.yaml"])
    assert [d.message for d in diags] == ["expression nested deeper than 40 levels"]


def test_enormous_rule_file_is_refused(tmp_path: Path) -> None:
    from gpu_triage.collectors.parsers.registry import PARSERS
    from gpu_triage.engine.lint import lint

    big = tmp_path / "big.yaml"
    big.write_text("# padding\n" * 200_000)
    (d,) = lint(PARSERS, [tmp_path])
    assert d.file == str(big) and "larger than" in d.message
