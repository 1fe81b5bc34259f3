"""verl's other staleness diagnostics: parsed into the metrics table, and put to the question which of
them crosses its threshold before the onset (``coolsampler.results.diagnostics``).

Logs are written in verl's own format (orjson, one ``{"step": k, "data": {...}}`` per line) with the
keys verl 0.9.1 logs (checked against a real CPU-stack log in ``tests/stack/test_end_to_end.py``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd
import pytest

from coolsampler.results import diagnostics as D
from coolsampler.results.metrics import log1p_bound, parse_jsonl
from coolsampler.spec.metrics_schema import COLUMNS, DIAGNOSTIC_COLUMNS, LOG1P_OF
from coolsampler.testkit.synthetic import make_metrics

VAL = "val-core/arith/acc/mean@1"

# every diagnostic key of a TIS run's record, as verl 0.9.1 names them (a real smoke-study step)
VERL_DIAGNOSTICS = {
    "rollout_corr/chi2_seq": 29.214160919189453,
    "rollout_corr/chi2_token": 8.898834228515625,
    "rollout_corr/log_ppl_abs_diff": 0.2954484820365906,
    "rollout_corr/log_ppl_diff": 0.14433209598064423,
    "rollout_corr/log_ppl_diff_max": 1.5173109769821167,
    "rollout_corr/log_ppl_diff_min": -1.2530131340026855,
    "rollout_corr/rollout_is_eff_sample_size": 0.8908281510177728,
    "rollout_corr/rollout_is_max": 2.0,
    "rollout_corr/rollout_is_mean": 0.9818742275238037,
    "rollout_corr/rollout_is_min": 0.010679282248020172,
    "rollout_corr/rollout_is_ratio_fraction_high": 0.046296294778585434,
    "rollout_corr/rollout_is_ratio_fraction_low": 0.0833333358168602,
    "rollout_corr/rollout_is_std": 0.34372761845588684,
    "training/rollout_probs_diff_max": 0.4977320730686188,
    "training/rollout_probs_diff_mean": 0.07786501199007034,
    "training/rollout_probs_diff_std": 0.12864485383033752,
}
IS_KEYS = {k for k in VERL_DIAGNOSTICS if "rollout_is_" in k}


def _record(t: int, extra: dict[str, Any]) -> dict[str, Any]:
    data = {
        "training/global_step": t,
        "rollout_corr/kl": 0.1,
        "actor/entropy": 0.5,
        "critic/score/mean": 0.5,
        "actor/grad_norm": 0.2,
        "actor/kl_loss": 0.001,
        **extra,
    }
    if t % 4 == 0:
        data[VAL] = 0.5
    return {"step": t, "data": data}


def write_log(path: Path, steps: int = 8, per_step: dict[int, dict[str, Any]] | None = None, **extra: Any) -> Path:
    """A verl JSONL: step 0's validation, then ``steps`` steps with ``extra`` keys (``per_step`` on top)."""
    recs = [{"step": 0, "data": {VAL: 0.5}}]
    for t in range(1, steps + 1):
        recs.append(_record(t, {**extra, **(per_step or {}).get(t, {})}))
    path.write_bytes(b"\n".join(orjson.dumps(r) for r in recs) + b"\n")
    return path


def parse(path: Path):
    return parse_jsonl(path, expected_steps=8, val_every=4)


def test_every_diagnostic_is_parsed_under_its_schema_name(tmp_path: Path) -> None:
    df, status = parse(write_log(tmp_path / "t.jsonl", **VERL_DIAGNOSTICS))
    assert status.complete, status.problems
    row = df[df.step == 3].iloc[0]
    for col in DIAGNOSTIC_COLUMNS:
        if col in LOG1P_OF:
            continue
        key = COLUMNS[col][2][0]
        assert row[col] == pytest.approx(VERL_DIAGNOSTICS[key]), col
    assert row["is_cap_frac"] == pytest.approx(VERL_DIAGNOSTICS["rollout_corr/rollout_is_ratio_fraction_high"])
    # the reverse-KL bounds: log(1 + chi^2), nats
    assert row["rkl_bound_token"] == pytest.approx(math.log1p(8.898834228515625))
    assert row["rkl_bound_seq"] == pytest.approx(math.log1p(29.214160919189453))
    # every diagnostic has a meaning and is a float column
    assert all(COLUMNS[c][0] == "float64" and len(COLUMNS[c][1]) > 20 for c in DIAGNOSTIC_COLUMNS)


