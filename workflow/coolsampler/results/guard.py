"""The staleness guard replayed over a logged run: where it would have refreshed, against the onset.

``coolsampler analyze PATHS --guard 'probs_diff>0.1'`` feeds a logged run's signal, step by step,
to the same decision the trainer would run (``coolsampler.spec.guard.RefreshGate``) and compares its
firings with the run's degradation onset (``coolsampler.results.analysis.degradation_events``, the
Section 2 criteria, read as the lead table reads them).

What a replay can say, and what it cannot: the log is of a fixed-N run, so after the guard's first
firing the values it reads are still those of the sampler the logged run kept (a guard run would have
refreshed there, and its signal would have dropped). The first firing is therefore exactly what a guard
run would have done up to that step; the later ones say when the guard would fire again *on this run's
sampler*, an upper bound on how often it would fire in a guard run, not a prediction of one. A logged
refresh of the fixed gate does not reset the guard: the replay asks what the guard alone would decide.

Definitions (``GuardReplay``):

* a *signal firing* is a refresh the guard makes because the signal crossed (``reason == "signal"``);
  a refresh because N steps passed (``"interval"``) is the fixed gate's, not a warning;
* ``lead`` = onset - the first signal firing (positive: the guard fired first), as the lead table's
  lead is onset - first crossing; None without an onset or a signal firing;
* a signal firing at step f *warns* when the onset falls in [f, f + horizon]; it is *late* when the
  onset came before it; otherwise it is a *false alarm* (no onset follows within the horizon, which is
  every firing in a run that does not degrade);
* ``horizon`` defaults to the run's N: a warning further ahead than one refresh interval is one the
  fixed gate would have answered anyway, by refreshing within that interval;
* ``mean_interval``: the mean number of steps between consecutive refreshes of the guard (signal and
  interval firings), from step 0; None when it never refreshes in the log.

Imports the spec layer and the analysis (pandas); no verl, vLLM or torch.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from coolsampler.results.analysis import validation, whole_run_mean
from coolsampler.results.diagnostics import onset_of, training_series
from coolsampler.spec.diagnostics import BY_NAME, trailing_median
from coolsampler.spec.guard import Decision, GuardSpec, RefreshGate, schedule_from_refreshed


@dataclass
class GuardReplay:
    """The guard's decisions over one logged run, and how they compare with its onset (module docstring)."""

    spec: GuardSpec
    N: int
    horizon: int
    steps: int  # training steps in the log
    logged: int  # steps with a finite value of the signal
    onset: int | None
    refreshes: list[Decision] = field(default_factory=list)

    @property
    def signal_steps(self) -> list[int]:
        return [d.step for d in self.refreshes if d.reason == "signal"]

    @property
    def interval_steps(self) -> list[int]:
        return [d.step for d in self.refreshes if d.reason == "interval"]

    @property
    def schedule(self) -> list[int]:
        """Every refresh, as the ``N: {schedule: [...]}`` that replays it open loop."""
        return [d.step for d in self.refreshes]

    @property
    def lead(self) -> int | None:
        first = self.signal_steps[:1]
        return None if self.onset is None or not first else self.onset - first[0]

    def _warns(self, f: int) -> bool:
        return self.onset is not None and f <= self.onset <= f + self.horizon

    @property
    def warned(self) -> list[int]:
        return [f for f in self.signal_steps if self._warns(f)]

    @property
    def late(self) -> list[int]:
        return [f for f in self.signal_steps if self.onset is not None and f > self.onset]

    @property
    def false_alarms(self) -> list[int]:
        return [f for f in self.signal_steps if not self._warns(f) and not (self.onset is not None and f > self.onset)]

    @property
    def mean_interval(self) -> float | None:
        points = [0, *self.schedule]
        gaps = [b - a for a, b in zip(points, points[1:], strict=False)]
        return sum(gaps) / len(gaps) if gaps else None


def replay_guard(metrics: pd.DataFrame, spec: GuardSpec, N: int, horizon: int | None = None) -> GuardReplay:
    """Feed ``metrics``' signal, one training step at a time, to a fresh ``RefreshGate(N, spec)``.

    Every training step of the table is decided (a step without the signal is one more step on the
    same sampler); ``horizon`` defaults to N."""
    values = training_series(metrics, spec.diagnostic.column)
    steps = sorted(int(s) for s in metrics["step"] if int(s) > 0) if "step" in metrics.columns else []
    gate = RefreshGate(int(N), spec)
    out = GuardReplay(spec, int(N), int(horizon if horizon is not None else N), len(steps), 0, onset_of(metrics))
    for step in steps:
        v = values.get(step)
        value = None if v is None or not math.isfinite(float(v)) else float(v)
        out.logged += value is not None
        d = gate.decide(step, value)
        if d.refresh:
            out.refreshes.append(d)
    return out


