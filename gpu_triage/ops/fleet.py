"""`gpu-triage fleet`: what one node cannot see, from many nodes' history.

Reads JSONL run records (one line per run, see :mod:`gpu_triage.ops.exporters`),
findings documents and snapshots, streaming, and reports: the top findings across the
fleet; repeat-offender GPUs and nodes (about 1% of GPUs cause about half of the
failures, fleet/F8); driver and VBIOS drift (fleet/F1, F3); the same Xid across many
nodes on one driver version (a driver regression, not a hardware fault: guide/MS3); and
racks or rows running hot.
"""

from __future__ import annotations

import json
import os
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from gpu_triage.io import jsonio
from gpu_triage.io.escape import md_code, md_text

BAD = ("warning", "critical")


# --------------------------------------------------------------------------- report model


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TopFinding(Model):
    rule: str
    severity: str
    nodes_now: int = Field(description="nodes where it fired in their latest run")
    runs: int = Field(description="runs, over all history, in which it fired")


class Offender(Model):
    node: str
    gpu: str = ""
    serial: str = ""
    bad_runs: int
    rules: list[str]
    share_pct: float = Field(description="share of all bad GPU findings in the history")


class Drift(Model):
    what: str  # driver | vbios (per GPU model)
    scope: str  # "" or the GPU model
    majority: str
    majority_nodes: int
    outliers: dict[str, list[str]]  # version -> nodes


class XidSpread(Model):
    code: int
    driver: str
    nodes: int
    nodes_on_driver: int
    gpus: int
    verdict: str  # driver regression suspected | hardware (few GPUs) | watch


class HotSpot(Model):
    level: str  # rack | row
    name: str
    mean_temp_c: float
    fleet_mean_c: float
    gpus: int


class FleetReport(Model):
    nodes: int
    runs: int
    gpus: int
    files: int
    errors: list[str] = Field(default_factory=list)
    top_findings: list[TopFinding] = Field(default_factory=list)
    repeat_gpus: list[Offender] = Field(default_factory=list)
    repeat_nodes: list[Offender] = Field(default_factory=list)
    top1pct_share_pct: float = Field(
        default=0.0, description="share of bad GPU findings from the worst 1% of GPUs"
    )
    drift: list[Drift] = Field(default_factory=list)
    xid_spread: list[XidSpread] = Field(default_factory=list)
    hot_spots: list[HotSpot] = Field(default_factory=list)


# --------------------------------------------------------------------------- reading


@dataclass
class NodeState:
    """What the fleet analysis keeps per node: the latest run and counters over history."""

    last_ts: str = ""
    last_findings: list[dict[str, Any]] = field(default_factory=list)
    driver: str | None = None
    gpus: list[dict[str, Any]] = field(default_factory=list)
    rack: str | None = None
    row: str | None = None
    runs: int = 0
    rule_runs: Counter[str] = field(default_factory=Counter)
    rule_sev: dict[str, str] = field(default_factory=dict)
    gpu_bad: Counter[str] = field(default_factory=Counter)
    gpu_rules: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    xids: dict[int, set[str]] = field(default_factory=lambda: defaultdict(set))  # code->gpus
    xid_driver: dict[int, str] = field(default_factory=dict)


def _records_from_file(path: Path) -> Iterator[dict[str, Any]]:
    if path.suffix == ".jsonl":
        with path.open(encoding="utf-8", errors="replace") as fh:
            for n, line in enumerate(fh, 1):
                if line.strip():
                    try:
                        yield jsonio.loads(line)
                    except json.JSONDecodeError as exc:
                        yield {"__error__": f"{path}:{n}: not JSON: {exc.msg}"}
                    except jsonio.NonFiniteNumber as exc:
                        yield {"__error__": f"{path}:{n}:{exc.col}: {exc.token}: not finite"}
        return
    try:
        data = jsonio.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError) as exc:  # not JSON, or NaN/Infinity (jsonio)
        yield {"__error__": f"{path}: {exc}"}
        return
    yield from _records_from_document(data, path)


def _records_from_document(data: Any, path: Path) -> Iterator[dict[str, Any]]:
    """A snapshot (evaluated here) or a findings document, as a run record."""
    from gpu_triage.ops.exporters import run_record

    if not isinstance(data, dict):
        yield {"__error__": f"{path}: neither a snapshot nor a findings document"}
        return
    if "facts" in data and "collectors" in data:
        from gpu_triage.engine.evaluate import evaluate
        from gpu_triage.model.snapshot import SnapshotError, parse_snapshot

        try:
            snap = parse_snapshot(json.dumps(data), str(path))
        except SnapshotError as exc:
            yield {"__error__": str(exc)}
            return
        doc = evaluate(snap, _book(), engine="reference")
        yield run_record(doc, snap.facts)
        return
    if "findings" in data and "engine" in data:
        from gpu_triage.engine.findings import FindingsDocument

        try:
            yield run_record(FindingsDocument.model_validate(data))
        except ValueError as exc:
            yield {"__error__": f"{path}: invalid findings document: {exc}"}
        return
    yield {"__error__": f"{path}: neither a snapshot nor a findings document"}


