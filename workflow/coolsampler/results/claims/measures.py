"""Per-run measures: what a claim computes on one run, or (``PAIRED``) on a run and its seed's pair.

Owns ``RunData`` (one run as the claims see it: settings, metrics table, status) and how it is read
from disk, the measures that ``QUANTITIES`` and ``PAIRED`` name (each a thin call into
``coolsampler.results.analysis``), the metrics columns each one reads (``quantity_columns``,
``unlogged``) and the staleness at a step. Why apart: these are the only functions of the claims that
read a run's metrics; judging, the claims file, evaluation and the budget work on what they return.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from coolsampler.results import analysis as A
from coolsampler.results import diagnostics as D
from coolsampler.spec.drift import PROBE_FILE
from coolsampler.spec.guard import staleness
from coolsampler.spec.inputs import InputError
from coolsampler.spec.metrics_schema import RunStatus, absent_columns
from coolsampler.spec.study import Run


@dataclass
class RunData:
    """One run as the claims see it: its settings, metrics table (None: no logs), status, and its drift
    probe (``drift_probe.json`` beside the metrics, None where the study probes no such run)."""

    run: Run
    metrics: pd.DataFrame | None
    status: RunStatus | None
    probe: Mapping[str, Any] | None = None

    @property
    def settings(self) -> dict[str, Any]:
        return self.run.settings()


def _order(rd: RunData) -> tuple[Any, ...]:
    """Runs in seed order (the paper lists per-seed numbers as seeds 1, 43, 44), replicates last."""
    return (rd.run.seed, rd.run.replicate or "", rd.run.key)


def load_run_data(run: Run, metrics: str | Path | None, status: str | Path | None) -> RunData:
    """A run's data from its metrics table and status.json (either may be absent: None), and the drift
    probe beside them where the study probed the run."""
    import json

    from coolsampler.results.loaders import load_metrics, load_status

    probe = Path(metrics).with_name(PROBE_FILE) if metrics is not None else None
    found = None
    if probe is not None and probe.is_file():
        try:
            found = json.loads(probe.read_bytes().decode("utf-8-sig"))
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise InputError(probe, f"not a JSON drift probe ({' '.join(str(e).split())})") from None
        if not isinstance(found, dict):
            raise InputError(probe, f"a JSON {type(found).__name__}; expected an object of the probe's numbers")
    return RunData(run, load_metrics(metrics), load_status(status), found)


# --------------------------------------------------------------------------------------------------
# Per-run measures: name -> fn(RunData, **args). Each is a thin call into coolsampler.results.analysis.


def _val(d: RunData) -> pd.Series:
    return A.validation(d.metrics)


def _col(d: RunData, col: str) -> pd.Series:
    return A._column(d.metrics, col)


def _window(s: pd.Series, since: int | None = None, until: int | None = None) -> pd.Series:
    if since is not None:
        s = s[s.index >= since]
    if until is not None:
        s = s[s.index <= until]
    return s


def _events(d: RunData, until: int | None = None) -> A.DegradationEvents:
    return A.degradation_events(_window(_val(d), None, until))


def m_final(d: RunData) -> float:
    v = _val(d)
    return float(v.iloc[-1]) if len(v) else math.nan


def m_peak(d: RunData) -> float:
    return A.degradation_events(_val(d)).peak


def m_val_first(d: RunData) -> float:
    v = _val(d)
    return float(v.iloc[0]) if len(v) else math.nan


def m_val_at(d: RunData, step: int) -> float:
    return A.value_at(d.metrics, "val_acc", step)


def m_max_val(d: RunData, since: int | None = None, until: int | None = None) -> float:
    v = _window(_val(d), since, until)
    return float(v.max()) if len(v) else math.nan


def m_val_curve(d: RunData, since: int | None = None, until: int | None = None) -> pd.Series:
    """The validation curve itself (for 'leads throughout': a difference of two curves)."""
    return _window(_val(d), since, until)


def m_first_at_least(d: RunData, threshold: float) -> int | None:
    """First validation step at or above ``threshold`` (analysis.first_crossing, inclusive)."""
    return A.first_crossing(_val(d), threshold - A.EPS)


def m_onset(d: RunData, until: int | None = None) -> int | None:
    return _events(d, until).onset


def m_collapse(d: RunData) -> int | None:
    """The step the run collapses at (``analysis.collapse_step``: a dip that recovers is none)."""
    return A.collapse_step(_val(d))


def m_kl_growth(d: RunData, since: int, until: int, base: int = 1) -> float:
    """The learner-sampler KL's growth (``analysis.kl_growth``): its mean over ``since``-``until`` minus
    the run's own KL at step ``base``, the tempering offset."""
    return A.kl_growth(_col(d, "kl"), since, until, base)


