"""The statistics every report uses, through ``scipy.stats`` and pandas.

* ``mean_sd``: mean, sample standard deviation and count of the finite values.
* ``welch_test``: difference of two means (independent samples), its 95% Welch
  t-interval and two-sided p-value.
* ``paired_test``: the same for samples paired by seed (paired t), where a seed gives every
  model the same data order (``core.train``: batch order, validation split and evaluation
  subset come from the seed alone).
* ``pooled_gap``: the mean of several data sets' gaps with its Welch-Satterthwaite interval.
* ``holm``: Holm-Bonferroni adjusted p-values of one family of tests; ``holm_levels``: the
  confidence level of the Holm step that decides each test, and ``t_interval`` the interval at
  that level, so a printed interval excludes 0 exactly when the verdict rejects (the scheme of
  every table: ``INTERVAL_NOTE``).
* ``verdict`` / ``verdict_all``: THE verdict rule, used by every table: a claim holds when its
  family-adjusted test rejects "no difference" with the difference in the claimed direction,
  does not hold when it rejects in the other direction, and cannot be told otherwise; a claim
  over several data sets holds only when it holds on each.
* ``wilson_interval`` (core.intervals): 95% Wilson interval of an error rate measured as k wrong out of n.
* ``ema_smooth``: TensorBoard-style exponential moving average (bias-corrected).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd

from ..intervals import LEVEL


class _Scipy:
    """``scipy.stats``, imported at first use: it costs about 2 s, and a page that only draws
    (most first views) should not pay for it."""

    def __getattr__(self, name):
        from scipy import stats

        return getattr(stats, name)


_st = _Scipy()

ALPHA = 0.05  # = 1 - LEVEL; a (family-adjusted) p-value below this rejects "no difference"


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


def _exact(diff: float) -> tuple[float, float, float, float]:
    """No spread at all: the difference is exact (p 0 unless it is 0)."""
    return diff, diff, diff, 0.0 if diff != 0 else 1.0


def welch_test(a, b, level: float = LEVEL) -> tuple[float, float, float, float]:
    """Mean of ``a`` − mean of ``b`` (independent samples), its Welch t-interval and p-value.

    NaN interval and p below 2 values in either sample."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if len(a) == 0 or len(b) == 0:
        return (math.nan,) * 4
    diff = float(a.mean() - b.mean())
    if len(a) < 2 or len(b) < 2:
        return diff, math.nan, math.nan, math.nan
    if a.var(ddof=1) + b.var(ddof=1) == 0:
        return _exact(diff)
    with warnings.catch_warnings():  # near-identical seeds: scipy warns of precision loss, the interval stands
        warnings.simplefilter("ignore", RuntimeWarning)
        res = _st.ttest_ind(a, b, equal_var=False)
        ci = res.confidence_interval(confidence_level=level)
    return diff, float(ci.low), float(ci.high), float(res.pvalue)


def paired_test(a: dict, b: dict, level: float = LEVEL) -> tuple[float, float, float, float, int]:
    """Mean of ``a[s] − b[s]`` over the seeds ``s`` in both, its paired t-interval, p-value and
    the number of pairs (NaN interval and p below 2 pairs)."""
    seeds = sorted(set(a) & set(b))
    d = np.asarray([float(a[s]) - float(b[s]) for s in seeds], dtype=float)
    if len(d) == 0:
        return math.nan, math.nan, math.nan, math.nan, 0
    if len(d) < 2:
        return float(d.mean()), math.nan, math.nan, math.nan, len(d)
    if d.var(ddof=1) == 0:
        return (*_exact(float(d.mean())), len(d))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        res = _st.ttest_1samp(d, 0.0)
        ci = res.confidence_interval(confidence_level=level)
    return float(d.mean()), float(ci.low), float(ci.high), float(res.pvalue), len(d)


def pooled_gap(pairs, level: float = LEVEL) -> tuple[float, float, float, float]:
    """The mean over data sets of (mean a − mean b), its interval and p-value.

    ``pairs``: one ``(a, b)`` of independent samples per data set. The estimate is the plain
    mean of the per-set gaps (each set weighs the same, as the paper's "average gap"); its
    variance is the sum of the per-set Welch variances over K², with Welch-Satterthwaite
    degrees of freedom over all 2K samples. One data set gives ``welch_test``'s numbers."""
    pairs = [(np.asarray(a, float), np.asarray(b, float)) for a, b in pairs]
    if not pairs or any(len(a) == 0 or len(b) == 0 for a, b in pairs):
        return (math.nan,) * 4
    k = len(pairs)
    est = float(np.mean([a.mean() - b.mean() for a, b in pairs]))
    if any(len(a) < 2 or len(b) < 2 for a, b in pairs):
        return est, math.nan, math.nan, math.nan
    parts = [x.var(ddof=1) / len(x) for a, b in pairs for x in (a, b)]
    sizes = [len(x) for a, b in pairs for x in (a, b)]
    var = sum(parts) / k**2
    if var == 0:
        return _exact(est)
    df = sum(parts) ** 2 / sum(v**2 / (n - 1) for v, n in zip(parts, sizes, strict=True))
    se = math.sqrt(var)
    half = float(_st.t.ppf(0.5 + level / 2, df)) * se
    return est, est - half, est + half, float(2 * _st.t.sf(abs(est) / se, df))