_BOOK: list[Any] = []


def _book() -> Any:
    if not _BOOK:
        from gpu_triage.engine.compiler import load_rulebook

        _BOOK.append(load_rulebook())
    return _BOOK[0]


def _fold(nodes: dict[str, NodeState], rec: dict[str, Any], errors: list[str]) -> int:
    if "__error__" in rec:
        errors.append(rec["__error__"])
        return 0
    host = rec.get("host") or "?"
    st = nodes.get(host)
    if st is None:
        st = nodes[host] = NodeState()
    st.runs += 1
    ts = rec.get("ts") or ""
    findings = rec.get("findings") or []
    serial_of = {g.get("bus"): g.get("serial") or "" for g in rec.get("gpus") or []}
    for f in findings:
        st.rule_runs[f["rule"]] += 1
        st.rule_sev[f["rule"]] = f.get("sev", "info")
        gpu = f.get("gpu") or ""
        if gpu and f.get("sev") in BAD:
            key = f"{gpu}|{serial_of.get(gpu, '')}"
            st.gpu_bad[key] += 1
            st.gpu_rules[key].add(f["rule"])
        code = f.get("xid")
        if code is not None:
            st.xids[code].add(gpu)
            st.xid_driver[code] = rec.get("driver") or "?"
    for code in rec.get("xids") or []:
        st.xids.setdefault(code, set())
        st.xid_driver.setdefault(code, rec.get("driver") or "?")
    if ts >= st.last_ts:
        st.last_ts, st.last_findings = ts, findings
        st.driver = rec.get("driver") or st.driver
        st.gpus = rec.get("gpus") or st.gpus
        st.rack = rec.get("rack") or st.rack
        st.row = rec.get("row") or st.row
    return 1


def _read_files(paths: list[str]) -> tuple[dict[str, NodeState], int, list[str]]:
    nodes: dict[str, NodeState] = {}
    errors: list[str] = []
    runs = 0
    for p in paths:
        for rec in _records_from_file(Path(p)):
            runs += _fold(nodes, rec, errors)
    return nodes, runs, errors


def _merge_states(into: NodeState, other: NodeState) -> None:
    into.runs += other.runs
    into.rule_runs.update(other.rule_runs)
    into.rule_sev.update(other.rule_sev)
    into.gpu_bad.update(other.gpu_bad)
    for k, v in other.gpu_rules.items():
        into.gpu_rules[k] |= v
    for code, gpus in other.xids.items():
        into.xids[code] |= gpus
    for code, drv in other.xid_driver.items():
        into.xid_driver.setdefault(code, drv)
    if other.last_ts >= into.last_ts:
        into.last_ts, into.last_findings = other.last_ts, other.last_findings
        into.driver, into.gpus = other.driver or into.driver, other.gpus or into.gpus
        into.rack, into.row = other.rack or into.rack, other.row or into.row


