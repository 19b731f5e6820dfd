"""Each integration under deploy/ against its documented contract."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from gpu_triage.cli import build_parser
from tests.conftest import ROOT, SNAPSHOTS

DEPLOY = ROOT / "deploy"


def gpu_triage(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpu_triage", *args], capture_output=True, text=True, env=env
    )


@pytest.fixture(scope="module")
def findings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("findings")
    out = {}
    for name in ("xid79", "healthy-busy", "input-bound", "no-gpu-collector"):
        p = d / f"{name}.json"
        gpu_triage("run", "--snapshot", str(SNAPSHOTS / f"{name}.json"), "--out", str(p))
        out[name] = p
    stale = json.loads(out["healthy-busy"].read_text())
    stale["generated_at"] = (datetime.now(UTC) - timedelta(hours=2)).isoformat()
    out["stale"] = d / "stale.json"
    out["stale"].write_text(json.dumps(stale))
    return out


# --------------------------------------------------------------------------- NPD


def test_npd_config_matches_the_plugin_contract(findings: dict[str, Path]) -> None:
    cfg = json.loads((DEPLOY / "node-problem-detector/gpu-triage-monitor.json").read_text())
    assert cfg["plugin"] == "custom"
    limit = cfg["pluginConfig"]["max_output_length"]
    conditions = {c["type"] for c in cfg["conditions"]}
    assert {r["condition"] for r in cfg["rules"]} <= conditions
    for rule in cfg["rules"]:
        assert rule["path"].endswith("/gpu-triage")
        args = list(rule["args"])
        build_parser().parse_args(args)  # the arguments are ones the CLI accepts
        i = args.index("--findings")
        expected = {"xid79": 1, "healthy-busy": 0, "stale": 2}
        if "warning" in args:
            expected["input-bound"] = 1
        for name, status in expected.items():
            args[i + 1] = str(findings[name])
            r = gpu_triage(*args)
            assert r.returncode == status, (rule["condition"], name, r.stdout, r.stderr)
            lines = r.stdout.splitlines()
            assert len(lines) == 1 and 0 < len(lines[0]) <= limit
        args[i + 1] = "/nonexistent/findings.json"
        assert gpu_triage(*args).returncode == 2


# --------------------------------------------------------------------------- DaemonSet


def test_daemonset_writes_a_textfile_node_exporter_reads(tmp_path: Path) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    ds = yaml.safe_load((DEPLOY / "kubernetes/daemonset.yaml").read_text())
    assert ds["kind"] == "DaemonSet"
    pod = ds["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = container["args"]
    parsed = build_parser().parse_args(args)
    assert parsed.command == "run" and parsed.format == "prometheus" and parsed.interval > 0
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    out_dir = str(Path(parsed.out).parent)
    volume = next(v for v in pod["volumes"] if v["name"] == mounts[out_dir])
    assert volume["hostPath"]["path"] == "/var/lib/node_exporter/textfile_collector"
    assert any(t.get("effect") == "NoSchedule" for t in pod["tolerations"])
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    # The same arguments, one run, on a recorded snapshot: node_exporter can parse the file.
    out = tmp_path / "gpu_triage.prom"
    one_run = [a for a in args if not a.startswith(("--interval", "--out", "--kernel-log"))]
    r = gpu_triage(*one_run, f"--out={out}", "--snapshot", str(SNAPSHOTS / "xid79.json"))
    assert r.returncode == 2, r.stderr
    names = {f.name for f in text_string_to_metric_families(out.read_text())}
    assert {"gpu_triage_finding", "gpu_triage_last_run_timestamp_seconds"} <= names


# --------------------------------------------------------------------------- Slurm

FAKE_SCONTROL = """#!/bin/sh
echo "$*" >> "{log}"
if [ "$1" = show ]; then cat "{state}"; exit 0; fi
exit 0
"""


def slurm(
    tmp_path: Path, findings_file: Path | None, state: str, extra: tuple[str, ...] = ()
) -> tuple[int, list[str], str]:
    log, st = tmp_path / "calls.log", tmp_path / "state.txt"
    log.write_text("")
    st.write_text(state)
    fake = tmp_path / "scontrol"
    fake.write_text(FAKE_SCONTROL.format(log=log, state=st))
    fake.chmod(0o755)
    args = ["slurm-healthcheck", "--node", "gpu17", "--scontrol", str(fake), *extra]
    args += ["--findings", str(findings_file)] if findings_file else ["--findings", "/nope"]
    r = gpu_triage(*args)
    return r.returncode, log.read_text().splitlines(), r.stdout


IDLE = "NodeName=gpu17 Arch=x86_64\n   State=IDLE ThreadsPerCore=2\n"


def drained(reason: str) -> str:
    return (
        f"NodeName=gpu17\n   State=IDLE+DRAIN ThreadsPerCore=2\n"
        f"   Reason={reason} [root@2026-11-30T01:00:00]\n"
    )


def test_slurm_drains_with_the_finding_as_reason(tmp_path: Path, findings: dict[str, Path]) -> None:
    code, calls, out = slurm(tmp_path, findings["xid79"], IDLE)
    assert code == 0 and calls[0] == "show node gpu17"
    update = calls[1]
    assert update.startswith("update NodeName=gpu17 State=DRAIN Reason=gpu-triage: ")
    # the top critical finding of the xid79 snapshot: NVML lost GPU 3 (Xid 79 on it)
    assert "gpu-lost-nvml" in update and "0000:48:00.0" in update
    assert len(update.split("Reason=", 1)[1]) <= 120
    assert "drained" in out


def test_slurm_resumes_only_its_own_drains(tmp_path: Path, findings: dict[str, Path]) -> None:
    ours = "gpu-triage: xid-79-fallen-off-bus: GPU fell off the bus (Xid 79) on XID 79"
    code, calls, _ = slurm(tmp_path, findings["healthy-busy"], drained(ours))
    assert code == 0 and calls == ["show node gpu17", "update NodeName=gpu17 State=RESUME"]
    code, calls, out = slurm(tmp_path, findings["healthy-busy"], drained("bad DIMM per ops"))
    assert code == 0 and calls == ["show node gpu17"] and "someone else" in out
    code, calls, out = slurm(tmp_path, findings["xid79"], drained("bad DIMM per ops"))
    assert code == 0 and calls == ["show node gpu17"] and "not touching" in out


def test_slurm_drains_a_node_it_cannot_look_at(tmp_path: Path, findings: dict[str, Path]) -> None:
    """No findings to read (missing, stale) or a run that could not look (exit 3): drain
    with the distinct reason "gpu-triage: unknown: ...", never leave a blind node in use."""
    code, calls, out = slurm(tmp_path, None, IDLE)
    assert code == 0 and calls[0] == "show node gpu17"
    assert calls[1].startswith("update NodeName=gpu17 State=DRAIN Reason=gpu-triage: unknown: ")
    assert "cannot read /nope" in calls[1] and "drained" in out
    code, calls, _ = slurm(tmp_path, findings["stale"], drained("gpu-triage: old"))
    assert code == 0 and "Reason=gpu-triage: unknown: " in calls[1] and "stale" in calls[1]
    code, calls, _ = slurm(tmp_path, findings["no-gpu-collector"], IDLE)
    assert "Reason=gpu-triage: unknown: GPU facts unavailable" in calls[1]
    # an operator's drain is still not touched, and ours is resumed once it can look again
    code, calls, _ = slurm(tmp_path, findings["no-gpu-collector"], drained("bad DIMM per ops"))
    assert calls == ["show node gpu17"]
    ours = calls_reason = "gpu-triage: unknown: no findings to read"
    code, calls, _ = slurm(tmp_path, findings["healthy-busy"], drained(ours))
    assert calls == ["show node gpu17", "update NodeName=gpu17 State=RESUME"], calls_reason


def test_npd_unknown_when_it_cannot_look(tmp_path: Path, findings: dict[str, Path]) -> None:
    for severity in ("critical", "warning"):
        blind = str(findings["no-gpu-collector"])
        r = gpu_triage("npd", "--severity", severity, "--findings", blind)
        assert r.returncode == 2, r.stdout
        assert r.stdout.startswith("gpu-triage unknown: GPU facts unavailable")
        assert len(r.stdout.strip()) <= 80
    r = gpu_triage("npd", "--findings", str(findings["healthy-busy"]))
    assert r.returncode == 0 and "no critical findings" in r.stdout
    r = gpu_triage("npd", "--findings", str(findings["xid79"]))
    assert r.returncode == 1


def test_systemd_success_exit_status_is_the_contract() -> None:
    """1 and 2 are judged runs; 3 (could not look, internal errors), 64 and signals fail
    the unit. Crashes exit 3 (the top-level handler), so they can never pass as 1."""
    unit = (DEPLOY / "systemd/gpu-triage.service").read_text()
    lines = [line for line in unit.splitlines() if line.startswith("SuccessExitStatus=")]
    assert len(lines) == 1 and set(lines[0].split("=", 1)[1].split()) == {"1", "2"}


def test_slurm_wrapper_script(tmp_path: Path, findings: dict[str, Path]) -> None:
    script = DEPLOY / "slurm/gpu-triage-healthcheck"
    assert os.access(script, os.X_OK)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    shim = bindir / "gpu-triage"
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m gpu_triage "$@"\n')
    shim.chmod(0o755)
    log, st = tmp_path / "calls.log", tmp_path / "state.txt"
    st.write_text(IDLE)
    fake = tmp_path / "scontrol"
    fake.write_text(FAKE_SCONTROL.format(log=log, state=st))
    fake.chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bindir}:{os.environ['PATH']}",
        "GPU_TRIAGE_FINDINGS": str(findings["xid79"]),
    }
    r = subprocess.run(
        [str(script), "--node", "gpu17", "--scontrol", str(fake)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    assert "State=DRAIN" in log.read_text()


# --------------------------------------------------------------------------- systemd


def _unit(path: Path) -> dict[str, dict[str, list[str]]]:
    sections: dict[str, dict[str, list[str]]] = {}
    current = ""
    text = re.sub(r"\\\n\s*", " ", path.read_text())  # systemd line continuations
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = line.strip("[]")
            sections[current] = {}
            continue
        key, _, value = line.partition("=")
        sections[current].setdefault(key, []).append(value)
    return sections


def test_systemd_units() -> None:
    svc = _unit(DEPLOY / "systemd/gpu-triage.service")
    assert svc["Service"]["Type"] == ["oneshot"]
    assert svc["Service"]["SuccessExitStatus"] == ["1 2"]
    for cmd in svc["Service"]["ExecStart"]:
        argv = shlex.split(cmd)
        assert argv[0] == "/usr/local/bin/gpu-triage"
        args = build_parser().parse_args(argv[1:])
        assert args.command == "run" and args.out is not None
        assert {a.split(":")[0] for a in args.also} == {"jsonl", "prometheus"}
    timer = _unit(DEPLOY / "systemd/gpu-triage.timer")
    assert timer["Timer"]["OnUnitActiveSec"] == ["5min"]
    assert timer["Install"]["WantedBy"] == ["timers.target"]
    if shutil.which("systemd-analyze"):
        r = subprocess.run(
            ["systemd-analyze", "verify", "--man=no", str(DEPLOY / "systemd/gpu-triage.timer")],
            capture_output=True,
            text=True,
        )
        assert "Unknown key" not in r.stderr and "Unknown section" not in r.stderr


# --------------------------------------------------------------------------- Prometheus


def _exported_names() -> set[str]:
    r = gpu_triage("run", "--snapshot", str(SNAPSHOTS / "xid79.json"), "--format", "prometheus")
    return set(re.findall(r"^# TYPE (\w+)", r.stdout, re.MULTILINE))


def test_prometheus_rules_use_exported_metrics() -> None:
    rules = yaml.safe_load((DEPLOY / "prometheus/gpu-triage-rules.yaml").read_text())
    recorded = {r["record"] for g in rules["groups"] for r in g["rules"] if "record" in r}
    exported = _exported_names()
    for g in rules["groups"]:
        for r in g["rules"]:
            for name in re.findall(r"\bgpu_triage[:\w]*", r["expr"]):
                assert name in exported | recorded, (name, r.get("record") or r.get("alert"))


@pytest.mark.skipif(
    shutil.which("promtool") is None and not os.environ.get("CI"),
    reason="promtool not installed (CI installs it)",
)
def test_promtool_rule_tests() -> None:
    d = DEPLOY / "prometheus"
    check = subprocess.run(
        ["promtool", "check", "rules", "gpu-triage-rules.yaml"],
        cwd=d,
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    test = subprocess.run(
        ["promtool", "test", "rules", "gpu-triage-rules.test.yaml"],
        cwd=d,
        capture_output=True,
        text=True,
    )
    assert test.returncode == 0, test.stdout + test.stderr


def test_grafana_dashboard_queries_known_series() -> None:
    dash = json.loads((DEPLOY / "grafana/gpu-triage-fleet.json").read_text())
    rules = yaml.safe_load((DEPLOY / "prometheus/gpu-triage-rules.yaml").read_text())
    recorded = {r["record"] for g in rules["groups"] for r in g["rules"] if "record" in r}
    known = _exported_names() | recorded
    assert dash["panels"]
    for p in dash["panels"]:
        for t in p["targets"]:
            names = re.findall(r"\bgpu_triage[:\w]*", t["expr"])
            assert names and set(names) <= known, (p["title"], names)
