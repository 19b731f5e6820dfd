from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_triage.engine.compiler import load_rulebook
from gpu_triage.engine.durable_backend import DurableBackend
from gpu_triage.engine.evaluate import evaluate
from gpu_triage.engine.findings import FindingsDocument, Status
from gpu_triage.engine.inputs import EvalInput
from gpu_triage.model.facts import Facts, GpuFacts, HostFacts
from gpu_triage.model.snapshot import load_snapshot
from tests.conftest import SNAPSHOTS

ROOT = Path(__file__).resolve().parents[2]

ENGINES = ["reference", "durable"]


@pytest.mark.parametrize("engine", ENGINES)
def test_input_bound_snapshot(builtin_book, engine: str) -> None:
    doc = evaluate(load_snapshot(SNAPSHOTS / "input-bound.json"), builtin_book, engine=engine)
    assert doc.engine.name == engine
    top = doc.findings[0]
    assert top.rule_id == "input-bound-pipeline"
    # one node-level cause, one finding naming the eight GPUs it starves
    assert [f.rule_id for f in doc.findings].count(top.rule_id) == 1
    assert top.occurrences == 8 and len(top.also_seen_on) == 7
    assert top.subject_key == "gpu:0000:18:00.0"
    ev = {e.path: e for e in top.evidence}
    assert ev["host.cpu_iowait_pct"].value == 38.0 and ev["host.cpu_iowait_pct"].unit == "%"
    assert ev["gpu.utilization_gpu_pct"].source == "nvml"
    assert doc.conclusions["input_bound"] is True
    assert doc.exit_code == 1


@pytest.mark.parametrize("engine", ENGINES)
def test_healthy_node_has_nothing_above_info(builtin_book, engine: str) -> None:
    doc = evaluate(load_snapshot(SNAPSHOTS / "healthy-busy.json"), builtin_book, engine=engine)
    assert [(f.rule_id, f.severity.value, f.occurrences) for f in doc.findings] == [
        ("gpu-compute-bound", "info", 8)
    ]
    assert not doc.cannot_evaluate and doc.exit_code == 0


@pytest.mark.parametrize("engine", ENGINES)
def test_unavailable_gpu_collector_is_not_healthy(builtin_book, engine: str) -> None:
    doc = evaluate(load_snapshot(SNAPSHOTS / "no-gpu-collector.json"), builtin_book, engine=engine)
    assert not doc.findings
    # NVML reads the GPUs and their NVLinks: every rule over either is in question.
    gpu_rules = {r.id for r in builtin_book.rules if {"gpu", "nvlink"} & set(r.iter_kinds)}
    # Every GPU rule is "cannot evaluate" except those the healthy host facts decide on
    # their own (false and anything is false) and those that only apply when the site
    # inventory says so (none is supplied here). A rule that also waits on an answer is
    # still "cannot evaluate": the answer alone would not settle it without GPU facts.
    decided_by_host = {
        "input-bound-pipeline",
        "cpu-preprocessing-bottleneck",
        "gpu-repeat-offender",
        "small-file-storm",  # no disk reads many small requests
        "input-decompression-bound",  # the host CPUs are not busy
    }
    site_gated = {
        r.id
        for r in builtin_book.rules
        if "gpu" in r.iter_kinds and "available(site." in r.rule.when and not r.rule.questions
    }
    # Asked only of an inference node (latency figures or the inventory's role): none here.
    site_gated |= {"gpu-shares-pcie-switch-with-nic"}
    # Rules about an event joined to its GPU (an Xid 154 and the GPU's NVML recovery
    # action) have no subject when the kernel log holds no such event.
    about_events = {r.id for r in builtin_book.rules if r.join_gpu}
    # Rules about a network-filesystem mount have no subject on a node without one.
    about_mounts = {r.id for r in builtin_book.rules if "mount" in r.iter_kinds}
    # Rules about growth between runs stay quiet until a previous run exists.
    about_growth = {r.id for r in builtin_book.rules if "_delta)" in r.rule.when}
    # Rules about a feature only some GPUs report (the NVSwitch fabric) judge it where read.
    where_reported = {
        r.id for r in builtin_book.rules if r.rule.when.lstrip().startswith("available(gpu.")
    }
    assert not gpu_rules & {f.rule_id for f in doc.needs_confirmation}
    # The snapshot predates the fabric collector: the Fabric Manager rules that need its
    # unit state cannot be judged either (those that need a version or a log line to fire
    # stay quiet without one).
    fabric_rules = {"fabric-manager-not-running", "fabric-manager-not-installed"}
    assert {f.rule_id for f in doc.cannot_evaluate} == (
        gpu_rules
        - decided_by_host
        - site_gated
        - about_events
        - about_growth
        - where_reported
        - about_mounts
    ) | fabric_rules
    asking = next(f for f in doc.cannot_evaluate if f.rule_id == "gpu-memory-exhaustion-risk")
    assert asking.questions  # the question is still shown
    f = next(f for f in doc.cannot_evaluate if f.rule_id == "gpu-thermal-throttling")
    assert f.status is Status.CANNOT_EVALUATE and f.subject == "gpu (unavailable)"
    miss = {m.path: m for m in f.missing}
    assert miss["gpu.throttle_hw_thermal_slowdown"].reason == "not_collected"
    assert "NVML library not found" in miss["gpu.throttle_hw_thermal_slowdown"].detail
    # NVML unavailable while sysfs shows NVIDIA GPUs: never healthy, unknown
    assert doc.exit_code == 3 and doc.summary.cannot_evaluate == len(doc.cannot_evaluate)
    assert "GPU facts unavailable" in doc.verdict and "8 NVIDIA PCI device(s)" in doc.verdict


