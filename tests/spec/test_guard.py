"""The staleness guard's decision (coolsampler.spec.guard): firing steps worked out by hand, the
interval and schedule gates, the exact restore of its state, and the signal read from verl's metrics."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from coolsampler.spec.guard import (
    GuardSpec,
    RefreshGate,
    check_schedule,
    longest_interval,
    make_gate,
    parse_guard_condition,
    parse_guard_token,
    schedule_from_refreshed,
    schedule_token,
    signal_value,
)

GUARD = {"signal": "probs_diff", "threshold": 0.1, "window": 3, "min": 2}
# per-step probs_diff; None: a step that did not log it
VALUES = [0.01, 0.2, 0.3, 0.05, 0.2, 0.2, None, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.09, 0.01]


def _run(gate: RefreshGate, values: list[float | None], first: int = 1) -> list[tuple[int, str | None]]:
    return [(d.step, d.reason) for t, v in enumerate(values, first) if (d := gate.decide(t, v)).refresh]


def test_firings_by_hand() -> None:
    """Window 3 needs 2 logged values; min 2 steps; N 10.

    step 1: [0.01] -> no reading; step 2: median(0.01, 0.2) = 0.105 > 0.1 and 2 steps -> fire.
    step 3: [0.3], one value; step 4: median(0.3, 0.05) = 0.175 -> fire. step 5: [0.2];
    step 6: median(0.2, 0.2) -> fire. Then 7 (not logged), 8..16 stay below 0.1: at step 16 the
    sampler has gone 10 steps (7..16) -> the interval fires.
    """
    gate = make_gate(10, GUARD)
    assert _run(gate, VALUES) == [(2, "signal"), (4, "signal"), (6, "signal"), (16, "interval")]
    assert gate.refreshes == 4 and gate.sampler_version == 16 and gate.since_refresh == 1
    assert gate.window == [0.01]


def test_min_holds_a_firing_back() -> None:
    """A reading above the threshold right after a refresh waits for ``min`` steps."""
    gate = make_gate(10, {**GUARD, "window": 1, "min": 3})
    assert _run(gate, [0.5] * 7) == [(3, "signal"), (6, "signal")]


def test_direction_of_a_falling_diagnostic() -> None:
    """ESS warns when it falls: median of 3 below 0.5."""
    gate = make_gate(50, {"signal": "ess", "threshold": 0.5, "window": 3})
    assert _run(gate, [0.9, 0.8, 0.4, 0.3, 0.2, 0.9]) == [(4, "signal")]  # median(0.8, 0.4, 0.3) = 0.4


def test_never_crossing_is_the_fixed_gate() -> None:
    """A signal that never crosses: the guard refreshes exactly where the paper's gate does."""
    gate = make_gate(4, GUARD)
    assert _run(gate, [0.01] * 13) == [(4, "interval"), (8, "interval"), (12, "interval")]
    assert _run(make_gate(4), [None] * 13) == [(4, "interval"), (8, "interval"), (12, "interval")]


def test_schedule_is_open_loop() -> None:
    gate = make_gate(7, schedule=[3, 10])
    assert _run(gate, [5.0] * 12) == [(3, "schedule"), (10, "schedule")]


def test_restore_is_exact_and_json() -> None:
    """A gate stopped after any step and restored from its JSON state decides the rest identically."""
    whole = make_gate(10, GUARD)
    want = [whole.decide(t, v) for t, v in enumerate(VALUES, 1)]
    for cut in range(len(VALUES) + 1):
        first = make_gate(10, GUARD)
        got = [first.decide(t, v) for t, v in enumerate(VALUES[:cut], 1)]
        resumed = make_gate(10, GUARD)
        resumed.load_state_dict(json.loads(json.dumps(first.state_dict())))
        assert resumed.state_dict() == first.state_dict()
        got += [resumed.decide(t, v) for t, v in enumerate(VALUES[cut:], cut + 1)]
        assert got == want


def test_replayed_step_is_answered_not_decided_again() -> None:
    gate = make_gate(10, GUARD)
    first = [gate.decide(t, v) for t, v in enumerate(VALUES[:2], 1)]
    state = gate.state_dict()
    assert gate.decide(2, 99.0) == first[1]  # the refresh of step 2, as decided
    assert gate.state_dict() == state
    with pytest.raises(ValueError, match="not after the last decided step"):
        gate.decide(1, 0.0)


def test_changed_parameters_refuse_the_state() -> None:
    gate = make_gate(10, GUARD)
    gate.decide(1, 0.5)
    with pytest.raises(ValueError, match="changed across resume"):
        make_gate(10, {**GUARD, "threshold": 0.2}).load_state_dict(gate.state_dict())
    with pytest.raises(ValueError, match="changed across resume"):
        make_gate(12, GUARD).load_state_dict(gate.state_dict())


