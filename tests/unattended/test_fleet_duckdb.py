"""The benchmark's DuckDB baseline computes the same report as the fleet reader (so the
side-by-side figure compares the same work). Runs where the ``bench`` extra is installed."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from gpu_triage.io import jsonio
from gpu_triage.ops.fleet import FleetRead, analyse, read_fleet
from tests.conftest import ROOT
from tests.unattended.fleet_records import finding, gpu, record, write

pytest.importorskip("duckdb")


def _baseline() -> object:
    spec = importlib.util.spec_from_file_location(
        "fleet_duckdb", ROOT / "benchmarks/fleet_duckdb.py"
    )
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["fleet_duckdb"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_duckdb_baseline_gives_the_same_report(tmp_path: Path) -> None:
    d = tmp_path / "h"
    d.mkdir()
    for n in range(12):
        driver = "575.51.03" if n < 6 else "570.86.15"
        recs = []
        for h in range(30):
            fs = []
            if n < 6 and h % 5 == 0:
                fs.append(finding("xid-109", "warning", xid=109))
            if n == 7:
                fs += [finding("ecc", "critical", "0000:28:00.0"), finding("ecc", "info")]
            gpus = [gpu(i, util=float((n * 17 + h * 3 + i) % 101), host=f"n{n}") for i in range(3)]
            if n == 9:
                gpus.append({"bus": None, "temp": 70.0, "util": 5.0})  # a GPU without a bus id
            recs.append(
                record(
                    f"n{n}", h, findings=fs, gpus=gpus, driver=driver, xids=[13] if h == 3 else []
                )
            )
        write(d / f"n{n}.jsonl", recs)
    ours = analyse(read_fleet([d], workers=2))
    mod = _baseline()
    nodes = mod.aggregate(sorted(d.glob("*.jsonl")), 85.0)  # type: ignore[attr-defined]
    theirs = analyse(FleetRead(nodes, sum(s.runs for s in nodes.values()), [], 0, 12))
    assert jsonio.dump_model(ours) == jsonio.dump_model(theirs)
    assert ours.xid_spread and ours.utilisation and ours.repeat_gpus


def test_duckdb_baseline_gives_the_same_history_anomalies(tmp_path: Path) -> None:
    from tests.unattended.test_fleet_anomalies import _history

    d = _history(tmp_path / "h", last={(2, 1): (0.0, 60.0), (0, 3): (0.0, 58.0)})
    ours = analyse(read_fleet([d], workers=2))
    mod = _baseline()
    nodes = mod.aggregate(sorted(d.glob("*.jsonl")), 85.0)  # type: ignore[attr-defined]
    theirs = analyse(FleetRead(nodes, sum(s.runs for s in nodes.values()), [], 0, 4))
    assert len(ours.history_anomalies) == 2
    assert jsonio.dump_model(ours) == jsonio.dump_model(theirs)
