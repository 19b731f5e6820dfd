"""gpu_triage/ops/record.py without Textual: appends, survives a torn line, exports."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

from gpu_triage.io.commands import CommandResult
from gpu_triage.ops.record import IncidentRecord, default_path, read_entries, to_markdown


def test_default_path_is_under_xdg_state(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    p = default_path("gpu-node/017")
    assert p.parent == tmp_path / "gpu-triage" / "incidents"
    assert p.name.endswith("-gpu-node_017.jsonl")


def test_entries_are_appended_at_once_and_private(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "r.jsonl"
    rec = IncidentRecord(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    rec.note("first")
    # a second process reading now sees the entry: nothing is buffered
    out = subprocess.run(
        [sys.executable, "-c", f"print(open({str(path)!r}).read())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert json.loads(out.strip())["text"] == "first"
    rec.answer("q1", 3.5, "How many?")
    rec.command(
        rule_id="r",
        subject="GPU 0",
        step=0,
        title="t",
        result=CommandResult(["nvidia-smi", "-q"], 0, "out ```text", duration_s=0.2),
        outcome="confirmed",
    )
    with path.open("a") as fh:
        fh.write('{"ts": "torn')  # the terminal dropped mid-write
    entries = read_entries(path)
    assert [e["kind"] for e in entries] == ["note", "answer", "command"]
    assert all("ts" in e for e in entries)


def test_export_markdown_and_json(tmp_path: Path) -> None:
    rec = IncidentRecord(tmp_path / "r.jsonl")
    rec.opened(source="demo", hostname="gpu-node-017", rulebook="9 rules", engine="reference")
    rec.command(
        rule_id="xid-79",
        subject="GPU 3",
        step=0,
        title="Read the log",
        result=CommandResult(["journalctl", "-k"], 1, "NVRM: Xid 79\n```", duration_s=1.0),
        outcome="failed",
    )
    rec.mark(rule_id="xid-79", subject="GPU 3", step=0, title="Read the log", mark="done")
    md, js = rec.export()
    text = md.read_text()
    assert text.startswith("# Incident record: gpu-node-017")
    assert "`journalctl -k` → exit 1" in text and "NVRM: Xid 79" in text
    assert "````text" in text  # output containing a fence cannot break out of it
    assert json.loads(js.read_text())["events"][1]["returncode"] == 1
    assert to_markdown([]).startswith("# Incident record")


def test_record_and_runner_do_not_import_textual() -> None:
    code = (
        "import gpu_triage.ops.record, gpu_triage.ops.session, gpu_triage.io.commands, sys;"
        "print([m for m in sys.modules if m.split('.')[0] == 'textual'])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
