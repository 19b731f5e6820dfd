"""Generate a fleet history: N nodes x 8 GPUs x D days of hourly JSONL run records.

    python benchmarks/make_fleet_history.py OUT_DIR [--nodes 1250] [--days 30]

Realistic shape: a few repeat-offender GPUs, a driver canary with an Xid regression,
one VBIOS outlier batch, one rack running hot, rare random faults elsewhere, and GPU
utilisation per run (most nodes near the 85% target, some half-used, a few idle: fleet/F9).
Records have the real exporter's format (``run_record``: compact, sorted keys), one file
per node."""

from __future__ import annotations

import argparse
import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

VERDICTS = {
    0: "HEALTHY (exit 0): every collector that could matter answered; no warning or critical "
    "finding",
    1: "WARNING (exit 1): 1 warning finding(s)",
    2: "CRITICAL (exit 2): 1 critical finding(s)",
}
# the questions an unattended run leaves open (rules waiting on a person's answer)
CONFIRM = [
    "inference-p99-spikes",
    "rack-power-over-budget",
    "rank-step-time-imbalance",
    "scaling-worse-with-more-nodes",
    "slower-than-baseline",
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--nodes", type=int, default=1250)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--canary-every", type=int, default=40, help="every Nth node on the new driver")
    a = ap.parse_args()
    rnd = random.Random(a.seed)
    a.out.mkdir(parents=True, exist_ok=True)
    start = datetime(2026, 10, 1, tzinfo=UTC)
    hours = a.days * 24
    offenders = {(rnd.randrange(a.nodes), rnd.randrange(8)) for _ in range(max(1, a.nodes // 12))}
    inventory = ["host,rack,row"]
    for n in range(a.nodes):
        host = f"gpu{n:04d}"
        rack, row = f"r{n // 16:03d}", f"row{n // 160:02d}"
        inventory.append(f"{host},{rack},{row}")
        driver = "570.86.15" if n % a.canary_every else "575.51.03"  # canary on a new driver
        # a node's typical load: most run near the target, some half-used, a few idle
        kind = rnd.random()
        base, spread = (93.0, 5.0) if kind < 0.7 else (60.0, 15.0) if kind < 0.92 else (3.0, 3.0)
        vbios = "96.00.99.00.01" if n < a.nodes - 20 else "96.00.74.00.0B"
        hot = 8.0 if rack == "r007" else 0.0
        gpus = [
            {
                "bus": f"0000:{0x18 + 0x10 * i:02x}:00.0",
                "serial": f"16523{n:07d}{i}",
                "name": "NVIDIA H100 80GB HBM3",
                "vbios": vbios,
                "temp": 0.0,
                "util": 0.0,
                "uuid": f"GPU-{n:08x}-{i:04x}-4c1e-9d2a-{n * 8 + i:012x}",
            }
            for i in range(8)
        ]
        lines = []
        for h in range(hours):
            ts = (start + timedelta(hours=h)).isoformat()
            findings = []
            xids: list[int] = []
            for i, g in enumerate(gpus):
                g["temp"] = round(55 + hot + rnd.random() * 10, 1)
                g["util"] = float(min(100, max(0, round(rnd.gauss(base, spread)))))
                bad = (n, i) in offenders and rnd.random() < 0.3
                if bad or rnd.random() < 0.0005:
                    code = rnd.choice([48, 79, 94]) if bad else rnd.choice([13, 31, 63])
                    findings.append(
                        {
                            "rule": f"xid-code-{code}",
                            "sev": "critical" if bad else "warning",
                            "stage": "hardware",
                            "gpu": g["bus"],
                            "subject": f"xid:{g['bus']}@{h}",
                            "n": 1,
                            "xid": code,
                        }
                    )
                    xids.append(code)
            if driver == "575.51.03" and rnd.random() < 0.05:
                xids.append(109)
                findings.append(
                    {
                        "rule": "xid-code-109",
                        "sev": "warning",
                        "stage": "hardware",
                        "gpu": gpus[0]["bus"],
                        "subject": f"xid:{gpus[0]['bus']}@{h}",
                        "n": 1,
                        "xid": 109,
                    }
                )
            exit_code = (
                2 if any(f["sev"] == "critical" for f in findings) else (1 if findings else 0)
            )
            if base > 85:  # what a busy, healthy node reports every run
                findings.append(
                    {
                        "rule": "gpu-compute-bound",
                        "sev": "info",
                        "stage": "FD1",
                        "gpu": gpus[0]["bus"],
                        "subject": f"gpu:{gpus[0]['bus']}",
                        "n": 8,
                    }
                )
            rec = {
                "v": 1,
                "ts": ts,
                "host": host,
                "exit": exit_code,
                "verdict": VERDICTS[exit_code],
                "engine": "durable",
                "rulebook": "3dbb3188c9120e30",
                "findings": findings,
                "unknown": [],
                "confirm": CONFIRM,
                "collectors": {"history": "ok", "nvml": "ok", "kernel_log": "ok", "host": "ok"},
                "cleared": [],
                "driver": driver,
                "gpus": gpus,
                "xids": sorted(set(xids)),
            }
            lines.append(json.dumps(rec, separators=(",", ":"), sort_keys=True))
        (a.out / f"{host}.jsonl").write_text("\n".join(lines) + "\n")
    (a.out / "inventory.csv").write_text("\n".join(inventory) + "\n")
    print(f"wrote {a.nodes} nodes x {hours} runs to {a.out}")


if __name__ == "__main__":
    main()