def m_severe(d: RunData, until: int | None = None) -> int | None:
    return _events(d, until).severe


def m_kind(d: RunData) -> str | None:
    return _events(d).kind


def m_recovered_at(d: RunData) -> int | None:
    return _events(d).recovered_at


def m_back_at(d: RunData, band: float = A.RECOVERY_BAND) -> int | None:
    """First validation after the onset back within ``band`` of the pre-onset maximum, with no
    20-step window (the text's 'recovers by 240', 'recovered at the refresh')."""
    ev = _events(d)
    if ev.onset is None:
        return None
    v = _val(d)
    back = v[(v.index > ev.onset) & (v.to_numpy() >= ev.reference - band - A.EPS)]
    return int(back.index[0]) if len(back) else None


def m_kl_cross(
    d: RunData, threshold: float = A.KL_LEAD_NAT, first_cycle: bool = False, since: int | None = None
) -> int | None:
    kl = _window(_col(d, "kl"), since, d.run.N if first_cycle else None)
    return A.first_crossing(kl, threshold)


def m_kl_max(d: RunData, since: int | None = None, until: int | None = None) -> float:
    kl = _window(_col(d, "kl"), since, until)
    return float(kl.max()) if len(kl) else math.nan


def m_kl_at(d: RunData, step: int) -> float:
    return A.value_at(d.metrics, "kl", step)


def m_kl_fixed(d: RunData) -> float:
    """Figure 2a's reading: the KL at step 110 (60 where N=96) of the first cycle."""
    return A.kl_at_step(d.metrics, d.run.N)


def m_kl_to_init(d: RunData, step: int = 90) -> float:
    return A.kl_to_init_at(d.metrics, step)


def m_lead(d: RunData, event: str = "onset") -> int | None:
    """``event`` step minus the first KL > 1 step (Table 2's lead; event: onset or severe)."""
    ev = _events(d)
    return A.lead(ev.onset if event == "onset" else ev.severe, A.first_crossing(_col(d, "kl"), A.KL_LEAD_NAT))


def m_diag_lead(d: RunData, diagnostic: str = "kl", threshold: float | None = None) -> int | None:
    """Onset minus the first step ``diagnostic`` (``results.diagnostics.DIAGNOSTICS``) is past its
    threshold (or ``threshold``): its lead; None without an onset, a crossing or the column."""
    return D.diagnostic_lead(d.metrics, D.diagnostic(diagnostic), threshold)


def m_rise_lead(d: RunData, col: str, delta: float) -> int | None:
    """Onset minus the first step ``col`` is more than ``delta`` above its running minimum (e.g. the greedy
    digit error turning up before accuracy falls); None without an onset or such a rise."""
    return A.lead(_events(d).onset, A.first_rise(_col(d, col), float(delta)))


def m_col_gap_at(d: RunData, col: str, minus: str, step: int) -> float:
    """``col`` minus ``minus`` at exactly ``step`` (e.g. sampled minus greedy validation accuracy); NaN
    where either is not logged there."""
    return A.value_at(d.metrics, col, step) - A.value_at(d.metrics, minus, step)


def m_at_onset(d: RunData, col: str) -> float:
    """``col`` at Section 2's onset step (what the IS effective sample size, |pi - q| or the entropy read
    when the run began to fall); NaN without an onset or where the column is not logged there."""
    onset = _events(d).onset
    return math.nan if onset is None else A.value_at(d.metrics, col, onset)


def m_last5(d: RunData) -> float:
    return A.last_five_mean(_val(d))


def m_end(d: RunData, last: int = 3) -> float:
    """The run's end: the mean of its last ``last`` greedy validations (``analysis.end_mean``)."""
    return A.end_mean(_val(d), last)


def m_probe(d: RunData, field: str) -> float:
    """A number of the run's drift probe (``coolsampler.spec.drift``: e.g. ``drift_frac_low``, the part of
    the learner's drift carried by candidate tokens the sampler gives q < 0.05); NaN where the run was not
    probed or the probe has no such number."""
    value = (d.probe or {}).get(field)
    return math.nan if value is None else float(value)


def m_whole(d: RunData) -> float:
    return A.whole_run_mean(_val(d))


