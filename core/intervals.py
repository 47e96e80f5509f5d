"""The confidence level and the interval of a measured rate (a leaf: the evaluation points and
the report's statistics both use them)."""

from __future__ import annotations

import math

LEVEL = 0.95  # every interval in RIMscope: 95%


def wilson_interval(k: int | float, n: int, level: float = LEVEL) -> tuple[float, float]:
    """Wilson interval of a rate measured as ``k`` out of ``n`` (NaN for ``n`` = 0)."""
    if n <= 0:
        return (math.nan, math.nan)
    from scipy import stats  # imported at first use: it costs about 2 s

    ci = stats.binomtest(int(round(k)), int(n)).proportion_ci(confidence_level=level, method="wilson")
    return (max(0.0, float(ci.low)), min(1.0, float(ci.high)))
