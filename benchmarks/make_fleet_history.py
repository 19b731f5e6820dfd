"""Generate a fleet history: N nodes x 8 GPUs x D days of hourly JSONL run records.

    python benchmarks/make_fleet_history.py OUT_DIR [--nodes 1250] [--days 30]

Realistic shape: a few repeat-offender GPUs, a driver canary with an Xid regression,
one VBIOS outlier batch, one rack running hot, rare random faults elsewhere. Records are
produced by the real exporter (``run_record``'s format), one file per node."""

from __future__ import annotations

import argparse
import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--nodes", type=int, default=1250)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--seed", type=int, default=11)
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
        driver = "570.86.15" if n % 50 else "575.51.03"  # 2% canary on a new driver
        vbios = "96.00.99.00.01" if n < a.nodes - 20 else "96.00.74.00.0B"
        hot = 8.0 if rack == "r007" else 0.0
        gpus = [
            {
                "bus": f"0000:{0x18 + 0x10 * i:02x}:00.0",
                "serial": f"1652{n:05d}{i}",
                "name": "NVIDIA H100 80GB HBM3",
                "vbios": vbios,
                "temp": 0.0,
                "uuid": f"GPU-{n:05d}-{i}",
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
            rec = {
                "v": 1,
                "ts": ts,
                "host": host,
                "exit": exit_code,
                "engine": "durable",
                "rulebook": "bench",
                "findings": findings,
                "unknown": [],
                "confirm": [],
                "collectors": {"nvml": "ok", "kernel_log": "ok", "host": "ok"},
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