def logged_schedule(metrics: pd.DataFrame) -> list[int]:
    """The steps a run's log marks ``refreshed`` (verl's ``staleness/refreshed``), as the ``N: {schedule:
    [...]}`` that replays a guard run's refreshes open loop (``coolsampler.spec.guard.schedule_from_refreshed``)."""
    if "refreshed" not in metrics.columns or "step" not in metrics.columns:
        return []
    pairs = zip(metrics["step"].astype("int64"), metrics["refreshed"], strict=True)
    return list(schedule_from_refreshed((s, None if pd.isna(f) else f) for s, f in pairs if s > 0))


def schedule_line(schedule: list[int]) -> str:
    """``N: {schedule: [34, 51, 147]}``: what a study's run entry says to replay these refreshes."""
    return f"N: {{schedule: [{', '.join(map(str, schedule))}]}}"


def _steps(steps: list[int], limit: int = 12) -> str:
    if not steps:
        return "none"
    shown = ", ".join(map(str, steps[:limit]))
    return shown + (f", ... ({len(steps)} in all)" if len(steps) > limit else "")


def replay_text(r: GuardReplay) -> str:
    """One run's replay in a few lines (under its block of ``coolsampler analyze``)."""
    if r.logged == 0:
        return f"   guard {r.spec.text()}: {r.spec.diagnostic.column} is not logged here; nothing to replay"
    lines = [
        f"   guard {r.spec.text()}, at most every {r.N} steps ({r.logged} of {r.steps} steps logged):",
        f"     fires (signal) at {_steps(r.signal_steps)}; interval refreshes at {_steps(r.interval_steps)}",
    ]
    mean = "no refresh in the log" if r.mean_interval is None else f"{r.mean_interval:.1f} steps"
    if r.onset is None:
        onset = "no onset"
    else:
        lead = "no signal firing" if r.lead is None else f"lead {r.lead:+d}"
        onset = f"onset {r.onset}: {lead}"
    lines.append(
        f"     {onset}; {len(r.warned)} warned, {len(r.late)} late, {len(r.false_alarms)} false alarm(s)"
        f" (horizon {r.horizon} steps); mean interval {mean} (fixed gate: {r.N})"
    )
    if r.schedule:
        lines.append(f"     as an open-loop schedule: {schedule_line(r.schedule)}")
    return "\n".join(lines)


REPLAY_NOTE = (
    "The replay reads a fixed-N log: up to the first firing it is what a guard run would have done; later"
    " firings read a sampler the logged run kept, so they bound how often the guard fires, they do not"
    " predict a guard run (coolsampler.results.guard)."
)


# --------------------------------------------------------------------------------------------------
# The frontier: what a refresh costs against what it protects, per run and per arm

FRONTIER_COLUMNS = [
    "key", "refresh", "arm", "correction", "Tb", "N", "seed", "steps", "refreshes", "interval", "degraded", "whole",
]  # fmt: skip


def refresh_kind(settings: Mapping[str, Any]) -> str:
    """``fixed``, ``guard`` or ``schedule`` from a run's settings (``Run.refresh`` for a Run)."""
    return "guard" if settings.get("guard") else "schedule" if settings.get("schedule") else "fixed"


def arm_label(settings: Mapping[str, Any]) -> str:
    """The arm a run belongs to on the frontier: ``N=8``, ``guard probs_diff>0.1`` or ``schedule 21,39,59``."""
    kind = refresh_kind(settings)
    if kind == "guard":
        spec = GuardSpec.from_config(settings["guard"])
        return f"guard {spec.signal}{'>' if spec.diagnostic.above else '<'}{spec.threshold:g}"
    if kind == "schedule":  # replays differ run by run: each its own point, named by its refreshes
        return f"schedule {','.join(map(str, settings['schedule']))}"
    return f"N={settings['N']}"


