"""Fleet statistics: minimum samples, confidence statements, severity order, counting."""

from __future__ import annotations

from pathlib import Path

from gpu_triage.ops.fleet import MIN_GROUP_NODES, analyse, fleet_markdown, read_fleet
from tests.unattended.fleet_records import finding, gpu, record, write


def _fleet(tmp_path: Path, groups: list[tuple[str, int, int]], code: int = 79) -> Path:
    """groups: (driver, nodes, of which logged Xid ``code``), two runs per node."""
    d = tmp_path / "h"
    d.mkdir()
    k = 0
    for driver, count, with_xid in groups:
        for i in range(count):
            host = f"{driver}-{i:04d}"
            fs = [finding(f"xid-{code}", "critical", xid=code)] if i < with_xid else []
            runs = [record(host, 0, driver=driver), record(host, 1, driver=driver, findings=fs)]
            write(d / f"{k:05d}.jsonl", runs)
            k += 1
    return d


def _spread(tmp_path: Path, groups: list[tuple[str, int, int]]) -> dict[str, object]:
    rep = analyse(read_fleet([_fleet(tmp_path, groups)], workers=1))
    return {x.driver: x for x in rep.xid_spread}


def test_majority_driver_is_not_blamed_beside_three_other_nodes(tmp_path: Path) -> None:
    # the case: 1,000 nodes on one driver, a quarter logged Xid 79; 3 on another
    spread = _spread(tmp_path, [("570.86.15", 1000, 250), ("575.51.03", 3, 0)])
    x = spread["570.86.15"]
    assert not x.verdict.startswith("driver regression")  # type: ignore[attr-defined]
    assert "too few nodes" in x.verdict and "only 3 nodes ran other drivers" in x.confidence  # type: ignore[attr-defined]
    assert x.p_value is None  # type: ignore[attr-defined]


def test_no_regression_when_the_other_group_is_big_enough_but_not_different(
    tmp_path: Path,
) -> None:
    # ten other nodes with no Xid 79 are what a 25% rate produces often (p ~ 0.06)
    spread = _spread(tmp_path, [("570.86.15", 400, 100), ("575.51.03", 10, 0)])
    x = spread["570.86.15"]
    assert x.p_value is not None and x.p_value > 0.01  # type: ignore[attr-defined]
    assert x.verdict.startswith("widespread on every driver")  # type: ignore[attr-defined]
    assert "Fisher" in x.confidence and "95% CI" in x.confidence  # type: ignore[attr-defined]


def test_a_real_regression_on_a_small_canary(tmp_path: Path) -> None:
    spread = _spread(tmp_path, [("570.86.15", 300, 3), ("575.51.03", MIN_GROUP_NODES, 4)])
    x = spread["575.51.03"]
    assert x.verdict.startswith("driver regression suspected")  # type: ignore[attr-defined]
    assert x.p_value < 1e-4 and x.severity == "critical"  # type: ignore[attr-defined]
    assert x.rate_pct == 80.0 and x.other_rate_pct == 1.0  # type: ignore[attr-defined]


def test_canary_below_the_minimum_is_not_judged(tmp_path: Path) -> None:
    spread = _spread(tmp_path, [("570.86.15", 300, 0), ("575.51.03", 4, 4)])
    x = spread["575.51.03"]
    assert "too few nodes" in x.verdict and "only 4 nodes ran 575.51.03" in x.confidence  # type: ignore[attr-defined]


def test_statements_need_their_minimum_sample(tmp_path: Path) -> None:
    d = tmp_path / "h"
    d.mkdir()
    fs = [finding("xid-79", "critical", xid=79)]
    write(d / "a.jsonl", [record("a", h, findings=fs) for h in range(3)])
    rep = analyse(read_fleet([d], workers=1))
    assert rep.top1pct_share_pct is None and "too few GPUs (2" in rep.top1pct_statement
    u = rep.utilisation
    assert u is not None and u.gpus_ranked == 0 and u.gpus_too_few_samples == 2
    assert (
        rep.hot_spots == []
        and "fewer than 8 GPUs, or with fewer than that outside it, is not compared"
        in rep.hot_statement
    )
    text = fleet_markdown(rep)
    assert "1 node, 2 GPUs, 3 runs read from 1 file." in text
    assert "2 GPUs with fewer than 24 samples not ranked" in text


