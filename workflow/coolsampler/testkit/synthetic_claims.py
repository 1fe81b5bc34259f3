"""Synthetic worlds in which a claim of ``config/claims.yaml`` holds by construction (or is shifted off).

The inverse of ``coolsampler.results.claims``: for each per-run measure of ``claims.QUANTITIES`` a *shaper*
rewrites a run's metrics table (``synthetic.make_metrics``, every ``metrics_schema.COLUMNS`` column)
so the measure takes a chosen value, and ``targets`` inverts a claim's reduction (each, mean, count,
difference/ratio per seed or group, brackets, ...) into one value per selected run. ``world`` puts the
two together: the runs a claim selects, each shaped so that the claim's quantity equals the paper's
value (the middle of a range, each value of an ``each`` list). ``shifted`` moves a paper value outside
its tolerance, so the same construction gives a world where the claim must say ``differs``.

Each claim gets its own world: a shape sets the one measure its claim reads and nothing else, so
two claims about the same run (its onset at 190 in one, its KL maximum in another) are built, and
checked, one at a time.

Step-valued measures are rounded to a validation step where the log can only show them there
(onsets, first crossings of an accuracy): within the tolerance of one validation interval.

Only numpy and pandas: no verl, vLLM or torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from typing import Any

import numpy as np
import pandas as pd

from coolsampler.results import analysis as A
from coolsampler.results import claims as C
from coolsampler.results import diagnostics as D
from coolsampler.spec.metrics_schema import RunStatus
from coolsampler.spec.study import Run
from coolsampler.testkit.synthetic import make_metrics

LEVEL = 0.8  # the flat validation accuracy of a shaped curve before any event
DROP = 0.2  # a drop of this size is both an onset (0.10) and a severe point (0.15) of Section 2
EVENT_STEP = 150  # where an event is placed when the claim does not say

# measures whose value is a learner step (shifted by steps, rounded where the log allows)
STEP_FNS = {
    "first_at_least", "onset", "severe", "recovered_at", "back_at", "kl_cross", "lead", "diag_lead",
    "last_step", "staleness_at_onset", "collapse",
}  # fmt: skip
# measures on the accuracy scale [0, 1]
ACC_FNS = {"final", "peak", "val_first", "val_at", "max_val", "val_curve", "last5", "whole", "end"}


class Unconstructible(ValueError):
    """A claim whose world the shapes here cannot build (the message says why)."""


# --------------------------------------------------------------------------------------------------
# Helpers on a metrics table


def base_metrics(run: Run) -> pd.DataFrame:
    """The run's table before shaping: the synthetic curve family, no collapse (a fresh copy)."""
    return _base(run.N, run.steps, run.val_every, run.Tb.initial, run.Tb.end, run.correction).copy()


@cache
def _base(N: int, steps: int, val_every: int, Tb: float, Tb_end: float | None, correction: str) -> pd.DataFrame:
    # every shape rewrites what its measure reads, so one table per schedule serves every world
    return make_metrics(N, steps, val_every, Tb, None, seed=0, correction=correction, Tb_end=Tb_end)


def _val_steps(df: pd.DataFrame, run: Run) -> np.ndarray:
    return df["step"].to_numpy()[df["step"].to_numpy() % run.val_every == 0]


