"""evaluate(facts, rulebook) -> findings, on the durable_rules backend or the reference one.

Both backends decide, for every rule and binding, whether the condition is
true, false or unknown; everything else (bindings, conclusions between strata,
findings, ranking, evidence) is shared here, so the two can only differ in the
decision itself, which the differential tests compare.
"""

from __future__ import annotations

import gc
import itertools
import operator
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from gpu_triage.engine import expr as E
from gpu_triage.engine import templates
from gpu_triage.engine.backend import Backend, BackendFailure, ReferenceBackend
from gpu_triage.engine.compiler import CompiledRule, Rulebook
from gpu_triage.engine.consistency import (
    HEALTHY_TAG,
    critical_gpus,
    gpus_of,
    healthy_bindings,
)
from gpu_triage.engine.durable_backend import shared_backend
from gpu_triage.engine.enrich import enrich_collapsed
from gpu_triage.engine.findings import (
    EngineInfo,
    EvidenceItem,
    Finding,
    FindingsDocument,
    MissingFact,
    RulebookInfo,
    RuledOut,
    Status,
    Summary,
)
from gpu_triage.engine.inputs import Binding, EvalInput, bindings, subject_key, subject_label
from gpu_triage.engine.model import RunbookStep
from gpu_triage.engine.placeholders import PLACEHOLDER_NODE, fill, placeholders
from gpu_triage.engine.reference import Conclusions, Evaluator, Missing, Val
from gpu_triage.engine.repeats import Repeats
from gpu_triage.engine.symptoms import differential
from gpu_triage.engine.verdict import judge
from gpu_triage.model.catalog import kinds
from gpu_triage.model.limits import SnapshotTooLarge, check_counts, counts_of
from gpu_triage.model.snapshot import Snapshot, SnapshotError


@dataclass
class Decision:
    rule: CompiledRule
    binding: Binding
    index: int
    status: Status
    # Other bindings whose facts read by the rule are equal: decided the same way (an
    # Xid storm repeats one line thousands of times; it is decided once).
    same: Sequence[Binding] = ()


class Members(Sequence[Binding]):
    """The bindings of a class but its first, in input order, without copying them out of
    the pool. With collapsed repeats (``repeats``), every event of the class's
    representatives but the first, each bound as its representative is."""

    def __init__(
        self,
        pool: list[Binding],
        members: list[int],
        first: int,
        kind: str | None = None,
        repeats: Repeats | None = None,
    ) -> None:
        self.pool, self.members, self.first = pool, members, first
        self.kind, self.repeats = kind, repeats

    def __len__(self) -> int:
        if self.repeats is None:
            return len(self.members) - 1
        counts = self.repeats.counts
        return sum(counts[m] for m in self.members) - 1

    def __iter__(self) -> Iterator[Binding]:
        pool, first, rep, kind = self.pool, self.first, self.repeats, self.kind
        if rep is None or kind is None:
            return (pool[m] for m in sorted(self.members) if m != first)
        skip = rep.firsts[first]
        return (
            {**pool[r], kind: rep.event(r, i)}
            for i, r in rep.ordered(sorted(self.members))
            if i != skip
        )

    def __getitem__(self, i: int) -> Binding:  # type: ignore[override]
        return list(self)[i]

    def labels(self, hostname: str) -> Iterator[str]:
        """The subjects of the bindings, in order: a repeat is named by its own line,
        which it has before annotation (none is annotated only to be named)."""
        rep, kind = self.repeats, self.kind
        if rep is None or kind is None:
            return (subject_label(b, hostname) for b in self)
        pool, events, skip = self.pool, rep.events, rep.firsts[self.first]
        return (
            subject_label({**pool[r], kind: events[i]}, hostname)
            for i, r in rep.ordered(sorted(self.members))
            if i != skip
        )


_ABSENT = object()  # a binding whose item of a kind is unavailable


