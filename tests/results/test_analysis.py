"""The Section 2 degradation criteria and the per-run readings, on curves with known answers.

Every boundary is tested from both sides: 0.10 / 0.15 below the running max, the step-30 rule, the
0.05 recovery band and the inclusive 20-step recovery window, the cycle-age boundary at step N.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from coolsampler.results.analysis import (
    cycle_age,
    cycle_of,
    cycle_readings,
    degradation_events,
    first_crossing,
    first_rise,
    kl_at_step,
    kl_step_for,
    kl_to_init_at,
    last_five_mean,
    lead,
    recovers_later,
    summarize_run,
    whole_run_mean,
)
from coolsampler.spec.metrics_schema import COLUMNS, RunStatus
from coolsampler.testkit.synthetic import make_metrics


def curve(points: dict[int, float]) -> pd.Series:
    return pd.Series(points, dtype="float64")


def rising(until: int = 100, top: float = 0.80) -> dict[int, float]:
    """Validation every 10 steps rising linearly to ``top`` at ``until``."""
    return {s: top * s / until for s in range(10, until + 1, 10)}


COMPLETE = RunStatus(True, 300, 300, [])


# --------------------------------------------------------------------------------------------------
# onset / severe


def test_no_events_on_a_rising_curve() -> None:
    ev = degradation_events(curve(rising(300, 0.85)))
    assert ev.onset is None and ev.severe is None and ev.kind is None
    assert ev.peak == pytest.approx(0.85) and ev.peak_step == 300


def test_onset_exactly_at_max_minus_0_10_counts() -> None:
    ev = degradation_events(curve({**rising(), 110: 0.80 - 0.10}))
    assert ev.onset == 110
    assert ev.reference == pytest.approx(0.80)


def test_onset_just_above_max_minus_0_10_does_not_count() -> None:
    ev = degradation_events(curve({**rising(), 110: 0.7001}))
    assert ev.onset is None and ev.severe is None


def test_float_tolerance_on_ratios() -> None:
    # 1055/1319 - 0.10 is not exactly representable; a point equal to it on paper must count
    top = 1055 / 1319
    low = top - 0.10
    ev = degradation_events(curve({**rising(100, top), 110: float(f"{low:.12f}")}))
    assert ev.onset == 110


def test_severe_exactly_at_max_minus_0_15_counts_and_just_above_does_not() -> None:
    yes = degradation_events(curve({**rising(), 110: 0.65}))
    no = degradation_events(curve({**rising(), 110: 0.6501}))
    assert yes.onset == 110 and yes.severe == 110
    assert no.onset == 110 and no.severe is None


def test_severe_can_come_after_onset() -> None:
    ev = degradation_events(curve({**rising(), 110: 0.69, 120: 0.60, 130: 0.55}))
    assert ev.onset == 110 and ev.severe == 120 and ev.kind == "sustained"


def test_step_30_is_excluded_and_step_31_included() -> None:
    at30 = degradation_events(curve({10: 0.5, 20: 0.6, 30: 0.3, 40: 0.61}))
    at31 = degradation_events(curve({10: 0.5, 20: 0.6, 31: 0.3, 40: 0.61}))
    assert at30.onset is None and at30.severe is None
    assert at31.onset == 31 and at31.severe == 31


def test_running_max_includes_steps_up_to_30() -> None:
    # the peak is at step 20; a drop at step 40 is measured against it
    ev = degradation_events(curve({10: 0.5, 20: 0.8, 30: 0.75, 40: 0.70, 50: 0.72}))
    assert ev.onset == 40 and ev.reference == pytest.approx(0.8)


def test_running_max_is_the_max_so_far_not_the_peak() -> None:
    # 0.75 at step 60 is 0.10 below the later peak 0.85 but not below the max so far (0.80)
    ev = degradation_events(curve({**rising(50, 0.80), 60: 0.75, 70: 0.85, 80: 0.76}))
    assert ev.onset is None
    assert ev.peak == pytest.approx(0.85)


def test_nan_and_unsorted_points_are_ignored() -> None:
    pts = {**rising(), 110: 0.65}
    s = pd.Series(pts).sample(frac=1.0, random_state=0)
    s.loc[115] = np.nan
    assert degradation_events(s).onset == 110


def test_empty_curve() -> None:
    ev = degradation_events(pd.Series(dtype="float64"))
    assert math.isnan(ev.peak) and ev.onset is None and ev.kind is None


# --------------------------------------------------------------------------------------------------
# transient / sustained


def _dip(back_step: int, back_value: float) -> pd.Series:
    return curve({**rising(), 110: 0.60, back_step: back_value})


def test_transient_when_back_within_0_05_at_onset_plus_20() -> None:
    ev = degradation_events(_dip(130, 0.75))  # exactly max - 0.05, exactly 20 steps later
    assert ev.onset == 110 and ev.kind == "transient" and ev.recovered_at == 130


def test_sustained_when_just_outside_the_recovery_band() -> None:
    ev = degradation_events(_dip(130, 0.7499))
    assert ev.kind == "sustained" and ev.recovered_at is None and not ev.window_censored


def test_sustained_when_recovery_comes_at_onset_plus_21() -> None:
    ev = degradation_events(_dip(131, 0.80))
    assert ev.kind == "sustained"


def test_recovery_measured_against_pre_onset_max_not_later_values() -> None:
    ev = degradation_events(curve({**rising(), 110: 0.60, 120: 0.76, 130: 0.5}))
    assert ev.kind == "transient" and ev.recovered_at == 120


def test_onset_at_the_last_point_is_sustained_and_censored() -> None:
    ev = degradation_events(curve({**rising(290, 0.84), 300: 0.70}))
    assert ev.onset == 300 and ev.kind == "sustained" and ev.window_censored


# --------------------------------------------------------------------------------------------------
# crossings, means, lead


def test_recovers_later_uses_the_recovery_band_at_the_last_point() -> None:
    assert recovers_later(0.75, 0.80)  # exactly max - 0.05
    assert recovers_later(0.80 - 0.05, 0.80)  # float noise of the subtraction stays inside
    assert not recovers_later(0.7499, 0.80)
    assert not recovers_later(math.nan, 0.80) and not recovers_later(0.8, math.nan)
    assert not recovers_later(0.8, None) and not recovers_later(None, 0.8)


def test_first_crossing_is_strict() -> None:
    s = pd.Series([0.5, 1.0, 1.2, 0.3], index=[1, 2, 3, 4])
    assert first_crossing(s, 1.0) == 3
    assert first_crossing(s, 0.4) == 1
    assert first_crossing(s, 1.2) is None


def test_first_rise_counts_from_the_running_minimum_and_is_strict() -> None:
    s = pd.Series([0.30, 0.20, 0.21, np.nan, 0.22, 0.25], index=[0, 8, 16, 20, 24, 32])
    assert first_rise(s, 0.02) == 32  # 0.25 > 0.20 + 0.02; 0.22 is not strictly above it
    assert first_rise(s, 0.01) == 24
    assert first_rise(s, 0.05) is None  # 0.30 at the start is no rise: nothing came before it
    assert first_rise(pd.Series([0.5, 0.4, 0.3]), 0.0) is None


def test_first_crossing_skips_nan() -> None:
    assert first_crossing(pd.Series([np.nan, 2.0], index=[5, 6]), 1.0) == 6


def test_last_five_mean() -> None:
    v = curve({10: 0.1, 20: 0.2, 30: 0.3, 40: 0.4, 50: 0.5, 60: 0.6})
    assert last_five_mean(v) == pytest.approx(0.4)
    assert math.isnan(last_five_mean(curve({10: 0.1, 20: 0.2, 30: 0.3, 40: 0.4})))


def test_whole_run_mean_trapezoid() -> None:
    assert whole_run_mean(curve({0: 0.0, 10: 1.0})) == pytest.approx(0.5)
    # unequal spacing: (0.5 * 10 + 1.0 * 20) / 30
    assert whole_run_mean(curve({0: 0.0, 10: 1.0, 30: 1.0})) == pytest.approx(25 / 30)
    assert whole_run_mean(curve({10: 0.7})) == pytest.approx(0.7)
    assert math.isnan(whole_run_mean(pd.Series(dtype="float64")))


def test_lead() -> None:
    assert lead(190, 179) == 11
    assert lead(190, 200) == -10
    assert lead(None, 179) is None and lead(190, None) is None


# --------------------------------------------------------------------------------------------------
# fixed-step KL and cycles


def test_kl_step_for_boundaries() -> None:
    assert kl_step_for(192) == 110 and kl_step_for(111) == 110
    assert kl_step_for(110) == 60 and kl_step_for(96) == 60 and kl_step_for(61) == 60
    assert kl_step_for(60) == 60 and kl_step_for(32) == 32


def test_kl_at_step_reads_the_exact_step_and_nan_when_missing() -> None:
    m = pd.DataFrame({"step": [59, 60, 61, 110], "kl": [0.1, 0.2, 0.3, 0.9]})
    assert kl_at_step(m, 96) == pytest.approx(0.2)
    assert kl_at_step(m, 192) == pytest.approx(0.9)
    assert math.isnan(kl_at_step(m.drop(index=1), 96))
    assert math.isnan(kl_at_step(None, 96))


def test_kl_to_init_at() -> None:
    m = make_metrics(192)
    assert kl_to_init_at(m) == pytest.approx(1.2e-4 * 90)
    assert math.isnan(kl_to_init_at(m, step=999))


def test_cycle_age_boundary_at_refresh() -> None:
    N = 96
    assert (cycle_of(1, N), cycle_age(1, N)) == (1, 0)
    assert (cycle_of(N, N), cycle_age(N, N)) == (1, N - 1)
    assert (cycle_of(N + 1, N), cycle_age(N + 1, N)) == (2, 0)
    m = make_metrics(N)
    assert (cycle_age(m["step"].to_numpy(), N) == m["staleness"].to_numpy()).all()


def test_cycle_readings_windows() -> None:
    N, steps = 100, 200
    t = np.arange(1, steps + 1)
    age, cyc = (t - 1) % N, (t - 1) // N + 1
    m = pd.DataFrame({"step": t, "kl": age * cyc, "entropy": age + 10.0 * cyc, "clip_frac": age / 100.0})
    r = cycle_readings(m, N).set_index("cycle")
    assert list(r.index) == [1, 2]
    assert r.loc[1, "kl"] == pytest.approx(60.0) and r.loc[2, "kl"] == pytest.approx(120.0)
    assert r.loc[1, "entropy_start"] == pytest.approx(12.0) and r.loc[2, "entropy_start"] == pytest.approx(22.0)
    assert r.loc[1, "clip"] == pytest.approx(0.60)
    assert r.loc[1, "n_mid"] == 11 and r.loc[1, "n_start"] == 5


def test_cycle_readings_partial_window_is_counted() -> None:
    m = make_metrics(100, end_step=160)  # cycle 2 reaches age 59 only: ages 55-59 logged
    r = cycle_readings(m, 100).set_index("cycle")
    assert r.loc[2, "n_mid"] == 5 and r.loc[2, "n_start"] == 5
    assert cycle_readings(None, 100).empty


# --------------------------------------------------------------------------------------------------
# synthetic data and whole-run summaries


def test_synthetic_table_has_every_schema_column() -> None:
    m = make_metrics(192)
    assert list(m.columns) == list(COLUMNS)
    assert {c: str(m[c].dtype) for c in m.columns} == {c: spec[0] for c, spec in COLUMNS.items()}
    assert m["val_acc"].notna().sum() == 30 and m["refreshed"].sum() == 1


def test_synthetic_kl_resets_at_refresh_and_grows_faster_when_hotter() -> None:
    hot, cool = make_metrics(96, Tb=1.0), make_metrics(96, Tb=0.8)
    assert hot.loc[hot.step == 96, "kl"].item() > 10 * hot.loc[hot.step == 97, "kl"].item()
    assert kl_at_step(hot, 96) > 2 * kl_at_step(cool, 96)


def test_summary_of_a_collapsing_run() -> None:
    m = make_metrics(192, Tb=1.0, collapse_at=190)
    s = summarize_run(m, {"N": 192, "key": "k"}, COMPLETE)
    assert s["onset"] == 190 and s["severe"] == 190 and s["kind"] == "sustained"
    assert s["kl_cross_1"] is not None and s["lead"] == 190 - s["kl_cross_1"]
    assert s["complete"] is True and s["note"] == ""
    assert s["kl_fixed_step"] == 110 and s["kl_max"] > 1.0


def test_summary_of_a_transient_dip() -> None:
    s = summarize_run(make_metrics(192, Tb=0.9, collapse_at=190, recover_at=200), {"N": 192}, COMPLETE)
    assert s["kind"] == "transient" and s["recovered_at"] == 200


def test_summary_of_a_stable_run() -> None:
    s = summarize_run(make_metrics(96, Tb=0.8), {"N": 96}, COMPLETE)
    assert s["onset"] is None and s["severe"] is None and s["kind"] is None and s["lead"] is None
    assert s["last5"] == pytest.approx(0.85, abs=0.02)


def test_incomplete_run_is_flagged_not_passed_as_whole() -> None:
    m = make_metrics(144, Tb=0.8, end_step=287)
    s = summarize_run(m, {"N": 144}, RunStatus(False, 287, 300, ["log ends at step 287"]))
    assert s["complete"] is False
    assert "incomplete" in s["note"] and "287 of 300" in s["note"] and "log ends" in s["note"]
    assert s["last_step"] == 287


def test_missing_metrics_and_missing_status() -> None:
    s = summarize_run(None, {"N": 96}, None)
    assert s["complete"] is False and "no metrics" in s["note"] and math.isnan(s["peak"])
    s2 = summarize_run(make_metrics(96), {"N": 96}, None)
    assert s2["complete"] is False and "status unknown" in s2["note"]


# --------------------------------------------------------------------------------------------------
# Collapse (the cliff study's criterion): a fall that holds to the end, over at least two validations


def test_collapse_needs_every_later_validation_0_15_below_the_best_before() -> None:
    from coolsampler.results.analysis import collapse_step

    held = curve({0: 0.5, 16: 0.8, 32: 0.8, 40: 0.65, 48: 0.6, 56: 0.65})  # 0.80 - 0.15 = 0.65, at or below
    assert collapse_step(held) == 40
    just_above = curve({0: 0.5, 16: 0.8, 32: 0.8, 40: 0.65, 48: 0.6, 56: 0.6501})
    assert collapse_step(just_above) is None  # the last point is not 0.15 below: it recovered enough


def test_a_dip_that_recovers_is_no_collapse_though_it_is_an_onset() -> None:
    from coolsampler.results.analysis import collapse_step

    dip = curve({0: 0.58, 8: 0.48, 16: 0.56, 24: 0.62, 32: 0.66, 40: 0.40, 48: 0.75, 56: 0.82, 64: 0.88})
    assert degradation_events(dip).onset == 40  # Section 2's onset fires on the one-validation dip
    assert collapse_step(dip) is None


def test_collapse_needs_two_validations_after_step_30() -> None:
    from coolsampler.results.analysis import collapse_step

    assert collapse_step(curve({0: 0.5, 16: 0.8, 32: 0.8, 40: 0.8, 48: 0.8, 56: 0.2})) is None  # last point only
    assert collapse_step(curve({0: 0.5, 16: 0.8, 32: 0.8, 40: 0.8, 48: 0.2, 56: 0.2})) == 48
    # a fall that starts at step 30 collapses at the first validation after it, not at 30
    assert collapse_step(curve({0: 0.5, 10: 0.8, 20: 0.8, 30: 0.3, 40: 0.3, 50: 0.3})) == 40
    assert collapse_step(curve({0: 0.8, 30: 0.3})) is None


def test_the_smoke_study_s_uncorrected_run_collapses() -> None:
    """The shipped example log of the smoke study's no-correction run at N=32 (examples/verl-logs/degrades)
    collapses, and its TIS run at N=4 (stable/) does not."""
    from pathlib import Path

    from coolsampler.results.analysis import collapse_step, validation
    from coolsampler.results.metrics import parse_jsonl

    examples = Path(__file__).resolve().parents[2] / "examples" / "verl-logs"
    degrades = validation(parse_jsonl(examples / "degrades" / "train.jsonl", required=("step",))[0])
    stable = validation(parse_jsonl(examples / "stable" / "train.jsonl", required=("step",))[0])
    at = collapse_step(degrades)
    assert at is not None and at > 30
    assert collapse_step(stable) is None


# --------------------------------------------------------------------------------------------------
# The KL's growth (the cliff study's H1b and its Figure 1c): the KL less its step-1 tempering offset


def test_the_kl_growth_takes_the_step_1_offset_off_and_averages_the_window() -> None:
    from coolsampler.results.analysis import kl_growth, kl_growth_curve

    cooled = curve({1: 0.018, 8: 0.020, 16: 0.022, 24: 0.026, 40: 0.030, 48: 0.5})
    np.testing.assert_allclose(kl_growth_curve(cooled).to_numpy(), [0.0, 0.002, 0.004, 0.008, 0.012, 0.482])
    assert kl_growth(cooled, 16, 40) == pytest.approx((0.004 + 0.008 + 0.012) / 3)  # step 48 outside
    # the offset is what H1's plain ratio cannot see past: an unmoved cooled run grows by 0
    assert kl_growth(curve({1: 0.018, 16: 0.018, 40: 0.018}), 16, 40) == pytest.approx(0.0)


def test_the_kl_growth_is_not_measured_without_its_step_1_or_its_window() -> None:
    from coolsampler.results.analysis import kl_growth, kl_growth_curve

    assert kl_growth_curve(curve({2: 0.1, 16: 0.2})).empty
    assert math.isnan(kl_growth(curve({2: 0.1, 16: 0.2}), 16, 40))
    assert math.isnan(kl_growth(curve({1: 0.1, 8: 0.2, 48: 0.3}), 16, 40))