@pytest.mark.parametrize("engine", ENGINES)
def test_ranking_is_severity_then_stage_then_rule_order(builtin_book, engine: str) -> None:
    doc = evaluate(
        load_snapshot(ROOT / "gpu_triage/data/demo-incident.json"), builtin_book, engine=engine
    )
    keys = [(f.severity.rank, f.stage.rank) for f in doc.findings]
    assert keys == sorted(keys)
    assert doc.findings[0].rule_id == "xid-79-fallen-off-bus"
    order = [f.rule_id for f in doc.findings if f.severity.value == "warning"]
    # the guide checks PCIe width in FD3, before the scheduler's FD4
    assert order == ["gpu-thermal-throttling", "pcie-link-downgraded", "gpu-shared-by-processes"]
    # a value NVML could not read is evidence of its own, with its reason
    unknown = next(f for f in doc.cannot_evaluate if f.rule_id == "gpu-compute-bound")
    assert unknown.missing[0].reason == "not_supported"


def test_two_evaluations_are_independent(builtin_book) -> None:
    hot = Facts(
        gpus=[
            GpuFacts(
                index=0,
                pci_bus_id="0000:01:00.0",
                throttle_hw_thermal_slowdown=True,
                throttle_sw_thermal_slowdown=False,
                throttle_gpu_idle=False,
            )
        ]
    )
    cool = Facts(
        gpus=[
            GpuFacts(
                index=0,
                pci_bus_id="0000:01:00.0",
                throttle_hw_thermal_slowdown=False,
                throttle_sw_thermal_slowdown=False,
                throttle_gpu_idle=False,
                throttle_hw_power_brake_slowdown=False,
            )
        ],
        host=HostFacts(cpu_iowait_pct=1.0),
    )
    for engine in ENGINES:
        a = evaluate(EvalInput(hot), builtin_book, engine=engine)
        b = evaluate(EvalInput(cool), builtin_book, engine=engine)
        a2 = evaluate(EvalInput(hot), builtin_book, engine=engine)
        assert "gpu-thermal-throttling" in {f.rule_id for f in a.findings}
        assert "gpu-thermal-throttling" not in {f.rule_id for f in b.findings}
        assert a.conclusions["throttled"] is True and b.conclusions["throttled"] is False
        strip = lambda d: [f.model_dump() for f in d.findings]  # noqa: E731
        assert strip(a) == strip(a2)