def binding_classes(
    binds: list[Binding],
    kinds_fields: dict[str, tuple[str, ...]],
    members: list[list[int]] | None = None,
) -> list[list[int]]:
    """Group bindings (``members``: lists of binding indexes, grouped already; None: each
    binding alone) by the values of ``kinds_fields``: equal values, equal verdicts.
    Classes keep the order of their first binding."""
    getters = [
        (kind, operator.attrgetter(*fields) if fields else None)
        for kind, fields in kinds_fields.items()
    ]
    if members is None and len(getters) == 1:
        return _classes_of_one_kind(binds, *getters[0])
    out: dict[Any, list[int]] = {}
    groups = members if members is not None else ([i] for i in range(len(binds)))
    try:
        for group in groups:
            b = binds[group[0]]
            key = tuple(
                _ABSENT if (it := b.get(kind)) is None else (g(it) if g is not None else True)
                for kind, g in getters
            )
            slot = out.get(key)
            if slot is None:
                out[key] = list(group)
            else:
                slot.extend(group)
    except TypeError:  # an unhashable value: every binding on its own
        return (
            [[i] for i in range(len(binds))]
            if members is None
            else [[i] for group in members for i in group]
        )
    return list(out.values())


def _classes_of_one_kind(
    binds: list[Binding], kind: str, getter: Callable[[Any], Any] | None
) -> list[list[int]]:
    out: dict[Any, list[int]] = {}
    try:
        for i, b in enumerate(binds):
            it = b[kind]
            key = _ABSENT if it is None else (getter(it) if getter is not None else True)
            slot = out.get(key)
            if slot is None:
                out[key] = [i]
            else:
                slot.append(i)
    except TypeError:
        return [[i] for i in range(len(binds))]
    return list(out.values())


def read_fields(rules: list[CompiledRule]) -> dict[str, tuple[str, ...]]:
    """Per bound kind, every field the rules read of it: their condition (aggregates'
    references to the binding included), their grouping, and the GPU's bus id (per-GPU
    conclusions)."""
    out: dict[str, set[str]] = {}
    for rule in rules:
        for kind, names in rule.bound_fields.items():
            out.setdefault(kind, set()).update(names)
    return {k: tuple(sorted(v)) for k, v in out.items()}


def _signature_classes(
    inp: EvalInput, iter_kinds: tuple[str, ...], join_gpu: bool, fields: dict[str, tuple[str, ...]]
) -> tuple[list[Binding], list[list[int]]]:
    """Bindings of a signature and their classes, once per evaluation (strata share them)."""
    cache = inp.aggregate_cache
    key = ("bindings", iter_kinds, join_gpu)
    all_binds = cache.get(key)
    if all_binds is None:
        all_binds = cache[key] = bindings(inp, iter_kinds, join_gpu)
    ckey = ("classes", iter_kinds, join_gpu, tuple(fields.items()))
    coarse = cache.get(ckey)
    if coarse is None:
        coarse = cache[ckey] = binding_classes(all_binds, fields)
    return all_binds, coarse


@dataclass
class _BookPlan:
    """What decide and the competing causes work out of a rulebook alone, once per
    rulebook object, not per evaluation."""

    # per stratum: its rules, and its rules per binding signature with the fields read
    strata: list[tuple[list[CompiledRule], list[tuple[tuple[Any, ...], list[CompiledRule], Any]]]]
    fields: dict[str, dict[str, tuple[str, ...]]]  # rule id -> read_fields of that rule
    groups: dict[str, list[CompiledRule]]  # differential group -> its rules, in order
    order: dict[str, int]  # rule id -> its place in the rulebook


_BOOK_PLANS: dict[int, tuple[Rulebook, _BookPlan]] = {}


def _plan(book: Rulebook) -> _BookPlan:
    """Keyed by the rulebook's identity; the entry keeps the rulebook alive, so the id is
    not reused while cached (a handful of rulebooks per process)."""
    hit = _BOOK_PLANS.get(id(book))
    if hit is not None and hit[0] is book:
        return hit[1]
    strata = []
    for stratum in book.strata:
        by_sig: dict[tuple[Any, ...], list[CompiledRule]] = {}
        for r in stratum:
            by_sig.setdefault((r.iter_kinds, r.join_gpu), []).append(r)
        strata.append((stratum, [(sig, rs, read_fields(rs)) for sig, rs in by_sig.items()]))
    groups: dict[str, list[CompiledRule]] = {}
    for r in book.rules:
        if r.group:
            groups.setdefault(r.group, []).append(r)
    plan = _BookPlan(
        strata,
        {r.id: read_fields([r]) for r in book.rules},
        groups,
        {r.id: r.order for r in book.rules},
    )
    if len(_BOOK_PLANS) >= 32:
        _BOOK_PLANS.clear()
    _BOOK_PLANS[id(book)] = (book, plan)
    return plan


