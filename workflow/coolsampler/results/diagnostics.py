"""Which staleness diagnostic warns first: the lead of every diagnostic verl logs over the onset.

The paper reads the learner-sampler KL (forward, k1 on the sampler's samples) against the validation
curve: Table 2 lists, for every run that degrades under the Section 2 criteria, the first step with
KL > 1 nat and its lead over the onset (positive: the KL crossed first). verl logs more than that on
every step (``coolsampler.spec.metrics_schema.DIAGNOSTIC_COLUMNS``): chi^2 of the learner to the sampler
(the other direction; log(1 + chi^2) bounds the learner's reverse KL), the effective sample size and
extremes of the IS weights, the per-response log-perplexity gap and the per-token probability gap.
This module asks each of them the same question: the first step at which it crosses its threshold,
and its lead over the onset, beside the paper's own KL > 1 nat.

Every threshold is a *choice*, named below with the reason for it, and every lead is also computed
at a lower and a higher threshold (``Diagnostic.sensitivity``), so a reader sees how much of a lead
is the threshold's doing. Conventions:

* The onset is ``analysis.degradation_events`` (Section 2), computed once; a run without one has no
  lead, but a crossing there still counts, as a false alarm (``lead_summary``).
* A crossing is strict (``> threshold`` for a diagnostic that rises with the mismatch, ``<`` for one
  that falls), as ``analysis.first_crossing`` reads "KL exceeds one nat". lead = onset - crossing.
* Per-step values of these diagnostics are batch means that a few tokens can dominate (the smoke
  study's chi2_token jumps by orders of magnitude from one step to the next). Every diagnostic is
  therefore read through a trailing rolling median (``ROBUST_WINDOW``) except the paper's own KL row,
  which reads each step as Table 2 does; a second KL row reads it through the same median, so that
  "which quantity" and "which reading" can be told apart.
* The analysis reads only the metrics table: it runs on the paper's runs and on a user's logs alike
  (``coolsampler analyze``).

Imports numpy and pandas only: no verl, vLLM or torch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from coolsampler.results import analysis as A
from coolsampler.spec.diagnostics import (  # noqa: F401 (defined in the spec layer, shared with the guard)
    BY_NAME,
    DIAGNOSTICS,
    ESS_FRACTION,
    KL_NATS,
    LEAD_BY_NAME,
    LEAD_DIAGNOSTICS,
    LOG_PPL_NATS,
    PROBS_DIFF,
    RKL_SEQ_NATS,
    RKL_TOKEN_NATS,
    ROBUST_MIN_STEPS,
    ROBUST_WINDOW,
    WEIGHT_FRACTION,
    Diagnostic,
    diagnostic,
    threshold_text,
)

# --------------------------------------------------------------------------------------------------
# One run


def rolling_median(series: pd.Series) -> pd.Series:
    """The trailing rolling median of a step-indexed series (``ROBUST_WINDOW`` rows, at least
    ``ROBUST_MIN_STEPS`` of them logged; NaN before that)."""
    s = A.clean_series(series)
    return s.rolling(ROBUST_WINDOW, min_periods=ROBUST_MIN_STEPS).median().dropna()


def training_series(metrics: pd.DataFrame | None, column: str) -> pd.Series:
    """``column`` indexed by step over the training steps (step 0 is the initial validation)."""
    s = A._column(metrics, column)
    return s[s.index > 0]


def reading(metrics: pd.DataFrame | None, d: Diagnostic) -> pd.Series:
    """What the lead table compares with the threshold: the column per step, or its rolling median."""
    s = training_series(metrics, d.column)
    return rolling_median(s) if d.robust else s


def crossing(metrics: pd.DataFrame | None, d: Diagnostic, threshold: float | None = None) -> int | None:
    """First step whose reading is strictly past ``threshold`` (default the diagnostic's), else None."""
    t = d.threshold if threshold is None else float(threshold)
    s = reading(metrics, d)
    return A.first_crossing(s if d.above else -s, t if d.above else -t)


def logged_steps(metrics: pd.DataFrame | None, column: str) -> int:
    """Training steps with a finite value of ``column`` (0: the log does not have it)."""
    s = training_series(metrics, column)
    return int(np.isfinite(s.to_numpy(dtype="float64")).sum())


def onset_of(metrics: pd.DataFrame | None) -> int | None:
    """The run's onset of degradation (Section 2), or None."""
    return A.degradation_events(A.validation(metrics)).onset


def diagnostic_lead(metrics: pd.DataFrame | None, d: Diagnostic, threshold: float | None = None) -> int | None:
    """Onset minus the diagnostic's first crossing (positive: it warned first); None without either."""
    return A.lead(onset_of(metrics), crossing(metrics, d, threshold))


LEAD_COLUMNS = [
    "key", "onset", "validations", "diagnostic", "label", "column", "reads", "condition", "threshold", "chosen",
    "step", "lead", "logged_steps",
]  # fmt: skip


def run_leads(key: str, metrics: pd.DataFrame | None, diagnostics: Sequence[Diagnostic] = DIAGNOSTICS) -> pd.DataFrame:
    """One row per diagnostic and threshold of ``d.sensitivity`` for one run (``LEAD_COLUMNS``).

    ``step``: the first crossing (None: never, or not logged: ``logged_steps`` 0); ``lead``: onset -
    step (None without an onset or a crossing); ``chosen``: the threshold the diagnostic is read at;
    ``validations``: the run's validation points (0: neither degraded nor stable, it cannot be judged).
    """
    onset = onset_of(metrics)
    validations = int(len(A.validation(metrics)))
    rows = []
    for d in diagnostics:
        n = logged_steps(metrics, d.column)
        for t in d.sensitivity:
            step = crossing(metrics, d, t) if n else None
            rows.append(
                {
                    "key": key,
                    "onset": onset,
                    "validations": validations,
                    "diagnostic": d.name,
                    "label": d.label,
                    "column": d.column,
                    "reads": d.reads,
                    "condition": d.condition(t),
                    "threshold": float(t),
                    "chosen": bool(math.isclose(t, d.threshold)),
                    "step": step,
                    "lead": A.lead(onset, step),
                    "logged_steps": n,
                }
            )
    out = pd.DataFrame(rows, columns=LEAD_COLUMNS)
    for col in ("onset", "step", "lead"):
        out[col] = out[col].astype("Int64")
    return out


# --------------------------------------------------------------------------------------------------
# Every run


def lead_table(
    runs: Sequence[tuple[Mapping[str, Any], pd.DataFrame | None, Any]],
    diagnostics: Sequence[Diagnostic] = DIAGNOSTICS,
) -> pd.DataFrame:
    """``run_leads`` of every run that has metrics, degraded or not (``onset`` None: stable).

    ``runs``: ``(settings, metrics, status)`` entries, the figures' and tables' form; a run's key is
    ``settings["key"]``. Steps and leads are nullable integers.
    """
    frames = [run_leads(str(s.get("key", "")), m, diagnostics) for s, m, _ in runs if m is not None and not m.empty]
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame(columns=LEAD_COLUMNS)
    return pd.concat(frames, ignore_index=True)


def degraded(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of the runs that degrade (an onset)."""
    return table[table["onset"].notna()] if len(table) else table


def stable(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of the runs that were validated and do not degrade (a run without validation points
    is neither: it cannot be judged)."""
    return table[table["onset"].isna() & (table["validations"] > 0)] if len(table) else table


def earliest(table: pd.DataFrame) -> dict[str, list[str]]:
    """Run key -> the diagnostics whose chosen-threshold crossing comes first in that run (ties: all
    of them), over the diagnostics that crossed; [] for a run where none crossed."""
    out: dict[str, list[str]] = {}
    chosen = table[table["chosen"]]
    for key, rows in chosen.groupby("key", sort=False):
        crossed = rows[rows["step"].notna()]
        if crossed.empty:
            out[str(key)] = []
            continue
        first = int(crossed["step"].min())
        out[str(key)] = [str(n) for n in crossed.loc[crossed["step"] == first, "diagnostic"]]
    return out


SUMMARY_COLUMNS = [
    "diagnostic", "label", "reads", "condition", "degraded_runs", "logged_in", "before_onset", "at_onset",
    "after_onset", "never", "median_lead", "earliest_in", "before_onset_over_range", "stable_runs", "fires_in_stable",
]  # fmt: skip


def lead_summary(table: pd.DataFrame, diagnostics: Sequence[Diagnostic] = DIAGNOSTICS) -> pd.DataFrame:
    """Per diagnostic, over the degraded runs: how many it was logged in, crossed before / at / after
    the onset or never (at the chosen threshold), the median lead, in how many runs it was the
    earliest to cross, how many crossed before the onset at each threshold of the range (low / chosen
    / high), and in how many of the stable runs (no onset) it crossed anyway: a warning that also
    fires where nothing happens is no warning."""
    rows = []
    if table.empty:
        return pd.DataFrame(columns=SUMMARY_COLUMNS)
    bad = degraded(table)
    calm_runs = stable(table)
    first = earliest(bad)
    for d in diagnostics:
        mine = bad[bad["diagnostic"] == d.name]
        at = mine[mine["chosen"] & (mine["logged_steps"] > 0)]
        leads = at["lead"].dropna().astype(int)
        calm = calm_runs[(calm_runs["diagnostic"] == d.name) & calm_runs["chosen"] & (calm_runs["logged_steps"] > 0)]
        per_t = []
        for t in d.sensitivity:
            rows_t = mine[np.isclose(mine["threshold"].to_numpy(dtype="float64"), t) & (mine["logged_steps"] > 0)]
            per_t.append(int((rows_t["lead"].dropna() > 0).sum()))
        rows.append(
            {
                "diagnostic": d.name,
                "label": d.label,
                "reads": d.reads,
                "condition": d.condition(),
                "degraded_runs": int(mine["key"].nunique()),
                "logged_in": int(len(at)),
                "before_onset": int((leads > 0).sum()),
                "at_onset": int((leads == 0).sum()),
                "after_onset": int((leads < 0).sum()),
                "never": int(at["step"].isna().sum()),
                "median_lead": float(np.median(leads)) if len(leads) else math.nan,
                "earliest_in": sum(1 for names in first.values() if d.name in names),
                "before_onset_over_range": " / ".join(str(n) for n in per_t),
                "stable_runs": int(len(calm)),
                "fires_in_stable": int(calm["step"].notna().sum()),
            }
        )
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