def test_mu_grpo_logs_the_mismatch_metrics_under_actor(tmp_path: Path) -> None:
    """In bypass mode (mu-GRPO) the loss logs them, prefixed actor/ (coolsampler.worker.losses)."""
    extra = {f"actor/{k}": v for k, v in VERL_DIAGNOSTICS.items() if k.startswith("rollout_corr/") and k not in IS_KEYS}
    df, _ = parse(write_log(tmp_path / "t.jsonl", **extra))
    assert df.loc[df.step == 2, "chi2_token"].item() == pytest.approx(8.898834228515625)
    assert df.loc[df.step == 2, "log_ppl_diff_min"].item() == pytest.approx(-1.2530131340026855)
    assert df["is_ess"].isna().all()  # no IS weights in bypass mode


def test_a_log_without_diagnostics_parses_as_before(tmp_path: Path) -> None:
    """A log that predates them (or a run without IS weights): NaN columns, the log still whole."""
    df, status = parse(write_log(tmp_path / "t.jsonl"))
    assert status.complete and status.problems == []
    assert list(df.columns) == list(COLUMNS)
    for col in DIAGNOSTIC_COLUMNS:
        assert df[col].isna().all(), col
    no_is = {k: v for k, v in VERL_DIAGNOSTICS.items() if k not in IS_KEYS}
    df, status = parse(write_log(tmp_path / "u.jsonl", **no_is))
    assert status.complete and df["is_ess"].isna().all() and df["chi2_token"].notna().sum() == 8


def test_a_diagnostic_gap_leaves_the_log_whole_but_a_required_gap_does_not(tmp_path: Path) -> None:
    gaps = {3: {"rollout_corr/chi2_token": None}, 5: {"training/rollout_probs_diff_mean": float("nan")}}
    df, status = parse(write_log(tmp_path / "t.jsonl", per_step=gaps, **VERL_DIAGNOSTICS))
    assert status.complete, status.problems
    assert math.isnan(df.loc[df.step == 3, "chi2_token"].item())
    assert math.isnan(df.loc[df.step == 3, "rkl_bound_token"].item())
    assert math.isnan(df.loc[df.step == 5, "probs_diff_mean"].item())
    assert D.logged_steps(df, "chi2_token") == 7
    # the KL, which the paper measures with, still makes a gap a problem
    df, status = parse(write_log(tmp_path / "u.jsonl", per_step={3: {"rollout_corr/kl": None}}, **VERL_DIAGNOSTICS))
    assert not status.complete and any("kl" in p for p in status.problems)


def test_log1p_bound_keeps_a_batch_below_zero_and_drops_the_impossible() -> None:
    x = pd.Series([0.0, np.e - 1.0, -0.5, -1.0, -3.0, np.nan])
    got = log1p_bound(x).to_numpy()
    assert got[0] == 0.0 and got[1] == pytest.approx(1.0) and got[2] == pytest.approx(math.log(0.5))
    assert np.isnan(got[3:]).all()


# --------------------------------------------------------------------------------------------------
# Crossings and leads


def _table(n: int = 80, **cols: Any) -> pd.DataFrame:
    """A metrics table with steps 0..n and the given columns (arrays over steps 1..n), validation every 4."""
    t = np.arange(0, n + 1)
    df = make_metrics(4, n, 4).iloc[:0].reindex(range(n + 1))
    df["step"] = t
    for c, v in cols.items():
        df[c] = np.concatenate([[np.nan], np.asarray(v, dtype="float64")])
    return df