def decide(inp: EvalInput, book: Rulebook, backend: Backend) -> tuple[list[Decision], Conclusions]:
    concl = Conclusions()
    decisions: list[Decision] = []
    for name in book.conclusions:
        concl.declare(name)
    if not inp.kind_fields:
        inp.kind_fields = book.kind_fields
    plan = _plan(book)
    for stratum, signatures in plan.strata:
        # Rules binding the same kinds share their bindings, grouped once by every field
        # they read; each rule then sees one binding per distinct value of its own fields.
        binds: dict[str, list[Binding]] = {}
        classes: dict[str, list[list[int]]] = {}
        full: dict[str, list[Binding]] = {}
        for (iter_kinds, join_gpu), rules, fields in signatures:
            all_binds, coarse = _signature_classes(inp, iter_kinds, join_gpu, fields)
            for r in rules:
                fine = binding_classes(all_binds, plan.fields[r.id], coarse)
                classes[r.id] = fine
                binds[r.id] = [all_binds[c[0]] for c in fine]
                full[r.id] = all_binds
        verdicts = backend.run_stratum(inp, stratum, binds, concl)
        for rule in stratum:
            all_binds = full[rule.id]
            # kept for the competing causes: why a rule lost is not worked out twice
            inp.aggregate_cache[("verdicts", rule.id)] = (
                all_binds,
                classes[rule.id],
                [verdicts.get((rule.id, i), False) for i in range(len(classes[rule.id]))],
            )
            # Bindings of collapsed repeats stand for every event of their representative.
            kind = next((k for k in rule.iter_kinds if k in inp.repeats), None)
            rep = inp.repeats[kind] if kind is not None else None
            for i, (b, members) in enumerate(zip(binds[rule.id], classes[rule.id], strict=True)):
                verdict = verdicts.get((rule.id, i), False)
                if rule.concludes:
                    gpu = b.get("gpu")
                    bus = gpu.__dict__.get("pci_bus_id") if gpu is not None else None
                    concl.record(rule.concludes, bus if "gpu" in rule.iter_kinds else None, verdict)
                if verdict is False:
                    continue
                status = Status.FIRED
                if verdict is None:
                    status = Status.CANNOT_EVALUATE
                first = min(members)
                same: Sequence[Binding] = ()
                if len(members) > 1 or (rep is not None and rep.counts[first] > 1):
                    same = Members(all_binds, members, first, kind, rep)
                decisions.append(Decision(rule, all_binds[first], first, status, same))
    return decisions, concl


def evaluate(
    inp: EvalInput | Snapshot,
    book: Rulebook,
    *,
    engine: str = "auto",
    backend_factory: Callable[[Rulebook], Backend] | None = None,
    source: str = "",
) -> FindingsDocument:
    """Evaluate facts against a rulebook. ``engine``: auto, durable or reference.

    A failure of the durable backend never loses the evaluation: the reference
    evaluator takes over and the document says so."""
    # The cyclic garbage collector is paused while evaluating: an evaluation allocates an
    # object per event and binding but creates no reference cycles, and with 100,000 Xids
    # the collector's repeated passes over them cost more than the evaluation itself.
    paused = gc.isenabled()
    gc.disable()
    try:
        return _evaluate(inp, book, engine, backend_factory, source)
    finally:
        if paused:
            gc.enable()