def _round_val(step: float, run: Run, low: int = A.AFTER_STEP + 1) -> int:
    """The validation step nearest ``step``, no earlier than ``low`` and no later than the last."""
    ve = run.val_every
    s = int(round(step / ve)) * ve
    first = int(math.ceil(low / ve)) * ve
    return int(min(max(s, first), (run.steps // ve) * ve))


def _set_val(df: pd.DataFrame, run: Run, fn: Callable[[np.ndarray], np.ndarray]) -> None:
    """Rewrite the validation points (the steps that are validated) as ``fn(steps)``."""
    t = df["step"].to_numpy()
    at = t % run.val_every == 0
    v = df["val_acc"].to_numpy(dtype="float64").copy()
    v[at] = np.clip(fn(t[at]), 0.0, 1.0)
    df["val_acc"] = v


def _flat_with_drop(df: pd.DataFrame, run: Run, at: int | None, back: int | None = None) -> None:
    """Flat accuracy LEVEL, dropping by DROP at validation step ``at`` (None: never), back at ``back``."""

    def f(t: np.ndarray) -> np.ndarray:
        v = np.full(t.shape, LEVEL)
        if at is not None:
            down = t >= at
            if back is not None:
                down &= t < back
            v[down] = LEVEL - DROP
        return v

    _set_val(df, run, f)


def _set_col(df: pd.DataFrame, col: str, value: float, mask: np.ndarray | None = None) -> None:
    x = df[col].to_numpy(dtype="float64").copy()
    if mask is None:
        x[:] = value
    else:
        x[mask] = value
    df[col] = x


def _at(df: pd.DataFrame, step: int) -> np.ndarray:
    return df["step"].to_numpy() == int(step)


def _kl_crossing(df: pd.DataFrame, threshold: float, at: int | None) -> None:
    """KL at half the threshold, and twice it from step ``at`` on (None: never above)."""
    _set_col(df, "kl", threshold * 0.5)
    if at is not None:
        _set_col(df, "kl", threshold * 2.0, df["step"].to_numpy() >= at)


# --------------------------------------------------------------------------------------------------
# Shapers: fn(df, run, target, **args) makes QUANTITIES[name](RunData(run, df), **args) == target.
# ``target`` None: the measure says "did not happen".


def s_final(df: pd.DataFrame, run: Run, v: float) -> None:
    last = _val_steps(df, run)[-1]
    _set_val(df, run, lambda t: np.where(t == last, v, LEVEL))


def s_peak(df: pd.DataFrame, run: Run, v: float) -> None:
    top = _round_val(EVENT_STEP, run)
    _set_val(df, run, lambda t: np.where(t == top, v, max(0.0, v - 0.05)))


def s_val_first(df: pd.DataFrame, run: Run, v: float) -> None:
    first = _val_steps(df, run)[0]
    _set_val(df, run, lambda t: np.where(t == first, v, LEVEL))


def s_val_at(df: pd.DataFrame, run: Run, v: float, step: int) -> None:
    _set_col(df, "val_acc", v, _at(df, step))


def s_max_val(df: pd.DataFrame, run: Run, v: float, since: int | None = None, until: int | None = None) -> None:
    _set_val(df, run, lambda t: np.full(t.shape, v))


s_val_curve = s_whole = s_max_val  # a constant curve: the difference of two is the difference of levels


def s_first_at_least(df: pd.DataFrame, run: Run, v: float, threshold: float) -> None:
    s = _round_val(v, run, low=run.val_every)
    _set_val(df, run, lambda t: np.where(t >= s, threshold + 0.01, threshold - 0.1))


def s_onset(df: pd.DataFrame, run: Run, v: int | None, until: int | None = None) -> None:
    _flat_with_drop(df, run, None if v is None else _round_val(v, run))


s_severe = s_onset


def s_collapse(df: pd.DataFrame, run: Run, v: int | None) -> None:
    # a drop that holds to the end over at least two validations: no later than the last but one
    if v is None:
        _flat_with_drop(df, run, None)
        return
    last_but_one = (run.steps // run.val_every - 1) * run.val_every
    _flat_with_drop(df, run, min(_round_val(v, run), last_but_one))


def s_kl_growth(df: pd.DataFrame, run: Run, v: float, since: int, until: int, base: int = 1) -> None:
    # a flat KL from ``base`` on, ``v`` higher over the window
    t = df["step"].to_numpy()
    _set_col(df, "kl", 0.02)
    _set_col(df, "kl", 0.02 + v, (t >= since) & (t <= until))


def s_kind(df: pd.DataFrame, run: Run, v: str | None) -> None:
    at = _round_val(EVENT_STEP, run)
    if v is None:
        _flat_with_drop(df, run, None)
    elif v == "transient":
        _flat_with_drop(df, run, at, at + run.val_every)
    elif v == "sustained":
        _flat_with_drop(df, run, at)
    else:
        raise Unconstructible(f"kind {v!r}")


def s_recovered_at(df: pd.DataFrame, run: Run, v: int | None) -> None:
    if v is None:
        _flat_with_drop(df, run, _round_val(EVENT_STEP, run))  # sustained: never recovered
        return
    back = _round_val(v, run, low=A.AFTER_STEP + 1 + run.val_every)
    _flat_with_drop(df, run, back - run.val_every, back)


def s_back_at(df: pd.DataFrame, run: Run, v: int | None, band: float = A.RECOVERY_BAND) -> None:
    if v is None:
        _flat_with_drop(df, run, _round_val(EVENT_STEP, run))
        return
    back = _round_val(v, run, low=A.AFTER_STEP + 1 + run.val_every)
    onset = _round_val(max(back - 2 * run.val_every, A.AFTER_STEP + 1), run)
    _flat_with_drop(df, run, onset, back)


def s_kl_cross(
    df: pd.DataFrame,
    run: Run,
    v: float | None,
    threshold: float = 1.0,
    first_cycle: bool = False,
    since: int | None = None,
) -> None:
    _kl_crossing(df, threshold, None if v is None else int(round(v)))


def s_kl_max(df: pd.DataFrame, run: Run, v: float, since: int | None = None, until: int | None = None) -> None:
    _set_col(df, "kl", v)


def s_kl_at(df: pd.DataFrame, run: Run, v: float, step: int) -> None:
    _set_col(df, "kl", v, _at(df, step))


def s_kl_fixed(df: pd.DataFrame, run: Run, v: float) -> None:
    _set_col(df, "kl", v, _at(df, A.kl_step_for(run.N)))


def s_kl_to_init(df: pd.DataFrame, run: Run, v: float, step: int = 90) -> None:
    _set_col(df, "kl_to_init", v, _at(df, step))


def s_lead(df: pd.DataFrame, run: Run, v: float | None, event: str = "onset") -> None:
    if v is None:
        _flat_with_drop(df, run, None)
        _kl_crossing(df, 1.0, None)
        return
    at = _round_val(max(EVENT_STEP + 50, v + 10) if v >= 0 else EVENT_STEP, run)
    cross = at - int(round(v))
    if not 1 <= cross <= run.steps:
        raise Unconstructible(f"lead {v}: KL crossing at step {cross}")
    _flat_with_drop(df, run, at)
    _kl_crossing(df, 1.0, cross)


def _diagnostic_crossing(df: pd.DataFrame, d: D.Diagnostic, threshold: float, at: int | None) -> None:
    """The diagnostic's column on the safe side of ``threshold`` (by a factor of 2), past it from a step on
    such that its reading (per step, or the trailing median) first crosses at ``at`` (None: never)."""
    safe, past = (threshold * 0.5, threshold * 2.0) if d.above else (min(1.0, threshold * 1.5), threshold * 0.5)
    _set_col(df, d.column, safe)
    if at is not None:
        # the median of ROBUST_WINDOW steps turns once ROBUST_MIN_STEPS of them are past
        start = at - (D.ROBUST_MIN_STEPS - 1 if d.robust else 0)
        _set_col(df, d.column, past, df["step"].to_numpy() >= start)


def s_diag_lead(
    df: pd.DataFrame, run: Run, v: float | None, diagnostic: str = "kl", threshold: float | None = None
) -> None:
    d = D.diagnostic(diagnostic)
    t = d.threshold if threshold is None else float(threshold)
    if v is None:  # degrades, never crosses
        _flat_with_drop(df, run, _round_val(EVENT_STEP, run))
        _diagnostic_crossing(df, d, t, None)
        return
    at = _round_val(max(EVENT_STEP + 50, v + 10) if v >= 0 else EVENT_STEP, run)
    cross = at - int(round(v))
    if not D.ROBUST_WINDOW <= cross <= run.steps:
        raise Unconstructible(f"diagnostic lead {v}: crossing at step {cross}")
    _flat_with_drop(df, run, at)
    _diagnostic_crossing(df, d, t, cross)


def s_end(df: pd.DataFrame, run: Run, v: float, last: int = 3) -> None:
    ends = _val_steps(df, run)[-last:]
    _set_val(df, run, lambda t: np.where(np.isin(t, ends), v, LEVEL))


def s_probe(df: pd.DataFrame, run: Run, v: float, field: str) -> None:
    raise Unconstructible(f"the drift probe's {field} is read from drift_probe.json, not shaped into the metrics")


def s_last_step(df: pd.DataFrame, run: Run, v: int) -> pd.DataFrame:
    return df[df["step"] <= int(v)].reset_index(drop=True)


def s_refreshes(df: pd.DataFrame, run: Run, v: int) -> None:
    r = np.zeros(len(df), dtype=bool)
    r[: int(v)] = True  # which steps does not matter to the count
    df["refreshed"] = r


def s_interval(df: pd.DataFrame, run: Run, v: float) -> None:
    """steps / refreshes = v: as many refreshes as that takes (at least one)."""
    s_refreshes(df, run, max(1, round(run.steps / float(v))))


def s_staleness_at_onset(df: pd.DataFrame, run: Run, v: int | None) -> None:
    if v is None:
        _flat_with_drop(df, run, None)
        return
    at = _round_val(max(v, A.AFTER_STEP + 1) + run.val_every / 2 - 0.5, run)  # the validation step at or after v
    if at < v:
        raise Unconstructible(f"staleness {v} beyond the run's {run.steps} steps")
    _flat_with_drop(df, run, at)
    sv = df["sampler_version"].to_numpy().copy()
    sv[_at(df, at)] = at - 1 - int(round(v))  # spec.guard.staleness(at, sv) == v
    df["sampler_version"] = sv


def s_rise_lead(df: pd.DataFrame, run: Run, v: float | None, col: str, delta: float) -> None:
    low, high = 0.1, 0.1 + 2 * float(delta)
    _set_col(df, col, low)
    if v is None:  # degrades, its column never rises
        _flat_with_drop(df, run, _round_val(EVENT_STEP, run))
        return
    at = _round_val(v + run.val_every, run)  # the onset a validation or so after the lead
    rise = at - int(round(v))
    if not 1 <= rise <= run.steps:
        raise Unconstructible(f"rise lead {v}: rise at step {rise}")
    _flat_with_drop(df, run, at)
    _set_col(df, col, high, df["step"].to_numpy() >= rise)


def s_col_gap_at(df: pd.DataFrame, run: Run, v: float, col: str, minus: str, step: int) -> None:
    _set_col(df, minus, LEVEL / 2, _at(df, step))
    _set_col(df, col, LEVEL / 2 + v, _at(df, step))


def s_at_onset(df: pd.DataFrame, run: Run, v: float, col: str) -> None:
    """An onset at the event's validation step, and ``col`` equal to ``v`` there (NaN: no onset)."""
    if isinstance(v, float) and math.isnan(v):
        _flat_with_drop(df, run, None)
        return
    at = _round_val(EVENT_STEP, run)
    _flat_with_drop(df, run, at)
    _set_col(df, col, v, _at(df, at))


def _s_col(df: pd.DataFrame, run: Run, v: float, col: str, **_: Any) -> None:
    _set_col(df, col, v)


_READING_COL = {"kl": ("kl", A.CYCLE_KL_AGES), "clip": ("clip_frac", A.CYCLE_KL_AGES),
                "entropy_start": ("entropy", (0, A.CYCLE_START_STEPS - 1))}  # fmt: skip


def _set_reading(df: pd.DataFrame, run: Run, reading: str, cycle: int, v: float) -> None:
    col, (lo, hi) = _READING_COL[reading]
    t = df["step"].to_numpy()
    cyc, age = A.cycle_of(t, run.N), A.cycle_age(t, run.N)
    _set_col(df, col, v, (cyc == cycle) & (age >= lo) & (age <= hi))


def s_cycle_reading(df: pd.DataFrame, run: Run, v: Any, reading: str, cycle: int | None = None) -> None:
    if cycle is not None:
        _set_reading(df, run, reading, cycle, v)
        return
    for c, x in enumerate(v, start=1):
        _set_reading(df, run, reading, c, x)


def s_cycle_change(df: pd.DataFrame, run: Run, v: float, reading: str) -> None:
    c1 = max(0.2, 0.1 - v)  # both cycles' readings stay positive
    s_cycle_reading(df, run, [c1, c1 + v], reading)


SHAPERS: dict[str, Callable[..., Any]] = {
    "final": s_final,
    "peak": s_peak,
    "val_first": s_val_first,
    "val_at": s_val_at,
    "max_val": s_max_val,
    "val_curve": s_val_curve,
    "first_at_least": s_first_at_least,
    "onset": s_onset,
    "collapse": s_collapse,
    "kl_growth": s_kl_growth,
    "severe": s_severe,
    "kind": s_kind,
    "recovered_at": s_recovered_at,
    "back_at": s_back_at,
    "kl_cross": s_kl_cross,
    "kl_max": s_kl_max,
    "kl_at": s_kl_at,
    "kl_fixed": s_kl_fixed,
    "kl_to_init": s_kl_to_init,
    "lead": s_lead,
    "diag_lead": s_diag_lead,
    "last5": lambda df, run, v: s_end(df, run, v, last=5),
    "whole": s_whole,
    "end": s_end,
    "probe": s_probe,
    "last_step": s_last_step,
    "refreshes": s_refreshes,
    "interval": s_interval,
    "staleness_at_onset": s_staleness_at_onset,
    "rise_lead": s_rise_lead,
    "col_gap_at": s_col_gap_at,
    "at_onset": s_at_onset,
    "col_mean": _s_col,
    "col_max": _s_col,
    "col_min": _s_col,
    "cycle_reading": s_cycle_reading,
    "cycle_change": s_cycle_change,
}


def default(fn: str, run: Run, args: Mapping[str, Any]) -> Any:
    """A plain value of the measure that says "it happened" (the versus side of a difference, an
    event counted by ``count``, a shifted ``null``)."""
    if fn in ACC_FNS:
        return 0.7
    if fn == "kind":
        return "sustained"
    if fn == "kl_cross" and args.get("first_cycle"):
        return run.N // 2
    if fn in ("onset", "severe") and args.get("until") is not None:
        return min(EVENT_STEP, int(args["until"]) - 20)
    if fn in ("first_at_least", "onset", "severe", "kl_cross", "collapse"):
        return EVENT_STEP
    if fn in ("recovered_at", "back_at"):
        return EVENT_STEP + 20
    if fn in ("lead", "diag_lead"):
        return 10
    if fn == "last_step":
        return run.steps
    if fn == "refreshes":
        return run.steps // run.N
    if fn == "interval":
        return run.steps / max(1, run.steps // run.N)
    if fn == "staleness_at_onset":
        return 100
    if fn == "cycle_reading" and args.get("cycle") is None:
        return [0.1, 0.1]
    if fn == "kl_to_init":
        return 0.01
    return 0.1


def shape(run: Run, fn: str, target: Any, args: Mapping[str, Any]) -> pd.DataFrame:
    """The run's table with measure ``fn`` (with ``args``) equal to ``target``."""
    df = base_metrics(run)
    out = SHAPERS[fn](df, run, target, **args)
    return df if out is None else out


# --------------------------------------------------------------------------------------------------
# Inverting a claim's reduction: a value per selected run


def _unit(fn: str, bound: float) -> float:
    """A step that moves a value clearly (steps: two validations; else half the bound, or 0.05)."""
    if fn in STEP_FNS:
        return 20.0
    return 0.5 * abs(bound) if bound else 0.05


def point(fn: str, paper: Any) -> Any:
    """One value that satisfies a paper value: a number, the middle of [low, high], inside an open end."""
    if isinstance(paper, list):
        lo, hi = paper
        if lo is None:
            return hi - _unit(fn, hi)
        if hi is None:
            return lo + _unit(fn, lo)
        return (lo + hi) / 2
    return paper


def _group(rd_run: Run, per: Any) -> tuple[Any, ...]:
    keys = ["seed"] if per == "seed" else list(per)
    s = rd_run.settings()
    return tuple(str(s.get(k)) for k in keys)


def targets(claims: C.Claims, claim: Mapping[str, Any], runs: Sequence[Run], paper: Any) -> dict[str, Any]:
    """Run key -> the value its measure must take so that the claim's reduction gives ``paper``."""
    q = claim["quantity"]
    fn, how, args = q["fn"], q["reduce"], q.get("args") or {}
    mine = sorted(C.select(runs, claims.selector(claim["runs"])), key=lambda r: (r.seed, r.replicate or "", r.key))
    theirs = C.select(runs, claims.selector(q["versus"])) if "versus" in q else []
    each = paper["each"] if isinstance(paper, Mapping) else None
    out: dict[str, Any] = {}
    if how == "one":
        out[mine[0].key] = each if each is not None else point(fn, paper)
    elif how in ("each", "degrading"):  # degrading: every selected run degrades, each with the value
        vals = each if each is not None else [point(fn, paper)] * len(mine)
        if len(vals) != len(mine):
            raise Unconstructible(f"paper lists {len(vals)} values, the filter selects {len(mine)} runs")
        out = {r.key: v for r, v in zip(mine, vals, strict=True)}
    elif how in ("mean", "min", "max"):
        out = {r.key: point(fn, paper) for r in mine}
    elif how == "count":
        n = int(round(point(fn, paper)))
        if not 0 <= n <= len(mine):
            raise Unconstructible(f"count {n} of {len(mine)} runs")
        out = {r.key: (default(fn, r, args) if i < n else None) for i, r in enumerate(mine)}
    elif how == "brackets":
        value, d = float(q["value"]), 20
        lo, hi = (value - d, value + d) if paper else (value + d, value + 2 * d)
        out = {r.key: lo for r in mine}
        _versus(out, theirs, hi)
    elif how in ("difference", "ratio"):
        base = default(fn, (theirs or mine)[0], args)
        op = (lambda b, v: b + v) if how == "difference" else (lambda b, v: b * v)  # noqa: E731
        per = q.get("per")
        if per is None:
            out = {r.key: op(base, point(fn, paper)) for r in mine}
        elif per == "run":
            vals = each if each is not None else [point(fn, paper)] * len(mine)
            if len(vals) != len(mine):
                raise Unconstructible(f"paper lists {len(vals)} values for {len(mine)} runs")
            out = {r.key: op(base, v) for r, v in zip(mine, vals, strict=True)}
        else:
            groups: dict[tuple[Any, ...], list[Run]] = {}
            for r in mine:
                groups.setdefault(_group(r, per), []).append(r)
            paired = [g for g in groups if any(_group(r, per) == g for r in theirs)]
            vals = each if each is not None else [point(fn, paper)] * len(paired)
            if len(vals) != len(paired):
                raise Unconstructible(f"paper lists {len(vals)} values for {len(paired)} groups")
            for g, v in zip(paired, vals, strict=True):
                out.update({r.key: op(base, v) for r in groups[g]})
            for g, rs in groups.items():  # groups with no partner are not reduced: any value
                if g not in paired:
                    out.update({r.key: base for r in rs})
        _versus(out, theirs, base)
    else:
        raise Unconstructible(f"reduce {how}")
    return out


def _versus(out: dict[str, Any], theirs: Sequence[Run], value: Any) -> None:
    for r in theirs:
        if r.key in out and out[r.key] != value:
            raise Unconstructible(f"run {r.key} is on both sides of the comparison")
        out[r.key] = value


# --------------------------------------------------------------------------------------------------
# Worlds


OWN = object()  # world()'s default paper value: the claim's own


def world(claims: C.Claims, claim: Mapping[str, Any], runs: Sequence[Run], paper: Any = OWN) -> dict[str, C.RunData]:
    """The runs ``claim`` selects, shaped so its quantity reduces to ``paper`` (default: the claim's own;
    ``shifted(claim)`` for a world where it must differ)."""
    if paper is OWN and claim.get("reported"):  # no paper value: the measure's plain value, every run
        first = C.select(runs, claims.selector(claim["runs"]))[0]
        paper = default(claim["quantity"]["fn"], first, claim["quantity"].get("args") or {})
    paper = claim["paper"] if paper is OWN else _happens(claims, claim, runs, paper)
    q = claim["quantity"]
    by_key = {r.key: r for r in runs}
    out = {}
    for key, target in targets(claims, claim, runs, paper).items():
        run = by_key[key]
        df = shape(run, q["fn"], target, q.get("args") or {})
        last = int(df["step"].max())
        out[key] = C.RunData(run, df, RunStatus(True, last, run.steps, []))
    return out


FRACTIONS = {"clip_frac", "reward", "is_cap_frac", "veto_frac", "ratio_clip_frac", "val_acc"}


def _fraction(fn: str, args: Mapping[str, Any]) -> bool:
    """Whether the measure is a fraction in [0, 1] (a shift must stay one)."""
    return args.get("col") in FRACTIONS or (fn == "cycle_reading" and args.get("reading") == "clip")


def shifted(claim: Mapping[str, Any], runs: Sequence[Run] = ()) -> Any:
    """A paper value of the claim's shape, outside its tolerance (``null``: the event happens; a range
    of steps that no shift can leave: the event does not happen). A reported claim has none to leave."""
    if claim.get("reported"):
        raise Unconstructible(f"claim {claim['id']} is reported, not asserted: no paper value to shift")
    q = claim["quantity"]
    fn, tol, paper, how = q["fn"], claim["tolerance"], claim["paper"], q["reduce"]
    steps = max((r.steps for r in runs), default=300)

    def feasible(x: float) -> bool:
        if how == "ratio":
            return x > 0
        if how in ("difference", "brackets"):
            return True
        if fn in ACC_FNS or _fraction(fn, q.get("args") or {}):
            return 0.0 <= x <= 0.99
        if fn == "lead":
            return abs(x) <= steps / 2
        if fn in STEP_FNS:
            return A.AFTER_STEP + 10 <= x <= steps - 10
        return x >= 0 or fn == "cycle_change"

    def away(lo: float | None, hi: float | None) -> Any:
        """A value below lo or above hi by more than the tolerance, or None if neither is possible."""
        cands = []
        if hi is not None:
            cands.append(hi + 2 * C._tol(tol, hi) + _unit(fn, hi) + (20 if fn in STEP_FNS else 0.02))
        if lo is not None:
            cands.append(lo - 2 * C._tol(tol, lo) - _unit(fn, lo) - (20 if fn in STEP_FNS else 0.02))
        if fn == "refreshes":
            cands = [round(x) for x in cands]
        ok = [x for x in cands if feasible(x)]
        if ok:
            return ok[0]
        if fn in STEP_FNS:
            return None  # no step outside the range fits the run: the event does not happen
        raise Unconstructible(f"no value of {fn} outside {lo}..{hi}")

    def off(p: Any) -> Any:
        if p is None:
            return "happens"
        if isinstance(p, bool):
            return not p
        if isinstance(p, str):
            return "transient" if p == "sustained" else "sustained"
        return away(p, p)

    if how == "count":
        n = int(round(point(fn, paper)))
        return n - 1 if n > 0 else n + 1
    if isinstance(paper, Mapping):
        return {"each": [off(p) for p in paper["each"]]}
    if isinstance(paper, list):
        return away(*paper)
    return off(paper)


def _happens(claims: C.Claims, claim: Mapping[str, Any], runs: Sequence[Run], paper: Any) -> Any:
    """A shifted ``null`` made concrete: the default value of the measure (it happens)."""
    if paper == "happens":
        q = claim["quantity"]
        first = C.select(runs, claims.selector(claim["runs"]))[0]
        return default(q["fn"], first, q.get("args") or {})
    if isinstance(paper, Mapping):
        return {"each": [_happens(claims, claim, runs, p) for p in paper["each"]]}
    return paper
