"""Unattended runs: every format, exit codes, atomic and locked writes, loop mode."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gpu_triage.engine.findings import FindingsDocument
from gpu_triage.model.snapshot import load_snapshot
from gpu_triage.ops.history import History
from gpu_triage.ops.unattended import RunSpec, run_loop, run_once
from tests.conftest import ROOT, SNAPSHOTS

DEMO = ROOT / "gpu_triage" / "data" / "demo-incident.json"


def cli(*args: str, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpu_triage", *args], capture_output=True, text=True, **kw
    )


@pytest.mark.parametrize(
    ("snapshot", "code"),
    [
        ("healthy-busy.json", 0),
        ("input-bound.json", 1),
        ("xid79.json", 2),
        # NVML unavailable on a node whose sysfs shows 8 NVIDIA GPUs: it could not look
        ("no-gpu-collector.json", 3),
    ],
)
def test_exit_codes(snapshot: str, code: int, tmp_path: Path) -> None:
    out = tmp_path / "f.json"
    assert cli("run", "--snapshot", str(SNAPSHOTS / snapshot), "--out", str(out)).returncode == code
    doc = FindingsDocument.model_validate_json(out.read_text())
    assert doc.exit_status == code and doc.verdict.startswith(
        ("HEALTHY", "WARNING", "CRITICAL", "UNKNOWN")[code] + f" (exit {code})"
    )


def test_exit_code_unknown_when_rulebook_breaks(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("id: [broken\n")
    r = cli("run", "--demo", "--rules", str(tmp_path))
    assert r.returncode == 3 and "bad.yaml:2:1: error: YAML" in r.stderr


def test_exit_code_unknown_when_every_collector_failed(tmp_path: Path) -> None:
    snap = load_snapshot(SNAPSHOTS / "no-gpu-collector.json")
    from gpu_triage.model.snapshot import CollectorState

    for c in snap.collectors:
        c.state = CollectorState.FAILED
    snap.facts.host = None
    p = tmp_path / "s.json"
    p.write_text(snap.model_dump_json())
    assert cli("run", "--snapshot", str(p), "--out", str(tmp_path / "f.json")).returncode == 3


def test_json_validates_against_published_schema(tmp_path: Path) -> None:
    import jsonschema

    out = tmp_path / "f.json"
    assert cli("run", "--demo", "--out", str(out)).returncode == 2
    schema = json.loads((ROOT / "docs" / "findings.schema.json").read_text())
    jsonschema.validate(json.loads(out.read_text()), schema)
    FindingsDocument.model_validate_json(out.read_text())


def test_prometheus_output_parses_back(tmp_path: Path) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    out = tmp_path / "gpu_triage.prom"
    cli("run", "--demo", "--format", "prometheus", "--out", str(out))
    families = {f.name: f for f in text_string_to_metric_families(out.read_text())}
    finding = families["gpu_triage_finding"]
    rules = {s.labels["rule"] for s in finding.samples}
    assert "xid-79-fallen-off-bus" in rules
    crit = next(s for s in finding.samples if s.labels["rule"] == "xid-79-fallen-off-bus")
    assert crit.labels["severity"] == "critical" and crit.labels["gpu"] == "0000:48:00.0"
    assert {s.labels["collector"] for s in families["gpu_triage_collector_up"].samples} == {
        "nvml",
        "kernel_log",
        "host",
        "fabric_manager",
        "history",  # the unattended history store (Xids before the last reboot)
    }
    assert families["gpu_triage_exit_code"].samples[0].value == 2
    assert families["gpu_triage_last_run_timestamp_seconds"].samples[0].value > 1e9
    xids = families["gpu_triage_xid_events"].samples
    assert [(s.labels["code"], s.value) for s in xids] == [("79", 1.0)]
    assert len(families["gpu_triage_gpu_info"].samples) == 8


def test_prometheus_label_values_are_escaped() -> None:
    from prometheus_client.parser import text_string_to_metric_families

    from gpu_triage.ops.exporters import prometheus_text

    snap = load_snapshot(DEMO)
    snap.facts.gpus[0].name = 'evil"\nname\\'
    from gpu_triage.engine.compiler import load_rulebook
    from gpu_triage.engine.evaluate import evaluate

    doc = evaluate(snap, load_rulebook(), engine="reference")
    text = prometheus_text(doc, snap.facts)
    info = next(f for f in text_string_to_metric_families(text) if f.name == "gpu_triage_gpu_info")
    assert info.samples[0].labels["name"] == 'evil"\nname\\'


def test_jsonl_appends_whole_lines(tmp_path: Path) -> None:
    out = tmp_path / "history.jsonl"
    for snap in ("healthy-busy.json", "xid79.json", "input-bound.json"):
        cli("run", "--snapshot", str(SNAPSHOTS / snap), "--format", "jsonl", "--out", str(out))
    lines = out.read_text().splitlines()
    assert len(lines) == 3
    recs = [json.loads(line) for line in lines]
    assert [r["exit"] for r in recs] == [0, 2, 1]
    assert any(f.get("xid") == 79 for f in recs[1]["findings"])
    assert recs[1]["driver"] == "565.57.01"


def test_markdown_report(tmp_path: Path) -> None:
    out = tmp_path / "r.md"
    cli("run", "--demo", "--format", "markdown", "--out", str(out))
    text = out.read_text()
    assert text.startswith("# gpu-triage report: gpu-node-017")
    assert "## [CRITICAL]" in text and "## Cannot evaluate" in text


def test_concurrent_runs_do_not_interleave(tmp_path: Path) -> None:
    out = tmp_path / "h.jsonl"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gpu_triage",
                "run",
                "--demo",
                "--format",
                "jsonl",
                "--out",
                str(out),
                "--engine",
                "reference",
            ]
        )
        for _ in range(6)
    ]
    for p in procs:
        p.wait(60)
    lines = out.read_text().splitlines()
    assert len(lines) == 6 and all(json.loads(line)["exit"] == 2 for line in lines)


def test_sigkill_while_writing_keeps_the_previous_output(tmp_path: Path) -> None:
    """Kill writers at many points of a large write: the file is always the old complete
    document or the new complete one, never a truncated mix."""
    out = tmp_path / "big.json"
    old = json.dumps({"generation": "old", "pad": "x" * 1000})
    out.write_text(old)
    writer = (
        "import sys; from gpu_triage.io.files import write_atomic; "
        "pad = 'y' * 60_000_000; "
        'write_atomic(sys.argv[1], \'{"generation": "new", "pad": "\' + pad + \'"}\')'
    )
    seen = set()
    for delay in (0.05, 0.1, 0.2, 0.3, 0.4, 0.6):
        p = subprocess.Popen([sys.executable, "-c", writer, str(out)])
        time.sleep(delay)
        p.send_signal(signal.SIGKILL)
        p.wait()
        gen = json.loads(out.read_text())["generation"]
        seen.add(gen)
        if gen == "new":
            out.write_text(old)
    assert "old" in seen


def test_read_only_directory_is_a_clear_error(tmp_path: Path) -> None:
    d = tmp_path / "ro"
    d.mkdir()
    (d / "f.json").write_text("previous")
    d.chmod(0o555)
    try:
        if os.access(d, os.W_OK):
            pytest.skip("running as root: a read-only mode does not stop writes")
        r = cli("run", "--demo", "--out", str(d / "f.json"))
        assert r.returncode == 3 and "cannot write" in r.stderr
        assert (d / "f.json").read_text() == "previous"
    finally:
        d.chmod(0o755)


def _spec(tmp_path: Path, snaps: list[Path], fmt: str = "jsonl") -> RunSpec:
    from gpu_triage.engine.compiler import load_rulebook

    it = iter(snaps)
    return RunSpec(
        load_rulebook(),
        "reference",
        fmt,
        tmp_path / "out",
        "info",
        lambda: (load_snapshot(next(it)), "test"),
        History.load(tmp_path / "state.json"),
    )


def test_history_first_seen_last_seen_and_cleared(tmp_path: Path) -> None:
    spec = _spec(
        tmp_path,
        [SNAPSHOTS / "xid79.json", SNAPSHOTS / "xid79.json", SNAPSHOTS / "healthy-busy.json"],
    )
    a = run_once(spec)
    b = run_once(spec)
    xa = next(f for f in a.findings if f.rule_id == "xid-79-fallen-off-bus")
    xb = next(f for f in b.findings if f.rule_id == "xid-79-fallen-off-bus")
    assert xb.first_seen == xa.first_seen and xb.last_seen > xa.last_seen
    c = run_once(spec)
    cleared = {x.rule_id for x in c.cleared}
    assert "xid-79-fallen-off-bus" in cleared
    last = json.loads((tmp_path / "out").read_text().splitlines()[-1])
    assert "xid-79-fallen-off-bus" in {x["rule"] for x in last["cleared"]}
    # the state survives a new process (systemd timer runs)
    assert History.load(tmp_path / "state.json").seen.keys() == {
        History.key(f.rule_id, f.subject_key) for f in c.findings
    }


def start_loop(out: Path, *extra: str, interval: str = "0.3") -> subprocess.Popen[str]:
    """An `--interval` loop, returned once it says it is ready (signal handlers held,
    rulebook loaded): nothing after depends on how fast the machine starts it."""
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpu_triage",
            "run",
            "--demo",
            "--format",
            "jsonl",
            "--out",
            str(out),
            "--interval",
            interval,
            "--engine",
            "reference",
            *extra,
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    assert p.stderr is not None
    for line in p.stderr:  # blocks until the line comes (or the process ends)
        if "loop ready" in line:
            return p
    raise AssertionError(f"the loop never said it was ready (exit {p.wait()})")


def wait_for_lines(out: Path, n: int, timeout_s: float = 120.0) -> list[str]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        lines = out.read_text().splitlines() if out.exists() else []
        if len(lines) >= n:
            return lines
        time.sleep(0.05)
    raise AssertionError(f"fewer than {n} runs in {timeout_s} s")


def test_loop_keeps_schedule_and_stops_on_sigterm(tmp_path: Path) -> None:
    """Readiness, not sleeps: wait for the loop to say it is ready and for three runs,
    then SIGTERM. It ends cleanly with the last run's code, every line whole, and never
    ran faster than its schedule (runs <= elapsed / interval + 1, whatever the load)."""
    out = tmp_path / "loop.jsonl"
    launched = time.monotonic()  # surely before the loop's start (its ready line may be read late)
    p = start_loop(out)
    wait_for_lines(out, 3)
    elapsed = time.monotonic() - launched
    p.send_signal(signal.SIGTERM)
    assert p.wait(30) == 2  # last run's exit code: the demo is critical
    lines = out.read_text().splitlines()
    assert all(json.loads(line)["exit"] == 2 for line in lines)
    assert 3 <= len(lines) <= (time.monotonic() - launched) / 0.3 + 1, (len(lines), elapsed)


def test_sigterm_while_starting_never_kills_the_loop_half_way(tmp_path: Path) -> None:
    """SIGTERM while the loop starts (after main's first line, before the first run) is
    held: a clean exit 3 (no run was made), never death by -15. The loop is caught at a
    known point of its start-up: reading its --site file, a FIFO this test holds."""
    fifo = tmp_path / "site.yaml"
    os.mkfifo(fifo, 0o600)
    out = tmp_path / "loop.jsonl"
    p = subprocess.Popen(
        [
            *(sys.executable, "-m", "gpu_triage", "run", "--demo", "--format", "jsonl"),
            *("--out", str(out), "--interval", "0.3", "--engine", "reference"),
            *("--site", str(fifo)),
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while True:  # a non-blocking open for writing succeeds once the loop opened it to read
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError:
            assert p.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
    p.send_signal(signal.SIGTERM)
    time.sleep(0.2)
    os.write(fd, b"rack: r1\n")
    os.close(fd)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 3, err
    assert not out.exists()  # stopped before its first run: nothing half-written


def test_a_failing_run_does_not_end_the_loop(tmp_path: Path) -> None:
    """Each run is isolated: a snapshot that cannot be read, then a good one. The bad
    run is written as an unknown document (exit 3) and the loop goes on."""
    from gpu_triage.engine.compiler import load_rulebook

    bad = tmp_path / "bad.json"
    bad.write_text("{")
    snaps = iter([bad, DEMO, bad, DEMO])
    spec = RunSpec(
        load_rulebook(),
        "reference",
        "jsonl",
        tmp_path / "out",
        "info",
        lambda: (load_snapshot(next(snaps)), "test"),
        History.load(tmp_path / "state.json"),
    )
    said: list[str] = []
    codes: list[int] = []
    run_loop(
        spec, 0.001, max_runs=4, on_run=lambda d: codes.append(d.exit_code), report=said.append
    )
    assert codes == [3, 2, 3, 2]
    recs = [json.loads(line) for line in (tmp_path / "out").read_text().splitlines()]
    assert [r["exit"] for r in recs] == [3, 2, 3, 2]
    assert "no snapshot: SnapshotError" in recs[0]["verdict"]
    assert sum("run 1: no snapshot" in m for m in said) == 1


def test_loop_memory_is_steady(tmp_path: Path) -> None:
    """Many iterations in one process: memory must not grow with the run count."""
    import resource

    snaps = [DEMO] * 400
    spec = _spec(tmp_path, snaps, fmt="prometheus")
    spec.engine = "auto"
    rss: list[int] = []

    def sample(_doc: FindingsDocument) -> None:
        rss.append(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)

    run_loop(spec, 0.0001, max_runs=400, on_run=sample)
    assert len(rss) == 400
    growth_kib = rss[-1] - rss[99]
    assert growth_kib < 8 * 1024, f"max RSS grew {growth_kib} KiB over 300 runs"


def test_loop_runs_in_a_thread_without_signals(tmp_path: Path) -> None:
    spec = _spec(tmp_path, [DEMO] * 3)
    t = threading.Thread(target=run_loop, args=(spec, 0.01), kwargs={"max_runs": 3})
    t.start()
    t.join(30)
    assert len((tmp_path / "out").read_text().splitlines()) == 3


def test_xid_again_after_a_reboot_escalates(tmp_path: Path) -> None:
    """Run 1 sees an Xid 48 on GPU 3; the node reboots; run 2 sees Xid 48 on the same GPU
    again: the history makes the recurrence rule fire (hardware, not the job)."""
    from datetime import timedelta

    from gpu_triage.model.facts import XidEvent

    base = load_snapshot(SNAPSHOTS / "healthy-busy.json")
    gpu3 = base.facts.gpus[3].pci_bus_id

    def with_xid(boot_offset_h: int, stamp: str) -> Path:
        snap = base.model_copy(deep=True)
        assert snap.facts.host is not None
        snap.facts.host.boot_time = snap.taken_at - timedelta(hours=boot_offset_h)
        snap.facts.xids = [
            XidEvent(
                code=48,
                pci_bus_id=gpu3,
                time_text=stamp,
                line=1,
                message="An uncorrectable double bit error (DBE)",
            )
        ]
        p = tmp_path / f"s{boot_offset_h}.json"
        p.write_text(snap.model_dump_json())
        return p

    first, second = with_xid(10, "100.1"), with_xid(1, "55.5")
    spec = _spec(tmp_path, [first, first, second])
    docs = [run_once(spec) for _ in range(3)]
    assert "xid-recurs-after-reset" not in {f.rule_id for d in docs[:2] for f in d.findings}
    again = next(f for f in docs[2].findings if f.rule_id == "xid-recurs-after-reset")
    assert again.severity.value == "critical" and gpu3 in again.subject_key
    ledger = History.load(tmp_path / "state.json").xids
    assert ledger.resets == 1 and ledger.entries[f"{gpu3}|48"]["before"] == 1


def test_site_inventory_job_metrics_and_answers_from_files(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text("step_time_ms: 900\nrank_step_times_ms: [400, 410, 900]\n")
    (tmp_path / "site.yaml").write_text("baseline_step_time_ms: 420\n")
    out = tmp_path / "f.json"
    r = cli(
        "run",
        "--snapshot",
        str(SNAPSHOTS / "healthy-busy.json"),
        "--job",
        str(tmp_path / "job.yaml"),
        "--site",
        str(tmp_path / "site.yaml"),
        "--out",
        str(out),
    )
    assert r.returncode == 1, r.stderr
    fired = {f.rule_id for f in FindingsDocument.model_validate_json(out.read_text()).findings}
    assert {"slower-than-baseline", "rank-step-time-imbalance"} <= fired
    (tmp_path / "bad.yaml").write_text("step_time: fast\n")
    r = cli("run", "--demo", "--job", str(tmp_path / "bad.yaml"))
    assert r.returncode == 64 and "bad.yaml: step_time" in r.stderr


def test_a_write_that_fails_once_does_not_end_the_loop(tmp_path: Path) -> None:
    """A full disk (here: the output folder replaced by a file) for one run: that run
    reports exit 3 and the loop goes on writing once it can."""
    from gpu_triage.engine.compiler import load_rulebook

    folder = tmp_path / "d"
    folder.mkdir()
    spec = RunSpec(
        load_rulebook(),
        "reference",
        "jsonl",
        folder / "out.jsonl",
        "info",
        lambda: (load_snapshot(DEMO), "test"),
        History.load(tmp_path / "state.json"),
    )
    codes: list[int] = []
    said: list[str] = []

    def after(doc: FindingsDocument) -> None:
        codes.append(doc.exit_code)
        if len(codes) == 1:
            folder.rename(tmp_path / "d.away")
            folder.write_text("not a folder")
        elif len(codes) == 2:
            folder.unlink()
            (tmp_path / "d.away").rename(folder)

    assert run_loop(spec, 0.001, max_runs=3, on_run=after, report=said.append) == 2
    assert len(codes) == 3
    assert any(m.startswith("run 2: ") for m in said)
    assert len((folder / "out.jsonl").read_text().splitlines()) == 2