def test_durable_crash_falls_back_to_reference(builtin_book) -> None:
    crashing = [sys.executable, str(Path(__file__).with_name("crashing_worker.py"))]
    backends: list[DurableBackend] = []

    def factory(book):
        b = DurableBackend(book, worker_argv=crashing)
        backends.append(b)
        return b

    snap = load_snapshot(SNAPSHOTS / "input-bound.json")
    doc = evaluate(snap, builtin_book, engine="durable", backend_factory=factory)
    assert doc.engine.name == "reference"
    # durable_rules dies of SIGSEGV or SIGABRT depending on the heap layout
    assert "durable_rules worker crashed (SIG" in (doc.engine.fallback_reason or "")
    reference = evaluate(snap, builtin_book, engine="reference")
    assert [f.model_dump() for f in doc.findings] == [f.model_dump() for f in reference.findings]
    backends[0].close()


def test_cli_run_writes_valid_findings(tmp_path: Path) -> None:
    out = tmp_path / "findings.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpu_triage",
            "run",
            "--snapshot",
            str(SNAPSHOTS / "xid79.json"),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2, proc.stderr  # critical
    doc = FindingsDocument.model_validate_json(out.read_text())
    assert {"xid-79-fallen-off-bus", "gpu-lost-nvml"} <= {f.rule_id for f in doc.findings}
    assert doc.findings[0].severity.value == "critical"
    import jsonschema

    schema = json.loads((ROOT / "docs/findings.schema.json").read_text())
    jsonschema.validate(json.loads(out.read_text()), schema)


