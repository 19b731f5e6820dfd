"""fleet/F6 in `gpu-triage fleet`: GPUs whose latest temperature is far from their own
history at the same load, from run records as the exporter writes them."""

from __future__ import annotations

import random
from pathlib import Path

from gpu_triage.ops import baseline
from gpu_triage.ops.fleet import ANOMALY_MIN_RUNS, analyse, fleet_markdown, read_fleet
from gpu_triage.ops.load_bands import BAND_BOUNDS, band_index
from tests.unattended.fleet_records import gpu, record, write


def _history(
    d: Path, *, nodes: int = 4, runs: int = 50, last: dict[tuple[int, int], tuple[float, float]]
) -> Path:
    """``nodes`` nodes of 4 GPUs, ``runs`` hourly runs, load alternating busy / idle,
    temperatures noisy around 64 °C busy and 34 °C idle; ``last`` sets (node, GPU) ->
    (util, temp) in the latest run."""
    rng = random.Random(4)
    d.mkdir()
    for n in range(nodes):
        host = f"n{n}"
        recs = []
        for h in range(runs):
            busy = h % 2 == 0
            gpus = [
                gpu(
                    i,
                    host=host,
                    util=97.0 if busy else 0.0,
                    temp=round((64.0 if busy else 34.0) + i + rng.gauss(0, 1.5), 1),
                )
                for i in range(4)
            ]
            if h == runs - 1:
                for (node, i), (util, temp) in last.items():
                    if node == n:
                        gpus[i] = gpu(i, host=host, util=util, temp=temp)
            recs.append(record(host, h, gpus=gpus))
        write(d / f"{host}.jsonl", recs)
    return d


def test_a_gpu_far_above_its_own_history_is_listed(tmp_path: Path) -> None:
    # the latest run (h=49) is idle: n2's GPU 1 idles at 60 °C, hot for idle although
    # cooler than every GPU's busy temperature
    d = _history(tmp_path / "h", last={(2, 1): (0.0, 60.0)})
    rep = analyse(read_fleet([d], workers=1))
    assert [(a.node, a.gpu, a.band) for a in rep.history_anomalies] == [
        ("n2", "0000:28:00.0", "idle"),
    ]
    a = rep.history_anomalies[0]
    assert a.runs == 24  # the idle runs before the latest
    assert 33 <= a.history_mean_c <= 37 and a.z >= 6
    assert rep.section_severity["history_anomalies"] == "warning"
    text = fleet_markdown(rep)
    assert "## GPUs far from their own history" in text
    assert "n2 GPU 0000:28:00.0 (serial SER-n2-1): 60.0 °C while idle" in text


def test_busy_heat_is_judged_against_busy_runs(tmp_path: Path) -> None:
    # 66 °C is the busy norm of GPU 2: in a busy latest run it is nothing
    d = _history(tmp_path / "h", runs=51, last={(1, 2): (97.0, 66.0)})
    rep = analyse(read_fleet([d], workers=1))
    assert rep.history_anomalies == []
    assert "No GPU runs far hotter" in fleet_markdown(rep)


def test_too_short_a_history_is_not_judged(tmp_path: Path) -> None:
    runs = 2 * ANOMALY_MIN_RUNS - 2  # fewer than the minimum in the idle band
    d = _history(tmp_path / "h", runs=runs, last={(0, 0): (0.0, 90.0)})
    rep = analyse(read_fleet([d], workers=1))
    assert rep.history_anomalies == [] and "(0 judged)" in rep.anomaly_statement


def test_bands_are_the_node_baseline_bands() -> None:
    assert tuple(bound for _, bound in baseline.BANDS[:2]) == BAND_BOUNDS
    for util in (0.0, 9.99, 10.0, 45.0, 69.9, 70.0, 100.0):
        name = baseline.band_of(util)
        assert ("idle", "light", "busy")[band_index(util)] == name


def test_the_nodes_own_robust_z_is_used_when_its_records_carry_it(tmp_path: Path) -> None:
    """An anomaly that lasts widens the window's deviation (three hot runs in a row hide
    the third from a mean and SD); the node's median/MAD z in its records does not."""
    d = tmp_path / "h"
    d.mkdir()
    recs = []
    for h in range(30):
        hot = h >= 27
        g0 = gpu(0, host="n0", util=97.0, temp=84.0 if hot else 64.0)
        if h >= 20:  # the node's baseline judges from its 21st run on
            g0["temp_z"] = 14.8 if hot else 0.3
        recs.append(record("n0", h, gpus=[g0, gpu(1, host="n0", util=97.0, temp=64.0)]))
    write(d / "n0.jsonl", recs)
    rep = analyse(read_fleet([d], workers=1))
    assert [(a.gpu, a.judged_by, a.z) for a in rep.history_anomalies] == [
        ("0000:18:00.0", "node baseline", 14.8),
    ]
    assert "14.8 robust deviations above its own median" in fleet_markdown(rep)


def test_run_records_carry_the_node_baseline_z() -> None:
    from gpu_triage.engine.compiler import load_rulebook
    from gpu_triage.engine.evaluate import evaluate
    from gpu_triage.engine.inputs import EvalInput
    from gpu_triage.model.facts import Facts, GpuFacts
    from gpu_triage.ops.exporters import run_record

    facts = Facts(
        gpus=[
            GpuFacts(index=0, pci_bus_id="0000:18:00.0", temperature_gpu_c=84, temp_robust_z=14.8),
            GpuFacts(index=1, pci_bus_id="0000:28:00.0", temperature_gpu_c=64),
        ]
    )
    doc = evaluate(EvalInput(facts), load_rulebook(), engine="reference")
    gpus = run_record(doc, facts)["gpus"]
    assert gpus[0]["temp_z"] == 14.8 and "temp_z" not in gpus[1]