def _evaluate(
    inp: EvalInput | Snapshot,
    book: Rulebook,
    engine: str,
    backend_factory: Callable[[Rulebook], Backend] | None,
    source: str,
) -> FindingsDocument:
    collectors = []
    if isinstance(inp, Snapshot):
        collectors = inp.collectors
        inp = EvalInput.from_snapshot(inp)
    try:  # live collections and library callers too, not only snapshot files
        check_counts(counts_of(inp.facts), inp.hostname or "snapshot")
    except SnapshotTooLarge as exc:
        raise SnapshotError(str(exc)) from None
    facts = inp.facts
    inp = enrich_collapsed(inp, book)
    start = time.perf_counter()
    fallback: str | None = None
    backend: Backend = ReferenceBackend()
    if engine in ("auto", "durable"):
        try:
            backend = (backend_factory or shared_backend)(book)
        except BackendFailure as exc:
            fallback = str(exc)
    try:
        decisions, concl = decide(inp, book, backend)
    except BackendFailure as exc:
        fallback = f"{backend.name} failed: {exc}"
        backend = ReferenceBackend()
        decisions, concl = decide(inp, book, backend)
    elapsed = (time.perf_counter() - start) * 1000
    doc = build_document(inp, book, decisions, concl)
    doc.engine = EngineInfo(
        name=backend.name,
        requested=engine,
        fallback_reason=fallback,
        duration_ms=round(elapsed, 3),
        note=getattr(backend, "note", None),
    )
    doc.collectors = list(collectors)
    doc.snapshot_source = source
    code, doc.verdict = judge(doc.summary.critical, doc.summary.warning, doc.collectors, facts)
    doc.exit_status = int(code)
    return doc


# --------------------------------------------------------------------------- findings


# A folded finding lists at most this many other subjects; ``occurrences`` counts them all.
MAX_ALSO_SEEN = 50


def build_document(
    inp: EvalInput, book: Rulebook, decisions: list[Decision], concl: Conclusions
) -> FindingsDocument:
    fired: list[Finding] = []
    unknown: list[Finding] = []
    confirm: list[Finding] = []
    fired_ids: set[str] = set()
    folded: dict[tuple[str, str], tuple[Finding, set[str]]] = {}
    decisions = _without_contradictions(decisions)
    for d in decisions:
        if d.status is Status.FIRED and d.rule.group_by:
            # Fold before building: one finding per rule and grouping values, however
            # many bindings share them.
            ev = Evaluator(inp, d.binding, concl)
            key = (d.rule.id, repr([ev.ref(r).value for r in d.rule.group_by]))
            entry = folded.get(key)
            others: Iterable[str] = _labels(d.same, inp.hostname)
            n_others = len(d.same)
            if entry is None:
                f = make_finding(inp, d, concl)
                entry = folded[key] = (f, {f.subject})
                fired.append(f)
                fired_ids.add(f.rule_id)
            else:
                others = itertools.chain((subject_label(d.binding, inp.hostname),), others)
                n_others += 1
            first, seen = entry
            first.occurrences += n_others
            for subject in others:
                if len(first.also_seen_on) >= MAX_ALSO_SEEN:
                    break
                if subject not in seen:
                    seen.add(subject)
                    first.also_seen_on.append(subject)
            continue
        for i, b in enumerate(itertools.chain((d.binding,), d.same)):
            f = make_finding(inp, d if i == 0 else replace(d, binding=b, same=[]), concl)
            if f.status is Status.FIRED:
                fired.append(f)
                fired_ids.add(f.rule_id)
            elif f.status is Status.NEEDS_CONFIRMATION:
                confirm.append(f)
            else:
                unknown.append(f)
    competing = CompetingCauses(inp, book, concl)
    for f in fired:
        if f.group:
            f.competing = competing.of(f)
    order = _plan(book).order
    # What the responder sees (job.symptom) puts its differential first within a severity,
    # its questions first among those to confirm.
    job = inp.facts.job
    focus = (
        differential(((r.id, r.tags) for r in book.rules), str(job.symptom))
        if job is not None and job.symptom is not None
        else set()
    )

    def rank(f: Finding) -> tuple[int, int, int, int, str]:
        severity, stage = f.sort_key
        return (severity, f.rule_id not in focus, stage, order[f.rule_id], f.subject_key)

    fired.sort(key=rank)
    unknown.sort(key=rank)
    confirm.sort(key=rank)
    summary = Summary(
        critical=sum(f.severity == "critical" for f in fired),
        warning=sum(f.severity == "warning" for f in fired),
        info=sum(f.severity == "info" for f in fired),
        cannot_evaluate=len(unknown),
        needs_confirmation=len(confirm),
        rules_evaluated=len(book.rules),
        rules_fired=len(fired_ids),
    )
    return FindingsDocument(
        hostname=inp.hostname,
        snapshot_taken_at=inp.taken_at,
        engine=EngineInfo(name="", requested=""),
        rulebook=RulebookInfo(
            fingerprint=book.fingerprint,
            rules=len(book.rules),
            sources=book.sources,
            disabled=book.disabled,
            overlays=book.overlays,
        ),
        summary=summary,
        findings=fired,
        cannot_evaluate=unknown,
        needs_confirmation=confirm,
        conclusions=dict(concl.node),
    )


