"""Per-run numbers of the paper, computed from a metrics table (``coolsampler.spec.metrics_schema``).

Everything the tables and figures report about a run is computed here, once, under the fixed
criteria of Section 2 ("Degradation criteria"), so a figure and a table can never disagree about
when a run degraded. This module imports only numpy and pandas: a researcher can re-derive every
number of the paper on a laptop from the parsed logs.

Conventions used throughout:

* A *validation series* is a pandas Series of accuracy indexed by learner step. NaN entries (steps
  that were not validated) are dropped, and the index is sorted, before anything is computed.
* Step ``t`` is 1-based. Under the staleness gate the sampler is refreshed at the end of steps
  ``N, 2N, ...``, so step ``t`` lies in *cycle* ``(t - 1) // N + 1`` at *cycle age*
  ``(t - 1) % N``: age 0 is the first step sampled from freshly pushed weights, and the age equals
  the ``staleness`` column of the metrics table.
* Missing values are reported as ``None`` (steps: "did not happen") or NaN (measurements: "not
  measurable from this log"), never replaced by a guess.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from coolsampler.spec.metrics_schema import RunStatus
from coolsampler.spec.settings import KL_EARLY_NAT, KL_LEAD_NAT

# Section 2 of the paper; named so the tests and the docs quote the same numbers.
ONSET_DROP = 0.10  # onset: at or below running max - 0.10
SEVERE_DROP = 0.15  # severe: at or below running max - 0.15
RECOVERY_BAND = 0.05  # transient: back within 0.05 of the pre-onset maximum ...
RECOVERY_WINDOW = 20  # ... within 20 steps of the onset
AFTER_STEP = 30  # events only count after step 30 (early validation noise)
# Collapse, the cliff study's criterion (round 4), beside Section 2's onset: a dip that recovers is not a
# collapse. Greedy validation at toy scale dips by 0.10 for one validation at every N, so the onset alone
# cannot tell staleness from volatility there.
COLLAPSE_DROP = 0.15  # every validation from the collapse on is at least 0.15 below the best before it ...
COLLAPSE_MIN_POINTS = 2  # ... and at least two validations lie in [collapse, end]
COLLAPSE_AFTER_STEP = AFTER_STEP  # and the collapse step is after step 30, as Section 2's events
# Validation accuracies are ratios such as 1126/1319 and thresholds such as 0.80 - 0.10 are not exact in
# binary floating point; EPS makes "at or below" behave as written on paper (0.70 <= 0.80 - 0.10).
EPS = 1e-9

# Fixed-step KL of Figure 2a: "KL at a fixed step of the first cycle (110, or 60 where the refresh is at 96)".
KL_STEP = 110
KL_STEP_SHORT = 60
# Learner-sampler KL levels KL_LEAD_NAT (Table 2's lead) and KL_EARLY_NAT (Figure 2b), and their
# texts (nat_text, kl_above_text): imported from coolsampler.spec.settings, which owns them (the
# controller's KL gate reads them too), so tables, figures and claims read the same numbers from here


# The criterion and the fixed-step rule in words, for captions: built from the numbers above, so a
# caption cannot state a threshold the analysis does not apply.
ONSET_TEXT = f"<= running max - {ONSET_DROP:.2f} after step {AFTER_STEP}"
SEVERE_TEXT = f"<= max - {SEVERE_DROP:.2f}"
KL_STEP_TEXT = (
    f"step {KL_STEP} (step {KL_STEP_SHORT} where {KL_STEP_SHORT} < N <= {KL_STEP}, step N where N <= {KL_STEP_SHORT})"
)


def clean_series(s: pd.Series | None) -> pd.Series:
    """Drop NaN and sort by step, so every criterion reads the same points in the same order."""
    if s is None:
        return pd.Series(dtype="float64")
    s = pd.to_numeric(s, errors="coerce").dropna()
    s.index = s.index.astype("int64")
    return s.sort_index()


def validation(metrics: pd.DataFrame | None) -> pd.Series:
    """The validation series of a metrics table: ``val_acc`` indexed by ``step``, non-NaN only."""
    return _column(metrics, "val_acc")


def _column(metrics: pd.DataFrame | None, col: str) -> pd.Series:
    if metrics is None or col not in metrics.columns or "step" not in metrics.columns:
        return pd.Series(dtype="float64")
    return clean_series(pd.Series(metrics[col].to_numpy(), index=metrics["step"].to_numpy()))


# --------------------------------------------------------------------------------------------------
# Degradation criteria


@dataclass(frozen=True)
class DegradationEvents:
    """What the Section 2 criteria say about one validation curve.

    ``peak``: highest validation point (NaN for an empty curve); ``peak_step`` its first step.
    ``onset`` / ``severe``: steps, or None where the criterion never fires.
    ``kind``: "transient", "sustained", or None without an onset.
    ``reference``: the running maximum the onset was measured against (NaN without an onset).
    ``recovered_at``: the step that made a degradation transient (None otherwise).
    ``window_censored``: True when the curve ends before the 20-step recovery window closes and no
    recovery was seen, i.e. "sustained" rests on a truncated window (matters for cut runs).
    """

    peak: float
    peak_step: int | None
    onset: int | None
    severe: int | None
    kind: str | None
    reference: float = math.nan
    recovered_at: int | None = None
    window_censored: bool = False


def degradation_events(val: pd.Series) -> DegradationEvents:
    """Apply the fixed degradation criteria of Section 2 to a validation series.

    Decisions where the paper's sentence leaves room (each is tested on both sides):

    * "after step 30" is strict: only points at steps ``> 30`` can be an onset or a severe point. A
      point at step 30 itself belongs to the warm-up, where greedy accuracy still jumps by tens of
      points between validations.
    * The running maximum at step ``t`` is the maximum over all points at steps ``< t``, *including*
      steps ``<= 30`` (a peak at step 20 is a real peak; only the event has to come after step 30).
      Whether the current point is included makes no difference: a point ``0.10`` below the maximum
      cannot be the maximum.
    * "at or below": ``value <= running_max - drop + EPS``.
    * Severe uses the same running maximum with ``0.15``; it is searched independently of the onset
      (it can never come before it, since ``-0.15`` implies ``-0.10``).
    * Transient: some point at a step ``s`` with ``onset < s <= onset + 20`` (inclusive) has
      ``value >= M - 0.05 - EPS``, where ``M`` is the running maximum before the onset. Otherwise
      sustained, including an onset at the last validation (the paper's controller run, onset 300,
      is "sustained"); ``window_censored`` marks that case so a reader can tell.
    * Only the first onset is classified; later events of the same run are left to the curve.
    """
    v = clean_series(val)
    if v.empty:
        return DegradationEvents(math.nan, None, None, None, None)
    steps = v.index.to_numpy()
    vals = v.to_numpy(dtype="float64")
    peak_i = int(np.argmax(vals))
    peak, peak_step = float(vals[peak_i]), int(steps[peak_i])
    # running max of the points strictly before each point
    prev_max = np.concatenate([[-np.inf], np.maximum.accumulate(vals)[:-1]])
    eligible = steps > AFTER_STEP
    onset_mask = eligible & (vals <= prev_max - ONSET_DROP + EPS)
    severe_mask = eligible & (vals <= prev_max - SEVERE_DROP + EPS)
    severe = int(steps[np.argmax(severe_mask)]) if severe_mask.any() else None
    if not onset_mask.any():
        return DegradationEvents(peak, peak_step, None, severe, None)
    oi = int(np.argmax(onset_mask))
    onset, ref = int(steps[oi]), float(prev_max[oi])
    window = (steps > onset) & (steps <= onset + RECOVERY_WINDOW)
    back = window & (vals >= ref - RECOVERY_BAND - EPS)
    if back.any():
        return DegradationEvents(peak, peak_step, onset, severe, "transient", ref, int(steps[np.argmax(back)]))
    censored = bool(steps[-1] < onset + RECOVERY_WINDOW)
    return DegradationEvents(peak, peak_step, onset, severe, "sustained", ref, None, censored)


def collapse_step(val: pd.Series) -> int | None:
    """The step at which a validation curve collapses (the cliff study's criterion), else None.

    A run collapses at validation step ``s`` when ``s > COLLAPSE_AFTER_STEP``, every validation from ``s``
    to the end is at least ``COLLAPSE_DROP`` below the highest validation before ``s`` (at or below, with
    ``EPS`` as Section 2's criteria), and at least ``COLLAPSE_MIN_POINTS`` validations lie in ``[s, end]``.
    The first such step is returned. Unlike Section 2's onset a one-validation dip never counts, and a
    curve that falls at its last validation does not either (one point cannot tell a collapse from a dip).
    """
    v = clean_series(val)
    if len(v) < COLLAPSE_MIN_POINTS:
        return None
    steps = v.index.to_numpy()
    vals = v.to_numpy(dtype="float64")
    best_before = np.concatenate([[-np.inf], np.maximum.accumulate(vals)[:-1]])
    best_after = np.maximum.accumulate(vals[::-1])[::-1]  # highest validation in [s, end]
    left = len(vals) - np.arange(len(vals))  # validations in [s, end]
    hit = (steps > COLLAPSE_AFTER_STEP) & (left >= COLLAPSE_MIN_POINTS)
    hit &= best_after <= best_before - COLLAPSE_DROP + EPS
    return int(steps[np.argmax(hit)]) if hit.any() else None


def kl_growth_curve(kl: pd.Series, base: int = 1) -> pd.Series:
    """The learner-sampler KL minus its own value at step ``base`` (empty where that step is not logged).

    At step 1 no weight has moved, so the KL there is the tempering offset alone (a cooled sampler starts
    above zero); what remains is the drift that staleness added on top of it.
    """
    s = clean_series(kl)
    return s - float(s.loc[base]) if base in s.index else pd.Series(dtype="float64")


def kl_growth(kl: pd.Series, since: int, until: int, base: int = 1) -> float:
    """The KL's growth (``kl_growth_curve``) averaged over steps ``since``-``until`` (NaN where nothing is
    logged there): the number the cliff study's H1b compares between sampler temperatures."""
    g = kl_growth_curve(kl, base)
    window = g[(g.index >= since) & (g.index <= until)]
    return float(window.mean()) if len(window) else math.nan


def first_crossing(series: pd.Series, threshold: float) -> int | None:
    """First step whose value is strictly above ``threshold`` (e.g. KL > 1 nat), else None.

    Strict because the paper says "exceeds"/"above"; NaN steps are skipped, not treated as crossings.
    """
    s = clean_series(series)
    hit = s.to_numpy(dtype="float64") > threshold
    return int(s.index[np.argmax(hit)]) if hit.any() else None


def first_rise(series: pd.Series, delta: float) -> int | None:
    """First step whose value is strictly more than ``delta`` above its running minimum (the lowest value
    logged up to that step), else None. From the running minimum, not the first value: a quantity that
    falls while training helps and then turns (an error rate) rises from its best, not from its start.
    NaN steps are skipped."""
    s = clean_series(series)
    x = s.to_numpy(dtype="float64")
    hit = x > np.minimum.accumulate(x) + delta
    return int(s.index[np.argmax(hit)]) if hit.any() else None


def last_five_mean(val: pd.Series) -> float:
    """Mean of the last five validation points (Table 1's end metric, steps 260-300 on GSM8K).

    NaN when the curve has fewer than five points: a shorter mean is a different metric and would
    compare unfairly with complete runs.
    """
    v = clean_series(val)
    return float(v.iloc[-5:].mean()) if len(v) >= 5 else math.nan


def end_mean(val: pd.Series, last: int = 3) -> float:
    """Mean of a run's last ``last`` validation points: the cliff study's end of a run, short enough to
    read the end of a 96-step run validated every 8 steps, long enough that one noisy validation does
    not decide it. NaN when fewer points were logged (a shorter mean would compare unfairly)."""
    v = clean_series(val)
    return float(v.iloc[-last:].mean()) if last > 0 and len(v) >= last else math.nan


def whole_run_mean(val: pd.Series) -> float:
    """Trapezoid integral of the validation curve divided by its step span (Table 1's whole-run metric).

    Unequal spacing is handled by the trapezoid rule itself. A single point is its own mean; an empty
    curve gives NaN.
    """
    v = clean_series(val)
    if v.empty:
        return math.nan
    if len(v) == 1:
        return float(v.iloc[0])
    x, y = v.index.to_numpy(dtype="float64"), v.to_numpy(dtype="float64")
    # written out rather than np.trapezoid, which numpy < 2.0 (allowed by pyproject) lacks
    return float(np.sum((y[1:] + y[:-1]) * np.diff(x)) / 2.0 / (x[-1] - x[0]))


def recovers_later(final: float | None, reference: float | None) -> bool:
    """Whether a sustained degradation ends back within ``RECOVERY_BAND`` of its pre-onset maximum
    (``reference``) at the last validation (``final``): Table 2's "sustained, recovers later". The band
    is the transient criterion's, applied at the end of the run instead of within ``RECOVERY_WINDOW``
    of the onset; a missing value recovers nothing."""
    if final is None or reference is None or math.isnan(final) or math.isnan(reference):
        return False
    return final >= reference - RECOVERY_BAND - EPS


def lead(onset: int | None, kl_cross: int | None) -> int | None:
    """Onset minus the first KL > 1 step (positive: the KL crossed first); None if either is missing."""
    if onset is None or kl_cross is None:
        return None
    return int(onset) - int(kl_cross)


def binomial_interval(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper-Pearson) two-sided interval of a rate seen as ``k`` events in ``n`` trials.

    At a learning rate where a stale learner sits at a bifurcation, whether one realization collapses is
    a coin that noise throws: a handful of runs measures its probability, and only an interval says how
    little a handful pins down (1 of 5 is anything from 0.005 to 0.72). Exact, not a normal
    approximation, because n is small; found by bisection on the binomial tail, so no scipy is needed.
    """
    if not 0 <= k <= n or n < 1:
        raise ValueError(f"binomial_interval: need 0 <= k <= n and n >= 1, got k={k}, n={n}")
    alpha = (1.0 - level) / 2.0

    def tail_at_least(p: float) -> float:  # P(X >= k) under Binomial(n, p)
        return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1))

    def tail_at_most(p: float) -> float:  # P(X <= k)
        return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(0, k + 1))

    def solve(f: Any, want: float, rising: bool) -> float:
        lo, hi = 0.0, 1.0
        for _ in range(80):
            mid = (lo + hi) / 2
            if (f(mid) < want) == rising:
                lo = mid
            else:
                hi = mid
        return (lo + hi) / 2

    lower = 0.0 if k == 0 else solve(tail_at_least, alpha, rising=True)
    upper = 1.0 if k == n else solve(tail_at_most, alpha, rising=False)
    return lower, upper


# --------------------------------------------------------------------------------------------------
# KL and cycle readings


def kl_step_for(N: int) -> int:
    """The first-cycle step Figure 2a reads the KL at.

    110 where the first cycle reaches it (N > 110), else 60 (the paper's N = 96 case; also used for
    N = 64..110 so the reading stays in the first cycle); for N <= 60, step N, the last step of the
    first cycle (only toy studies have such short intervals).
    """
    if N > KL_STEP:
        return KL_STEP
    if N > KL_STEP_SHORT:
        return KL_STEP_SHORT
    return int(N)


def value_at(metrics: pd.DataFrame | None, col: str, step: int) -> float:
    """The value of ``col`` at exactly ``step``; NaN if that step is not logged or the value is NaN."""
    s = _column(metrics, col)
    return float(s.loc[step]) if step in s.index else math.nan


def kl_at_step(metrics: pd.DataFrame | None, N: int) -> float:
    """Learner-sampler KL at the fixed first-cycle step of Figure 2a (``kl_step_for(N)``).

    If that exact step is missing (not logged, or NaN) the result is NaN: the KL grows several-fold
    within a few dozen steps of a cycle, so a neighbouring step would misstate it; the figure shows
    the run as "no KL at step ..." instead.
    """
    return value_at(metrics, "kl", kl_step_for(N))


def kl_to_init_at(metrics: pd.DataFrame | None, step: int = 90) -> float:
    """Learner KL to its initial policy at ``step`` (Section 3: step 90); NaN if that step is missing."""
    return value_at(metrics, "kl_to_init", step)


def cycle_of(step: int | np.ndarray, N: int) -> Any:
    """Cycle number (1-based) of a step: ``(t - 1) // N + 1``."""
    return (np.asarray(step) - 1) // N + 1


def cycle_age(step: int | np.ndarray, N: int) -> Any:
    """Cycle age of a step: ``(t - 1) % N``, equal to the ``staleness`` column under the gate."""
    return (np.asarray(step) - 1) % N


CYCLE_KL_AGES = (55, 65)  # Table 3: "averaged over cycle ages 55-65" (inclusive)
CYCLE_START_STEPS = 5  # Table 3: "entropy ... over the first five steps of the cycle" (ages 0-4)


def cycle_readings(metrics: pd.DataFrame | None, N: int) -> pd.DataFrame:
    """Table 3's cycle-aligned readings, one row per cycle that the log reaches.

    Columns: ``cycle``; ``kl`` and ``clip`` (means of ``kl`` and ``clip_frac`` over ages 55-65
    inclusive); ``entropy_start`` (mean ``entropy`` over ages 0-4); ``clip_cycle`` and
    ``reward_cycle`` (means of ``clip_frac`` and ``reward`` over every logged step of the cycle:
    Section 3.3's "ran 84-95% of its responses to the length limit and kept the training reward
    below 0.2" for a whole second cycle); ``n_mid`` and ``n_start``, the number of logged steps each
    window mean is over, so a partial window (a cut run, missing steps) is visible rather than
    silently averaged as if whole. A mean over zero steps is NaN.
    """
    cols = ["cycle", "kl", "entropy_start", "clip", "clip_cycle", "reward_cycle", "n_mid", "n_start"]
    if metrics is None or metrics.empty:
        return pd.DataFrame(columns=cols)
    m = metrics.sort_values("step")
    steps = m["step"].to_numpy(dtype="int64")
    cyc, age = cycle_of(steps, N), cycle_age(steps, N)
    lo, hi = CYCLE_KL_AGES
    rows = []
    for c in sorted(set(cyc.tolist())):
        mid = (cyc == c) & (age >= lo) & (age <= hi)
        start = (cyc == c) & (age < CYCLE_START_STEPS)
        whole = (cyc == c) & (steps > 0)
        rows.append(
            {
                "cycle": int(c),
                "kl": _nanmean(m, "kl", mid),
                "entropy_start": _nanmean(m, "entropy", start),
                "clip": _nanmean(m, "clip_frac", mid),
                "clip_cycle": _nanmean(m, "clip_frac", whole),
                "reward_cycle": _nanmean(m, "reward", whole),
                "n_mid": int(mid.sum()),
                "n_start": int(start.sum()),
            }
        )
    return pd.DataFrame(rows, columns=cols)


def _nanmean(m: pd.DataFrame, col: str, mask: np.ndarray) -> float:
    if col not in m.columns or not mask.any():
        return math.nan
    x = pd.to_numeric(m[col], errors="coerce").to_numpy(dtype="float64")[mask]
    x = x[~np.isnan(x)]
    return float(x.mean()) if x.size else math.nan


# --------------------------------------------------------------------------------------------------
# One run, summarised


# A log read without the run's length (no run.yaml, no --steps): never called complete, and never called
# incomplete either (its last step is all that is known of its length).
LENGTH_UNKNOWN = "the run's length is unknown"


def status_note(status: RunStatus | None, has_metrics: bool) -> str:
    """Human-readable reason a run's numbers are not those of a whole run ('' if they are)."""
    if not has_metrics:
        return "no metrics (run missing or not parsed)"
    if status is None:
        return "status unknown (no status record)"
    if status.problems == [LENGTH_UNKNOWN]:
        return f"{LENGTH_UNKNOWN}: numbers cover the logged steps"
    if not status.complete:
        if status.last_step >= status.expected_steps:  # whole to its end: a flaw inside it, not a cut
            return "; ".join(status.problems) + "; numbers cover the records read"
        why = f"incomplete: last step {status.last_step} of {status.expected_steps}"
        if status.problems:
            why += " (" + "; ".join(status.problems) + ")"
        return why + "; numbers cover the logged steps only"
    return ""


def summarize_run(
    metrics: pd.DataFrame | None, run_settings: Mapping[str, Any], status: RunStatus | None
) -> dict[str, Any]:
    """Every per-run number of Tables 1, 2 and 4, in one flat dict.

    An incomplete run (``status.complete`` False, or no status, or no metrics) is still summarised
    over the steps it logged, because the paper lists such runs (the "cut" run), but it carries
    ``complete=False`` and a ``note`` saying why, and consumers must show that note. ``final`` is the
    last validation point *logged*, which for an incomplete run is not the end of training.
    """
    val = validation(metrics)
    kl = _column(metrics, "kl")
    ev = degradation_events(val)
    N = int(run_settings.get("N", 0) or 0)
    kl1, kl01 = first_crossing(kl, KL_LEAD_NAT), first_crossing(kl, KL_EARLY_NAT)
    has = metrics is not None and not metrics.empty
    note = status_note(status, has)
    if ev.window_censored and ev.kind == "sustained":
        note = (note + "; " if note else "") + "recovery window runs past the last validation"
    return {
        "key": run_settings.get("key", ""),
        "peak": ev.peak,
        "peak_step": ev.peak_step,
        "final": float(val.iloc[-1]) if len(val) else math.nan,
        "onset": ev.onset,
        "severe": ev.severe,
        "kind": ev.kind,
        "reference": ev.reference,
        "recovered_at": ev.recovered_at,
        "kl_cross_1": kl1,
        "kl_cross_01": kl01,
        "lead": lead(ev.onset, kl1),
        "kl_max": float(kl.max()) if len(kl) else math.nan,
        "kl_fixed_step": kl_step_for(N) if N else None,
        "kl_fixed": kl_at_step(metrics, N) if N else math.nan,
        "kl_to_init_90": kl_to_init_at(metrics, 90),
        "last5": last_five_mean(val),
        "whole": whole_run_mean(val),
        "n_val": int(len(val)),
        "last_step": int(metrics["step"].max()) if has else None,
        "complete": bool(has and status is not None and status.complete),
        "note": note,
    }