def run_refreshes(metrics: pd.DataFrame | None, steps: int, N: int) -> int:
    """Refreshes the log records (``refreshed``); a log without the column counts the fixed gate's."""
    if metrics is not None and "refreshed" in metrics.columns:
        r = metrics["refreshed"].dropna()
        if len(r):
            return int(r.astype(bool).sum())
    return int(steps // N)


def largest_safe_N(runs: Iterable[tuple[int, bool]]) -> int | None:
    """The largest N none of whose runs degrade, from ``(N, degraded)`` per fixed-N run: the frontier a
    staleness guard is measured against (the claims' ``per: frontier`` and the frontier figure). None
    when every N has a degraded run."""
    by_N: dict[int, bool] = {}
    for N, degraded in runs:
        by_N[int(N)] = by_N.get(int(N), False) or bool(degraded)
    safe = [N for N, bad in by_N.items() if not bad]
    return max(safe) if safe else None


def frontier_table(entries: Sequence[tuple[Mapping[str, Any], pd.DataFrame | None, Any]]) -> pd.DataFrame:
    """One row per run with a log: its arm, refreshes, mean refresh interval (steps / refreshes),
    whether it degrades (Section 2's onset) and its whole-run accuracy (Table 1's trapezoid mean).

    ``entries`` are a figure panel's ``(settings, metrics, status)``; runs without metrics are left out
    (the figure names them)."""
    rows = []
    for settings, metrics, _ in entries:
        if metrics is None or metrics.empty:
            continue
        steps = int(settings.get("steps") or int(metrics["step"].max()))
        refreshes = run_refreshes(metrics, steps, int(settings["N"]))
        rows.append(
            {
                "key": settings.get("key"),
                "refresh": refresh_kind(settings),
                "arm": arm_label(settings),
                "correction": settings.get("correction"),
                "Tb": settings.get("Tb_initial", settings.get("Tb")),
                "N": int(settings["N"]),
                "seed": settings.get("seed"),
                "steps": steps,
                "refreshes": refreshes,
                "interval": steps / max(1, refreshes),
                "degraded": onset_of(metrics) is not None,
                "whole": whole_run_mean(validation(metrics)),
            }
        )
    return pd.DataFrame(rows, columns=FRONTIER_COLUMNS)


def frontier_arms(table: pd.DataFrame) -> pd.DataFrame:
    """Per arm (and correction, temperature): runs, mean interval, degraded fraction, mean whole-run
    accuracy with its range over seeds. Fixed arms first, by N, then guards, then schedules."""
    keys = ["refresh", "arm", "correction", "Tb"]
    agg = {
        "N": ("N", "max"), "runs": ("key", "count"), "interval": ("interval", "mean"), "degraded": ("degraded", "mean"),
        "whole": ("whole", "mean"), "whole_min": ("whole", "min"), "whole_max": ("whole", "max"),
    }  # fmt: skip
    if table.empty:
        return pd.DataFrame(columns=[*keys, *agg])
    out = table.groupby(keys, sort=False, dropna=False).agg(**agg).reset_index()
    order = {"fixed": 0, "guard": 1, "schedule": 2}
    out["_o"] = out["refresh"].map(order)
    return out.sort_values(["correction", "Tb", "_o", "N", "arm"]).drop(columns="_o").reset_index(drop=True)


# --------------------------------------------------------------------------------------------------
# Calibration: a guard's threshold from the fixed-N frontier, by the rule the guard calibration study
# writes before its runs (config/guard-calibration.yaml).


def readings_at(metrics: pd.DataFrame, signal: str, window: int, staleness: int) -> list[float]:
    """The guard's own reading (its signal through the trailing median of ``window`` values since the
    last refresh, as ``RefreshGate`` reads it) at each step of a logged run where the sampler is
    ``staleness`` steps old (the metrics' ``staleness``), one per cycle that reaches that age."""
    values = training_series(metrics, BY_NAME[signal].column)
    m = metrics[metrics["step"] > 0]
    out = []
    for _, row in m[m["staleness"] == staleness].iterrows():
        cycle = m[(m["sampler_version"] == row["sampler_version"]) & (m["step"] <= row["step"])]
        reading = trailing_median([values.get(int(s)) for s in cycle["step"]], window)
        if reading is not None:
            out.append(reading)
    return out


@dataclass
class Calibration:
    """N* and, per signal, the threshold and the readings it is the median of."""

    N_star: int | None
    degraded: dict[int, list[bool]]  # N -> per run (seed order), whether it has an onset
    readings: dict[str, list[float]] = field(default_factory=dict)
    thresholds: dict[str, float | None] = field(default_factory=dict)

    def text(self, window: int) -> str:
        lines = [f"N={N}: {sum(flags)} of {len(flags)} runs degrade" for N, flags in sorted(self.degraded.items())]
        if self.N_star is None:
            lines.append("N*: none (every N has a degraded run): no threshold by the rule")
            return "\n".join(lines)
        lines.append(f"N* = {self.N_star} (the largest N none of whose runs degrade)")
        for signal, t in self.thresholds.items():
            d = BY_NAME[signal]
            got = self.readings[signal]
            shown = ", ".join(f"{v:.4g}" for v in got)
            reading = f"median of {len(got)} readings at staleness {self.N_star - 1}" if got else "no reading"
            value = "none" if t is None else f"{t:.4g}"
            lines.append(
                f"threshold {signal} ({d.label}, refresh when {'above' if d.above else 'below'} it): {value}"
                f"  [{reading}, window {window}: {shown}]"
            )
        return "\n".join(lines)


def calibrate(
    runs: Sequence[tuple[Mapping[str, Any], pd.DataFrame]], signals: Sequence[str], window: int
) -> Calibration:
    """N* over fixed-N runs ``(settings, metrics)`` (the largest N with no onset on any run, Section 2),
    then for each signal the median of the guard's reading at staleness N*-1 over every cycle of the N*
    runs: the level a guard should refresh at to keep every cycle as young as N*'s."""
    degraded: dict[int, list[bool]] = {}
    for settings, metrics in runs:
        degraded.setdefault(int(settings["N"]), []).append(onset_of(metrics) is not None)
    N_star = largest_safe_N((N, any(flags)) for N, flags in degraded.items())
    out = Calibration(N_star, degraded)
    for signal in signals:
        got: list[float] = []
        if N_star is not None:
            for settings, metrics in runs:
                if int(settings["N"]) == N_star:
                    got += readings_at(metrics, signal, window, N_star - 1)
        out.readings[signal] = got
        out.thresholds[signal] = float(np.median(got)) if got else None
    return out
