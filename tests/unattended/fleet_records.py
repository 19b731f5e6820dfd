"""Run records as the exporter writes them (compact JSON, sorted keys), for fleet tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from gpu_triage.io import jsonio

START = datetime(2026, 11, 1, tzinfo=UTC)


def gpu(
    i: int, *, util: float | None = 90.0, temp: float | None = 60.0, host: str = "n"
) -> dict[str, Any]:
    return {
        "bus": f"0000:{0x18 + 0x10 * i:02x}:00.0",
        "name": "NVIDIA H100 80GB HBM3",
        "serial": f"SER-{host}-{i}",
        "temp": temp,
        "util": util,
        "uuid": f"GPU-{host}-{i}",
        "vbios": "96.00.99.00.01",
    }


def record(
    host: str,
    hour: int,
    *,
    findings: list[dict[str, Any]] | None = None,
    gpus: list[dict[str, Any]] | None = None,
    driver: str = "570.86.15",
    xids: list[int] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "cleared": [],
        "collectors": {"host": "ok", "kernel_log": "ok", "nvml": "ok"},
        "confirm": [],
        "driver": driver,
        "engine": "durable",
        "exit": 0,
        "findings": findings or [],
        "gpus": gpus if gpus is not None else [gpu(i, host=host) for i in range(2)],
        "host": host,
        "rulebook": "3dbb3188c9120e30",
        "ts": (START + timedelta(hours=hour)).isoformat(),
        "unknown": [],
        "v": 1,
        "verdict": "HEALTHY (exit 0)",
        "xids": xids or [],
    }
    rec.update(extra)
    return rec


def finding(
    rule: str, sev: str, bus: str = "0000:18:00.0", xid: int | None = None
) -> dict[str, Any]:
    f: dict[str, Any] = {"gpu": bus, "n": 1, "rule": rule, "sev": sev, "stage": "hardware"}
    f["subject"] = f"gpu:{bus}"
    if xid is not None:
        f["xid"] = xid
    return f


def line(rec: dict[str, Any]) -> str:
    return jsonio.dumps(rec, compact=True, sort_keys=True) + "\n"


def write(path: Path, recs: list[dict[str, Any]]) -> Path:
    path.write_text("".join(line(r) for r in recs))
    return path
