"""The statistics every report uses, through ``scipy.stats`` and pandas.

* ``mean_sd``: mean, sample standard deviation and count of the finite values.
* ``welch_ci``: difference of two means (independent samples) with its 95% Welch t-interval.
* ``wilson_interval``: 95% Wilson interval of an error rate measured as k wrong out of n.
* ``verdict``: what an interval of (other − method) says about a claim.
* ``ema_smooth``: TensorBoard-style exponential moving average (bias-corrected).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
from scipy import stats as _st

LEVEL = 0.95


def finite(values) -> np.ndarray:
    """Floats of ``values`` with None / NaN / infinite ones left out."""
    out = []
    for v in values if values is not None else []:
        try:
            f = float(v)
        except (TypeError, ValueError):
            continue
        if math.isfinite(f):
            out.append(f)
    return np.asarray(out, dtype=float)


def float_array(values) -> np.ndarray:
    """Floats with None / non-numbers as NaN (diverged losses are stored as null)."""
    out = []
    for v in values if values is not None else []:
        try:
            out.append(float(v))
        except (TypeError, ValueError):
            out.append(math.nan)
    return np.asarray(out, dtype=float)


def mean_sd(values) -> tuple[float, float, int]:
    """Mean, sample sd (NaN for fewer than 2 values) and count of the finite ``values``."""
    v = finite(values)
    if len(v) == 0:
        return math.nan, math.nan, 0
    return float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else math.nan, len(v)


def welch_ci(a, b, level: float = LEVEL) -> tuple[float, float, float]:
    """Mean of ``a - b`` (independent samples) and its Welch t-interval (NaN below 2 each)."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    diff = float(a.mean() - b.mean())
    if len(a) < 2 or len(b) < 2:
        return diff, math.nan, math.nan
    if a.var(ddof=1) + b.var(ddof=1) == 0:  # no spread at all: the difference is exact
        return diff, diff, diff
    with warnings.catch_warnings():  # near-identical seeds: scipy warns of precision loss, the interval stands
        warnings.simplefilter("ignore", RuntimeWarning)
        ci = _st.ttest_ind(a, b, equal_var=False).confidence_interval(confidence_level=level)
    return diff, float(ci.low), float(ci.high)


def wilson_interval(k: int | float, n: int, level: float = LEVEL) -> tuple[float, float]:
    """Wilson interval of a rate measured as ``k`` out of ``n`` (NaN for ``n`` = 0)."""
    if n <= 0:
        return (math.nan, math.nan)
    ci = _st.binomtest(int(round(k)), int(n)).proportion_ci(confidence_level=level, method="wilson")
    return (max(0.0, float(ci.low)), min(1.0, float(ci.high)))


def verdict(lo: float, hi: float, above: str = "holds", below: str = "does not hold (the other method is better)",
            neither: str = "cannot tell at this number of seeds") -> str:
    """'holds' when the interval of (other - rim) lies above 0, 'does not hold' below."""
    if math.isnan(lo) or math.isnan(hi):
        return "cannot tell (fewer than 2 seeds)"
    if lo > 0:
        return above
    if hi < 0:
        return below
    return neither


def ema_smooth(values, weight: float) -> np.ndarray:
    """TensorBoard-style exponential moving average with bias correction.

    ``weight`` in [0, 1): 0 returns the values unchanged. NaN and infinite values are skipped
    (the average carries over) but stay NaN in the output, so a diverged stretch shows a gap.
    """
    y = float_array(values)
    if not 0.0 <= weight < 1.0:
        raise ValueError(f"smoothing weight must be in [0, 1), got {weight}")
    if weight == 0.0 or len(y) == 0:
        return y
    ok = np.isfinite(y)
    s = pd.Series(np.where(ok, y, np.nan)).ewm(alpha=1.0 - weight, adjust=True, ignore_na=True).mean()
    return np.where(ok, s.to_numpy(dtype=float), np.nan)