def _labels(same: Sequence[Binding], hostname: str) -> Iterator[str]:
    if isinstance(same, Members):
        return same.labels(hostname)
    return (subject_label(b, hostname) for b in same)


def _without_contradictions(decisions: list[Decision]) -> list[Decision]:
    """No reassuring finding for a GPU with a critical one (engine.consistency)."""
    reassuring = [d for d in decisions if HEALTHY_TAG in d.rule.tags]
    if not reassuring:
        return decisions
    failing = critical_gpus((d.rule.severity, d.status, _gpu_bindings(d)) for d in decisions)
    if not failing:
        return decisions
    out: list[Decision] = []
    for d in decisions:
        if HEALTHY_TAG in d.rule.tags:
            kept_d = _healthy(d, failing)
            if kept_d is None:
                continue
            d = kept_d
        out.append(d)
    return out


def _gpu_bindings(d: Decision) -> Sequence[Binding]:
    """Bindings naming every GPU the decision's bindings name: a repeat's GPU is its
    representative's (the bus id is never a field repeats differ in), so a storm's
    representatives stand for its events."""
    same = d.same
    if isinstance(same, Members) and same.repeats is not None:
        return [d.binding, *(same.pool[m] for m in same.members if m != same.first)]
    return [d.binding, *same]


def _healthy(d: Decision, failing: set[str]) -> Decision | None:
    same = d.same
    if isinstance(same, Members) and same.repeats is not None:
        pool, rep = same.pool, same.repeats
        members = [m for m in same.members if not (gpus_of(pool[m]) & failing)]
        if not members:
            return None
        first = min(members)
        many = len(members) > 1 or rep.counts[first] > 1
        others = Members(pool, members, first, same.kind, rep) if many else ()
        return replace(d, binding=pool[first], index=first, same=others)
    kept = healthy_bindings([d.binding, *same], failing)
    if not kept:
        return None
    return replace(d, binding=kept[0], same=kept[1:])


def make_finding(inp: EvalInput, d: Decision, concl: Conclusions) -> Finding:
    rule = d.rule
    ev = Evaluator(inp, d.binding, concl)
    status = d.status
    missing: list[MissingFact] = []
    questions = []
    if status is not Status.FIRED:
        val = ev.eval(rule.expr)
        seen: set[str] = set()
        for m in val.missing:
            if m.path not in seen:
                seen.add(m.path)
                missing.append(
                    MissingFact(path=m.path, reason=m.reason.reason.value, detail=m.reason.detail)
                )
        asked = {
            m.path.removeprefix("answer.") for m in val.missing if m.path.startswith("answer.")
        }
        questions = [q for q in rule.rule.questions if q.id in asked]
        # Only a person's answer is missing: ask. Collected facts are missing too: an
        # answer alone would not settle it, so it cannot be evaluated (the questions are
        # still listed).
        if asked and all(m.path.startswith("answer.") for m in val.missing):
            status = Status.NEEDS_CONFIRMATION
    return Finding(
        rule_id=rule.id,
        rule_version=rule.rule.version,
        title=render_text(rule.rule.title, ev, segments=status is Status.FIRED),
        severity=rule.severity,
        stage=rule.rule.stage,
        status=status,
        rulebook=rule.rulebook,
        rule_file=rule.file,
        subject=subject_label(d.binding, inp.hostname),
        subject_key=subject_key(d.binding),
        symptom=render_text(rule.rule.symptom, ev, fired=status is Status.FIRED),
        cause=render_text(rule.rule.cause, ev, fired=status is Status.FIRED),
        fix=render_text(rule.rule.fix, ev, fired=status is Status.FIRED),
        evidence=evidence(rule, ev),
        missing=missing,
        questions=questions,
        runbook=fill_runbook(rule.rule.runbook, ev, inp.hostname),
        references=list(rule.rule.references),
        group=rule.rule.group,
        concludes=rule.rule.concludes,
        overridden_by=rule.overridden_by,
    )