def pooled_se_df(pairs) -> tuple[float, float]:
    """Standard error and Welch-Satterthwaite degrees of freedom of ``pooled_gap``'s estimate."""
    pairs = [(np.asarray(a, float), np.asarray(b, float)) for a, b in pairs]
    if not pairs or any(len(a) < 2 or len(b) < 2 for a, b in pairs):
        return math.nan, math.nan
    parts = [x.var(ddof=1) / len(x) for a, b in pairs for x in (a, b)]
    sizes = [len(x) for a, b in pairs for x in (a, b)]
    if sum(parts) == 0:
        return 0.0, float(sum(sizes) - 2 * len(pairs))
    df = sum(parts) ** 2 / sum(v**2 / (n - 1) for v, n in zip(parts, sizes, strict=True))
    return math.sqrt(sum(parts)) / len(pairs), df


def holm(pvalues, pending: int = 0) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values of one family (NaN ones stay NaN and do not count).

    Sorted ascending, the i-th smallest (from 0) becomes ``max over j <= i of min(1, (m − j) p_j)``.
    ``pending``: further tests of the family whose data are not in yet, counted with p = 1 (last in
    the order, never rejected): m grows by them. Holm is monotone in every p value, so a test
    rejected now stays rejected whatever p values the pending tests bring."""
    p = float_array(pvalues)
    out = np.full(len(p), math.nan)
    ok = np.flatnonzero(np.isfinite(p))
    m = len(ok) + max(0, int(pending))
    running = 0.0
    for rank, i in enumerate(ok[np.argsort(p[ok], kind="stable")]):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out


def holm_levels(pvalues, alpha: float = ALPHA, pending: int = 0) -> np.ndarray:
    """The confidence level of the Holm step that decides each test of one family (NaN ones: NaN).

    Sorted ascending (rank i from 0, m finite tests), Holm rejects ranks 0..r-1 and stops at the
    first r with ``p > alpha / (m - r)``. A rejected test is decided at its own step (level
    ``1 - alpha / (m - i)``), every other at the stopping step (``1 - alpha / (m - r)``). The
    t-interval of a test at its level excludes 0 exactly when its Holm-adjusted p is below
    ``alpha``, so interval and verdict never disagree. ``pending`` as in ``holm`` (m counts them;
    the stopping step is at the latest the first of them)."""
    p = float_array(pvalues)
    out = np.full(len(p), math.nan)
    ok = np.flatnonzero(np.isfinite(p))
    m = len(ok) + max(0, int(pending))
    order = ok[np.argsort(p[ok], kind="stable")]
    stop = len(ok)
    for rank, i in enumerate(order):
        if not p[i] * (m - rank) < alpha:
            stop = rank
            break
    for rank, i in enumerate(order):
        out[i] = 1.0 - alpha / (m - min(rank, stop))
    return out


def t_interval(diff: float, se: float, df: float, level: float) -> tuple[float, float]:
    """``diff`` ± t(df) quantile x ``se`` at ``level`` (``se`` 0: the exact difference; NaN when unknown)."""
    if any(not math.isfinite(float(x)) for x in (diff, se, df, level)):
        return math.nan, math.nan
    if se == 0:
        return float(diff), float(diff)
    half = float(_st.t.ppf(0.5 + level / 2, df)) * se
    return float(diff) - half, float(diff) + half


def welch_se_df(a, b) -> tuple[float, float]:
    """Standard error and Welch-Satterthwaite degrees of freedom of mean(a) − mean(b) (NaN below 2 each)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if len(a) < 2 or len(b) < 2:
        return math.nan, math.nan
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    if va + vb == 0:
        return 0.0, float(len(a) + len(b) - 2)
    return math.sqrt(va + vb), (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))