def _val(n: int, onset: int | None) -> np.ndarray:
    """Validation every 4 steps at 0.8, dropping to 0.5 from ``onset`` on (NaN between validations)."""
    t = np.arange(1, n + 1)
    v = np.where(t % 4 == 0, 0.8, np.nan)
    if onset is not None:
        v = np.where((t % 4 == 0) & (t >= onset), 0.5, v)
    return v


def test_a_single_spike_crosses_per_step_but_not_through_the_median() -> None:
    chi2 = np.full(80, 0.1)
    chi2[19] = 900.0  # one token-dominated step at step 20, as the smoke study's chi2_token has
    chi2[49:] = 5.0  # a sustained rise from step 50
    df = _table(80, val_acc=_val(80, 60), chi2_token=chi2, rkl_bound_token=np.log1p(chi2), kl=chi2 / 2)
    rkl = D.diagnostic("rkl_token")
    assert D.reading(df, rkl).index[0] == D.ROBUST_MIN_STEPS  # a median needs 3 steps
    assert D.crossing(df, rkl) == 52  # 3 of the last 5 steps above: 50, 51, 52
    per_step = D.Diagnostic("x", "rkl_bound_token", "x", "nat", True, 1.0, (1.0,), robust=False)
    assert D.crossing(df, per_step) == 20  # the spike
    assert D.diagnostic_lead(df, rkl) == 60 - 52
    # the paper's own KL row reads each step: the spike at step 20 is a crossing there
    assert D.crossing(df, D.diagnostic("kl")) == 20 and D.crossing(df, D.diagnostic("kl_median")) == 52


def test_crossings_are_strict_and_a_falling_diagnostic_warns_below() -> None:
    ess = np.concatenate([np.full(30, 0.9), np.full(10, 0.5), np.full(40, 0.2)])
    df = _table(80, val_acc=_val(80, 44), is_ess=ess)
    d = D.diagnostic("ess")
    assert not d.above and d.threshold == D.ESS_FRACTION
    assert D.crossing(df, d) == 43  # 0.5 itself is not "below 0.5": the median passes 0.5 at 41..45 -> 43
    assert D.crossing(df, d, 0.7) == 33 and D.crossing(df, d, 0.3) == 43
    assert D.diagnostic_lead(df, d) == 44 - 43


def test_thresholds_are_named_choices_with_a_range_around_them() -> None:
    for d in D.DIAGNOSTICS:
        assert d.threshold in d.sensitivity and list(d.sensitivity) == sorted(d.sensitivity), d.name
        assert len(d.sensitivity) == 3 and d.column in COLUMNS, d.name
    assert D.diagnostic("kl").threshold == 1.0 and not D.diagnostic("kl").robust  # the paper's KL > 1 nat
    assert D.RKL_SEQ_NATS == pytest.approx(math.log(100))
    with pytest.raises(ValueError, match="unknown diagnostic 'chi3'.*kl, kl_median"):
        D.diagnostic("chi3")
    # each threshold constant is followed by its docstring: why this value (where they are defined:
    # the spec layer, which the staleness guard shares)
    import inspect

    src = inspect.getsource(inspect.getmodule(D.Diagnostic))
    for const in ("ROBUST_WINDOW", "KL_NATS", "RKL_TOKEN_NATS", "RKL_SEQ_NATS", "ESS_FRACTION", "WEIGHT_FRACTION",
                  "LOG_PPL_NATS", "PROBS_DIFF"):  # fmt: skip
        assert src.split(f"\n{const} = ", 1)[1].split("\n", 2)[1].startswith('"""'), const