def fill_runbook(steps: list[RunbookStep], ev: Evaluator, hostname: str) -> list[RunbookStep]:
    """The rule's steps with their ``{kind.field}`` parameters filled from the bindings
    (what stays unfilled is asked of a person before the step can run)."""

    def lookup(kind: str, name: str) -> Any:
        if kind == PLACEHOLDER_NODE:
            return hostname if name == "hostname" else None
        if kind not in kinds() or name not in kinds()[kind].fields:
            return None
        v = ev.ref(E.Ref(kind, name))
        return v.value if v.known else None

    out = []
    for step in steps:
        if step.command and placeholders(step.command):
            step = step.model_copy(update={"command": fill(step.command, lookup)})
        out.append(step)
    return out


def render_text(text: str, ev: Evaluator, *, segments: bool = True, fired: bool = True) -> str:
    """Fill ``{kind.field}`` placeholders with the bound values; an optional ``[[...]]``
    segment whose values are not all known is left out (engine.templates), and every
    segment when ``segments`` is false (the title of a rule that did not fire)."""

    def lookup(ref: E.Ref) -> tuple[bool, Any]:
        v = ev.ref(ref)
        return v.known, v.value

    return templates.render(
        text, lookup, _fmt, with_segments=segments, on_missing=None if fired else templates.not_seen
    )


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def evidence(rule: CompiledRule, ev: Evaluator) -> list[EvidenceItem]:
    items: list[EvidenceItem] = []
    seen: set[str] = set()
    identity = [
        E.Ref(k, f)
        for k in rule.iter_kinds
        if ev.binding.get(k) is not None
        for f in kinds()[k].identity  # which item it is: always shown with the evidence
    ]
    refs = identity + [r for r in rule.expr_refs if r.kind != "params"] + list(rule.evidence)
    for r in refs:
        if r.path in seen:
            continue
        seen.add(r.path)
        v = ev.ref(r)
        items.append(_evidence_item(r.path, v, r.kind, r.name, ev))
    for agg in rule.expr_aggregates:
        text = E.render(agg)
        if text in seen:
            continue
        seen.add(text)
        v = ev.aggregate(agg)
        items.append(
            EvidenceItem(
                path=text,
                value=v.value,
                unit="" if agg.func != "sum" else _unit(agg.kind, agg.field),
                meaning=f"{agg.func} over {agg.kind}",
                source=", ".join(kinds()[agg.kind].collectors[:1]),
                unavailable=_why(v),
            )
        )
    return items


def _evidence_item(path: str, v: Val, kind: str, name: str, ev: Evaluator) -> EvidenceItem:
    unit = meaning = source = ""
    if kind in kinds():
        fi = kinds()[kind].fields.get(name)
        if fi:
            unit, meaning = fi.unit, fi.meaning
        item = ev.binding.get(kind) if not kinds()[kind].singleton else ev.inp.singleton(kind)
        source = (item.source if item is not None else "") or kinds()[kind].collectors[0]
    elif kind == "answer":
        source = "answer"
    elif kind == "concl":
        source = "conclusion"
    return EvidenceItem(
        path=path, value=v.value, unit=unit, meaning=meaning, source=source, unavailable=_why(v)
    )


def _why(v: Val) -> str | None:
    if v.known or not v.missing:
        return None
    return str(v.missing[0].reason)


def _unit(kind: str, name: str | None) -> str:
    fi = kinds()[kind].fields.get(name or "")
    return fi.unit if fi else ""


