"""The state of one triage session, without Textual: facts, findings over time, step
outcomes, answers, and the incident record. The app drives it; tests and benchmarks can
use it alone."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpu_triage.engine.compiler import Rulebook
from gpu_triage.engine.enrich import enrich
from gpu_triage.engine.evaluate import evaluate
from gpu_triage.engine.findings import Finding, FindingsDocument
from gpu_triage.engine.inputs import EvalInput, bindings, subject_key
from gpu_triage.engine.model import Question, QuestionType, RunbookStep
from gpu_triage.engine.reference import Conclusions, Evaluator
from gpu_triage.io.commands import CommandResult
from gpu_triage.io.node_identity import local_identity
from gpu_triage.model.facts import JobMetrics, Symptom
from gpu_triage.model.snapshot import Snapshot
from gpu_triage.ops.record import MAX_OUTPUT_IN_RECORD, IncidentRecord

if TYPE_CHECKING:
    # The parsers and the paste intake are imported when a step's output or a paste is
    # read, not before the first findings are on screen (the TUI's first paint).
    from gpu_triage.collectors.from_text import Intake

# What a responder may mark a step as, by hand.
MARKS = ("done", "confirmed", "ruled out", "skipped")

StepKey = tuple[str, str, int]  # rule id, subject key, step index


@dataclass(frozen=True)
class TuiOptions:
    """What the CLI hands the TUI (``gpu-triage tui`` flags), typed: no argparse below the CLI."""

    rules: tuple[Path, ...] = ()  # extra rulebook files or directories
    include_builtin: bool = True
    allow_untrusted_rules: bool = False
    engine: str = "auto"  # auto | durable | reference
    snapshot: Path | None = None  # open this snapshot instead of collecting
    demo: str | None = None  # open this bundled demo incident
    window_s: float = 1.0  # sampling window when collecting
    record: Path | None = None  # incident record file (default: a new one)
    symptom: str | None = None  # what the responder sees; None: ask first; "none": nothing


@dataclass
class StepState:
    mark: str = ""  # one of MARKS, set by a person
    outcome: str = ""  # confirmed | ruled out | inconclusive | failed | "" (not run)
    detail: str = ""  # why that outcome
    result: CommandResult | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        if self.mark:
            return self.mark
        return self.outcome or "not run"


@dataclass
class HistoryEntry:
    at: datetime
    reason: str
    doc: FindingsDocument


@dataclass
class Replayed:
    """What reopening a record brought back (``--record FILE`` on an existing file)."""

    answers: int = 0
    steps: int = 0  # step outcomes and marks
    outputs: int = 0  # recorded outputs parsed into the facts again
    notes: int = 0
    pastes: int = 0
    symptom: str = ""
    skipped: list[str] = field(default_factory=list)  # what could not be replayed, and why

    def describe(self) -> str:
        done = (
            f"{self.answers} answers, {self.steps} step results, "
            f"{self.outputs} outputs re-read, {self.notes} notes, {self.pastes} pastes"
        )
        if self.symptom:
            done += f"; symptom: {self.symptom}"
        if self.skipped:
            done += f"; not replayed: {'; '.join(self.skipped[:3])}"
            if len(self.skipped) > 3:
                done += f" (+{len(self.skipped) - 3} more)"
        return done


_ANSWER_TYPES = (bool, int, float, str)


@dataclass
class StepApplied:
    outcome: str
    detail: str
    changed_kinds: list[str]
    parse_error: str = ""


def step_key(f: Finding, index: int) -> StepKey:
    return (f.rule_id, f.subject_key, index)


def parse_answer(q: Question, text: str) -> bool | float | str:
    """A typed answer from what a person typed; ValueError with a readable message."""
    t = text.strip()
    if q.type is QuestionType.YES_NO:
        low = t.lower()
        if low in ("y", "yes", "true", "1"):
            return True
        if low in ("n", "no", "false", "0"):
            return False
        raise ValueError("answer yes or no")
    if q.type is QuestionType.NUMBER:
        try:
            return float(t) if any(c in t for c in ".eE") else int(t)
        except ValueError:
            raise ValueError(f"a number{f' in {q.unit}' if q.unit else ''}, please") from None
    if t in q.choices:
        return t
    raise ValueError(f"one of: {', '.join(q.choices)}")


class TriageSession:
    """Holds the facts being looked at and evaluates them on request."""

    def __init__(
        self,
        snapshot: Snapshot,
        book: Rulebook,
        *,
        engine: str = "auto",
        source: str = "",
        record: IncidentRecord | None = None,
    ) -> None:
        self.snapshot = snapshot
        self.book = book
        self.engine = engine
        self.source = source
        self.record = record
        self.doc: FindingsDocument | None = None
        self.history: list[HistoryEntry] = []
        self.steps: dict[StepKey, StepState] = {}
        self.identity_root = Path("/")  # where this host's machine and boot ids are read
        self._lock = threading.Lock()
        self.replayed: Replayed | None = None
        if record is not None:
            earlier = record.entries()
            record.opened(
                source=source,
                hostname=snapshot.hostname,
                rulebook=f"{len(book.rules)} rules, fingerprint {book.fingerprint}",
                engine=engine,
                node_id=snapshot.node_id,
                resumed=bool(earlier),
            )
            if earlier:
                self.replayed = self.replay(earlier)

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, reason: str) -> FindingsDocument:
        """Evaluate the current facts (safe from a worker thread: it reads a copy)."""
        with self._lock:
            snap = self.snapshot.model_copy(deep=True)
        doc = evaluate(snap, self.book, engine=self.engine, source=self.source)
        with self._lock:
            self.doc = doc
            self.history.append(HistoryEntry(datetime.now(UTC), reason, doc))
        if self.record is not None:
            self.record.findings(doc, reason)
        return doc

    def replace_snapshot(self, snapshot: Snapshot, reason: str = "re-collected") -> None:
        """A fresh collection; answers given so far are kept."""
        with self._lock:
            answers = dict(self.snapshot.facts.answers)
            snapshot.facts.answers.update(answers)
            self.snapshot = snapshot
        if self.record is not None:
            detail = ", ".join(f"{c.name} {c.state.value}" for c in snapshot.collectors)
            self.record.append("collect", reason=reason, detail=detail)

    @staticmethod
    def ordered(doc: FindingsDocument) -> list[Finding]:
        return [*doc.findings, *doc.needs_confirmation, *doc.cannot_evaluate]

    def find(self, rule_id: str, subject_key_: str) -> Finding | None:
        if self.doc is None:
            return None
        return next(
            (
                f
                for f in self.ordered(self.doc)
                if f.rule_id == rule_id and f.subject_key == subject_key_
            ),
            None,
        )

    def open_questions(self) -> list[Question]:
        """Questions the current findings wait on, unanswered, each once."""
        if self.doc is None:
            return []
        seen: dict[str, Question] = {}
        for f in self.doc.needs_confirmation:
            for q in f.questions:
                if q.id not in self.snapshot.facts.answers:
                    seen.setdefault(q.id, q)
        return list(seen.values())

    # ------------------------------------------------------------------ steps
    def steps_run_here(self) -> tuple[bool, str]:
        """Whether runbook steps may run on this machine: only on the incident's node, in
        the same boot (machine id and boot id recorded in the snapshot match this host's).
        Elsewhere a step would observe another machine, and its output must never be
        merged into the incident's facts. The reason names the incident's node."""
        snap = self.snapshot
        node = snap.hostname or "an unnamed node"
        if not snap.node_id or not snap.boot_id:
            why = "a redacted snapshot" if snap.redacted else "a snapshot without a node identity"
            return False, f"this incident ({node}) comes from {why}: steps cannot run here"
        here = local_identity(self.identity_root)
        if snap.node_id != here.node_id:
            return False, f"this incident is from {node}, another machine: steps run only there"
        if snap.boot_id != here.boot_id:
            return False, (
                f"{node} has rebooted since this snapshot was taken: collect again before "
                "running steps"
            )
        return True, f"on {node}, the incident's node"

    def step(self, f: Finding, index: int) -> StepState:
        return self.steps.setdefault(step_key(f, index), StepState())

    def apply_output(
        self, f: Finding, index: int, result: CommandResult, ran: RunbookStep | None = None
    ) -> StepApplied:
        """Fold a step's output into the facts (through its parser) and judge the step
        by its ``confirms_when``. ``ran``: the step as run, its parameters filled in. The
        caller re-evaluates afterwards."""
        here, why = self.steps_run_here()
        if not here:
            raise ValueError(f"output not merged: {why}")
        step = ran or f.runbook[index]
        state = self.step(f, index)
        state.result = result
        changed: list[str] = []
        parse_error = ""
        if not result.ok and not result.output:
            outcome, detail = "failed", result.error or f"the command ended: {result.status}"
        else:
            if step.parser:
                from gpu_triage.collectors.merge import update_facts
                from gpu_triage.collectors.parsers.registry import get_parser

                try:
                    parsed = get_parser(step.parser)(result.output, " ".join(result.argv))
                    with self._lock:
                        changed = update_facts(self.snapshot.facts, parsed)
                except Exception as exc:  # noqa: BLE001 - a parser failure is reported, not fatal
                    parse_error = f"{type(exc).__name__}: {exc}"
            outcome, detail = self.judge(f, index)
            if not result.ok:
                detail = f"{detail} (the command ended: {result.status})"
            if parse_error:
                detail = f"{detail}; the output could not be parsed: {parse_error}"
        state.outcome, state.detail = outcome, detail
        if self.record is not None:
            self.record.command(
                rule_id=f.rule_id,
                subject=f.subject,
                subject_key=f.subject_key,
                parser=step.parser,
                detail=detail,
                step=index,
                title=step.title,
                result=result,
                outcome=outcome,
                parsed_kinds=changed,
                parse_error=parse_error,
            )
        return StepApplied(outcome, detail, changed, parse_error)

    def judge(self, f: Finding, index: int) -> tuple[str, str]:
        """Evaluate the step's ``confirms_when`` on the current facts, for the finding's
        subject: confirmed, ruled out or inconclusive."""
        rule = self.book.by_id(f.rule_id)
        if rule is None:
            return "inconclusive", "the rule is no longer in the rulebook"
        expr = rule.confirms.get(index)
        if expr is None:
            return "inconclusive", "this step has no automatic check: read the output"
        with self._lock:
            snap = self.snapshot.model_copy(deep=True)
        inp = enrich(EvalInput.from_snapshot(snap), self.book)
        binding: dict[str, Any] | None = None
        for b in bindings(inp, rule.iter_kinds, rule.join_gpu):
            if subject_key(b) == f.subject_key:
                binding = b
                break
        if binding is None:
            return "inconclusive", f"{f.subject} is not in the facts any more"
        v = Evaluator(inp, binding, Conclusions()).eval(expr)
        text = f.runbook[index].confirms_when or ""
        if v.value is True:
            return "confirmed", f"{text} holds"
        if v.value is False:
            return "ruled out", f"{text} does not hold"
        missing = ", ".join(str(m) for m in v.missing[:3])
        return "inconclusive", f"{text} cannot be decided: {missing or 'facts missing'}"

    def mark(self, f: Finding, index: int, mark: str) -> None:
        if mark not in MARKS and mark != "":
            raise ValueError(f"unknown mark {mark!r}")
        self.step(f, index).mark = mark
        if self.record is not None:
            self.record.mark(
                rule_id=f.rule_id,
                subject=f.subject,
                subject_key=f.subject_key,
                step=index,
                title=f.runbook[index].title,
                mark=mark or "cleared",
            )

    def note(self, text: str, f: Finding | None = None, index: int | None = None) -> None:
        if f is not None and index is not None:
            self.step(f, index).notes.append(text)
        if self.record is not None:
            self.record.note(
                text,
                rule_id=f.rule_id if f else "",
                subject=f.subject if f else "",
                subject_key=f.subject_key if f else "",
                step=index,
            )

    # ------------------------------------------------------------------ reopening
    def replay(self, entries: list[dict[str, Any]]) -> Replayed:
        """Bring back what an earlier session of this record did: answers, step marks and
        outcomes, notes, and the outputs of steps run on the incident's node (parsed into
        the facts again, in the order they ran). Nothing is run. A record of another node
        replays its answers only: its outputs are not this snapshot's facts."""
        out = Replayed()
        opened = next((e for e in entries if e.get("kind") == "opened"), {})
        same_node = self._same_node(opened)
        for e in entries:
            kind = e.get("kind")
            if kind == "answer":
                qid, value = e.get("question"), e.get("value")
                if isinstance(qid, str) and isinstance(value, _ANSWER_TYPES):
                    with self._lock:
                        self.snapshot.facts.answers[qid] = value
                    out.answers += 1
                continue
            if kind == "symptom":
                value = e.get("symptom")
                if value is None or value in {s.value for s in Symptom}:
                    self.set_symptom(value, record=False)
                    out.symptom = value or ""
                continue
            if kind == "paste":
                text = e.get("text")
                if not isinstance(text, str) or e.get("text_truncated"):
                    out.skipped.append("a paste too long to keep in the record")
                elif not same_node:
                    out.skipped.append("a paste (the record is of another node)")
                else:
                    self.add_paste(text, str(e.get("source") or "paste"), record=False)
                    out.pastes += 1
                continue
            if kind not in ("command", "step_mark", "note"):
                continue
            key = self._replay_key(e)
            if key is None:
                if kind != "note" or e.get("step") is not None:
                    out.skipped.append(f"a {kind} entry without its finding")
                continue
            if not same_node:
                out.skipped.append(f"{kind} of {key[0]} (the record is of another node)")
                continue
            state = self.steps.setdefault(key, StepState())
            if kind == "step_mark":
                mark = e.get("mark")
                state.mark = "" if mark == "cleared" else str(mark)
                out.steps += 1
            elif kind == "note":
                state.notes.append(str(e.get("text", "")))
                out.notes += 1
            else:
                state.outcome = str(e.get("outcome") or "")
                state.detail = f"{e.get('detail') or ''} (from the record)".strip()
                out.steps += 1
                if self._reparse(e, out):
                    out.outputs += 1
        return out

    def _same_node(self, opened: dict[str, Any]) -> bool:
        snap = self.snapshot
        node = opened.get("node_id")
        if node and snap.node_id:
            return bool(node == snap.node_id)
        return bool(opened) and opened.get("hostname") == snap.hostname

    @staticmethod
    def _replay_key(e: dict[str, Any]) -> StepKey | None:
        rule, key, step = e.get("rule_id"), e.get("subject_key"), e.get("step")
        if not (isinstance(rule, str) and rule and isinstance(key, str) and key):
            return None
        if not isinstance(step, int) or isinstance(step, bool) or step < 0:
            return None
        return (rule, key, step)

    def _reparse(self, e: dict[str, Any], out: Replayed) -> bool:
        parser, output = e.get("parser"), e.get("output")
        if not parser or not isinstance(output, str) or not output:
            return False
        if e.get("output_truncated"):
            out.skipped.append(f"output of {e.get('rule_id')} step {e['step'] + 1} (truncated)")
            return False
        from gpu_triage.collectors.merge import update_facts
        from gpu_triage.collectors.parsers.registry import get_parser

        try:
            parsed = get_parser(str(parser))(output, " ".join(map(str, e.get("argv", []))))
        except Exception as exc:  # noqa: BLE001 - as when the step ran: reported, not fatal
            out.skipped.append(f"output of {e.get('rule_id')}: {type(exc).__name__}: {exc}")
            return False
        with self._lock:
            update_facts(self.snapshot.facts, parsed)
        return True

    # ------------------------------------------------------------------ what the responder brings
    def set_symptom(self, symptom: str | None, *, record: bool = True) -> None:
        """What the responder sees (``run --symptom``): its differential ranks first and
        its questions come first. None: nothing specific (the symptom is cleared)."""
        value = Symptom(symptom) if symptom else None
        with self._lock:
            facts = self.snapshot.facts
            if facts.job is None:
                if value is None:
                    return
                facts.job = JobMetrics(source="tui: what are you seeing?")
            facts.job.symptom = value
        if record and self.record is not None:
            self.record.append("symptom", symptom=value.value if value else None)

    @property
    def symptom(self) -> str | None:
        job = self.snapshot.facts.job
        return job.symptom.value if job is not None and job.symptom is not None else None

    def add_paste(self, text: str, source: str = "paste", *, record: bool = True) -> Intake:
        """A pasted terminal session, error or command output, read as ``collect
        --from-text`` reads a file (blocks at prompts, each recognised by content) and
        folded into the facts (events kept beside the ones there, GPUs matched by bus id).
        Nothing is merged when nothing was recognised; the pieces say what was read."""
        from gpu_triage.collectors.from_text import intake_paste
        from gpu_triage.collectors.merge import combine_facts

        intake = intake_paste(text, source)
        if intake.anything_read:
            with self._lock:
                snap = self.snapshot
                snap.facts = combine_facts([snap.facts, intake.facts])
                snap.collectors.extend(intake.statuses())
                snap.raw.extend(intake.raw)
        if record and self.record is not None:
            self.record.append(
                "paste",
                source=source,
                text=text[:MAX_OUTPUT_IN_RECORD],
                text_truncated=len(text) > MAX_OUTPUT_IN_RECORD,
                pieces=[p.describe() for p in intake.pieces],
            )
        return intake

    def answer(self, q: Question, value: bool | float | str) -> None:
        with self._lock:
            self.snapshot.facts.answers[q.id] = value
        if self.record is not None:
            self.record.answer(q.id, value, q.text)
