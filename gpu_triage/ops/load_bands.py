"""Load bands of the per-GPU baselines: GPU utilisation below 10 % is idle, below 70 %
light, else busy. One home for the bounds, shared by the unattended run's baseline
ledger (ops/baseline.py) and the fleet reader, which must agree on them."""

from __future__ import annotations

BAND_BOUNDS = (10.0, 70.0)
BAND_NAMES = ("idle", "light", "busy")
IDLE_BELOW, LIGHT_BELOW = BAND_BOUNDS


def band_index(util: float) -> int:
    return 0 if util < IDLE_BELOW else 1 if util < LIGHT_BELOW else 2
