"""Each GPU against its own history: anomaly detection over the unattended runs.

A fixed threshold cannot tell a GPU at 80 °C under training (normal) from one at 80 °C
while idle (a cooling fault or a stuck context): what is abnormal is a reading far
from what *this* GPU shows *at this load*. So every unattended run records, per GPU and
per load band (GPU utilisation: idle < 10 %, light < 70 %, busy), its temperature and
power draw, and the next runs compare with them.

The comparison is robust, so that a few odd runs in the history do not move it and the
false-positive rate stays very low: the median of the band's earlier runs and the
median absolute deviation (MAD, scaled by 1.4826 to a standard deviation for normal
data), with a floor under the scale (a GPU that read 65 °C fifty times in a row would
otherwise make 66 °C a huge deviation). Nothing is said before :data:`MIN_RUNS` earlier
runs in the band. Two more facts let the rules ask for more than one odd reading: the
previous run's z (an anomaly that lasts two runs is no sampling accident), and the
median z of the node's other GPUs in the same band (when they all moved together, the
workload or the room changed, not this GPU). The rules add an absolute difference on
top of the robust z.

The samples live in the history state file (``baselines``), bounded: the newest
:data:`MAX_PER_BAND` per band and GPU, none older than :data:`MAX_AGE`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from statistics import median
from typing import Any

from gpu_triage.model.facts import FactModel, GpuFacts, UnavailableReason
from gpu_triage.model.snapshot import Snapshot
from gpu_triage.ops.load_bands import BAND_BOUNDS, BAND_NAMES

# (name, GPU utilisation below which a reading is in it): the fleet view's bands
BANDS = tuple(zip(BAND_NAMES, (*BAND_BOUNDS, math.inf), strict=True))
MIN_RUNS = 20
MAX_PER_BAND = 96  # 8 hours of 5-minute runs when the GPU stays in one band
MAX_AGE = timedelta(days=14)
MAX_GPUS = 1024
MAD_TO_SD = 1.4826
PREVIOUS_MAX_AGE = timedelta(hours=2)
LAST = "last"  # the band key holding the previous run's [time, temperature z, power z]
# fact read, baseline fact, z fact, previous run's z, peers' z, floor under the scale
# (absolute, relative to the median)
METRICS = (
    (
        "temperature_gpu_c",
        "temp_baseline_c",
        "temp_robust_z",
        "temp_z_previous_run",
        "temp_peers_z",
        1.0,
        0.0,
    ),
    (
        "power_draw_w",
        "power_baseline_w",
        "power_robust_z",
        "power_z_previous_run",
        "power_peers_z",
        5.0,
        0.02,
    ),
)
FIELDS = ("load_band", "baseline_runs", *(f for m in METRICS for f in m[1:5]))
Sample = list[float | None]  # [epoch seconds, temperature, power]


def _finite(value: float | None) -> float | None:
    """A reading the state file can hold: NaN, infinities and absurd values are none."""
    if isinstance(value, (int, float)) and math.isfinite(value) and abs(value) <= 1e9:
        return float(value)
    return None


def band_of(util: float | None) -> str | None:
    if util is None or not 0.0 <= util <= 100.0:  # NaN compares false: no band
        return None
    return next(name for name, bound in BANDS if util < bound)


def robust_z(
    value: float, past: list[float], floor_abs: float, floor_rel: float
) -> tuple[float, float]:
    """(median of ``past``, robust z of ``value`` against it)."""
    med = median(past)
    mad = median(abs(v - med) for v in past)
    scale = max(MAD_TO_SD * mad, floor_abs, floor_rel * abs(med))
    return med, (value - med) / scale


def _key(gpu: FactModel) -> str | None:
    ident = getattr(gpu, "uuid", None) or getattr(gpu, "pci_bus_id", None)
    return f"gpu|{ident}" if ident else None


@dataclass
class BaselineLedger:
    entries: dict[str, dict[str, list[Sample]]] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BaselineLedger:
        entries = data.get("entries", {})
        return cls({k: dict(v) for k, v in entries.items() if isinstance(v, dict)})

    def to_json(self) -> dict[str, Any]:
        return {"entries": self.entries}

    def _past(self, key: str, band: str, now: float) -> list[Sample]:
        return [
            s
            for s in self.entries.get(key, {}).get(band, [])
            if isinstance(s[0], (int, float)) and now - s[0] <= MAX_AGE.total_seconds()
        ]

    def prepare(self, snap: Snapshot, now: datetime) -> None:
        """Fill each GPU's baseline facts from the earlier runs in its load band."""
        t = (snap.taken_at or now).timestamp()
        judged: list[tuple[GpuFacts, str]] = []
        for gpu in snap.facts.gpus:
            key, band = _key(gpu), band_of(gpu.utilization_gpu_pct)
            if key is None or band is None:
                why = "no GPU identity" if key is None else "GPU utilisation not read"
                for fld in FIELDS:
                    gpu.mark_unavailable(fld, UnavailableReason.NOT_COLLECTED, why)
                continue
            judged.append((gpu, band))
            past = self._past(key, band, t)
            gpu.load_band, gpu.baseline_runs = band, len(past)
            last = self._previous(key, t)
            for pos, (current, base, z, prev, _, floor_abs, floor_rel) in enumerate(
                METRICS, start=1
            ):
                value = _finite(getattr(gpu, current))
                values = [s[pos] for s in past if isinstance(s[pos], (int, float))]
                if value is None or len(values) < MIN_RUNS:
                    why = (
                        f"{current} not read"
                        if value is None
                        else f"{len(values)} earlier runs at this load ({MIN_RUNS} needed)"
                    )
                    for fld in (base, z):
                        gpu.mark_unavailable(fld, UnavailableReason.NOT_COLLECTED, why)
                else:
                    med, score = robust_z(value, values, floor_abs, floor_rel)  # type: ignore[arg-type]
                    setattr(gpu, base, round(med, 2))
                    setattr(gpu, z, round(score, 2))
                before = last[pos] if last else None
                if isinstance(before, (int, float)):
                    setattr(gpu, prev, before)
                else:
                    gpu.mark_unavailable(
                        prev, UnavailableReason.NOT_COLLECTED, "no judged run in the last two hours"
                    )
        for gpu, band in judged:
            for *_, z, _, peers, _, _ in METRICS:
                others = [
                    getattr(o, z)
                    for o, b in judged
                    if o is not gpu and b == band and getattr(o, z) is not None
                ]
                if others:
                    setattr(gpu, peers, round(median(others), 2))
                else:
                    gpu.mark_unavailable(
                        peers, UnavailableReason.NOT_COLLECTED, "no other GPU judged at this load"
                    )

    def _previous(self, key: str, now: float) -> Sample | None:
        last = self.entries.get(key, {}).get(LAST) or []
        sample = last[-1] if last else None
        if not sample or not isinstance(sample[0], (int, float)):
            return None
        return sample if 0 < now - sample[0] <= PREVIOUS_MAX_AGE.total_seconds() else None

    def record(self, snap: Snapshot, now: datetime) -> None:
        """Add this run's readings to each GPU's band (and its z, for the next run),
        keeping the bounds."""
        t = (snap.taken_at or now).timestamp()
        for gpu in snap.facts.gpus:
            key, band = _key(gpu), band_of(gpu.utilization_gpu_pct)
            if key is None or band is None:
                continue
            temp, power = _finite(gpu.temperature_gpu_c), _finite(gpu.power_draw_w)
            if temp is None and power is None:
                continue
            bands = self.entries.setdefault(key, {})
            kept = self._past(key, band, t)[-(MAX_PER_BAND - 1) :]
            bands[band] = [*kept, [t, temp, power]]
            scores = [_finite(getattr(gpu, m[2], None)) for m in METRICS]
            bands[LAST] = [[t, *scores]]
        if len(self.entries) > MAX_GPUS:  # keep the GPUs seen most recently

            def newest(item: tuple[str, dict[str, list[Sample]]]) -> float:
                return max((s[0] or 0.0 for b in item[1].values() for s in b[-1:]), default=0.0)

            self.entries = dict(sorted(self.entries.items(), key=newest)[-MAX_GPUS:])