@pytest.mark.parametrize(
    ("cfg", "N", "match"),
    [
        ({"signal": "kl_typo", "threshold": 1}, 10, r"guard.signal: 'kl_typo' is not valid; allowed: kl, kl_median"),
        ({"signal": "kl", "threshold": 1, "window": 0}, 10, r"guard.window: 0 is not valid; allowed: an integer >= 1"),
        ({"signal": "kl", "threshold": -1}, 10, r"guard.threshold: -1 is not valid"),
        ({"signal": "kl", "threshold": 1, "min": 11}, 10, r"guard.min: 11 exceeds N 10; allowed: 1..N"),
        ({"signal": "kl"}, 10, r"guard.threshold: missing"),
        ({"signal": "kl", "threshold": 1, "every": 2}, 10, r"guard.every: unknown key"),
    ],
)
def test_bad_guards(cfg: dict, N: int, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        make_gate(N, cfg)


def test_defaults_follow_the_lead_table() -> None:
    """Unless told, a robust diagnostic is read through the lead table's window, the per-step KL each step."""
    assert GuardSpec.from_config({"signal": "probs_diff", "threshold": 0.1}) == GuardSpec("probs_diff", 0.1, 5, 1)
    assert GuardSpec.from_config({"signal": "kl", "threshold": 1}).window == 1


def test_tokens_and_conditions() -> None:
    spec = GuardSpec.from_config(GUARD)
    assert spec.token() == "gprobs_diff0.1w3m2"
    assert parse_guard_token(spec.token()) == spec
    assert parse_guard_token("gkl_median1w5m1") == GuardSpec("kl_median", 1.0, 5, 1)
    assert parse_guard_condition("probs_diff>0.1") == GuardSpec("probs_diff", 0.1, 5, 1)
    assert parse_guard_condition("ess < 0.5").signal == "ess"
    with pytest.raises(ValueError, match="warns when it falls; write ess<"):
        parse_guard_condition("ess>0.5")
    with pytest.raises(ValueError, match="does not parse"):
        parse_guard_condition("probs_diff=0.1")


def test_schedules() -> None:
    assert longest_interval([34, 51, 147], 300) == 153  # the tail after the last refresh
    assert longest_interval([100, 200, 300], 300) == 100
    assert schedule_from_refreshed({1: False, 5: True, 3: None, 9: 1.0, 12: float("nan")}) == (5, 9)
    assert schedule_from_refreshed([(7, True), (2, True)]) == (2, 7)
    assert schedule_token([2, 7]) == schedule_token((2, 7)) != schedule_token([2, 8])
    with pytest.raises(ValueError, match="N.schedule: 3 follows 5; allowed: strictly increasing"):
        check_schedule([5, 3])
    with pytest.raises(ValueError, match="past the run's 10 steps"):
        check_schedule([5, 11], 10)


def test_signal_from_verl_metrics() -> None:
    """The trainer reads the signal from verl's metrics dict by the keys the parser reads."""
    assert signal_value({"training/rollout_probs_diff_mean": 0.25}, "probs_diff") == 0.25
    assert signal_value({"actor/rollout_corr/kl": 0.5}, "kl_median") == 0.5
    assert math.isclose(signal_value({"rollout_corr/chi2_token": math.e - 1}, "rkl_token"), 1.0)
    assert signal_value({"rollout_corr/rollout_is_eff_sample_size": None}, "ess") is None
    assert signal_value({}, "ess") is None


def test_guard_stays_light() -> None:
    """verl's trainer process will run this module: no numpy, pandas or torch comes with it."""
    code = "import sys, coolsampler.spec.guard; print(sorted({'numpy', 'pandas', 'torch'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_signal_is_readable_from_verl_metrics() -> None:
    """Each row of the lead table has a verl key the trainer can read it from (or, for the reverse-KL
    bounds, verl's chi^2 that the bound is computed from)."""
    from coolsampler.spec.diagnostics import DIAGNOSTICS
    from coolsampler.spec.metrics_schema import COLUMNS, LOG1P_OF

    for d in DIAGNOSTICS:
        column = LOG1P_OF.get(d.column, d.column)
        sources = COLUMNS[column][2]
        assert sources, d.name
        for key in sources:
            got = signal_value({key.replace("*", "gsm8k"): 0.25}, d.name)
            want = math.log1p(0.25) if d.column in LOG1P_OF else 0.25
            assert got is not None and math.isclose(got, want), (d.name, key)