class CompetingCauses:
    """For fired findings, every other rule of their differential group and why it lost;
    each (rule, GPU) is worked out once per evaluation, however many findings ask."""

    def __init__(self, inp: EvalInput, book: Rulebook, concl: Conclusions) -> None:
        self.inp, self.book, self.concl = inp, book, concl
        self.plan = _plan(book)
        self.groups = self.plan.groups
        self._binds: dict[tuple[Any, ...], tuple[list[Binding], dict[str, list[int]]]] = {}
        self._memo: dict[tuple[str, frozenset[str]], RuledOut] = {}
        self._decided: dict[str, list[bool | None]] = {}

    def of(self, f: Finding) -> list[RuledOut]:
        buses = frozenset(
            p[4:] for p in f.subject_key.split(",") if p.startswith("gpu:") and len(p) > 4
        )
        out: list[RuledOut] = []
        for other in self.groups.get(f.group or "", []):
            if other.id == f.rule_id:
                continue
            key = (other.id, buses)
            hit = self._memo.get(key)
            if hit is None:
                hit = self._memo[key] = self._ruled_out(other, buses)
            out.append(hit.model_copy())
        return out

    def _bindings(self, rule: CompiledRule) -> tuple[list[Binding], dict[str, list[int]]]:
        sig = (rule.iter_kinds, rule.join_gpu)
        hit = self._binds.get(sig)
        if hit is None:
            # decide's bindings of the signature, when it made them (its verdicts index them)
            binds = self.inp.aggregate_cache.get(("bindings", *sig))
            if binds is None:
                binds = bindings(self.inp, rule.iter_kinds, rule.join_gpu)
            by_bus: dict[str, list[int]] = {}
            for i, b in enumerate(binds):
                gpu = b.get("gpu")
                bus = gpu.__dict__.get("pci_bus_id") if gpu is not None else None
                if bus:
                    by_bus.setdefault(bus, []).append(i)
            hit = self._binds[sig] = (binds, by_bus)
        return hit

    def _verdicts(self, rule: CompiledRule, binds: list[Binding]) -> list[bool | None] | None:
        """Per binding, the rule's verdict as decide found it (None: it did not record
        one over these bindings)."""
        hit = self._decided.get(rule.id)
        if hit is None:
            got = self.inp.aggregate_cache.get(("verdicts", rule.id))
            if got is None or got[0] is not binds:
                return None
            _, classes, values = got
            out: list[bool | None] = [False] * len(binds)
            for members, v in zip(classes, values, strict=True):
                if v is not False:
                    for m in members:
                        out[m] = v
            hit = self._decided[rule.id] = out
        return hit

    def _ruled_out(self, other: CompiledRule, buses: frozenset[str]) -> RuledOut:
        inp, concl = self.inp, self.concl
        binds, by_bus = self._bindings(other)
        idx = sorted(i for bus in buses for i in by_bus.get(bus, ()))
        related = [binds[i] for i in idx] if idx else binds
        title = render_text(
            other.rule.title,
            Evaluator(inp, related[0] if related else {}, concl),
            segments=False,
        )
        # One evaluation per distinct set of values the rule reads (classes keep order).
        # No binding at all (a node where the driver enumerates no GPU): nothing to try.
        classes = (
            binding_classes(related, self.plan.fields[other.id])
            if len(related) > 1
            else [[0]]
            if related
            else []
        )
        first_unknown: Binding | None = None
        decided = self._verdicts(other, binds)
        if decided is not None:  # decide's verdicts: the same evaluation, already done
            for j, i in enumerate(idx or range(len(binds))):
                verdict = decided[i]
                if verdict is True:
                    return RuledOut(
                        rule_id=other.id, title=title, status="fired", reason="also holds"
                    )
                if verdict is None and first_unknown is None:
                    first_unknown = related[j]
            classes = []
        for c in classes:
            v = Evaluator(inp, related[c[0]], concl).evaluate(other.expr)
            if v.value is True:
                return RuledOut(rule_id=other.id, title=title, status="fired", reason="also holds")
            if v.value is None and first_unknown is None:
                first_unknown = related[c[0]]
        if first_unknown is not None:
            val = Evaluator(inp, first_unknown, concl).evaluate(other.expr)
            miss = ", ".join(str(m) for m in val.missing[:3])
            return RuledOut(
                rule_id=other.id, title=title, status="cannot_evaluate", reason=miss or "unknown"
            )
        reason = "no items to evaluate"
        if related:
            from gpu_triage.engine.why import deciding_reason, why_tree

            tree = why_tree(Evaluator(inp, related[0], concl), other.expr)
            reason = deciding_reason(tree) or "condition false"
        return RuledOut(rule_id=other.id, title=title, status="not_fired", reason=reason)


def competing_causes(
    inp: EvalInput, book: Rulebook, f: Finding, concl: Conclusions
) -> list[RuledOut]:
    """For a fired finding, every other rule of its differential group and why it lost."""
    return CompetingCauses(inp, book, concl).of(f)


def missing_summary(missing: tuple[Missing, ...]) -> str:
    return "; ".join(str(m) for m in missing)
