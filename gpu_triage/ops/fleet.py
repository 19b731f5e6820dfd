"""`gpu-triage fleet`: what one node cannot see, from many nodes' history.

Reads JSONL run records (one line per run, see :mod:`gpu_triage.ops.exporters`),
findings documents and snapshots (:mod:`gpu_triage.ops.fleet_read`) and reports: the top
findings across the fleet, worst first; repeat-offender GPUs and nodes (about 1% of GPUs
cause about half of the failures, fleet/F8); driver and VBIOS drift (fleet/F1, F3); the
same Xid across many nodes on one driver version (a driver regression, not a hardware
fault: guide/MS3), tested against the nodes on other drivers; racks or rows running hot;
GPUs far hotter than their own history at the same load (fleet/F6); GPUs and nodes
ranked by utilisation against the 85% target (fleet/F9).

Every statistical statement has a minimum sample below which the report says it cannot
tell, and a confidence statement (an interval or a p-value) above it.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from gpu_triage.io.escape import md_code, md_text
from gpu_triage.ops.fleet_read import (
    DEFAULT_UTIL_TARGET,
    SEV_RANK,
    FleetRead,
    NodeState,
    expand,
    inventory,
    read_fleet,
    worse,
)
from gpu_triage.ops.fleet_stats import fisher_greater, mean_ci, variance, welch_diff, wilson
from gpu_triage.ops.load_bands import BAND_BOUNDS, BAND_NAMES, band_index

__all__ = [
    "FleetReport",
    "Inventory",
    "NodeState",
    "analyse",
    "expand",
    "fleet_markdown",
    "read_fleet",
]

# Minimum samples below which a statement is not made.
MIN_GROUP_NODES = 5  # nodes on each side of a driver comparison
MIN_GPUS_FOR_SHARE = 100  # "the worst 1% of GPUs" needs at least one whole GPU in that 1%
MIN_BAD_FOR_SHARE = 20  # bad findings before their concentration is stated
MIN_GPUS_PER_PLACE = 8  # GPUs in a rack or row before its temperature is compared
MIN_UTIL_SAMPLES = 24  # a day of hourly runs before a GPU's utilisation is ranked
ANOMALY_MIN_RUNS = 20  # earlier runs of a GPU at the same load before it is judged
ANOMALY_Z = 6.0
ANOMALY_RISE_C = 10.0
ANOMALY_MIN_SD_C = 1.0
REGRESSION_P = 0.01  # one-sided Fisher p below which a driver is suspected
CORRELATED = (
    "intervals treat samples as independent; runs of one node are correlated, so read "
    "them as optimistic"
)


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
    severity: str = Field(default="warning", description="worst severity of its bad findings")
    bad_runs: int
    rules: list[str]
    share_pct: float = Field(description="share of all bad GPU findings in the history")


class Drift(Model):
    what: str  # driver | vbios (per GPU model) | kernel, CUDA, BIOS ... (the golden image)
    scope: str  # "" or the GPU model
    majority: str
    majority_nodes: int
    outliers: dict[str, list[str]]  # version -> nodes


class XidSpread(Model):
    code: int
    driver: str
    nodes: int = Field(description="nodes that logged the code while running this driver")
    nodes_on_driver: int = Field(description="nodes that ran this driver in the window")
    gpus: int
    other_nodes: int = Field(default=0, description="nodes that never ran this driver")
    other_nodes_with: int = Field(default=0, description="of those, nodes that logged the code")
    rate_pct: float = 0.0
    rate_ci95_pct: tuple[float, float] = (0.0, 100.0)
    other_rate_pct: float = 0.0
    other_rate_ci95_pct: tuple[float, float] = (0.0, 100.0)
    p_value: float | None = Field(
        default=None, description="one-sided Fisher exact: this driver's rate above the others'"
    )
    severity: str = "info"
    verdict: str  # driver regression suspected | widespread | scattered | watch | cannot tell
    confidence: str = ""


class HotSpot(Model):
    level: str  # rack | row
    name: str
    mean_temp_c: float
    fleet_mean_c: float
    delta_c: float = 0.0
    delta_ci95_c: tuple[float, float] = (0.0, 0.0)
    gpus: int


class GpuAnomaly(Model):
    node: str
    gpu: str
    serial: str = ""
    band: str = Field(description="load band of the latest run: idle, light or busy")
    temp_c: float = Field(description="temperature in the node's latest run")
    history_mean_c: float | None = Field(
        default=None, description="mean of its earlier runs in the same band (fleet window)"
    )
    history_sd_c: float | None = Field(
        default=None, description="their standard deviation, floored (fleet window)"
    )
    z: float
    runs: int = Field(default=0, description="earlier runs in the band (fleet window)")
    judged_by: str = Field(
        default="fleet window",
        description="node baseline: the node's own median/MAD z (temp_z of its run record); "
        "fleet window: mean and deviation of the runs read",
    )


class UtilRank(Model):
    node: str
    gpu: str = ""
    serial: str = ""
    mean_pct: float
    ci95_pct: float = Field(description="half-width of the 95% interval of the mean")
    at_target_pct: float = Field(description="share of samples at or above the target")
    samples: int


class Utilisation(Model):
    target_pct: float
    min_samples: int
    window_start: str = ""
    window_end: str = ""
    gpus_ranked: int = 0
    gpus_too_few_samples: int = 0
    gpus_meeting_target: int = 0
    nodes_ranked: int = 0
    nodes_meeting_target: int = 0
    fleet_mean_pct: float | None = Field(default=None, description="mean of the ranked GPUs")
    lowest_gpus: list[UtilRank] = Field(default_factory=list)
    lowest_nodes: list[UtilRank] = Field(default_factory=list)
    confidence: str = ""


class FleetReport(Model):
    nodes: int
    runs: int
    gpus: int
    files: int
    nodes_without_inventory: int = Field(
        default=0, description="nodes known only from findings documents: no GPU list"
    )
    window_start: str = ""
    window_end: str = ""
    since: str = Field(default="", description="runs before this time were left out")
    runs_before_since: int = 0
    errors: list[str] = Field(default_factory=list, description="the first unreadable inputs")
    error_count: int = 0
    top_findings: list[TopFinding] = Field(default_factory=list)
    repeat_gpus: list[Offender] = Field(default_factory=list)
    repeat_nodes: list[Offender] = Field(default_factory=list)
    top1pct_share_pct: float | None = Field(
        default=None, description="share of bad GPU findings from the worst 1% of GPUs"
    )
    top1pct_statement: str = ""
    drift: list[Drift] = Field(default_factory=list)
    xid_spread: list[XidSpread] = Field(default_factory=list)
    hot_spots: list[HotSpot] = Field(default_factory=list)
    hot_statement: str = ""
    history_anomalies: list[GpuAnomaly] = Field(
        default_factory=list,
        description="GPUs whose latest temperature is far from their own history",
    )
    anomaly_statement: str = ""
    utilisation: Utilisation | None = None
    section_severity: dict[str, str] = Field(
        default_factory=dict, description="worst severity per section ('' when empty)"
    )


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

        with path.open(newline="", encoding="utf-8", errors="replace") as fh:
            for row in csv.DictReader(fh):
                if row.get("host"):
                    inv.places[row["host"]] = (row.get("rack") or None, row.get("row") or None)
        return inv


def _rank(sev: str) -> int:
    return SEV_RANK.get(sev, 0)


def analyse(
    read: FleetRead,
    inventory: Inventory | None = None,
    *,
    top: int = 20,
    xid_min_nodes: int = 3,
    hot_delta_c: float = 5.0,
    util_target: float = DEFAULT_UTIL_TARGET,
    min_util_samples: int = MIN_UTIL_SAMPLES,
) -> FleetReport:
    nodes = read.nodes
    inventory = inventory or Inventory()
    gpus_total = sum(len(st.gpus) for st in nodes.values())
    starts = [st.first_ts for st in nodes.values() if st.first_ts]
    ends = [st.last_ts for st in nodes.values() if st.last_ts]
    rep = FleetReport(
        nodes=len(nodes),
        runs=read.runs,
        gpus=gpus_total,
        files=read.files,
        nodes_without_inventory=sum(1 for st in nodes.values() if not st.gpus),
        window_start=min(starts, default=""),
        window_end=max(ends, default=""),
        errors=read.errors,
        error_count=read.error_count,
        since=read.since,
        runs_before_since=read.outside,
    )
    rep.top_findings = _top_findings(nodes, top)
    _offenders(rep, nodes, top, gpus_total)
    rep.drift = _drift(nodes)
    rep.xid_spread = _xid_spread(nodes, xid_min_nodes)
    rep.hot_spots, rep.hot_statement = _hot_spots(nodes, inventory, hot_delta_c)
    rep.history_anomalies, rep.anomaly_statement = _history_anomalies(nodes, top)
    rep.utilisation = _utilisation(nodes, util_target, min_util_samples, top, rep)
    rep.section_severity = _section_severity(rep)
    return rep


def _top_findings(nodes: dict[str, NodeState], top: int) -> list[TopFinding]:
    now_nodes: Counter[str] = Counter()
    sev_of: dict[str, str] = {}
    all_runs: Counter[str] = Counter()
    for st in nodes.values():
        all_runs.update(st.rule_runs)
        now_nodes.update(set(st.last_rules))
        for rule, sev in st.rule_sev.items():
            sev_of[rule] = worse(sev_of.get(rule, sev), sev)
    # worst first: a critical finding on one node outranks an info finding on every node
    ranked = sorted(
        all_runs, key=lambda r: (-_rank(sev_of.get(r, "info")), -now_nodes[r], -all_runs[r], r)
    )
    return [
        TopFinding(rule=r, severity=sev_of.get(r, "info"), nodes_now=now_nodes[r], runs=all_runs[r])
        for r in ranked[:top]
    ]


def _offenders(rep: FleetReport, nodes: dict[str, NodeState], top: int, gpus_total: int) -> None:
    gpu_rows = [
        (host, key, n, sorted(st.gpu_rules[key]), st.gpu_sev.get(key, "warning"))
        for host, st in nodes.items()
        for key, n in st.gpu_bad.items()
    ]
    total_bad = sum(r[2] for r in gpu_rows)
    gpu_rows.sort(key=lambda r: (-r[2], r[0], r[1]))
    rep.repeat_gpus = [
        Offender(
            node=h,
            gpu=k.split("|", 1)[0],
            serial=k.split("|", 1)[1],
            severity=sev,
            bad_runs=n,
            rules=rules,
            share_pct=round(100 * n / total_bad, 2),
        )
        for h, k, n, rules, sev in gpu_rows[:top]
        if n > 1
    ]
    node_rows = []
    for h, st in nodes.items():
        if st.gpu_bad:
            sev = "warning"
            for s in st.gpu_sev.values():
                sev = worse(sev, s)
            rules = sorted(set().union(*st.gpu_rules.values()))
            node_rows.append((h, sum(st.gpu_bad.values()), rules, sev))
    node_rows.sort(key=lambda r: (-r[1], r[0]))
    rep.repeat_nodes = [
        Offender(
            node=h, severity=sev, bad_runs=n, rules=rules, share_pct=round(100 * n / total_bad, 2)
        )
        for h, n, rules, sev in node_rows[:top]
        if n > 1
    ]
    if gpus_total < MIN_GPUS_FOR_SHARE:
        rep.top1pct_statement = (
            f"too few GPUs ({gpus_total}, at least {MIN_GPUS_FOR_SHARE} needed) "
            "to name the worst 1%"
        )
    elif total_bad < MIN_BAD_FOR_SHARE:
        rep.top1pct_statement = (
            f"too few bad GPU findings ({total_bad}, at least {MIN_BAD_FOR_SHARE} needed) "
            "to say how concentrated they are"
        )
    else:
        worst = round(gpus_total * 0.01)
        share = round(100 * sum(r[2] for r in gpu_rows[:worst]) / total_bad, 2)
        rep.top1pct_share_pct = share
        rep.top1pct_statement = (
            f"the worst 1% of GPUs ({worst} of {gpus_total}) account for {share}% of "
            f"{total_bad} bad GPU findings in the window"
            + (" (fleet/F8: quarantine or RMA them)" if share >= 50 else "")
        )


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
        for g in inventory(st.gpus):
            if g["vbios"]:
                hosts = vbios[g.get("name") or "(no name)"][g["vbios"]]
                if not hosts or hosts[-1] != host:
                    hosts.append(host)
    for model, versions in sorted(vbios.items()):
        if len(versions) > 1:
            out.append(_drift_entry("vbios", model, versions))
    # the rest of the golden image (fleet/F1): kernel, CUDA, Fabric Manager, BIOS, toolkit,
    # NIC firmware per adapter family
    image: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for host, st in nodes.items():
        for key, version in st.versions.items():
            image[key][version].append(host)
    for key, versions in sorted(image.items()):
        if len(versions) > 1:
            what, _, family = key.partition(":")
            scope = f"family {family}" if family else ""
            out.append(_drift_entry(IMAGE_NAMES.get(what, what), scope, versions))
    return out


IMAGE_NAMES = {
    "kernel": "kernel",
    "cuda": "CUDA",
    "bios": "BIOS",
    "fabric_manager": "Fabric Manager",
    "container_toolkit": "container toolkit",
    "nic_firmware": "NIC firmware",
}


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


def _pct(x: float) -> float:
    return round(100 * x, 1)


def _xid_spread(nodes: dict[str, NodeState], min_nodes: int) -> list[XidSpread]:
    """Each (code, driver) seen on at least ``min_nodes`` nodes, compared with the nodes
    that never ran that driver: the same code there at a similar rate points at the
    workload or the fleet, a much higher rate on one driver at the driver."""
    ran: Counter[str] = Counter()
    for st in nodes.values():
        ran.update(st.drivers or {"?"})
    affected: dict[tuple[int, str], list[set[str]]] = defaultdict(list)
    code_nodes: dict[int, set[str]] = defaultdict(set)  # code -> nodes, any driver
    for host, st in nodes.items():
        for (code, driver), gpus in st.xids.items():
            affected[(code, driver)].append(gpus)
            code_nodes[code].add(host)
    out: list[XidSpread] = []
    for (code, driver), gpu_sets in affected.items():
        a = len(gpu_sets)
        if a < min_nodes:
            continue
        n1 = max(ran[driver], a)
        others = [h for h, st in nodes.items() if driver not in (st.drivers or {"?"})]
        n2 = len(others)
        b = sum(1 for h in others if h in code_nodes[code])
        gpu_count = sum(len(g) or 1 for g in gpu_sets)
        item = XidSpread(
            code=code,
            driver=driver,
            nodes=a,
            nodes_on_driver=n1,
            gpus=gpu_count,
            other_nodes=n2,
            other_nodes_with=b,
            rate_pct=_pct(a / n1),
            rate_ci95_pct=tuple(_pct(x) for x in wilson(a, n1)),
            other_rate_pct=_pct(b / n2) if n2 else 0.0,
            other_rate_ci95_pct=tuple(_pct(x) for x in wilson(b, n2)),
            verdict="",
        )
        _judge(item, a, n1, b, n2)
        out.append(item)
    out.sort(key=lambda x: (-_rank(x.severity), -x.nodes, x.code, x.driver))
    return out


def _judge(x: XidSpread, a: int, n1: int, b: int, n2: int) -> None:
    rate, lo, hi = x.rate_pct, *x.rate_ci95_pct
    here = f"{a} of {n1} nodes on {x.driver} ({rate}%, 95% CI {lo}-{hi}%)"
    if n1 < MIN_GROUP_NODES or n2 < MIN_GROUP_NODES:
        x.verdict = "cannot tell a driver regression from a fleet-wide cause: too few nodes"
        short = (
            f"only {n1} nodes ran {x.driver}"
            if n1 < MIN_GROUP_NODES
            else f"only {n2} nodes ran other drivers"
        )
        x.confidence = f"{here}; {short}, and a comparison needs {MIN_GROUP_NODES} on each side"
        x.severity = "warning" if a / n1 >= 0.2 else "info"
        return
    p = fisher_greater(a, n1, b, n2)
    x.p_value = float(f"{p:.3g}")
    olo, ohi = x.other_rate_ci95_pct
    there = f"{b} of {n2} nodes on other drivers ({x.other_rate_pct}%, 95% CI {olo}-{ohi}%)"
    x.confidence = f"{here} vs {there}; one-sided Fisher exact p = {x.p_value:.3g}"
    share, other_share = a / n1, b / n2
    if p < REGRESSION_P and share >= 3 * other_share:
        x.verdict, x.severity = (
            "driver regression suspected: far more common on this driver",
            "critical",
        )
    elif share >= 0.2:
        x.verdict, x.severity = (
            "widespread on every driver: a fleet-wide or workload cause",
            "warning",
        )
    elif x.gpus <= a * 1.1:
        x.verdict, x.severity = "scattered single GPUs: treat per GPU", "info"
    else:
        x.verdict, x.severity = "watch", "info"


def _hot_spots(
    nodes: dict[str, NodeState], inv: Inventory, delta: float
) -> tuple[list[HotSpot], str]:
    """Racks and rows whose GPUs' mean temperature over the window is at least ``delta``
    above the rest of the fleet, with the 95% interval of the difference above zero."""
    temps: dict[tuple[str, str], list[float]] = defaultdict(list)
    everything: list[float] = []
    for host, st in nodes.items():
        rack, row = inv.places.get(host, (st.rack, st.row))
        for w in st.window.values():
            if not w.temp_n:
                continue
            t = w.temp_sum / w.temp_n
            everything.append(t)
            if rack:
                temps[("rack", rack)].append(t)
            if row:
                temps[("row", row)].append(t)
    if not everything:
        return [], "no GPU temperature in the history"
    fleet_mean, _ = variance(everything)
    total, total_sq, n_all = (
        math.fsum(everything),
        math.fsum(t * t for t in everything),
        len(everything),
    )
    out: list[HotSpot] = []
    small = 0
    for (level, name), ts in temps.items():
        n = len(ts)
        rest_n = n_all - n
        if n < MIN_GPUS_PER_PLACE or rest_n < MIN_GPUS_PER_PLACE:
            small += 1
            continue
        mean, var = variance(ts)
        rest_mean = (total - math.fsum(ts)) / rest_n
        rest_var = max(
            0.0, (total_sq - math.fsum(t * t for t in ts) - rest_n * rest_mean**2) / (rest_n - 1)
        )
        diff, lo, hi = welch_diff(n, mean, var, rest_n, rest_mean, rest_var)
        if diff >= delta and lo > 0:
            out.append(
                HotSpot(
                    level=level,
                    name=name,
                    mean_temp_c=round(mean, 1),
                    fleet_mean_c=round(fleet_mean, 1),
                    delta_c=round(diff, 1),
                    delta_ci95_c=(round(lo, 1), round(hi, 1)),
                    gpus=n,
                )
            )
    out.sort(key=lambda h: (-h.delta_c, h.level, h.name))
    statement = (
        f"a place is hot when its GPUs' mean temperature over the window is {delta:g} °C or "
        f"more above the rest of the fleet and the 95% interval of the difference excludes "
        f"zero; a place with fewer than {MIN_GPUS_PER_PLACE} GPUs, or with fewer than that outside "
        "it, is not compared" + (f" ({small} such)" if small else "") + f"; {CORRELATED}"
    )
    return out, statement


def _history_anomalies(nodes: dict[str, NodeState], top: int) -> tuple[list[GpuAnomaly], str]:
    """GPUs whose temperature in their node's latest run is far above their own earlier
    runs at the same load (fleet/F6): z of the latest reading against the mean and
    standard deviation of the others (running sums: no sample is kept), the deviation
    floored so that a very steady GPU is not flagged for a degree."""
    out: list[GpuAnomaly] = []
    judged = 0
    for host, st in nodes.items():
        for g in inventory(st.gpus):
            temp, util, w = g["temp"], g["util"], st.window.get(g["bus"])
            if temp is None or util is None or w is None:
                continue
            b = band_index(util)
            seen = {
                "node": host,
                "gpu": g["bus"],
                "serial": g["serial"],
                "band": BAND_NAMES[b],
                "temp_c": round(temp, 1),
            }
            if g["temp_z"] is not None:  # the node judged it: robust, and not fooled by
                judged += 1  # an anomaly that lasts (it widens a mean's deviation)
                if g["temp_z"] >= ANOMALY_Z:
                    z = round(g["temp_z"], 1)
                    out.append(GpuAnomaly(**seen, z=z, judged_by="node baseline"))
                continue
            n = w.band_n[b] - 1  # the latest run is in the sums: leave it out
            if n < ANOMALY_MIN_RUNS:
                continue
            judged += 1
            mean = (w.band_sum[b] - temp) / n
            var = max(0.0, (w.band_sq[b] - temp * temp - n * mean * mean) / (n - 1))
            sd = max(math.sqrt(var), ANOMALY_MIN_SD_C)
            z = (temp - mean) / sd
            if z >= ANOMALY_Z and temp - mean >= ANOMALY_RISE_C:
                out.append(
                    GpuAnomaly(
                        **seen,
                        history_mean_c=round(mean, 1),
                        history_sd_c=round(sd, 2),
                        z=round(z, 1),
                        runs=n,
                    )
                )
    out.sort(key=lambda a: (-a.z, a.node, a.gpu))
    statement = (
        f"a GPU is listed when its node's latest run judged its temperature {ANOMALY_Z:g} "
        "robust deviations or more above its own median at the same load (node baseline: "
        "the run record's temp_z); for records without it, "
        f"when its temperature in its node's latest run is {ANOMALY_Z:g} "
        f"standard deviations or more and {ANOMALY_RISE_C:g} °C or more above the mean of its "
        f"own earlier runs at the same load (GPU utilisation: idle below "
        f"{BAND_BOUNDS[0]:g} %, light below {BAND_BOUNDS[1]:g} %, busy), the deviation "
        f"taken as {ANOMALY_MIN_SD_C:g} °C at least; a GPU with fewer than "
        f"{ANOMALY_MIN_RUNS} earlier runs at that load is not judged ({judged:,} judged); "
        "an earlier anomaly widens the deviation, so this errs on the quiet side"
    )
    return out[:top], statement


def _utilisation(
    nodes: dict[str, NodeState], target: float, min_samples: int, top: int, rep: FleetReport
) -> Utilisation | None:
    gpu_rows: list[UtilRank] = []
    node_rows: list[UtilRank] = []
    too_few = 0
    for host, st in nodes.items():
        n = at = 0
        s = sq = 0.0
        for bus, w in st.window.items():
            if not w.util_n:
                continue
            n, s, sq, at = n + w.util_n, s + w.util_sum, sq + w.util_sq, at + w.util_at_target
            if w.util_n < min_samples:
                too_few += 1
                continue
            mean, half = mean_ci(w.util_n, w.util_sum, w.util_sq)
            gpu_rows.append(
                UtilRank(
                    node=host,
                    gpu=bus,
                    serial=w.serial,
                    mean_pct=round(mean, 1),
                    ci95_pct=round(half, 1),
                    at_target_pct=round(100 * w.util_at_target / w.util_n, 1),
                    samples=w.util_n,
                )
            )
        if n >= min_samples:
            mean, half = mean_ci(n, s, sq)
            node_rows.append(
                UtilRank(
                    node=host,
                    mean_pct=round(mean, 1),
                    ci95_pct=round(half, 1),
                    at_target_pct=round(100 * at / n, 1),
                    samples=n,
                )
            )
    if not gpu_rows and not too_few:
        return None
    gpu_rows.sort(key=lambda r: (r.mean_pct, r.node, r.gpu))
    node_rows.sort(key=lambda r: (r.mean_pct, r.node))
    return Utilisation(
        target_pct=target,
        min_samples=min_samples,
        window_start=rep.window_start,
        window_end=rep.window_end,
        gpus_ranked=len(gpu_rows),
        gpus_too_few_samples=too_few,
        gpus_meeting_target=sum(1 for r in gpu_rows if r.mean_pct >= target),
        nodes_ranked=len(node_rows),
        nodes_meeting_target=sum(1 for r in node_rows if r.mean_pct >= target),
        fleet_mean_pct=round(statistics.fmean(r.mean_pct for r in gpu_rows), 1)
        if gpu_rows
        else None,
        lowest_gpus=gpu_rows[:top],
        lowest_nodes=node_rows[:top],
        confidence=(
            f"one sample per GPU per run (NVML's utilisation over its last sample period); "
            f"GPUs with fewer than {min_samples} samples are not ranked; ± is the 95% "
            f"interval of the mean; {CORRELATED}"
        ),
    )


def _section_severity(rep: FleetReport) -> dict[str, str]:
    def worst(sevs: list[str]) -> str:
        out = ""
        for s in sevs:
            out = s if not out else worse(out, s)
        return out

    return {
        "top_findings": worst([t.severity for t in rep.top_findings if t.nodes_now]),
        "repeat_offenders": worst([o.severity for o in rep.repeat_gpus + rep.repeat_nodes]),
        "xid_spread": worst([x.severity for x in rep.xid_spread]),
        "drift": "warning" if rep.drift else "",
        "hot_spots": "warning" if rep.hot_spots else "",
        "history_anomalies": "warning" if rep.history_anomalies else "",
        "utilisation": "info" if rep.utilisation else "",
    }


# --------------------------------------------------------------------------- output


def _n(count: int, word: str, plural: str | None = None) -> str:
    return f"{count:,} {word if count == 1 else plural or word + 's'}"


def _header(rep: FleetReport) -> list[str]:
    m = md_text
    gpus = _n(rep.gpus, "GPU")
    if rep.nodes_without_inventory:
        gpus += (
            f" (plus {_n(rep.nodes_without_inventory, 'node')} known only from findings "
            "documents, which list no GPUs)"
        )
    lines = [
        "# gpu-triage fleet report",
        "",
        f"{_n(rep.nodes, 'node')}, {gpus}, {_n(rep.runs, 'run')} read from "
        f"{_n(rep.files, 'file')}.",
    ]
    if rep.window_start:
        lines.append(f"Window: {m(rep.window_start)} to {m(rep.window_end)}.")
    if rep.since:
        lines.append(f"Runs before {m(rep.since)} left out (--since): {rep.runs_before_since:,}.")
    lines.append("")
    if rep.error_count:
        lines += [f"{_n(rep.error_count, 'unreadable input')} skipped:", ""]
        lines += [f"- {m(e)}" for e in rep.errors[:10]]
        if rep.error_count > 10:
            lines.append(
                f"- ... {rep.error_count - 10:,} more (JSON lists the first {len(rep.errors)})"
            )
        lines.append("")
    return lines


def _sec_top(rep: FleetReport) -> list[str]:
    m = md_text
    lines = ["## Top findings", "", "Worst severity first, then nodes where it fires now.", ""]
    if not rep.top_findings:
        return [*lines, "No finding in any run."]
    lines += ["| rule | severity | nodes now | runs |", "|---|---|---|---|"]
    lines += [
        f"| {md_code(t.rule, in_table=True)} | {m(t.severity)} | {t.nodes_now} | {t.runs} |"
        for t in rep.top_findings
    ]
    return lines


def _sec_offenders(rep: FleetReport) -> list[str]:
    m = md_text
    lines = [
        "## Repeat offenders",
        "",
        m(rep.top1pct_statement[:1].upper() + rep.top1pct_statement[1:]) + ".",
        "",
    ]
    if not rep.repeat_gpus:
        return [*lines, "No GPU had a warning or critical finding in more than one run."]
    lines += [
        "| node | GPU | serial | severity | bad runs | share | rules |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {m(o.node)} | {m(o.gpu)} | {m(o.serial)} | {m(o.severity)} | {o.bad_runs} | "
        f"{o.share_pct}% | {m(', '.join(o.rules))} |"
        for o in rep.repeat_gpus
    ]
    if rep.repeat_nodes:
        lines += ["", "| node | severity | bad runs | share | rules |", "|---|---|---|---|---|"]
        lines += [
            f"| {m(o.node)} | {m(o.severity)} | {o.bad_runs} | {o.share_pct}% | "
            f"{m(', '.join(o.rules))} |"
            for o in rep.repeat_nodes
        ]
    return lines


def _sec_drift(rep: FleetReport) -> list[str]:
    m = md_text
    lines = ["## Version drift", ""]
    if not rep.drift:
        return [
            *lines,
            "No drift: every node runs the same driver, VBIOS per GPU model, and the same "
            "kernel, CUDA, Fabric Manager, BIOS, container toolkit and NIC firmware where "
            "recorded.",
        ]
    for d in rep.drift:
        scope = f" ({m(d.scope)})" if d.scope else ""
        lines.append(
            f"- **{m(d.what)}{scope}**: majority {m(d.majority)} on "
            f"{_n(d.majority_nodes, 'node')}; "
            + "; ".join(
                f"{m(v)} on {m(', '.join(h[:5]))}{' ...' if len(h) > 5 else ''}"
                for v, h in d.outliers.items()
            )
        )
    return lines


def _sec_xid(rep: FleetReport) -> list[str]:
    m = md_text
    lines = ["## The same Xid on many nodes", ""]
    if not rep.xid_spread:
        return [*lines, "No Xid code appears on several nodes."]
    for x in rep.xid_spread:
        lines.append(
            f"- Xid {x.code} on {x.nodes} of {_n(x.nodes_on_driver, 'node')} running driver "
            f"{m(x.driver)} ({_n(x.gpus, 'GPU')}): **{m(x.verdict)}**. {m(x.confidence)}."
        )
    return lines


def _sec_hot(rep: FleetReport) -> list[str]:
    m = md_text
    lines = ["## Hot racks and rows", ""]
    if not rep.hot_spots:
        lines.append("No rack or row runs hotter than the rest of the fleet.")
    for h in rep.hot_spots:
        lo, hi = h.delta_ci95_c
        lines.append(
            f"- {m(h.level)} {m(h.name)}: {h.mean_temp_c} °C mean over {_n(h.gpus, 'GPU')}, "
            f"+{h.delta_c} °C above the rest (95% CI {lo} to {hi} °C; fleet {h.fleet_mean_c} °C)"
        )
    if rep.hot_statement:
        lines += ["", m(rep.hot_statement[:1].upper() + rep.hot_statement[1:]) + "."]
    return lines


def _sec_anomalies(rep: FleetReport) -> list[str]:
    m = md_text
    lines = ["## GPUs far from their own history", ""]
    if not rep.history_anomalies:
        lines.append("No GPU runs far hotter than its own history at the same load.")
    for a in rep.history_anomalies:
        serial = f" (serial {m(a.serial)})" if a.serial else ""
        against = (
            f"against {a.history_mean_c} ± {a.history_sd_c} °C over its "
            f"{_n(a.runs, 'earlier run')} at that load (z {a.z})"
            if a.judged_by == "fleet window"
            else f"{a.z} robust deviations above its own median at that load (node baseline)"
        )
        lines.append(
            f"- {m(a.node)} GPU {m(a.gpu)}{serial}: {a.temp_c} °C while {a.band}, {against}"
        )
    if rep.anomaly_statement:
        lines += ["", m(rep.anomaly_statement[:1].upper() + rep.anomaly_statement[1:]) + "."]
    return lines


def _sec_util(rep: FleetReport) -> list[str]:
    m = md_text
    u = rep.utilisation
    lines = ["## Utilisation against the target (fleet/F9)", ""]
    if u is None:
        return [*lines, "No GPU utilisation in the history (records written before it was kept)."]
    lines.append(
        f"Target {u.target_pct:g}% busy. {u.gpus_meeting_target} of "
        f"{_n(u.gpus_ranked, 'ranked GPU')} and {u.nodes_meeting_target} of "
        f"{_n(u.nodes_ranked, 'ranked node')} meet it"
        + (f"; the ranked GPUs average {u.fleet_mean_pct}%" if u.fleet_mean_pct is not None else "")
        + (
            f"; {_n(u.gpus_too_few_samples, 'GPU')} with fewer than {u.min_samples} samples "
            "not ranked"
            if u.gpus_too_few_samples
            else ""
        )
        + "."
    )
    lines += ["", m(u.confidence[:1].upper() + u.confidence[1:]) + ".", ""]
    if u.lowest_nodes:
        lines += [
            "Least used nodes:",
            "",
            "| node | mean busy | at target | samples |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| {m(r.node)} | {r.mean_pct}% ± {r.ci95_pct} | {r.at_target_pct}% | {r.samples} |"
            for r in u.lowest_nodes
        ]
        lines.append("")
    if u.lowest_gpus:
        lines += [
            "Least used GPUs:",
            "",
            "| node | GPU | serial | mean busy | at target | samples |",
            "|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {m(r.node)} | {m(r.gpu)} | {m(r.serial)} | {r.mean_pct}% ± {r.ci95_pct} | "
            f"{r.at_target_pct}% | {r.samples} |"
            for r in u.lowest_gpus
        ]
    return lines


_SECTIONS = (
    ("top_findings", _sec_top),
    ("xid_spread", _sec_xid),
    ("repeat_offenders", _sec_offenders),
    ("hot_spots", _sec_hot),
    ("history_anomalies", _sec_anomalies),
    ("drift", _sec_drift),
    ("utilisation", _sec_util),
)


def fleet_markdown(rep: FleetReport) -> str:
    """The report for people, sections worst first (a section with nothing to report
    last); every value read from a node's files is escaped (md_text)."""

    def order(item: tuple[int, tuple[str, object]]) -> tuple[int, int]:
        pos, (key, _) = item
        sev = rep.section_severity.get(key, "")
        return (-(_rank(sev) + 1) if sev else 1, pos)

    lines = _header(rep)
    for _, (_, render) in sorted(enumerate(_SECTIONS), key=order):
        lines += [*render(rep), ""]
    return "\n".join(lines).rstrip("\n") + "\n"