def welch_from_summary(m1, s1, n1, m2, s2, n2, level: float = LEVEL) -> dict:
    """Welch test of mean 1 − mean 2 from means, sample sds and counts: ``diff``, ``se``, ``df``, ``p``,
    ``ci_low``, ``ci_high`` (NaN where a count is below 2)."""
    d = float(m1) - float(m2)
    if min(n1, n2) < 2:
        return {"diff": d, "se": math.nan, "df": math.nan, "p": math.nan, "ci_low": math.nan, "ci_high": math.nan}
    va, vb = float(s1) ** 2 / n1, float(s2) ** 2 / n2
    se = math.sqrt(va + vb)
    if se == 0:
        lo, hi = d, d
        return {"diff": d, "se": 0.0, "df": float(n1 + n2 - 2), "p": 0.0 if d else 1.0, "ci_low": d, "ci_high": d}
    df = (va + vb) ** 2 / (va**2 / (n1 - 1) + vb**2 / (n2 - 1))
    lo, hi = t_interval(d, se, df, level)
    return {"diff": d, "se": se, "df": df, "p": float(2 * _st.t.sf(abs(d) / se, df)), "ci_low": lo, "ci_high": hi}


def tost(diff: float, se: float, df: float, margin: float) -> float:
    """Two one-sided tests of equivalence: the p-value of "|true difference| >= ``margin``"
    (small: the difference lies within ± margin). NaN when the test cannot be made."""
    if any(not math.isfinite(float(x)) for x in (diff, se, df, margin)):
        return math.nan
    if se == 0:
        return 0.0 if abs(diff) < margin else 1.0
    lower = float(_st.t.sf((diff + margin) / se, df))  # H0: diff <= -margin
    upper = float(_st.t.cdf((diff - margin) / se, df))  # H0: diff >= +margin
    return max(lower, upper)


INTERVAL_NOTE = ("Interval: the t-interval at the confidence level of the Holm step that decides the test (rejected "
                 "tests: 1 − 0.05/(m − rank); the others: the level where Holm stopped), so it excludes 0 exactly "
                 "when the Holm-adjusted p is below 0.05 and the verdict follows from it: holds when it lies wholly "
                 "on the claimed side, does not hold when wholly on the other, cannot tell when it contains 0.")


HOLDS, NOT_HOLDS, CANNOT_TELL = "holds", "does not hold (the other method is better)", "cannot tell at this number of seeds"
TOO_FEW = "cannot tell (fewer than 2 seeds)"


def verdict(diff: float, p_adjusted: float, above: str = HOLDS, below: str = NOT_HOLDS,
            neither: str = CANNOT_TELL, alpha: float = ALPHA) -> str:
    """THE verdict rule. ``diff``: the claimed direction is positive (e.g. other − RIM, where a
    positive gap means RIM is better); ``p_adjusted``: the test's p-value, Holm-adjusted within
    its family (one table). Rejecting (p < alpha) with a positive ``diff``: ``above``; with a
    negative one: ``below``; otherwise ``neither``; no test (fewer than 2 seeds): ``TOO_FEW``."""
    if diff is None or p_adjusted is None or math.isnan(float(diff)) or math.isnan(float(p_adjusted)):
        return TOO_FEW
    if p_adjusted < alpha and diff > 0:
        return above
    if p_adjusted < alpha and diff < 0:
        return below
    return neither


# THE magnitude rule: a gap against the paper's figure for it (both as "other − RIM", points),
# read from the same interval as the verdict (the Holm step's level): "smaller than the paper's"
# when the whole interval lies below the paper's figure; "as large as the paper's" when it
# excludes 0 and reaches the figure (contains it or lies above it); otherwise it contains both 0
# and the paper's figure, and five seeds cannot tell
SMALLER, AS_LARGE, MAGNITUDE_OPEN = "smaller than the paper's", "as large as the paper's", "cannot tell against the paper's"


def magnitude(ci_low: float, ci_high: float, paper: float) -> str:
    """THE magnitude rule (above); ``""`` when the paper gives no figure or there is no interval."""
    if any(not math.isfinite(float(x)) for x in (ci_low, ci_high, paper)):
        return ""
    if ci_high < paper:
        return SMALLER
    if ci_low > 0:
        return AS_LARGE
    return MAGNITUDE_OPEN


def verdict_all(verdicts: dict, required) -> tuple[str, dict]:
    """A claim over several data sets: it holds only when it holds on each of ``required``, does
    not hold when it fails measurably on any, and cannot be told otherwise (a set without a
    test counts as "cannot tell"). ``verdicts``: data set -> ``verdict`` text. Returns the
    verdict and ``{"holds": [...], "does not hold": [...], "cannot tell": [...]}``."""
    groups: dict[str, list] = {"holds": [], "does not hold": [], "cannot tell": []}
    for d in required:
        v = verdicts.get(d) or TOO_FEW
        key = "holds" if v == HOLDS else "does not hold" if v.startswith("does not hold") else "cannot tell"
        groups[key].append(d)
    if groups["does not hold"]:
        return NOT_HOLDS, groups
    if len(groups["holds"]) == len(list(required)) and groups["holds"]:
        return HOLDS, groups
    return CANNOT_TELL, groups


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
