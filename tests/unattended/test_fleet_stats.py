"""The fleet report's statistics against exact or textbook values."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from gpu_triage.ops.fleet_stats import fisher_greater, mean_ci, welch_diff, wilson


def _fisher_exact(a: int, n1: int, b: int, n2: int) -> float:
    """P(X >= a), summed with exact integers."""
    total, hits = n1 + n2, a + b
    num = sum(
        math.comb(hits, x) * math.comb(total - hits, n1 - x) for x in range(a, min(hits, n1) + 1)
    )
    return float(Fraction(num, math.comb(total, n1)))


@pytest.mark.parametrize(
    ("a", "n1", "b", "n2"),
    [
        (3, 3, 0, 1000),
        (9, 10, 0, 240),
        (250, 1000, 0, 3),
        (5, 50, 4, 60),
        (0, 10, 5, 10),
        (10, 10, 10, 10),
        (1, 1, 0, 1),
        (31, 1250, 12, 9000),
    ],
)
def test_fisher_matches_the_exact_sum(a: int, n1: int, b: int, n2: int) -> None:
    assert fisher_greater(a, n1, b, n2) == pytest.approx(_fisher_exact(a, n1, b, n2), rel=1e-9)


def test_fisher_stays_finite_on_big_fleets() -> None:
    p = fisher_greater(600, 12500, 40, 12500)
    assert 0.0 <= p < 1e-50 and math.isfinite(p)
    assert fisher_greater(0, 10, 0, 10) == 1.0 and fisher_greater(1, 0, 0, 5) == 1.0


def test_wilson_textbook_values() -> None:
    lo, hi = wilson(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.2775, abs=1e-4)
    lo, hi = wilson(9, 10)
    assert (lo, hi) == (pytest.approx(0.5958, abs=1e-4), pytest.approx(0.9821, abs=1e-4))
    assert wilson(0, 0) == (0.0, 1.0)


def test_mean_ci_from_running_sums() -> None:
    xs = [80.0, 90.0, 100.0, 70.0]
    mean, half = mean_ci(len(xs), sum(xs), sum(x * x for x in xs))
    sd = math.sqrt(sum((x - 85.0) ** 2 for x in xs) / 3)
    assert mean == 85.0 and half == pytest.approx(1.959964 * sd / 2, rel=1e-6)
    assert mean_ci(1, 5.0, 25.0) == (5.0, math.inf)


def test_welch_interval() -> None:
    diff, lo, hi = welch_diff(100, 70.0, 4.0, 900, 62.0, 9.0)
    assert diff == 8.0 and lo == pytest.approx(8 - 1.959964 * math.sqrt(0.04 + 0.01), rel=1e-6)
    assert hi - diff == pytest.approx(diff - lo)