def test_lead_table_sensitivity_and_summary() -> None:
    """Three runs: one where the reverse-KL bound warns 20 steps before the KL, one where nothing warns,
    one stable run where the bound fires anyway (a false alarm)."""
    n = 120
    ramp = np.linspace(0.0, 3.0, n)  # a steady rise: 1 nat at step ~40
    early = _table(n, val_acc=_val(n, 100), kl=ramp / 2, rkl_bound_token=ramp)
    late = _table(n, val_acc=_val(n, 60), kl=np.full(n, 0.01), rkl_bound_token=np.full(n, 0.01))
    calm = _table(n, val_acc=_val(n, None), kl=np.full(n, 0.01), rkl_bound_token=np.full(n, 2.0))
    runs = [({"key": "early"}, early, None), ({"key": "late"}, late, None), ({"key": "calm"}, calm, None)]
    table = D.lead_table(runs, [D.diagnostic("kl"), D.diagnostic("rkl_token")])
    assert set(table.columns) == set(D.LEAD_COLUMNS) and len(table) == 3 * 2 * 3
    row = table[(table.key == "early") & (table.diagnostic == "rkl_token") & table.chosen].iloc[0]
    kl_row = table[(table.key == "early") & (table.diagnostic == "kl") & table.chosen].iloc[0]
    assert row.onset == 100 and kl_row.step - row.step >= 19  # the bound is twice the KL here
    assert row.lead == 100 - row.step and kl_row.lead == 100 - kl_row.step
    # over the range: a lower threshold crosses earlier, a higher one later
    leads = table[(table.key == "early") & (table.diagnostic == "rkl_token")].sort_values("threshold")["lead"]
    assert list(leads) == sorted(leads, reverse=True)
    summary = D.lead_summary(table, [D.diagnostic("kl"), D.diagnostic("rkl_token")]).set_index("diagnostic")
    assert summary.loc["rkl_token", "degraded_runs"] == 2 and summary.loc["rkl_token", "before_onset"] == 1
    assert summary.loc["rkl_token", "never"] == 1 and summary.loc["rkl_token", "earliest_in"] == 1
    assert summary.loc["rkl_token", "fires_in_stable"] == 1 and summary.loc["kl", "fires_in_stable"] == 0
    assert summary.loc["kl", "before_onset_over_range"] == "1 / 1 / 0"  # the KL never reaches 2 nats
    assert D.earliest(D.degraded(table)) == {"early": ["rkl_token"], "late": []}


def test_a_diagnostic_the_log_lacks_is_not_logged_not_never() -> None:
    df = _table(80, val_acc=_val(80, 60), kl=np.full(80, 2.0))
    table = D.run_leads("r", df)
    ess = table[(table.diagnostic == "ess") & table.chosen].iloc[0]
    assert ess.logged_steps == 0 and pd.isna(ess.step) and pd.isna(ess.lead)
    s = D.lead_summary(D.lead_table([({"key": "r"}, df, None)])).set_index("diagnostic")
    assert s.loc["ess", "logged_in"] == 0 and s.loc["ess", "never"] == 0
    assert s.loc["kl", "logged_in"] == 1 and s.loc["kl", "before_onset"] == 1


def test_the_synthetic_worlds_carry_every_diagnostic() -> None:
    """make_metrics draws them from its KL: a collapsing run's bound crosses before its onset."""
    m = make_metrics(192, 300, 10, 1.0, collapse_at=190, seed=3)
    assert all(m[c].notna().all() for c in DIAGNOSTIC_COLUMNS)
    assert D.diagnostic_lead(m, D.diagnostic("rkl_token")) > D.diagnostic_lead(m, D.diagnostic("kl")) > 0
    none = make_metrics(96, 300, 10, 0.8, collapse_at=150, correction="none")
    assert none["is_ess"].isna().all() and none["chi2_token"].notna().all()


def test_the_guard_reads_as_the_lead_table_does() -> None:
    """The pure trailing median the staleness guard runs in verl's process equals the lead table's
    pandas rolling median at every step, gaps included (one reading, two implementations)."""
    from coolsampler.spec.diagnostics import trailing_median

    rng = np.random.default_rng(3)
    values = rng.lognormal(size=80)
    values[rng.random(80) < 0.2] = np.nan
    s = pd.Series(values, index=np.arange(1, 81))
    want = D.rolling_median(s)
    for step in s.index:
        got = trailing_median(list(values[:step]), D.ROBUST_WINDOW)
        if step in want.index:
            assert got == pytest.approx(want[step]), step
        else:
            assert got is None or not np.isfinite(values[step - 1]), step