def expand(paths: Iterable[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out += sorted(q for q in p.rglob("*") if q.suffix in (".jsonl", ".json"))
        else:
            out.append(p)
    return out


def read_fleet(
    paths: Iterable[Path], workers: int | None = None
) -> tuple[dict[str, NodeState], int, list[str], int]:
    files = expand(paths)
    workers = workers or min(os.cpu_count() or 1, 8)
    nodes: dict[str, NodeState] = {}
    errors: list[str] = []
    runs = 0
    if workers > 1 and len(files) > 8:
        chunks = [[str(f) for f in files[i::workers]] for i in range(workers)]
        with ProcessPoolExecutor(workers) as pool:
            parts = list(pool.map(_read_files, chunks))
    else:
        parts = [_read_files([str(f) for f in files])]
    for part_nodes, part_runs, part_errors in parts:
        runs += part_runs
        errors += part_errors
        for host, st in part_nodes.items():
            if host in nodes:
                _merge_states(nodes[host], st)
            else:
                nodes[host] = st
    return nodes, runs, errors, len(files)


# --------------------------------------------------------------------------- analysis


@dataclass
class Inventory:
    """host -> (rack, row), e.g. from a site inventory CSV: host,rack,row."""

    places: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path | None) -> Inventory:
        inv = cls()
        if path is None:
            return inv
        import csv

        with path.open(newline="") as fh:
            for row in csv.DictReader(fh):
                inv.places[row["host"]] = (row.get("rack") or None, row.get("row") or None)
        return inv


def analyse(
    nodes: dict[str, NodeState],
    runs: int,
    errors: list[str],
    files: int,
    inventory: Inventory | None = None,
    *,
    top: int = 20,
    xid_min_nodes: int = 3,
    hot_delta_c: float = 5.0,
) -> FleetReport:
    inventory = inventory or Inventory()
    gpus_total = sum(len(st.gpus) for st in nodes.values())
    rep = FleetReport(nodes=len(nodes), runs=runs, gpus=gpus_total, files=files, errors=errors[:50])

    now_nodes: Counter[str] = Counter()
    sev_of: dict[str, str] = {}
    all_runs: Counter[str] = Counter()
    for st in nodes.values():
        all_runs.update(st.rule_runs)
        for rule in {f["rule"] for f in st.last_findings}:
            now_nodes[rule] += 1
        sev_of.update(st.rule_sev)
    ranked = sorted(all_runs, key=lambda r: (-now_nodes[r], -all_runs[r], r))
    rep.top_findings = [
        TopFinding(rule=r, severity=sev_of.get(r, "?"), nodes_now=now_nodes[r], runs=all_runs[r])
        for r in ranked[:top]
    ]

    gpu_rows = [
        (host, key, n, sorted(st.gpu_rules[key]))
        for host, st in nodes.items()
        for key, n in st.gpu_bad.items()
    ]
    total_bad = sum(n for _, _, n, _ in gpu_rows) or 1
    gpu_rows.sort(key=lambda r: (-r[2], r[0], r[1]))
    rep.repeat_gpus = [
        Offender(
            node=h,
            gpu=k.split("|")[0],
            serial=k.split("|")[1],
            bad_runs=n,
            rules=rules,
            share_pct=round(100 * n / total_bad, 2),
        )
        for h, k, n, rules in gpu_rows[:top]
        if n > 1
    ]
    if gpus_total:
        worst = max(1, round(gpus_total * 0.01))
        rep.top1pct_share_pct = round(
            100 * sum(n for _, _, n, _ in gpu_rows[:worst]) / total_bad, 2
        )
    node_rows = sorted(
        (
            (h, sum(st.gpu_bad.values()), sorted(set().union(*st.gpu_rules.values())))
            for h, st in nodes.items()
            if st.gpu_bad
        ),
        key=lambda r: (-r[1], r[0]),
    )
    rep.repeat_nodes = [
        Offender(node=h, bad_runs=n, rules=rules, share_pct=round(100 * n / total_bad, 2))
        for h, n, rules in node_rows[:top]
        if n > 1
    ]

    rep.drift = _drift(nodes)
    rep.xid_spread = _xid_spread(nodes, xid_min_nodes)
    rep.hot_spots = _hot_spots(nodes, inventory, hot_delta_c)
    return rep


def _drift(nodes: dict[str, NodeState]) -> list[Drift]:
    out: list[Drift] = []
    drivers: dict[str, list[str]] = defaultdict(list)
    for host, st in nodes.items():
        if st.driver:
            drivers[st.driver].append(host)
    if len(drivers) > 1:
        out.append(_drift_entry("driver", "", drivers))
    vbios: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for host, st in nodes.items():
        for g in st.gpus:
            if g.get("vbios"):
                hosts = vbios[g.get("name") or "?"][g["vbios"]]
                if not hosts or hosts[-1] != host:
                    hosts.append(host)
    for model, versions in sorted(vbios.items()):
        if len(versions) > 1:
            out.append(_drift_entry("vbios", model, versions))
    return out


def _drift_entry(what: str, scope: str, versions: dict[str, list[str]]) -> Drift:
    majority = max(versions, key=lambda v: (len(versions[v]), v))
    outliers = {v: sorted(h)[:50] for v, h in sorted(versions.items()) if v != majority}
    return Drift(
        what=what,
        scope=scope,
        majority=majority,
        majority_nodes=len(versions[majority]),
        outliers=outliers,
    )


def _xid_spread(nodes: dict[str, NodeState], min_nodes: int) -> list[XidSpread]:
    per: dict[tuple[int, str], list[set[str]]] = defaultdict(list)
    on_driver: Counter[str] = Counter(st.driver or "?" for st in nodes.values())
    for st in nodes.values():
        for code, gpus in st.xids.items():
            per[(code, st.xid_driver.get(code, st.driver or "?"))].append(gpus)
    out: list[XidSpread] = []
    total_nodes = sum(on_driver.values())
    for (code, driver), gpu_sets in per.items():
        n = len(gpu_sets)
        if n < min_nodes:
            continue
        share = n / max(on_driver[driver], 1)
        gpu_count = sum(len(g) or 1 for g in gpu_sets)
        # The same code on the other drivers, as a share of their nodes.
        other_nodes = sum(len(sets) for (c, d), sets in per.items() if c == code and d != driver)
        other_share = other_nodes / max(total_nodes - on_driver[driver], 1)
        if share >= 0.2 and share >= 3 * other_share:
            verdict = "driver regression suspected: far more common on this driver"
        elif share >= 0.2:
            verdict = "widespread on every driver: a fleet-wide or workload cause"
        elif gpu_count <= n * 1.1:
            verdict = "scattered single GPUs: treat per GPU"
        else:
            verdict = "watch"
        out.append(
            XidSpread(
                code=code,
                driver=driver,
                nodes=n,
                nodes_on_driver=on_driver[driver],
                gpus=gpu_count,
                verdict=verdict,
            )
        )
    out.sort(key=lambda x: (-x.nodes, x.code))
    return out


def _hot_spots(nodes: dict[str, NodeState], inv: Inventory, delta: float) -> list[HotSpot]:
    temps: dict[tuple[str, str], list[float]] = defaultdict(list)
    everything: list[float] = []
    for host, st in nodes.items():
        rack, row = inv.places.get(host, (st.rack, st.row))
        for g in st.gpus:
            t = g.get("temp")
            if isinstance(t, int | float):
                everything.append(float(t))
                if rack:
                    temps[("rack", rack)].append(float(t))
                if row:
                    temps[("row", row)].append(float(t))
    if not everything:
        return []
    fleet_mean = statistics.fmean(everything)
    out = [
        HotSpot(
            level=level,
            name=name,
            mean_temp_c=round(statistics.fmean(ts), 1),
            fleet_mean_c=round(fleet_mean, 1),
            gpus=len(ts),
        )
        for (level, name), ts in temps.items()
        if statistics.fmean(ts) >= fleet_mean + delta
    ]
    out.sort(key=lambda h: -h.mean_temp_c)
    return out


# --------------------------------------------------------------------------- output


def fleet_markdown(rep: FleetReport) -> str:
    """The report for people; every value read from a node's files is escaped (md_text)."""
    m = md_text
    lines = [
        "# gpu-triage fleet report",
        "",
        f"{rep.nodes} nodes, {rep.gpus} GPUs, {rep.runs} runs read from {rep.files} files.",
        "",
    ]
    if rep.errors:
        lines += [f"{len(rep.errors)} unreadable inputs (first: {m(rep.errors[0])})", ""]
    lines += ["## Top findings", "", "| rule | severity | nodes now | runs |", "|---|---|---|---|"]
    lines += [
        f"| {md_code(t.rule, in_table=True)} | {m(t.severity)} | {t.nodes_now} | {t.runs} |"
        for t in rep.top_findings
    ]
    lines += [
        "",
        "## Repeat offenders",
        "",
        f"The worst 1% of GPUs account for {rep.top1pct_share_pct}% of bad GPU findings "
        "(fleet/F8: quarantine or RMA them).",
        "",
        "| node | GPU | serial | bad runs | share | rules |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {m(o.node)} | {m(o.gpu)} | {m(o.serial)} | {o.bad_runs} | {o.share_pct}% | "
        f"{m(', '.join(o.rules))} |"
        for o in rep.repeat_gpus
    ]
    if rep.repeat_nodes:
        lines += ["", "| node | bad runs | share | rules |", "|---|---|---|---|"]
        lines += [
            f"| {m(o.node)} | {o.bad_runs} | {o.share_pct}% | {m(', '.join(o.rules))} |"
            for o in rep.repeat_nodes
        ]
    lines += ["", "## Version drift", ""]
    if not rep.drift:
        lines.append("No drift: every node runs the same driver and VBIOS per GPU model.")
    for d in rep.drift:
        scope = f" ({m(d.scope)})" if d.scope else ""
        lines.append(
            f"- **{m(d.what)}{scope}**: majority {m(d.majority)} on {d.majority_nodes} nodes; "
            + "; ".join(
                f"{m(v)} on {m(', '.join(h[:5]))}{' ...' if len(h) > 5 else ''}"
                for v, h in d.outliers.items()
            )
        )
    lines += ["", "## The same Xid on many nodes", ""]
    if not rep.xid_spread:
        lines.append("No Xid code appears on several nodes.")
    for x in rep.xid_spread:
        lines.append(
            f"- Xid {x.code} on {x.nodes} of {x.nodes_on_driver} nodes running driver "
            f"{m(x.driver)} ({x.gpus} GPUs): **{m(x.verdict)}**"
        )
    lines += ["", "## Hot racks and rows", ""]
    if not rep.hot_spots:
        lines.append("No rack or row runs hotter than the fleet.")
    for h in rep.hot_spots:
        lines.append(
            f"- {m(h.level)} {m(h.name)}: {h.mean_temp_c} °C mean over {h.gpus} GPUs "
            f"(fleet {h.fleet_mean_c} °C)"
        )
    return "\n".join(lines) + "\n"
