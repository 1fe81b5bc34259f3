"""Judging: per-run values reduced over a claim's runs, and the result compared with the paper's value.

Owns the reductions a claim's ``quantity.reduce`` names (``reduce_values``: one, each, mean, min, max,
count, realizations, degrading, difference, ratio, brackets, paired; ``frontier_N`` for ``per:
frontier``) and the comparison with the paper's value under its tolerance (``agrees``). Why apart: this
is where a verdict is decided, and it is pure: values in, a value or a yes/no out, with no file and no metrics table.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from coolsampler.results.analysis import binomial_interval
from coolsampler.results.claims.claims_file import COUNT_BOUNDS, ClaimError
from coolsampler.results.claims.measures import RunData, _events
from coolsampler.results.guard import largest_safe_N

# --------------------------------------------------------------------------------------------------
# Reductions over the selected runs


def _missing(x: Any) -> bool:
    return x is None or x is pd.NA or (isinstance(x, float) and math.isnan(x))


def _mean(values: Sequence[Any]) -> Any:
    xs = [v for v in values if not _missing(v)]
    if not xs:
        return None
    if all(isinstance(v, pd.Series) for v in xs):
        return pd.concat(xs, axis=1).mean(axis=1)
    return float(np.mean([float(v) for v in xs]))


def _op(a: Any, b: Any, how: str) -> Any:
    if _missing(a) or _missing(b):
        return None
    if isinstance(a, pd.Series) or isinstance(b, pd.Series):
        return (a - b).dropna()
    return float(a) - float(b) if how == "difference" else (float(a) / float(b) if float(b) else math.nan)


def degrades(rd: RunData) -> bool:
    """Whether a run has an onset of degradation under the Section 2 criteria."""
    return _events(rd).onset is not None


def frontier_N(runs: Sequence[tuple[RunData, Any]]) -> int | None:
    """The largest N none of whose runs degrade (Section 2's onset); ``results.guard.largest_safe_N``."""
    return largest_safe_N((rd.run.N, degrades(rd)) for rd, _ in runs)


def _grouped(pairs: Sequence[tuple[RunData, Any]], per: Sequence[str]) -> dict[tuple[Any, ...], list[Any]]:
    """The values of ``(run, value)`` pairs grouped by the settings ``per`` names."""
    out: dict[tuple[Any, ...], list[Any]] = {}
    for rd, v in pairs:
        s = rd.settings
        out.setdefault(tuple(str(s.get(k)) for k in per), []).append(v)
    return out


def realization_count(values: Sequence[Any]) -> int:
    """How many realizations had the event: a value that is neither missing nor False (a collapse step,
    an onset step, True)."""
    return sum(1 for v in values if not _missing(v) and v is not False)


def realization_rate(values: Sequence[Any], level: float = 0.95) -> tuple[int, int, float, float]:
    """``(k, n, lower, upper)``: the realizations with the event, those measured, and the exact binomial
    interval of the event's probability (``analysis.binomial_interval``)."""
    k, n = realization_count(values), len(values)
    lo, hi = binomial_interval(k, n, level) if n else (math.nan, math.nan)
    return k, n, lo, hi


def count_bound(quantity: Mapping[str, Any]) -> tuple[str, float, str] | None:
    """A count claim's (key, bound, sign), or None for a claim that counts nothing."""
    for key, (sign, _) in COUNT_BOUNDS.items():
        if key in quantity:
            return key, float(quantity[key]), sign
    return None


def reduce_values(
    quantity: Mapping[str, Any],
    runs: Sequence[tuple[RunData, Any]],
    versus: Sequence[tuple[RunData, Any]] = (),
) -> Any:
    """Reduce per-run values (``(run, value)`` pairs, already in seed order) as ``quantity`` says; with
    ``count_at_least``, a list of values becomes how many of them are at or above it ("in at least 3 of
    4 seeds" is a count in [3, null])."""
    value = _reduce(quantity, runs, versus)
    bound = count_bound(quantity)
    if bound is not None:
        key, at, _ = bound
        meets = COUNT_BOUNDS[key][1]
        xs = value if isinstance(value, list) else [value]
        return sum(1 for v in xs if not _missing(v) and meets(float(v), at))
    return value


def _reduce(
    quantity: Mapping[str, Any],
    runs: Sequence[tuple[RunData, Any]],
    versus: Sequence[tuple[RunData, Any]] = (),
) -> Any:
    how = quantity["reduce"]
    vals = [v for _, v in runs]
    if how == "one":
        if len(vals) != 1:
            raise ClaimError(f"reduce one needs exactly one run, the filter selects {len(vals)}")
        return vals[0]
    if how == "each":
        return vals
    if how == "mean":
        return _mean(vals)
    if how in ("min", "max"):
        xs = [float(v) for v in vals if not _missing(v)]
        return (min(xs) if how == "min" else max(xs)) if xs else None
    if how == "count":
        return sum(1 for v in vals if not _missing(v) and v is not False)
    if how == "realizations":  # events counted over realizations; with versus, how many more than there
        mine = realization_count(vals)
        return mine if not versus else mine - realization_count([v for _, v in versus])
    if how == "paired":  # measured on seed pairs already (evaluate_claim): one value per seed, pairs with none left out
        values = [v for _, v in runs if not _missing(v)]
        return _mean(values) if quantity.get("pairs") == "mean" else values
    if how == "degrading":  # each value, over the runs with an onset (Section 2): Table 2's runs
        return [v for rd, v in runs if degrades(rd)]
    if how == "brackets":
        lo = min((float(v) for v in vals if not _missing(v)), default=None)
        hi = min((float(v) for _, v in versus if not _missing(v)), default=None)
        if lo is None or hi is None:
            return None
        return bool(lo < float(quantity["value"]) < hi)
    if how in ("difference", "ratio"):
        per = quantity.get("per")
        if per is None:
            return _op(_mean(vals), _mean([v for _, v in versus]), how)
        if per == "run":
            ref = _mean([v for _, v in versus])
            return [_op(v, ref, how) for v in vals]
        if per == "frontier":
            safe = frontier_N(versus)
            ref = _mean([v for rd, v in versus if rd.run.N == safe]) if safe is not None else None
            return _op(_mean(vals), ref, how)
        keys = ["seed"] if per == "seed" else list(per)
        other, mine = _grouped(versus, keys), _grouped(runs, keys)
        return [_op(_mean(v), _mean(other[k]), how) for k, v in mine.items() if k in other]
    raise ClaimError(f"unknown reduce {how!r}")


# --------------------------------------------------------------------------------------------------
# Comparison with the paper's value


def _tol(tolerance: Any, ref: float) -> float:
    if isinstance(tolerance, Mapping):
        return float(tolerance["rel"]) * abs(ref)
    return float(tolerance)


def scalar(v: Any) -> Any:
    """A curve (Series) is judged by its worst point: 'leads throughout' = its minimum is >= 0."""
    if isinstance(v, pd.Series):
        return float(v.min()) if len(v) else math.nan
    return v


def _close(v: Any, p: Any, tolerance: Any) -> bool:
    v = scalar(v)
    if p is None:
        return v is None
    if isinstance(p, bool):
        return v is p or v == p
    if isinstance(p, str):
        return v == p
    if _missing(v) or isinstance(v, (str, bool, list)):
        return False
    return abs(float(v) - float(p)) <= _tol(tolerance, float(p)) + 1e-12


def _in_range(v: Any, lo: Any, hi: Any, tolerance: Any) -> bool:
    v = scalar(v)
    if _missing(v) or isinstance(v, (str, bool, list)):
        return False
    x = float(v)
    if lo is not None and x < float(lo) - _tol(tolerance, float(lo)) - 1e-12:
        return False
    return not (hi is not None and x > float(hi) + _tol(tolerance, float(hi)) + 1e-12)


def agrees(value: Any, paper: Any, tolerance: Any) -> bool:
    """Whether a computed value matches the paper's (every value of a list must)."""
    if isinstance(paper, Mapping):
        want = paper["each"]
        if not isinstance(value, list) or len(value) != len(want):
            return False
        return all(_close(v, p, tolerance) for v, p in zip(value, want, strict=True))
    values = value if isinstance(value, list) else [value]
    if not values:
        return False
    if isinstance(paper, list):
        return all(_in_range(v, paper[0], paper[1], tolerance) for v in values)
    return all(_close(v, paper, tolerance) for v in values)


__all__ = [
    "COUNT_BOUNDS",
    "count_bound",
    "agrees",
    "degrades",
    "frontier_N",
    "realization_count",
    "realization_rate",
    "reduce_values",
    "scalar",
]