def test_cli_bad_snapshot_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_version": 1, "facts": {"gpus": [{"index": "zero"}]}}')
    proc = subprocess.run(
        [sys.executable, "-m", "gpu_triage", "run", "--snapshot", str(bad)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 3
    assert str(bad) in proc.stderr and "facts.gpus.0.index" in proc.stderr
    future = tmp_path / "future.json"
    future.write_text('{"schema_version": 99}')
    proc = subprocess.run(
        [sys.executable, "-m", "gpu_triage", "run", "--snapshot", str(future)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 3 and "unknown snapshot schema_version 99" in proc.stderr
    trunc = tmp_path / "trunc.json"
    trunc.write_text('{"schema_version": 1, "facts": {"gpus": [')
    proc = subprocess.run(
        [sys.executable, "-m", "gpu_triage", "run", "--snapshot", str(trunc)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 3 and f"{trunc}:1:" in proc.stderr


def test_cli_explain_fired_and_not_fired() -> None:
    snap = str(SNAPSHOTS / "input-bound.json")
    fired = subprocess.run(
        [sys.executable, "-m", "gpu_triage", "explain", "input-bound-pipeline", "--snapshot", snap],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "GPU 0 (0000:18:00.0): FIRED" in fired
    assert "[true ] host.cpu_iowait_pct > 20 (host.cpu_iowait_pct = 38)" in fired
    quiet = subprocess.run(
        [sys.executable, "-m", "gpu_triage", "explain", "pcie-link-downgraded", "--snapshot", snap],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "NOT FIRED" in quiet
    assert (
        "decided by: gpu.pcie_link_width < gpu.pcie_link_width_max "
        "(gpu.pcie_link_width = 16, gpu.pcie_link_width_max = 16) is false"
    ) in quiet


def test_overlay_changes_params_severity_and_disables(tmp_path: Path) -> None:
    (tmp_path / "site.yaml").write_text(
        "overlay: dc-east\n"
        "params: {input-bound-pipeline.iowait_pct: 50}\n"
        "severity: {pcie-link-downgraded: critical}\n"
        "disable: [{rule: gpu-compute-bound, reason: noisy here}]\n"
    )
    book = load_rulebook([tmp_path])
    assert book.by_id("gpu-compute-bound") is None
    assert "noisy here" in book.disabled["gpu-compute-bound"]
    assert book.by_id("input-bound-pipeline").params["iowait_pct"] == 50
    doc = evaluate(load_snapshot(SNAPSHOTS / "input-bound.json"), book, engine="reference")
    assert not any(f.rule_id == "input-bound-pipeline" for f in doc.findings)  # 38% < 50%
    demo = evaluate(load_snapshot(ROOT / "gpu_triage/data/demo-incident.json"), book)
    pcie = next(f for f in demo.findings if f.rule_id == "pcie-link-downgraded")
    assert pcie.severity.value == "critical" and pcie.overridden_by == ["dc-east"]


def test_overlay_out_of_bounds_is_refused(tmp_path: Path) -> None:
    from gpu_triage.engine.loader import RulebookError

    (tmp_path / "site.yaml").write_text(
        "overlay: bad\nparams: {input-bound-pipeline.iowait_pct: 500}\n"
    )
    with pytest.raises(RulebookError) as exc:
        load_rulebook([tmp_path])
    assert "above the maximum" in str(exc.value) and "site.yaml:2:" in str(exc.value)


def test_site_rule_added_and_named_by_its_rulebook(tmp_path: Path) -> None:
    site = tmp_path / "acme"
    site.mkdir()
    (site / "hot.yaml").write_text(
        (ROOT / "tests/engine/test_lint.py").read_text().split('GOOD = """\\\n')[1].split('"""')[0]
    )
    book = load_rulebook([site])
    doc = evaluate(EvalInput(Facts(gpus=[GpuFacts(index=0, temperature_gpu_c=95)])), book)
    hot = next(f for f in doc.findings if f.rule_id == "site-hot-gpu")
    assert hot.rulebook == "acme"


def test_conclusion_cycle_is_refused(tmp_path: Path) -> None:
    from gpu_triage.engine.loader import RulebookError

    rule = (
        "id: {id}\ntitle: cycle {id}\nversion: 1\nseverity: info\nstage: FD1\n"
        "symptom: s\ncause: c\nfix: f\nwhen: concl.{dep} or gpu.index > 0\n"
        "concludes: {me}\nreferences: [guide/FD1]\n"
    )
    (tmp_path / "cyc.yaml").write_text(
        rule.format(id="cyc-a", dep="b", me="a")
        + "---\n"
        + rule.format(id="cyc-b", dep="a", me="b")
    )
    with pytest.raises(RulebookError) as exc:
        load_rulebook([tmp_path], include_builtin=False)
    assert "cycle" in str(exc.value)


def test_rule_test_params_apply_on_both_engines(tmp_path: Path) -> None:
    from gpu_triage.engine.backend import ReferenceBackend
    from gpu_triage.engine.durable_backend import DurableBackend
    from gpu_triage.engine.ruletest import run_rule_tests

    good = (
        (ROOT / "tests/engine/test_lint.py").read_text().split('GOOD = """\\\n')[1].split('"""')[0]
    )
    (tmp_path / "r.yaml").write_text(
        good
        + (
            "  - name: a lower threshold from the test fires at 60\n"
            "    params: {max_c: 55}\n"
            "    facts: {gpus: [{index: 0, temperature_gpu_c: 60}]}\n"
            "    expect: {fires: true}\n"
        )
    )
    book = load_rulebook([tmp_path], include_builtin=False)
    durable = DurableBackend(book)
    try:
        results = run_rule_tests(book, [ReferenceBackend(), durable])
    finally:
        durable.close()
    assert [r.problems for r in results] == [[], [], []]


def test_a_plain_model_dump_of_a_snapshot_reads_back(tmp_path: Path) -> None:
    """Computed values (memory_used_pct, ...) in a plain dump are dropped on load."""
    snap = load_snapshot(SNAPSHOTS / "healthy-busy.json")
    p = tmp_path / "dumped.json"
    p.write_text(snap.model_dump_json())
    assert "memory_used_pct" in p.read_text()
    again = load_snapshot(p)
    assert again.facts.gpus[0].memory_used_pct == snap.facts.gpus[0].memory_used_pct
