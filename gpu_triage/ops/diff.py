"""`gpu-triage diff SLOW HEALTHY`: a slow node beside a healthy twin (guide: "run the
fast-diagnosis guide on a slow job and on a healthy one and compare").

Two things differ between the nodes: findings (a rule fires on one and not the other) and
facts (a value differs beyond the noise of its unit). Both are ranked in the guide's
fast-diagnosis order: a fact takes the earliest stage of the rules that read it, so a
difference in what FD1 looks at comes before one in what FD3 looks at, and facts no rule
reads come last. Items are paired across the nodes by what stays the same on a twin (GPU
index, disk or NIC name, link number), never by bus id or serial, which differ.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, Field

from gpu_triage.engine.compiler import Rulebook
from gpu_triage.engine.findings import Finding, FindingsDocument
from gpu_triage.engine.model import Severity, Stage
from gpu_triage.io.escape import md_code, md_text
from gpu_triage.model.catalog import FieldInfo, KindInfo, kinds
from gpu_triage.model.facts import FactModel, Facts

# Noise per unit: (absolute, relative) beyond which two values differ. Documented in the
# report itself (``noise``) so a reader knows what "differs" meant.
_RELATIVE = 0.10
NOISE: dict[str, tuple[float, float]] = {
    "%": (10.0, 0.0),  # ten points of utilisation, pressure or memory use
    "°C": (5.0, 0.0),
    "ratio": (0.0, _RELATIVE),
}
# Units whose values are counts or settings: any change is a difference.
_EXACT_UNITS = frozenset(
    {
        "errors", "events", "packets", "replays", "rows", "pages", "resets", "processes",
        "pods", "values", "lanes", "gen", "links", "GPUs", "cores", "nodes", "P-state",
        "bytes",
    }
)  # fmt: skip
# Not compared: times and intervals (they differ on every run), and what names an item.
_SKIPPED_UNITS = frozenset({"s"})
_SKIPPED_FIELDS = frozenset(
    {"hostname", "serial", "uuid", "pci_bus_id", "gpu_pci_bus_id", "boot_time", "line",
     "timestamp", "raw", "message", "source", "minor_number", "board_id", "busiest_core"}
)  # fmt: skip
# How items of a list kind pair up across two nodes (what a twin keeps the same).
_PAIR_BY: dict[str, tuple[str, ...]] = {
    "gpu": ("index",),
    "nvlink": ("gpu_index", "link"),
    "disk": ("name",),
    "nic": ("name",),
    "ib": ("ca_name", "port"),
}
RANGE = "\u2013"  # an en dash: "GPUs 0-7" as people write it
_EVENT_KINDS = ("xid", "sxid", "aer", "bus_loss", "oom", "nvlink_error")


class FactDiff(BaseModel):
    subject: str = Field(description="the item on both nodes: 'GPU 3', 'disk nvme0n1', 'host'")
    path: str = Field(description="kind.field")
    slow: Any
    healthy: Any
    unit: str = ""
    stage: Stage | None = Field(default=None, description="earliest stage of a reading rule")
    read_by: list[str] = Field(default_factory=list, description="rules that read the field")


class FindingDiff(BaseModel):
    side: Literal["slow_only", "healthy_only"]
    rule_id: str
    title: str
    severity: Severity
    stage: Stage
    subjects: list[str]


class DiffReport(BaseModel):
    slow: str
    healthy: str
    findings: list[FindingDiff] = Field(default_factory=list)
    facts: list[FactDiff] = Field(default_factory=list)
    noise: dict[str, str] = Field(default_factory=dict, description="what 'differs' means")


def diff_documents(
    slow_facts: Facts,
    slow_doc: FindingsDocument,
    healthy_facts: Facts,
    healthy_doc: FindingsDocument,
    book: Rulebook,
    *,
    slow_label: str = "slow",
    healthy_label: str = "healthy",
) -> DiffReport:
    stage_of = _stages_of_fields(book)
    readers = book.readers()
    return DiffReport(
        slow=slow_label,
        healthy=healthy_label,
        findings=_finding_diffs(slow_doc.findings, healthy_doc.findings),
        facts=sorted(
            _fact_diffs(slow_facts, healthy_facts, stage_of, readers),
            key=lambda d: (d.stage.rank if d.stage else len(Stage), d.path, d.subject),
        ),
        noise=_noise_doc(),
    )


def _finding_diffs(slow: list[Finding], healthy: list[Finding]) -> list[FindingDiff]:
    def by_rule(findings: list[Finding]) -> dict[str, list[Finding]]:
        out: dict[str, list[Finding]] = {}
        for f in findings:
            out.setdefault(f.rule_id, []).append(f)
        return out

    s, h = by_rule(slow), by_rule(healthy)
    out: list[FindingDiff] = []
    sides: tuple[
        tuple[
            Literal["slow_only", "healthy_only"], dict[str, list[Finding]], dict[str, list[Finding]]
        ],
        ...,
    ] = (
        ("slow_only", s, h),
        ("healthy_only", h, s),
    )
    for side, mine, other in sides:
        for rule_id, fs in mine.items():
            if rule_id in other:
                continue
            first = fs[0]
            subjects = [x for f in fs for x in (f.subject, *f.also_seen_on)]
            out.append(
                FindingDiff(
                    side=side,
                    rule_id=rule_id,
                    title=first.title,
                    severity=first.severity,
                    stage=first.stage,
                    subjects=list(dict.fromkeys(subjects)),
                )
            )
    out.sort(key=lambda d: (d.side != "slow_only", d.severity.rank, d.stage.rank, d.rule_id))
    return out


def _stages_of_fields(book: Rulebook) -> dict[str, Stage]:
    out: dict[str, Stage] = {}
    for rule in book.rules:
        stage = rule.rule.stage
        for path in rule.reads:
            if path not in out or stage.rank < out[path].rank:
                out[path] = stage
    return out


def _differs(a: Any, b: Any, info: FieldInfo) -> bool:
    if a is None or b is None:
        return a is not b
    if isinstance(a, bool) or isinstance(b, bool) or info.type in ("string", "list"):
        return bool(a != b)
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
        return bool(a != b)
    if not (math.isfinite(a) and math.isfinite(b)):
        return bool(a != b)
    if info.unit in _EXACT_UNITS:
        return a != b
    absolute, relative = NOISE.get(info.unit, (0.0, _RELATIVE))
    gap = abs(a - b)
    return gap > absolute and gap > relative * max(abs(a), abs(b))


def _compared_fields(kind: KindInfo) -> list[FieldInfo]:
    return [
        info
        for name, info in kind.fields.items()
        if name not in _SKIPPED_FIELDS and info.unit not in _SKIPPED_UNITS
    ]


def _label(kind: KindInfo, key: tuple[Any, ...]) -> str:
    if kind.singleton:
        return kind.name
    if kind.name == "gpu":
        return f"GPU {key[0]}"
    return f"{kind.name} {' '.join(str(k) for k in key)}"


def _pairs(
    kind: KindInfo, slow: Facts, healthy: Facts
) -> list[tuple[str, FactModel | None, FactModel | None]]:
    a, b = getattr(slow, kind.attr), getattr(healthy, kind.attr)
    if kind.singleton:
        return [(kind.name, a, b)] if (a is not None or b is not None) else []
    fields = _PAIR_BY.get(kind.name)
    if fields is None:
        return []

    def keyed(items: list[FactModel]) -> dict[tuple[Any, ...], FactModel]:
        return {tuple(getattr(i, f, None) for f in fields): i for i in items}

    ka, kb = keyed(a), keyed(b)
    keys = sorted(set(ka) | set(kb), key=lambda k: tuple(str(x) for x in k))
    return [(_label(kind, k), ka.get(k), kb.get(k)) for k in keys]


def _fact_diffs(
    slow: Facts, healthy: Facts, stage_of: dict[str, Stage], readers: dict[str, list[str]]
) -> list[FactDiff]:
    out: list[FactDiff] = []
    for kind in kinds().values():
        if kind.name in _EVENT_KINDS:
            continue
        for subject, a, b in _pairs(kind, slow, healthy):
            if a is None or b is None:
                out.append(
                    FactDiff(
                        subject=subject,
                        path=kind.name,
                        slow="present" if a is not None else "absent",
                        healthy="present" if b is not None else "absent",
                    )
                )
                continue
            for info in _compared_fields(kind):
                va, vb = getattr(a, info.name, None), getattr(b, info.name, None)
                if _differs(va, vb, info):
                    path = f"{kind.name}.{info.name}"
                    out.append(
                        FactDiff(
                            subject=subject,
                            path=path,
                            slow=va,
                            healthy=vb,
                            unit=info.unit,
                            stage=stage_of.get(path),
                            read_by=readers.get(path, []),
                        )
                    )
    for name in _EVENT_KINDS:
        event_kind = kinds().get(name)
        if event_kind is None:
            continue
        na, nb = len(getattr(slow, event_kind.attr)), len(getattr(healthy, event_kind.attr))
        if na != nb:
            path = f"{name}.count"
            out.append(
                FactDiff(
                    subject="kernel log",
                    path=path,
                    slow=na,
                    healthy=nb,
                    unit="events",
                    stage=Stage.HARDWARE,
                    read_by=sorted(
                        {r for p, rs in readers.items() if p.startswith(name) for r in rs}
                    ),
                )
            )
    return out


def _noise_doc() -> dict[str, str]:
    doc = {unit: f"more than {a:g} {unit} apart" for unit, (a, r) in NOISE.items() if a}
    doc["ratio"] = f"more than {_RELATIVE:.0%} apart"
    doc["counts and settings"] = "any change (" + ", ".join(sorted(_EXACT_UNITS)) + ")"
    doc["other measurements"] = f"more than {_RELATIVE:.0%} apart"
    doc["not compared"] = "times, intervals and what names an item (serials, bus ids)"
    return doc


def _value(v: Any, unit: str) -> str:
    if v is None:
        return "unknown"
    if isinstance(v, bool):
        return "yes" if v else "no"
    text = f"{v:g}" if isinstance(v, float) else str(v)
    return f"{text} {unit}".strip() if unit and not isinstance(v, str) else text


def _fold(facts: list[FactDiff]) -> list[list[FactDiff]]:
    """One row per fact over the items it differs on (GPUs 0-7), as people read it."""
    groups: list[list[FactDiff]] = []
    for fd in facts:
        if groups and groups[-1][0].path == fd.path and groups[-1][0].stage == fd.stage:
            groups[-1].append(fd)
        else:
            groups.append([fd])
    return groups


def _subjects(group: list[FactDiff]) -> str:
    if len(group) == 1:
        return group[0].subject
    gpus = [g.subject.removeprefix("GPU ") for g in group if g.subject.startswith("GPU ")]
    if len(gpus) == len(group) and all(x.isdigit() for x in gpus):
        return "GPUs " + _ranges(sorted(int(x) for x in gpus))
    return ", ".join(g.subject for g in group)


def _ranges(numbers: list[int]) -> str:
    out: list[str] = []
    start = prev = numbers[0]
    for n in [*numbers[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        out.append(f"{start}" if start == prev else f"{start}{RANGE}{prev}")
        if n is not None:
            start = prev = n
    return ", ".join(out)


def _values(values: list[Any], unit: str) -> str:
    numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if len(values) > 1 and len(numbers) == len(values):
        lo, hi = min(numbers), max(numbers)
        if lo != hi:
            return f"{_value(lo, '')}{RANGE}{_value(hi, unit)}"
    distinct = list(dict.fromkeys(_value(v, unit) for v in values))
    return ", ".join(distinct)


def diff_markdown(report: DiffReport) -> str:
    """The report for people: findings first, then facts in fast-diagnosis order."""
    lines = [
        f"# {md_text(report.slow)} compared with {md_text(report.healthy)}",
        "",
    ]
    slow_only = [d for d in report.findings if d.side == "slow_only"]
    healthy_only = [d for d in report.findings if d.side == "healthy_only"]
    if slow_only:
        lines += [f"## Only on {md_text(report.slow)}", ""]
        for d in slow_only:
            lines.append(
                f"- **{d.severity.value.upper()}** {md_text(d.title)} "
                f"(stage {d.stage.value}, {md_code(d.rule_id)}): " + md_text(", ".join(d.subjects))
            )
        lines.append("")
    if healthy_only:
        lines += [f"## Only on {md_text(report.healthy)}", ""]
        lines += [f"- {md_text(d.title)} ({md_code(d.rule_id)})" for d in healthy_only]
        lines.append("")
    if not report.findings:
        lines += ["No rule fires on one node and not on the other.", ""]
    if report.facts:
        lines += [
            "## Facts that differ, in fast-diagnosis order",
            "",
            f"| stage | item | fact | {md_text(report.slow)} | {md_text(report.healthy)} "
            "| read by |",
            "|---|---|---|---|---|---|",
        ]
        for group in _fold(report.facts):
            fd = group[0]
            lines.append(
                "| "
                + " | ".join(
                    [
                        fd.stage.value if fd.stage else "-",
                        md_text(_subjects(group)),
                        md_code(fd.path, in_table=True),
                        md_text(_values([g.slow for g in group], fd.unit)),
                        md_text(_values([g.healthy for g in group], fd.unit)),
                        md_text(", ".join(fd.read_by[:3]) + (" …" if len(fd.read_by) > 3 else ""))
                        or "no rule",
                    ]
                )
                + " |"
            )
        lines.append("")
    else:
        lines += ["No fact differs beyond its noise.", ""]
    lines += ["Differs means: " + md_text("; ".join(f"{k}: {v}" for k, v in report.noise.items()))]
    return "\n".join(lines) + "\n"


def fact_table(report: DiffReport) -> list[tuple[str, str, str, str, str, str]]:
    """The facts that differ as rows (stage, item, fact, slow, healthy, read by), folded
    over the items they differ on as the Markdown report folds them: for the TUI."""
    rows = []
    for group in _fold(report.facts):
        fd = group[0]
        readers = ", ".join(fd.read_by[:3]) + (" …" if len(fd.read_by) > 3 else "")
        rows.append(
            (
                fd.stage.value if fd.stage else "-",
                _subjects(group),
                fd.path,
                _values([g.slow for g in group], fd.unit),
                _values([g.healthy for g in group], fd.unit),
                readers or "no rule",
            )
        )
    return rows
