"""The few statistics the fleet report states, stdlib only.

Each function returns what a sentence of the report needs: an interval or a p-value.
Samples of one node are correlated (a job runs for hours; GPUs of one node share its
cooling), so the intervals that assume independent samples are optimistic, and the report
says so where it prints them.
"""

from __future__ import annotations

import math

Z95 = 1.959963984540054  # two-sided 95% normal quantile


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """95% Wilson score interval of a proportion (good at 0/n and n/n, unlike Wald)."""
    if n <= 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def fisher_greater(a: int, n1: int, b: int, n2: int) -> float:
    """One-sided Fisher exact p-value that group 1's rate (a of n1) exceeds group 2's
    (b of n2): P(X >= a) under the hypergeometric law with both groups' margins fixed.
    Linear in min(a + b, n1); summed in log space, so thousands of nodes do not overflow."""
    if not (0 <= a <= n1 and 0 <= b <= n2) or n1 == 0 or n2 == 0:
        return 1.0
    total, hits = n1 + n2, a + b
    top = min(hits, n1)
    if a > top:
        return 0.0
    base = _log_comb(total, n1)
    logs = [_log_comb(hits, x) + _log_comb(total - hits, n1 - x) - base for x in range(a, top + 1)]
    peak = max(logs)
    return min(1.0, math.exp(peak) * sum(math.exp(v - peak) for v in logs))


def mean_ci(n: int, total: float, squares: float, z: float = Z95) -> tuple[float, float]:
    """Mean and the half-width of its 95% interval from a count, a sum and a sum of
    squares (what the readers accumulate; no sample is kept)."""
    if n <= 0:
        return (math.nan, math.inf)
    mean = total / n
    if n == 1:
        return (mean, math.inf)
    var = max(0.0, (squares - n * mean * mean) / (n - 1))
    return (mean, z * math.sqrt(var / n))


def welch_diff(
    n1: int, mean1: float, var1: float, n2: int, mean2: float, var2: float, z: float = Z95
) -> tuple[float, float, float]:
    """Difference of two means with its 95% interval (normal approximation, unequal
    variances): (difference, low, high)."""
    diff = mean1 - mean2
    if n1 < 2 or n2 < 2:
        return (diff, -math.inf, math.inf)
    se = math.sqrt(var1 / n1 + var2 / n2)
    return (diff, diff - z * se, diff + z * se)


def variance(values: list[float]) -> tuple[float, float]:
    """(mean, sample variance) of a list; variance 0 for fewer than two values."""
    n = len(values)
    if n == 0:
        return (math.nan, 0.0)
    mean = math.fsum(values) / n
    if n == 1:
        return (mean, 0.0)
    return (mean, math.fsum((v - mean) ** 2 for v in values) / (n - 1))