def m_last_step(d: RunData) -> int | None:
    if d.metrics is None or d.metrics.empty:
        return None
    return int(d.metrics["step"].max())


def m_interval(d: RunData) -> float:
    """The run's mean refresh interval: its steps over its refreshes (``m_refreshes``), the x axis of the
    guard's frontier; a run that never refreshes counts its whole length."""
    return float(d.run.steps) / max(1, m_refreshes(d))


def m_refreshes(d: RunData) -> int:
    """Sampler refreshes the log records within the run (Table 1's 'Refreshes')."""
    r = _col(d, "refreshed")
    if len(r):
        return int(r.astype(bool).sum())
    return int(d.run.steps // d.run.N)


def staleness_at(d: RunData, step: int | None) -> int | None:
    """The staleness of learner step ``step`` (``coolsampler.spec.guard.staleness``, the one definition:
    what the trainer logs as ``staleness``), from the sampler's weights' step.

    Read from the log (``sampler_version``: the learner step whose weights the sampler held) where it
    has it, else from the gate's schedule (the last multiple of N before the step)."""
    if step is None:
        return None
    sv = A.value_at(d.metrics, "sampler_version", step)
    if math.isnan(sv):
        sv = d.run.N * ((step - 1) // d.run.N)
    return staleness(step, int(sv))


def m_staleness_at_onset(d: RunData) -> int | None:
    return staleness_at(d, _events(d).onset)


def _stat(fn: str) -> Callable[..., float]:
    def measure(
        d: RunData, col: str, since: int | None = None, until: int | None = None, cycle: int | None = None
    ) -> float:
        # the steps of cycle ``cycle`` (1-based): (c-1)N+1 .. cN (analysis.cycle_of)
        lo, hi = ((cycle - 1) * d.run.N + 1, cycle * d.run.N) if cycle is not None else (None, None)
        s = _window(_col(d, col), since if since is not None else lo, until if until is not None else hi)
        return float(getattr(s, fn)()) if len(s) else math.nan

    measure.__doc__ = f"{fn} of a metrics column over a step window or a cycle"
    return measure


def m_cycle_reading(d: RunData, reading: str, cycle: int | None = None) -> Any:
    """Table 3's reading (kl, entropy_start, clip) of cycle ``cycle``, or [cycle 1, cycle 2]."""
    t = A.cycle_readings(d.metrics, d.run.N).set_index("cycle")
    get = lambda c: float(t.loc[c, reading]) if c in t.index else math.nan  # noqa: E731
    return get(cycle) if cycle is not None else [get(1), get(2)]


# The readings ``m_cycle_reading`` may name: the columns of Table 3's table besides its cycle.
CYCLE_READINGS: tuple[str, ...] = tuple(c for c in A.cycle_readings(None, 1).columns if c != "cycle")


def m_cycle_change(d: RunData, reading: str) -> float:
    """Cycle 2 minus cycle 1 of a Table 3 reading (negative: lower in the second cycle)."""
    c1, c2 = m_cycle_reading(d, reading)
    return c2 - c1


QUANTITIES: dict[str, Callable[..., Any]] = {
    "final": m_final,
    "peak": m_peak,
    "val_first": m_val_first,
    "val_at": m_val_at,
    "max_val": m_max_val,
    "val_curve": m_val_curve,
    "first_at_least": m_first_at_least,
    "onset": m_onset,
    "collapse": m_collapse,
    "kl_growth": m_kl_growth,
    "severe": m_severe,
    "kind": m_kind,
    "recovered_at": m_recovered_at,
    "back_at": m_back_at,
    "kl_cross": m_kl_cross,
    "kl_max": m_kl_max,
    "kl_at": m_kl_at,
    "kl_fixed": m_kl_fixed,
    "kl_to_init": m_kl_to_init,
    "lead": m_lead,
    "diag_lead": m_diag_lead,
    "last5": m_last5,
    "whole": m_whole,
    "end": m_end,
    "probe": m_probe,
    "last_step": m_last_step,
    "refreshes": m_refreshes,
    "interval": m_interval,
    "staleness_at_onset": m_staleness_at_onset,
    "rise_lead": m_rise_lead,
    "col_gap_at": m_col_gap_at,
    "at_onset": m_at_onset,
    "col_mean": _stat("mean"),
    "col_max": _stat("max"),
    "col_min": _stat("min"),
    "cycle_reading": m_cycle_reading,
    "cycle_change": m_cycle_change,
}


# Paired measures (reduce ``paired``): a run against the versus run of its own seed, for predictions that
# compare two arms seed by seed on a per-seed event of one of them (the cooled run's onset against the
# uncooled one's; accuracy before the uncooled run's onset). A pair whose value is missing is left out.


def p_onset_ratio(d: RunData, ref: RunData) -> float | None:
    """The run's onset over its pair's, where the pair degrades (None where it does not: no pair to
    compare); a run with no onset counts as infinitely later, as "no onset by the last step" is later."""
    theirs = _events(ref).onset
    if theirs is None:
        return None
    mine = _events(d).onset
    return math.inf if mine is None else mine / theirs


def p_val_gap(d: RunData, ref: RunData, before: int | None = None) -> float | None:
    """Mean over the validations both logged (before step ``before``, where given) of the run's
    validation score minus its pair's: how far one arm is behind the other."""
    a, b = _val(d), _val(ref)
    if before is not None:
        a, b = a[a.index < before], b[b.index < before]
    gap = (a - b).dropna()
    return float(gap.mean()) if len(gap) else None


def p_val_gap_before_onset(d: RunData, ref: RunData) -> float | None:
    """``p_val_gap`` before the pair's onset (the whole run if it has none): how far one arm is behind
    while the other still holds."""
    return p_val_gap(d, ref, before=_events(ref).onset)


def p_kl_growth_ratio(d: RunData, ref: RunData, since: int, until: int, base: int = 1) -> float | None:
    """The run's KL growth (``m_kl_growth``) over its pair's. A pair that did not grow (growth <= 0)
    beside a run that did counts as infinitely above any bound: the cooled drift vanished; where
    neither grew there is no ratio to judge (None)."""
    mine, theirs = m_kl_growth(d, since, until, base), m_kl_growth(ref, since, until, base)
    if math.isnan(mine) or math.isnan(theirs):
        return None
    if theirs <= 0:
        return math.inf if mine > 0 else None
    return mine / theirs


def p_collapse_ratio(d: RunData, ref: RunData) -> float | None:
    """The run's collapse step over its pair's, where the pair collapses (None where it does not); a run
    that does not collapse counts as infinitely later."""
    theirs = m_collapse(ref)
    if theirs is None:
        return None
    mine = m_collapse(d)
    return math.inf if mine is None else mine / theirs


def p_end_gap(d: RunData, ref: RunData, last: int = 3) -> float | None:
    """The run's end minus its pair's (``m_end``): the cliff study's staleness gap, a fresh sampler's end
    over a stale one's of the same seed."""
    mine, theirs = m_end(d, last), m_end(ref, last)
    return None if math.isnan(mine) or math.isnan(theirs) else mine - theirs


def p_gap_closed(d: RunData, ref: RunData, also: RunData, last: int = 3) -> float | None:
    """How much of the staleness gap the run closes: (its end - the stale pair's end) over (the fresh
    control's end - the stale pair's end), ``ref`` the stale run and ``also`` the fresh control of the same
    seed. None where the gap is not positive (nothing to close) or an end is missing."""
    mine, stale, fresh = m_end(d, last), m_end(ref, last), m_end(also, last)
    if any(math.isnan(x) for x in (mine, stale, fresh)) or fresh - stale <= 0:
        return None
    return (mine - stale) / (fresh - stale)


def p_kl_mean_ratio(d: RunData, ref: RunData, since: int, until: int) -> float | None:
    """The run's mean learner-sampler KL over steps ``since``-``until`` over its pair's."""
    mine = _window(_col(d, "kl"), since, until).mean()
    theirs = _window(_col(ref, "kl"), since, until).mean()
    if pd.isna(mine) or pd.isna(theirs) or theirs <= 0:
        return None
    return float(mine) / float(theirs)


def p_closes_half_and_cools(
    d: RunData,
    ref: RunData,
    also: RunData,
    since: int,
    until: int,
    last: int = 3,
    closed: float = 0.5,
    kl_ratio: float = 0.5,
) -> float | None:
    """1 where the run both closes at least ``closed`` of the staleness gap (its end >= the stale pair's
    end + ``closed`` x (the fresh control's end - the stale end)) and keeps its mean KL over
    ``since``-``until`` at or below ``kl_ratio`` x the stale pair's; 0 where either fails; None where a
    number is missing. The cliff study's B1, per seed: two conditions that must hold in the same seed."""
    mine, stale, fresh = m_end(d, last), m_end(ref, last), m_end(also, last)
    ratio = p_kl_mean_ratio(d, ref, since, until)
    if any(math.isnan(x) for x in (mine, stale, fresh)) or ratio is None:
        return None
    return float(mine >= stale + closed * (fresh - stale) - A.EPS and ratio <= kl_ratio)


PAIRED: dict[str, Callable[..., Any]] = {
    "onset_ratio": p_onset_ratio,
    "val_gap_before_onset": p_val_gap_before_onset,
    "val_gap": p_val_gap,
    "kl_growth_ratio": p_kl_growth_ratio,
    "collapse_ratio": p_collapse_ratio,
    "end_gap": p_end_gap,
    "gap_closed": p_gap_closed,
    "kl_mean_ratio": p_kl_mean_ratio,
    "closes_half_and_cools": p_closes_half_and_cools,
}

# The paired measures that read a third run of the seed (the claim's ``also`` filter: the fresh control).
NEEDS_ALSO = frozenset(name for name, fn in PAIRED.items() if "also" in inspect.signature(fn).parameters)


# The metrics columns each quantity reads (its ``col``/``diagnostic``/``reading`` argument adds its own):
# a claim whose runs never logged one of them cannot be measured, and says which verl setting logs it.
_VAL = ("val_acc",)
QUANTITY_COLUMNS: dict[str, tuple[str, ...]] = {
    **{q: _VAL for q in ("final", "peak", "val_first", "val_at", "max_val", "val_curve", "first_at_least")},
    **{q: _VAL for q in ("onset", "severe", "kind", "recovered_at", "back_at", "last5", "whole")},
    **{q: _VAL for q in ("diag_lead", "staleness_at_onset", "rise_lead", "onset_ratio", "val_gap_before_onset")},
    "at_onset": _VAL,
    **{q: _VAL for q in ("val_gap", "collapse", "collapse_ratio", "end", "end_gap", "gap_closed")},
    **{q: ("kl",) for q in ("kl_cross", "kl_max", "kl_at", "kl_fixed", "kl_mean_ratio", "kl_growth")},
    "kl_growth_ratio": ("kl",),
    **{q: ("val_acc", "kl") for q in ("lead", "closes_half_and_cools")},
    "kl_to_init": ("kl_to_init",),
}
_READING_COLUMN = {"kl": "kl", "entropy_start": "entropy", "clip": "clip_frac", "clip_cycle": "clip_frac"}


def quantity_columns(q: Mapping[str, Any]) -> list[str]:
    """The metrics columns claim quantity ``q`` (its ``fn`` and ``args``) reads."""
    args = q.get("args") or {}
    cols = list(QUANTITY_COLUMNS.get(q["fn"], ()))
    cols += [args[a] for a in ("col", "minus") if a in args]
    if q["fn"] == "diag_lead":
        cols.append(D.diagnostic(args.get("diagnostic", "kl")).column)
    if "reading" in args and args["reading"] in _READING_COLUMN:
        cols.append(_READING_COLUMN[args["reading"]])
    return cols


def unlogged(q: Mapping[str, Any], rds: Sequence[RunData]) -> list[str]:
    """The columns ``q`` reads that none of ``rds`` ever logged (``metrics_schema.absent_columns``)."""
    cols = quantity_columns(q)
    absent = [set(absent_columns(rd.metrics)) for rd in rds if rd.metrics is not None]
    return [c for c in cols if absent and all(c in a for a in absent)]


__all__ = [
    "CYCLE_READINGS",
    "NEEDS_ALSO",
    "PAIRED",
    "QUANTITIES",
    "QUANTITY_COLUMNS",
    "RunData",
    "load_run_data",
    "m_back_at",
    "m_at_onset",
    "m_col_gap_at",
    "m_collapse",
    "m_cycle_change",
    "m_cycle_reading",
    "m_diag_lead",
    "m_final",
    "m_first_at_least",
    "m_interval",
    "m_kind",
    "m_kl_at",
    "m_kl_cross",
    "m_kl_fixed",
    "m_kl_growth",
    "m_kl_max",
    "m_kl_to_init",
    "m_last5",
    "m_last_step",
    "m_lead",
    "m_max_val",
    "m_onset",
    "m_peak",
    "m_recovered_at",
    "m_refreshes",
    "m_rise_lead",
    "m_severe",
    "m_staleness_at_onset",
    "m_val_at",
    "m_val_curve",
    "m_val_first",
    "m_whole",
    "p_collapse_ratio",
    "p_kl_growth_ratio",
    "p_onset_ratio",
    "p_val_gap",
    "p_val_gap_before_onset",
    "quantity_columns",
    "staleness_at",
    "unlogged",
]
