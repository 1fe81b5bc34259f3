"""The paper's quantitative statements as checkable claims, computed on a study's runs.

``config/claims.yaml`` lists every number of Sections 3-4, the captions and Tables 1-4 that a run can
check: which runs (a settings filter, the grammar of a study's ``figures:`` filters), which per-run
measure (``QUANTITIES``, each a thin call into ``coolsampler.results.analysis``), how it is reduced over the
runs (``REDUCERS``), the paper's value and a tolerance. ``evaluate`` turns that into one verdict per
claim:

* ``reproduced``: the computed value is within the tolerance of the paper's;
* ``differs``: it is not (or it cannot be measured from the logs: NaN);
* ``not run``: no run of the study matches the filter, or a matching run has no metrics yet;
* ``incomplete``: every run has metrics but one stopped early (its ``status.json``); the value over
  the logged steps is still shown;
* ``reported``: a claim marked ``reported: true`` has no paper value to agree with: its value is
  computed and shown, never judged. The lead of each staleness diagnostic over the onset is such a
  quantity (the paper reports the diagnostics "as descriptions of the degradation"; Section 4).

Before any training the report still says, for each claim, which runs would check it.

The staleness budget (Section 3.3: "degrades at about 120 steps of staleness uncooled and 180 cooled,
so 144 should sit between") comes from *observed* onsets (Section 3.2: KL extrapolation does not
forecast the cliff): ``staleness_at_onset`` is the onset step minus the last refresh before it, and
``staleness_budget`` tabulates it per model, task and sampler temperature.

Only numpy, pandas, yaml and jsonschema: no verl, vLLM or torch.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from coolsampler.results import analysis as A
from coolsampler.results import diagnostics as D
from coolsampler.results.guard import largest_safe_N
from coolsampler.spec.layout import Layout, key_of_file
from coolsampler.spec.metrics_schema import RunStatus, absent_columns, missing_text
from coolsampler.spec.study import Run, Temperature, matches
from coolsampler.spec.targets import TARGETS

VERDICTS = ("reproduced", "differs", "not run", "incomplete", "reported")


class ClaimError(ValueError):
    """A claims file that cannot be evaluated. The message is one line naming the claim and field."""


@dataclass
class RunData:
    """One run as the claims see it: its settings, metrics table (None: no logs) and status."""

    run: Run
    metrics: pd.DataFrame | None
    status: RunStatus | None

    @property
    def settings(self) -> dict[str, Any]:
        return self.run.settings()


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


def _cycle_window(d: RunData, cycle: int | None) -> tuple[int | None, int | None]:
    """Steps of cycle ``cycle`` (1-based): ``(c-1)N+1 .. cN`` (analysis.cycle_of)."""
    if cycle is None:
        return None, None
    N = d.run.N
    return (cycle - 1) * N + 1, cycle * N


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


def m_kl_cross(d: RunData, threshold: float = A.KL_LEAD_NAT, first_cycle: bool = False, since: int | None = None) -> int | None:
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


def m_last5(d: RunData) -> float:
    return A.last_five_mean(_val(d))


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
    """Steps since the last refresh at ``step``: the step minus the sampler's weights' step.

    Read from the log (``sampler_version``: the learner step whose weights the sampler held) where it
    has it, else from the gate's schedule (the last multiple of N before the step)."""
    if step is None:
        return None
    sv = A.value_at(d.metrics, "sampler_version", step)
    if math.isnan(sv):
        sv = d.run.N * ((step - 1) // d.run.N)
    return int(step - sv)


def m_staleness_at_onset(d: RunData) -> int | None:
    return staleness_at(d, _events(d).onset)


def _stat(fn: str) -> Callable[..., float]:
    def measure(
        d: RunData, col: str, since: int | None = None, until: int | None = None, cycle: int | None = None
    ) -> float:
        lo, hi = _cycle_window(d, cycle)
        s = _window(_col(d, col), since if since is not None else lo, until if until is not None else hi)
        return float(getattr(s, fn)()) if len(s) else math.nan

    measure.__doc__ = f"{fn} of a metrics column over a step window or a cycle"
    return measure


def m_cycle_reading(d: RunData, reading: str, cycle: int | None = None) -> Any:
    """Table 3's reading (kl, entropy_start, clip) of cycle ``cycle``, or [cycle 1, cycle 2]."""
    t = A.cycle_readings(d.metrics, d.run.N).set_index("cycle")
    get = lambda c: float(t.loc[c, reading]) if c in t.index else math.nan  # noqa: E731
    return get(cycle) if cycle is not None else [get(1), get(2)]


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
    "last_step": m_last_step,
    "refreshes": m_refreshes,
    "interval": m_interval,
    "staleness_at_onset": m_staleness_at_onset,
    "rise_lead": m_rise_lead,
    "col_gap_at": m_col_gap_at,
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


def p_val_gap_before_onset(d: RunData, ref: RunData) -> float | None:
    """Mean over the validations both logged before the pair's onset (the whole run if it has none) of
    the run's validation score minus its pair's: how far one arm is behind while the other still holds."""
    cut = _events(ref).onset
    a, b = _val(d), _val(ref)
    if cut is not None:
        a, b = a[a.index < cut], b[b.index < cut]
    gap = (a - b).dropna()
    return float(gap.mean()) if len(gap) else None


PAIRED: dict[str, Callable[..., Any]] = {
    "onset_ratio": p_onset_ratio,
    "val_gap_before_onset": p_val_gap_before_onset,
}


# The metrics columns each quantity reads (its ``col``/``diagnostic``/``reading`` argument adds its own):
# a claim whose runs never logged one of them cannot be measured, and says which verl setting logs it.
_VAL = ("val_acc",)
QUANTITY_COLUMNS: dict[str, tuple[str, ...]] = {
    **{q: _VAL for q in ("final", "peak", "val_first", "val_at", "max_val", "val_curve", "first_at_least")},
    **{q: _VAL for q in ("onset", "severe", "kind", "recovered_at", "back_at", "last5", "whole")},
    **{q: ("kl",) for q in ("kl_cross", "kl_max", "kl_at", "kl_fixed")},
    "kl_to_init": ("kl_to_init",),
    "lead": ("val_acc", "kl"),
    "diag_lead": _VAL,
    "staleness_at_onset": _VAL,
    "rise_lead": _VAL,
    "onset_ratio": _VAL,
    "val_gap_before_onset": _VAL,
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


# --------------------------------------------------------------------------------------------------
# Reductions over the selected runs


def _missing(x: Any) -> bool:
    return x is None or x is pd.NA or (isinstance(x, float) and math.isnan(x))


def _order(rd: RunData) -> tuple[Any, ...]:
    """Runs in seed order (the paper lists per-seed numbers as seeds 1, 43, 44), replicates last."""
    return (rd.run.seed, rd.run.replicate or "", rd.run.key)


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


def _group_key(rd: RunData, per: Sequence[str]) -> tuple[Any, ...]:
    s = rd.settings
    return tuple(str(s.get(k)) for k in per)


def reduce_values(
    quantity: Mapping[str, Any],
    runs: Sequence[tuple[RunData, Any]],
    versus: Sequence[tuple[RunData, Any]] = (),
) -> Any:
    """Reduce per-run values (``(run, value)`` pairs, already in seed order) as ``quantity`` says; with
    ``count_at_least``, a list of values becomes how many of them are at or above it ("in at least 3 of
    4 seeds" is a count in [3, null])."""
    value = _reduce(quantity, runs, versus)
    if "count_at_least" in quantity:
        xs = value if isinstance(value, list) else [value]
        return sum(1 for v in xs if not _missing(v) and float(v) >= float(quantity["count_at_least"]))
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
        other: dict[tuple[Any, ...], list[Any]] = {}
        for rd, v in versus:
            other.setdefault(_group_key(rd, keys), []).append(v)
        mine: dict[tuple[Any, ...], list[Any]] = {}
        for rd, v in runs:
            mine.setdefault(_group_key(rd, keys), []).append(v)
        return [_op(_mean(v), _mean(other[k]), how) for k, v in mine.items() if k in other]
    raise ClaimError(f"unknown reduce {how!r}")


# --------------------------------------------------------------------------------------------------
# Comparison with the paper's value


def _tol(tolerance: Any, ref: float) -> float:
    if isinstance(tolerance, Mapping):
        return float(tolerance["rel"]) * abs(ref)
    return float(tolerance)


def _scalar(v: Any) -> Any:
    """A curve (Series) is judged by its worst point: 'leads throughout' = its minimum is >= 0."""
    if isinstance(v, pd.Series):
        return float(v.min()) if len(v) else math.nan
    return v


def _close(v: Any, p: Any, tolerance: Any) -> bool:
    v = _scalar(v)
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
    v = _scalar(v)
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


# --------------------------------------------------------------------------------------------------
# Loading and validating the claims file


@cache
def claims_schema() -> dict[str, Any]:
    return yaml.safe_load(resources.files("coolsampler.spec").joinpath("schemas/claims.schema.yaml").read_text())


def _where(doc: Mapping[str, Any], path: Sequence[Any]) -> str:
    """'claim <id>: field' for a schema error path."""
    parts = list(path)
    if len(parts) >= 2 and parts[0] == "claims" and isinstance(parts[1], int):
        claims = doc.get("claims") or []
        cid = claims[parts[1]].get("id", f"#{parts[1]}") if isinstance(claims[parts[1]], Mapping) else parts[1]
        rest = ".".join(str(p) for p in parts[2:]) or "(the claim)"
        return f"claim {cid}: {rest}"
    return ".".join(str(p) for p in parts) or "(top level)"


def check_claims(doc: Any, origin: str = "claims") -> None:
    """Schema, then what it cannot say: filter names exist, quantities exist and take their args,
    ids are unique, versus/value/per are given where the reduction needs them. One-line errors."""
    import inspect

    import jsonschema

    if not isinstance(doc, Mapping):
        raise ClaimError(f"{origin}: expected a mapping with claims:")
    for i, c in enumerate(doc.get("claims") or []):  # the schema says it too, without naming the field
        for fld in ("paper", "tolerance"):
            if isinstance(c, Mapping) and c.get("reported") is True and fld in c:
                where = _where(doc, ["claims", i, fld])
                raise ClaimError(f"{origin}: {where}: a reported claim takes no {fld}: its value is shown, not judged")
    errors = sorted(jsonschema.Draft202012Validator(claims_schema()).iter_errors(doc), key=lambda e: list(e.path))
    if errors:
        e = min(errors, key=lambda e: len(list(e.path)) * -1)
        raise ClaimError(f"{origin}: {_where(doc, e.absolute_path)}: {e.message}".replace("\n", " "))
    names = set(doc.get("filters") or {})
    seen: set[str] = set()
    for c in doc["claims"]:
        cid, q = c["id"], c["quantity"]
        if cid in seen:
            raise ClaimError(f"{origin}: claim {cid}: id: duplicate")
        seen.add(cid)
        for fld, sel in (("runs", c["runs"]), ("quantity.versus", q.get("versus"))):
            for item in sel if isinstance(sel, list) else [sel]:
                if isinstance(item, str) and item not in names:
                    raise ClaimError(
                        f"{origin}: claim {cid}: {fld}: unknown filter {item!r} (define it under filters:)"
                    )
        table = PAIRED if q["reduce"] == "paired" else QUANTITIES
        if q["fn"] not in table:
            kind = "paired measure" if table is PAIRED else "quantity"
            raise ClaimError(
                f"{origin}: claim {cid}: quantity.fn: unknown {kind} {q['fn']!r} (allowed: {', '.join(table)})"
            )
        params = inspect.signature(table[q["fn"]]).parameters
        for a in q.get("args") or {}:
            if a not in params or a in ("d", "ref"):
                raise ClaimError(f"{origin}: claim {cid}: quantity.args: {q['fn']} takes no argument {a!r}")
        if q["fn"] == "diag_lead":
            try:
                D.diagnostic(str((q.get("args") or {}).get("diagnostic", "kl")))
            except ValueError as e:
                raise ClaimError(f"{origin}: claim {cid}: quantity.args.diagnostic: {e}") from None
        needs_versus = q["reduce"] in ("difference", "ratio", "brackets", "paired")
        if needs_versus != ("versus" in q):
            what = "needs" if needs_versus else "takes no"
            raise ClaimError(f"{origin}: claim {cid}: quantity.versus: reduce {q['reduce']} {what} versus")
        if q["reduce"] == "brackets" and "value" not in q:
            raise ClaimError(f"{origin}: claim {cid}: quantity.value: reduce brackets needs value")
        if "per" in q and q["reduce"] not in ("difference", "ratio"):
            raise ClaimError(f"{origin}: claim {cid}: quantity.per: only with difference or ratio")


@dataclass
class Claims:
    filters: dict[str, Any]
    claims: list[dict[str, Any]]

    def selector(self, sel: Any) -> list[Mapping[str, Any]]:
        """A claim's ``runs``/``versus`` as a list of filters (names resolved)."""
        items = sel if isinstance(sel, list) else [sel]
        return [self.filters[i] if isinstance(i, str) else i for i in items]


def load_claims(path: str | Path) -> Claims:
    path = Path(path)
    try:
        # libyaml's loader where installed: the file is a few hundred claims
        doc = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506
    except yaml.YAMLError as e:
        raise ClaimError(f"{path}: not valid YAML: {e}".replace("\n", " ")) from e
    check_claims(doc, str(path))
    return Claims(dict(doc.get("filters") or {}), list(doc["claims"]))


def select(runs: Sequence[Run], filters: Sequence[Mapping[str, Any]]) -> list[Run]:
    """The runs any filter selects, in study order (``Study.select`` on a plain list of runs)."""
    return [r for r in runs if any(matches(r, f) for f in filters)]


def check_selects(claims: Claims, runs: Sequence[Run], origin: str = "claims") -> None:
    """Every claim's filters select at least one of ``runs`` (the paper study: a claim no paper run
    can check is a wrong filter). One-line ClaimError naming the claim and field."""
    for c in claims.claims:
        if not select(runs, claims.selector(c["runs"])):
            raise ClaimError(f"{origin}: claim {c['id']}: runs: selects no run of the study")
        if "versus" in c["quantity"] and not select(runs, claims.selector(c["quantity"]["versus"])):
            raise ClaimError(f"{origin}: claim {c['id']}: quantity.versus: selects no run of the study")


# The settings that name the paper's scale; a probe drops them and keeps the mechanism.
PROBE_DROP = ("model", "task", "N", "lr", "seed", "steps", "val_every", "key")


def relax(claims: Claims) -> Claims:
    """The claims with every filter reduced to its mechanism settings (a probe: stand-in runs, e.g. the smoke study)."""

    def strip(f: Any) -> Any:
        if isinstance(f, list):
            return [strip(x) for x in f]
        if isinstance(f, dict):
            return {k: v for k, v in f.items() if k not in PROBE_DROP}
        return f

    out = []
    for c in claims.claims:
        c = dict(c)
        q = dict(c["quantity"])
        if q["reduce"] == "one":
            q["reduce"] = "each"  # several stand-in runs may match a single paper run
        c["runs"] = strip(c["runs"])
        if "versus" in q:
            q["versus"] = strip(q["versus"])
        c["quantity"] = q
        out.append(c)
    return Claims({k: strip(v) for k, v in claims.filters.items()}, out)


# --------------------------------------------------------------------------------------------------
# Evaluation


@dataclass
class Result:
    claim: dict[str, Any]
    verdict: str
    value: Any = None
    runs: list[str] = field(default_factory=list)
    versus: list[str] = field(default_factory=list)
    reason: str = ""


def plan(claims: Claims, runs: Sequence[Run]) -> dict[str, list[str]]:
    """Claim id -> the keys of the runs that would check it (runs and versus): the dry listing."""
    out = {}
    for c in claims.claims:
        keys = [r.key for r in select(runs, claims.selector(c["runs"]))]
        if "versus" in c["quantity"]:
            keys += [r.key for r in select(runs, claims.selector(c["quantity"]["versus"]))]
        out[c["id"]] = list(dict.fromkeys(keys))
    return out


def evaluate_claim(claims: Claims, c: Mapping[str, Any], data: Mapping[str, RunData], runs: Sequence[Run]) -> Result:
    """One claim's verdict and value from the runs' data (``data``: key -> RunData, runs with logs)."""
    q = c["quantity"]
    mine = select(runs, claims.selector(c["runs"]))
    theirs = select(runs, claims.selector(q["versus"])) if "versus" in q else []
    res = Result(dict(c), "not run", runs=[r.key for r in mine], versus=[r.key for r in theirs])
    if not mine or ("versus" in q and not theirs):
        res.reason = "no run of the study matches" + (" the versus filter" if mine else "")
        return res
    absent = [r.key for r in mine + theirs if r.key not in data or data[r.key].metrics is None]
    if absent:
        res.reason = f"no logs yet for {len(absent)} of {len(mine) + len(theirs)} runs"
        return res
    lack = unlogged(q, [data[r.key] for r in mine + theirs])
    if lack:
        res.reason = "not in these logs: " + "; ".join(missing_text(lack))
        return res
    args = q.get("args") or {}
    fn = (PAIRED if q["reduce"] == "paired" else QUANTITIES)[q["fn"]]

    def measured(sel: list[Run]) -> list[tuple[RunData, Any]]:
        rds = sorted((data[r.key] for r in sel), key=_order)
        return [(rd, fn(rd, **args)) for rd in rds]

    def paired() -> list[tuple[RunData, Any]]:
        by_seed = {data[r.key].run.seed: data[r.key] for r in theirs}
        rds = sorted((data[r.key] for r in mine), key=_order)
        return [(rd, fn(rd, by_seed[rd.run.seed], **args)) for rd in rds if rd.run.seed in by_seed]

    try:
        if q["reduce"] == "paired":
            versus = [(data[r.key], None) for r in theirs]
            res.value = reduce_values(q, paired(), versus)
        else:
            versus = measured(theirs)
            res.value = reduce_values(q, measured(mine), versus)
    except ClaimError as e:
        raise ClaimError(f"claim {c['id']}: {e}") from None
    if q.get("per") == "frontier":  # say which N the value compares with: it follows from the data
        safe = frontier_N(versus)
        res.reason = (
            f"against N={safe}, the largest N none of whose runs degrade"
            if safe
            else ("every N of the versus runs has a degraded run: no frontier to compare with")
        )
    stopped = [
        k
        for k in res.runs + res.versus
        if data[k].status is None or not data[k].status.complete  # type: ignore[union-attr]
    ]
    if stopped:
        res.verdict = "incomplete"
        res.reason = f"{len(stopped)} run(s) stopped early or have no status: " + ", ".join(stopped)
        return res
    if c.get("reported"):
        res.verdict = "reported"
        return res
    res.verdict = "reproduced" if agrees(res.value, c["paper"], c["tolerance"]) else "differs"
    if res.verdict == "differs" and _has_nan(res.value):
        res.reason = "not measurable from the logs (NaN: a step or column is missing)"
    return res


def _has_nan(v: Any) -> bool:
    vs = v if isinstance(v, list) else [v]
    return any(isinstance(x, float) and math.isnan(x) for x in vs)


def evaluate(claims: Claims, runs: Sequence[Run], data: Mapping[str, RunData]) -> list[Result]:
    return [evaluate_claim(claims, c, data, runs) for c in claims.claims]


# --------------------------------------------------------------------------------------------------
# The staleness budget (Section 3.3), from observed onsets


BUDGET_COLUMNS = [
    "model", "task", "lr", "correction", "Tb", "Tl", "runs", "N", "degrading", "staleness_at_onset",
    "first_cycle_safe_N_below", "safe_N_below", "passed_first_refresh",
]  # fmt: skip


def staleness_budget(runs: Sequence[Run], data: Mapping[str, RunData]) -> pd.DataFrame:
    """Per model, task, lr, correction, Tb and Tl: the staleness at onset of the degrading runs and
    the refresh interval that implies.

    ``staleness_at_onset``: onset step minus the last refresh before it, per degrading run;
    ``first_cycle_safe_N_below``: the smallest of those among onsets in the first cycle, sampled from
    the initial policy (the budget Section 3.3 predicts from: an interval N keeps the staleness below
    N, so N under this value was not seen to degrade); ``safe_N_below``: the same over every cycle
    (later cycles start from a sharper policy; the paper's 7B N=144 runs degrade in the second cycle
    at lower staleness); ``passed_first_refresh``: the largest N among runs with no onset before their
    first refresh (an interval seen to be survived once).
    """
    groups: dict[tuple[Any, ...], list[RunData]] = {}
    for r in runs:
        if r.key in data and data[r.key].metrics is not None:
            tl = "tied" if r.Tl == "tied" else Temperature("fixed", float(r.Tl)).short()
            groups.setdefault((r.model, r.task, r.lr, r.correction, r.Tb.short(), tl), []).append(data[r.key])
    rows = []
    for (model, task, lr, corr, tb, tl), rds in sorted(groups.items(), key=lambda kv: [str(x) for x in kv[0]]):
        onsets = [(rd, m_onset(rd)) for rd in sorted(rds, key=lambda rd: (rd.run.N, _order(rd)))]
        stale = [(rd.run.N, staleness_at(rd, o), o <= rd.run.N) for rd, o in onsets if o is not None]
        first = [st for _, st, in_first in stale if in_first]
        survived = [
            rd.run.N
            for rd, _ in onsets
            if m_onset(rd, until=rd.run.N) is None and m_last_step(rd) and (m_last_step(rd) or 0) >= rd.run.N
        ]
        rows.append(
            {
                "model": model,
                "task": task,
                "lr": lr,
                "correction": corr,
                "Tb": tb,
                "Tl": tl,
                "runs": len(rds),
                "N": "/".join(str(n) for n in sorted({rd.run.N for rd in rds})),
                "degrading": len(stale),
                "staleness_at_onset": "/".join(f"{st}(N{n})" for n, st, _ in stale) or "–",
                "first_cycle_safe_N_below": min(first) if first else None,
                "safe_N_below": min(st for _, st, _ in stale) if stale else None,
                "passed_first_refresh": max(survived) if survived else None,
            }
        )
    df = pd.DataFrame(rows, columns=BUDGET_COLUMNS)
    for col in ("first_cycle_safe_N_below", "safe_N_below", "passed_first_refresh"):
        if col in df:
            df[col] = df[col].astype("Int64")  # steps, with "none" where no run says
    return df


# --------------------------------------------------------------------------------------------------
# The report


def fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, pd.Series):
        return f"min {fmt(_scalar(v))} over {len(v)} points" if len(v) else "no points"
    if isinstance(v, list):
        return " / ".join(fmt(x) for x in v)
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        if math.isnan(v):
            return "NaN"
        if float(v).is_integer() and abs(v) >= 1:
            return str(int(v))
        return f"{v:.3g}" if abs(v) < 0.1 else f"{v:.3f}"
    return str(v)


REPORTED = "reported, not asserted"


def paper_text(c: Mapping[str, Any]) -> str:
    """A claim's paper value as the report prints it (a reported claim has none)."""
    return REPORTED if c.get("reported") else fmt_paper(c["paper"])


def tolerance_text(c: Mapping[str, Any]) -> str:
    return "–" if c.get("reported") else fmt_tol(c["tolerance"])


def fmt_paper(p: Any) -> str:
    if isinstance(p, Mapping):
        return " / ".join(fmt(x) for x in p["each"])
    if isinstance(p, list):
        lo, hi = p
        return f"≥ {fmt(lo)}" if hi is None else (f"≤ {fmt(hi)}" if lo is None else f"{fmt(lo)}–{fmt(hi)}")
    return fmt(p)


def fmt_tol(t: Any) -> str:
    return f"±{fmt(t['rel'] * 100)}%" if isinstance(t, Mapping) else f"±{fmt(t)}"


def _links(shows: Sequence[str], defined: set[str] | None) -> str:
    out = []
    for t in shows:
        target = f"{t}.pdf" if t in TARGETS and TARGETS[t].kind == "figure" else f"{t}.md"
        if defined is None or t in defined or t in ("staleness_budget", "diagnostic_leads"):
            out.append(f"[{t}]({target})")
        else:
            out.append(f"{t} (not in this study)")
    return ", ".join(out) or "–"


def results_frame(results: Sequence[Result]) -> pd.DataFrame:
    rows = []
    for r in results:
        c = r.claim
        rows.append(
            {
                "id": c["id"],
                "where": c["where"],
                "verdict": r.verdict,
                "paper": paper_text(c),
                "ours": fmt(r.value) if r.verdict in ("reproduced", "differs", "incomplete", "reported") else "",
                "tolerance": tolerance_text(c),
                "quantity": _quantity_text(c["quantity"]),
                "runs": " ".join(r.runs),
                "versus": " ".join(r.versus),
                "reason": r.reason,
                "shows": " ".join(c.get("shows", [])),
                "text": c["text"],
                "note": c.get("note", ""),
            }
        )
    return pd.DataFrame(rows)


def _quantity_text(q: Mapping[str, Any]) -> str:
    args = ", ".join(f"{k}={v}" for k, v in (q.get("args") or {}).items())
    s = f"{q['fn']}({args}) {q['reduce']}"
    if "per" in q:
        s += f" per {q['per'] if isinstance(q['per'], str) else '/'.join(q['per'])}"
    if "value" in q:
        s += f" {q['value']}"
    return s


def counts(results: Sequence[Result]) -> dict[str, int]:
    return {v: sum(1 for r in results if r.verdict == v) for v in VERDICTS}


def _md_table(df: pd.DataFrame) -> str:
    cols = list(df.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, row in df.iterrows():
        lines.append("| " + " | ".join(("–" if _missing(v) else str(v)).replace("|", "\\|") for v in row) + " |")
    return "\n".join(lines)


def report_markdown(
    results: Sequence[Result],
    budget: pd.DataFrame,
    study: str,
    defined: set[str] | None = None,
) -> str:
    """The reproduction report: verdict counts, the staleness budget, and every claim beside the paper."""
    n = counts(results)
    # a study's own success criterion (where: Criterion <study>) is not the paper's: its "paper" value is
    # the criterion's bound, and "reproduced" means the part holds
    criterion = bool(results) and all(str(r.claim.get("where", "")).startswith("Criterion") for r in results)
    out = [
        f"# The success criterion of study `{study}`, part by part"
        if criterion
        else f"# Claims of the paper, checked on study `{study}`",
        "",
        f"{len(results)} claims: " + ", ".join(f"{v} **{n[v]}**" for v in VERDICTS) + ".",
        "",
        *(
            [
                "Each claim is one part of the criterion the study file states before its runs; *paper* is its"
                " bound, *reproduced* means the part holds and *differs* that it does not.",
                "",
            ]
            if criterion
            else []
        ),
        "Verdicts: *reproduced* = within the tolerance of the paper's value; *differs* = outside it (or not"
        " measurable); *not run* = no run of this study matches, or a matching run has no metrics yet;"
        " *incomplete* = a run stopped early (its status.json); the value over the logged steps is shown;"
        " *reported* = a quantity the paper reports without a value to check (the value is shown, not judged).",
        "",
        "| section | claims | " + " | ".join(VERDICTS) + " |",
        "|---|---|" + "---|" * len(VERDICTS),
    ]
    by_sec: dict[str, list[Result]] = {}
    for r in results:
        by_sec.setdefault(r.claim["where"], []).append(r)
    for sec, rs in by_sec.items():
        c = counts(rs)
        out.append(f"| {sec} | {len(rs)} | " + " | ".join(str(c[v]) for v in VERDICTS) + " |")
    out += ["", "## Staleness budget (from observed onsets)", ""]
    out.append(
        "Onset step minus the last refresh before it, for every degrading run; *first_cycle_safe_N_below*"
        " / *safe_N_below*: refresh intervals below the smallest of these (first-cycle onsets / every"
        " onset) were not seen to degrade; *passed_first_refresh*: the largest N whose run reached its"
        " first refresh intact. Also in [staleness_budget.md](staleness_budget.md)."
    )
    out += ["", _md_table(budget) if len(budget) else "(no run has metrics yet)", "", "## Claims", ""]
    out.append("| id | where | paper | ours | tolerance | verdict | runs | shows |")
    out.append("|---|---|---|---|---|---|---|---|")
    for r in results:
        c = r.claim
        ours = fmt(r.value) if r.verdict != "not run" else "–"
        nruns = f"{len(r.runs)}" + (f" vs {len(r.versus)}" if r.versus else "")
        out.append(
            f"| [{c['id']}](#{c['id']}) | {c['where']} | {paper_text(c)} | {ours} | {tolerance_text(c)} |"
            f" **{r.verdict}** | {nruns} | {_links(c.get('shows', []), defined)} |"
        )
    out += ["", "## Each claim", ""]
    for r in results:
        c = r.claim
        out += [f"### {c['id']}", "", f"{c['where']}: “{c['text']}”", ""]
        paper = REPORTED if c.get("reported") else f"paper {fmt_paper(c['paper'])} {fmt_tol(c['tolerance'])}"
        out.append(f"- quantity: `{_quantity_text(c['quantity'])}`; {paper}")
        if c.get("note"):
            out.append(f"- reading: {c['note']}")
        out.append(
            f"- verdict: **{r.verdict}**"
            + (f", ours {fmt(r.value)}" if r.verdict != "not run" else "")
            + (f" ({r.reason})" if r.reason else "")
        )
        out.append("- runs: " + (", ".join(f"`{k}`" for k in r.runs) or "none in this study"))
        if r.versus:
            out.append("- versus: " + ", ".join(f"`{k}`" for k in r.versus))
        out.append(f"- shown in: {_links(c.get('shows', []), defined)}")
        out.append("")
    return "\n".join(out)


def write_report(
    results: Sequence[Result],
    budget: pd.DataFrame,
    study: str,
    md: str | Path,
    csv_path: str | Path,
    budget_md: str | Path | None = None,
    budget_csv: str | Path | None = None,
    defined: set[str] | None = None,
) -> None:
    Path(md).parent.mkdir(parents=True, exist_ok=True)
    Path(md).write_text(report_markdown(results, budget, study, defined) + "\n")
    results_frame(results).to_csv(csv_path, index=False, quoting=csv.QUOTE_MINIMAL)
    if budget_md is not None:
        Path(budget_md).write_text(
            f"# Staleness budget, study `{study}`\n\n"
            + (_md_table(budget) if len(budget) else "(no run has metrics yet)")
            + "\n"
        )
    if budget_csv is not None:
        budget.to_csv(budget_csv, index=False)


def summary_text(results: Sequence[Result]) -> str:
    n = counts(results)
    buf = io.StringIO()
    buf.write(f"{len(results)} claims: " + ", ".join(f"{v} {n[v]}" for v in VERDICTS) + "\n")
    return buf.getvalue()


__all__ = [
    "QUANTITIES",
    "VERDICTS",
    "ClaimError",
    "Claims",
    "Result",
    "RunData",
    "agrees",
    "check_claims",
    "degrades",
    "check_selects",
    "evaluate",
    "load_claims",
    "paper_text",
    "plan",
    "relax",
    "reduce_values",
    "staleness_budget",
    "write_report",
]


# --------------------------------------------------------------------------------------------------
# Entry points: the Snakemake rule and the command line


def load_run_data(run: Run, metrics: str | Path | None, status: str | Path | None) -> RunData:
    """A run's data from its metrics table and status.json (either may be absent: None)."""
    from coolsampler.results.loaders import load_metrics, load_status

    return RunData(run, load_metrics(metrics), load_status(status))


def run_snakemake(smk: Any) -> None:
    """Body of ``workflow/scripts/claims.py``: the report on the study's runs that have metrics now.

    params: claims (file), study (name), run_keys (every run of the study), defined (the
    study's figure/table targets). input.metrics: the metrics tables that exist (the rule's inputs).
    """
    from coolsampler.results.smklog import snakemake_log
    from coolsampler.spec.study import parse_key, study_from_dict

    with snakemake_log(smk.log[0], "claims report") as logger:
        claims = load_claims(smk.params.claims)
        if smk.params.probe:  # no run of the study is the paper's: stand-in runs (claims.smk)
            claims = relax(claims)
        # the study's own runs as it lists them: a key with a schedule (_sch) or extra overrides (_x)
        # names only a hash, which only the study can read back (the rehearsal's keys parse alone)
        listed = study_from_dict(dict(smk.config), origin=smk.params.study).by_key()
        runs = [listed[k] if k in listed else parse_key(k) for k in smk.params.run_keys]
        # .../runs/<model>/<task>/<settings>/metrics.parquet: the run key is in the path
        have = {key_of_file(p): Path(p) for p in smk.input.metrics}
        data = {
            r.key: load_run_data(r, have[r.key], have[r.key].with_name("status.json"))
            for r in runs
            if r.key in have
        }
        results = evaluate(claims, runs, data)
        budget = staleness_budget(runs, data)
        write_report(
            results,
            budget,
            smk.params.study + (" (probe: filters relaxed to the mechanism settings)" if smk.params.probe else ""),
            smk.output.md,
            smk.output.csv,
            smk.output.budget_md,
            smk.output.budget_csv,
            set(smk.params.defined),
        )
        logger.info("%s runs with metrics; %s", len(data), summary_text(results).strip())


@dataclass
class ReportPlan:
    """What rule ``claims`` needs at DAG time: the claims, the runs they select, probe or not.

    The rule's inputs are the metrics tables that EXIST (``inputs``), so building the report never
    trains anything; ``message`` is the dry listing: every run that would check a claim.
    """

    claims: Claims
    study: str
    results: str
    runs: list[str]
    probe: bool

    @classmethod
    def of(cls, claims_file: str | Path, study_name: str, study_runs: Sequence[Run], results: str) -> ReportPlan:
        claims = load_claims(claims_file)
        keys = list(dict.fromkeys(k for ks in plan(claims, study_runs).values() for k in ks))
        # A study with none of the paper's runs (the smoke study) is probed: relaxed filters. Reported
        # claims do not decide it: they may select every run (the diagnostics' leads: `runs: {}`).
        asserted = Claims(claims.filters, [c for c in claims.claims if not c.get("reported")])
        probe = not any(plan(asserted, study_runs).values())
        if probe:
            keys = list(dict.fromkeys(k for ks in plan(relax(claims), study_runs).values() for k in ks))
        return cls(claims, study_name, results, keys, probe)

    def existing(self) -> list[str]:
        layout = Layout(self.results)
        return [k for k in self.runs if Path(layout.run_file(k, "metrics.parquet")).exists()]

    def inputs(self, claims_file: str, code: Sequence[str], *, wait: bool = False) -> dict[str, Any]:
        """The rule's inputs: the metrics that exist now, or with ``wait`` every run's (a study cheap to
        train, on the cpu platform, gets its report after its runs instead of before them)."""
        have = list(self.runs) if wait else self.existing()
        layout = Layout(self.results)
        status = [Path(layout.run_file(k, "status.json")) for k in have]
        return {
            "claims": claims_file,
            "metrics": [layout.run_file(k, "metrics.parquet") for k in have],
            "status": [str(p) for p in status if wait or p.exists()],
            "code": list(code),
        }

    def message(self) -> str:
        have = set(self.existing())
        head = (
            f"claims report of study {self.study}"
            + (" (probe: no run is the paper's)" if self.probe else "")
            + f": {len(self.claims.claims)} claims, checked by {len(self.runs)} runs, {len(have)} with metrics now"
        )
        return "\n".join([head] + [f"  no metrics yet: {k}" for k in self.runs if k not in have])
