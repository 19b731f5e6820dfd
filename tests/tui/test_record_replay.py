"""`gpu-triage tui --record FILE` on an existing record brings back what was done."""

from __future__ import annotations

from pathlib import Path

from gpu_triage.engine.compiler import load_rulebook
from gpu_triage.engine.model import Question, QuestionType
from gpu_triage.io.commands import CommandResult
from gpu_triage.ops.record import IncidentRecord, read_entries, to_markdown
from gpu_triage.ops.session import TriageSession

from .conftest import H100_Q, SLEEPER, as_local_node, python_cat, write_rulebook
from .test_app import _snapshot_gpu0_unknown


def _session(tmp_path: Path, record: Path, snap=None) -> TriageSession:  # type: ignore[no-untyped-def]
    rules = (
        write_rulebook(tmp_path, step_cmd=python_cat(H100_Q), sleep_cmd=SLEEPER)
        if not (tmp_path / "rules").exists()
        else tmp_path / "rules"
    )
    book = load_rulebook([rules], include_builtin=False, allow_untrusted=True)
    s = TriageSession(
        snap or _snapshot_gpu0_unknown(), book, engine="reference", record=IncidentRecord(record)
    )
    as_local_node(s, tmp_path)
    return s


def _first_session(tmp_path: Path, record: Path) -> tuple[TriageSession, str]:
    s = _session(tmp_path, record)
    doc = s.evaluate("opened")
    f = next(f for f in doc.cannot_evaluate if f.rule_id == "test-thermal")
    out = H100_Q.read_text(encoding="utf-8")
    s.apply_output(f, 0, CommandResult(argv=["nvidia-smi", "-q"], returncode=0, stdout=out))
    s.mark(f, 1, "skipped")
    s.note("checked the fans", f, 1)
    q = Question(
        id="training_stalled", text="Is the training job stalled?", type=QuestionType.YES_NO
    )
    s.answer(q, True)
    return s, f.subject_key


def test_reopening_a_record_replays_answers_steps_and_outputs(tmp_path: Path) -> None:
    record = tmp_path / "incident.jsonl"
    first, key = _first_session(tmp_path, record)
    assert first.snapshot.facts.gpus[0].throttle_hw_thermal_slowdown is False

    again = _session(tmp_path, record)  # the same snapshot, as `--record FILE` reopens it
    assert again.replayed is not None
    assert (again.replayed.answers, again.replayed.steps, again.replayed.outputs) == (1, 2, 1)
    assert again.replayed.notes == 1 and not again.replayed.skipped
    assert again.snapshot.facts.answers == {"training_stalled": True}
    # the recorded nvidia-smi -q output is parsed into the facts again, as when it ran
    assert again.snapshot.facts.gpus[0].throttle_hw_thermal_slowdown is False
    step0 = again.steps[("test-thermal", key, 0)]
    assert step0.outcome == "ruled out" and "from the record" in step0.detail
    step1 = again.steps[("test-thermal", key, 1)]
    assert step1.label == "skipped" and step1.notes == ["checked the fans"]
    doc = again.evaluate("reopened")
    assert not [f for f in doc.cannot_evaluate if f.rule_id == "test-thermal"]
    assert any(f.rule_id == "test-question" for f in doc.findings)  # the answer counts
    kinds = [e for e in read_entries(record) if e["kind"] == "opened"]
    assert [e["resumed"] for e in kinds] == [False, True]
    assert "session reopened" in to_markdown(read_entries(record))


def test_a_record_of_another_node_replays_answers_only(tmp_path: Path) -> None:
    record = tmp_path / "incident.jsonl"
    _first_session(tmp_path, record)
    other = _snapshot_gpu0_unknown()
    other.hostname = "another-node"
    rules = tmp_path / "rules"
    book = load_rulebook([rules], include_builtin=False, allow_untrusted=True)
    other.node_id = "f" * 32
    s = TriageSession(other, book, engine="reference", record=IncidentRecord(record))
    assert s.replayed is not None and s.replayed.answers == 1
    assert s.replayed.steps == 0 and s.replayed.outputs == 0
    assert any("another node" in why for why in s.replayed.skipped)
    assert s.snapshot.facts.gpus[0].throttle_hw_thermal_slowdown is None  # not merged
    assert not s.steps


def test_torn_or_hostile_entries_are_skipped_not_fatal(tmp_path: Path) -> None:
    record = tmp_path / "incident.jsonl"
    _first_session(tmp_path, record)
    with record.open("a", encoding="utf-8") as fh:
        fh.write('{"kind": "answer", "question": "x", "value": {"nested": 1}}\n')
        fh.write('{"kind": "command", "rule_id": "test-thermal", "step": "0"}\n')
        fh.write(
            '{"kind": "command", "rule_id": "test-thermal", "subject_key": "gpu:x",'
            ' "step": 0, "parser": "no-such-parser", "output": "text"}\n'
        )
        fh.write('{"kind": "answer", "question": "to')  # torn by a crash
    s = _session(tmp_path, record)
    assert s.replayed is not None
    assert "x" not in s.snapshot.facts.answers  # not a plain value: not an answer
    assert any("without its finding" in w for w in s.replayed.skipped)
    assert any("no-such-parser" in w for w in s.replayed.skipped)