def test_utilisation_ranks_lowest_first_with_intervals(tmp_path: Path) -> None:
    d = tmp_path / "h"
    d.mkdir()
    for host, level in (("busy", 95.0), ("half", 50.0), ("idle", 2.0)):
        recs = [
            record(host, h, gpus=[gpu(i, util=level + (h % 3) - 1, host=host) for i in range(4)])
            for h in range(48)
        ]
        write(d / f"{host}.jsonl", recs)
    u = analyse(read_fleet([d], workers=1), top=5).utilisation
    assert u is not None
    assert [r.node for r in u.lowest_nodes] == ["idle", "half", "busy"]
    assert u.nodes_meeting_target == 1 and u.gpus_meeting_target == 4 and u.gpus_ranked == 12
    busy = u.lowest_nodes[-1]
    assert busy.mean_pct == 95.0 and busy.at_target_pct == 100.0 and 0 < busy.ci95_pct < 0.5
    assert len(u.lowest_gpus) == 5 and u.lowest_gpus[0].node == "idle"


def test_hostile_node_strings_stay_text(tmp_path: Path) -> None:
    d = tmp_path / "h"
    d.mkdir()
    host = "evil|host\n# heading <script>"
    bad = [finding("xid-79", "critical", xid=79)]
    recs = [record(host, h, findings=bad, gpus=[gpu(0, host="x|y")]) for h in range(30)]
    write(d / "evil.jsonl", recs)
    text = fleet_markdown(analyse(read_fleet([d], workers=1)))
    assert "\n# heading" not in text and "<script>" not in text
    assert "| evil\\|host\\\\n# heading \\<script\\> |" in text  # one table cell


def test_sections_worst_first(tmp_path: Path) -> None:
    d = tmp_path / "h"
    d.mkdir()
    write(d / "a.jsonl", [record("a", h) for h in range(30)])
    rep = analyse(read_fleet([d], workers=1))
    heads = [ln for ln in fleet_markdown(rep).splitlines() if ln.startswith("## ")]
    assert rep.section_severity["utilisation"] == "info"
    assert (
        heads[0] == "## Utilisation against the target (fleet/F9)"
    )  # the only section with content


def test_since_leaves_earlier_runs_out(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from gpu_triage.cli.fleet import parse_since

    now = datetime(2026, 11, 3, 12, tzinfo=UTC)
    assert parse_since("36h", now) == "2026-11-02T00:00:00+00:00"
    assert parse_since("2d", now) == "2026-11-01T12:00:00+00:00"
    assert parse_since("2026-11-02T05:30:00+05:30") == "2026-11-02T00:00:00+00:00"
    assert parse_since("2026-11-02") == "2026-11-02T00:00:00+00:00"  # UTC when it says none
    d = tmp_path / "h"
    d.mkdir()
    bad = [finding("xid-79", "critical", xid=79)]
    old = [record("a", h, findings=bad, gpus=[gpu(0, util=1.0)]) for h in range(24)]
    new = [record("a", 24 + h, gpus=[gpu(0, util=99.0)]) for h in range(24)]
    write(d / "a.jsonl", old + new)
    rep = analyse(read_fleet([d], workers=1, since=parse_since("2026-11-02T00:00:00Z")))
    assert rep.runs == 24 and rep.runs_before_since == 24
    assert rep.window_start == "2026-11-02T00:00:00+00:00" and not rep.top_findings
    u = rep.utilisation
    assert u is not None and u.lowest_gpus[0].mean_pct == 99.0
    assert "Runs before 2026-11-02T00:00:00+00:00 left out (--since): 24." in fleet_markdown(rep)


def test_cli_refuses_a_bad_since(tmp_path: Path) -> None:
    import subprocess
    import sys

    write(tmp_path / "a.jsonl", [record("a", 0)])
    r = subprocess.run(
        [sys.executable, "-m", "gpu_triage", "fleet", str(tmp_path), "--since", "last week"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 64 and "--since: 'last week' is neither" in r.stderr
    empty = tmp_path / "empty.jsonl"
    empty.write_text("garbage\n")
    r = subprocess.run(
        [sys.executable, "-m", "gpu_triage", "fleet", str(empty), "--format", "json"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 3 and "no run record could be read" in r.stderr  # never "healthy"
