"""Sampler-temperature schedules and controllers (coolsampler.worker.controller): each rule's expected
trajectory on hand-made statistics, the spec parser, resumption, and the per-step statistics helpers."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from coolsampler.spec.study import Temperature, parse_key
from coolsampler.spec.temperature import parse_token
from coolsampler.worker.controller import (
    SATURATION_RULES,
    SCOPES,
    FixedTemperature,
    KLCoolingController,
    LinearSchedule,
    PerPromptSaturationController,
    SaturationController,
    TemperatureController,
    is_saturated,
    kl_from_metrics,
    linear,
    make_controller,
    prompt_ids,
    saturated_fraction,
)

# ------------------------------------------------------------------------------------------ linear


def test_linear_endpoints_midpoint_and_clamp() -> None:
    assert linear(1, 300, 0.8, 1.0) == pytest.approx(0.8)
    assert linear(300, 300, 0.8, 1.0) == pytest.approx(1.0)
    assert linear(2, 3, 0.8, 1.0) == pytest.approx(0.9)
    assert linear(0, 300, 0.8, 1.0) == pytest.approx(0.8)
    assert linear(400, 300, 0.8, 1.0) == pytest.approx(1.0)
    assert linear(1, 1, 0.8, 1.0) == 1.0
    with pytest.raises(ValueError):
        linear(1, 0, 0.8, 1.0)


def test_linear_schedule_ignores_statistics() -> None:
    c = LinearSchedule(0.8, 1.0, 101)
    c.update(1, saturated_frac=1.0, kl=5.0)
    assert c.temperature(51) == pytest.approx(0.9)


# -------------------------------------------------------------------------------------- saturation


def _run(c: TemperatureController, stats: list[tuple[float, float | None]], first_step: int = 1) -> list[float]:
    """Feed (saturated_frac, kl) per step; return the temperature each step was sampled at."""
    temps = []
    for i, (sat, kl) in enumerate(stats):
        step = first_step + i
        temps.append(c.temperature(step))
        c.update(step, sat, kl)
    return temps


def test_saturation_reheats_by_step_up_while_saturated() -> None:
    c = SaturationController(start=0.8, step_up=0.01)
    temps = _run(c, [(0.6, 0.0)] * 5)
    assert temps == pytest.approx([0.8, 0.81, 0.82, 0.83, 0.84])
    assert c.temperature(6) == pytest.approx(0.85)


def test_saturation_reaches_the_papers_1_05_region_and_stops_at_t_max() -> None:
    c = SaturationController(start=0.8)  # defaults: +0.005 per saturated step, t_max 1.2
    _run(c, [(0.9, 0.0)] * 50)
    assert c.temperature(51) == pytest.approx(1.05)
    _run(c, [(0.9, 0.0)] * 200, first_step=51)
    assert c.temperature(300) == pytest.approx(1.2)


def test_saturation_below_threshold_holds_at_start() -> None:
    c = SaturationController(start=0.8, step_down=0.01)
    _run(c, [(0.1, 0.0)] * 10)
    assert c.temperature(11) == pytest.approx(0.8)  # never below its start


def test_saturation_cools_back_with_step_down_and_hysteresis() -> None:
    c = SaturationController(start=0.8, step_up=0.02, step_down=0.01, ema=0.0, hysteresis=0.1)
    _run(c, [(0.6, 0.0)] * 3)  # 0.86
    _run(c, [(0.45, 0.0)] * 2, first_step=4)  # inside the band [0.4, 0.5): hold
    assert c.temperature(6) == pytest.approx(0.86)
    _run(c, [(0.2, 0.0)] * 2, first_step=6)  # below the band: cool back
    assert c.temperature(8) == pytest.approx(0.84)


def test_saturation_is_smoothed_by_ema() -> None:
    c = SaturationController(start=0.8, step_up=0.01, step_down=0.01, ema=0.5)
    c.update(1, 0.6, 0.0)  # ema = 0.6 -> up
    c.update(2, 0.2, 0.0)  # ema = 0.4 -> in the band (0.4 is not < 0.4): hold
    assert c.temperature(3) == pytest.approx(0.81)
    c.update(3, 0.2, 0.0)  # ema = 0.3 -> below: cool
    assert c.temperature(4) == pytest.approx(0.8)


def test_saturation_without_gate_ignores_kl() -> None:
    c = SaturationController(start=0.8, step_up=0.01, kl_gate=False)
    _run(c, [(0.9, 2.0), (0.9, None)])
    assert c.temperature(3) == pytest.approx(0.82)


def test_kl_gate_blocks_reheating_while_kl_is_high_or_unknown() -> None:
    c = SaturationController(start=0.8, step_up=0.01, kl_gate=True, kl_threshold=0.1)
    temps = _run(c, [(0.9, 0.05), (0.9, 0.2), (0.9, None), (0.9, 0.1), (0.9, 0.3)])
    assert temps == pytest.approx([0.8, 0.81, 0.81, 0.81, 0.82])
    assert c.temperature(6) == pytest.approx(0.82)


def test_kl_gate_does_not_block_cooling_back() -> None:
    c = SaturationController(start=0.8, step_up=0.05, step_down=0.01, ema=0.0, kl_gate=True)
    _run(c, [(0.9, 0.0), (0.1, 5.0)])
    assert c.temperature(3) == pytest.approx(0.84)


def test_saturation_nan_fraction_holds() -> None:
    c = SaturationController(start=0.8, step_up=0.01)
    _run(c, [(0.9, 0.0), (math.nan, 0.0)])
    assert c.temperature(3) == pytest.approx(0.81)
    assert c.sat_ema == pytest.approx(0.9)


def test_update_for_a_seen_step_is_ignored() -> None:
    c = SaturationController(start=0.8, step_up=0.01)
    c.update(5, 0.9, 0.0)
    c.update(5, 0.9, 0.0)
    c.update(4, 0.9, 0.0)
    assert c.temperature(6) == pytest.approx(0.81)


def test_saturation_parameter_checks() -> None:
    with pytest.raises(ValueError):
        SaturationController(start=0.8, t_max=0.7)
    with pytest.raises(ValueError):
        SaturationController(step_up=-0.1)
    with pytest.raises(ValueError):
        SaturationController(ema=1.0)
    with pytest.raises(ValueError):
        SaturationController(start=0.0)


# -------------------------------------------------------------------------------------- KL cooling


def test_kl_cooling_cools_when_kl_grows_past_growth_times_reference() -> None:
    c = KLCoolingController(start=0.8, factor=0.9, growth=1.5, kl_floor=0.01)
    temps = _run(c, [(0.0, 0.10), (0.0, 0.14), (0.0, 0.16), (0.0, 0.12), (0.0, 0.25)])
    # 0.10 sets ref; 0.14 < 0.15 and 0.16 > 0.15 -> cool once (ref := 0.16); 0.12 -> ref 0.12;
    # 0.25 > 0.18 -> cool again
    assert temps == pytest.approx([0.8, 0.8, 0.8, 0.72, 0.72])
    assert c.temperature(6) == pytest.approx(0.648)
    assert c.ref == pytest.approx(0.25)


def test_kl_cooling_reference_follows_a_refresh_down() -> None:
    c = KLCoolingController(start=0.8, factor=0.9, growth=1.5, kl_floor=0.01)
    _run(c, [(0.0, 0.5), (0.0, 0.02), (0.0, 0.031)])  # refresh drops the KL; growth is from the new low
    assert c.temperature(4) == pytest.approx(0.72)


def test_kl_cooling_floor_ignores_wobble_near_zero() -> None:
    c = KLCoolingController(start=0.8, factor=0.9, growth=1.5, kl_floor=0.01)
    _run(c, [(0.0, 0.001), (0.0, 0.012)])  # 12x, but below 1.5 * floor
    assert c.temperature(3) == pytest.approx(0.8)
    c.update(3, 0.0, 0.02)
    assert c.temperature(4) == pytest.approx(0.72)


def test_kl_cooling_stops_at_t_min_and_ignores_missing_kl() -> None:
    c = KLCoolingController(start=0.8, t_min=0.6, factor=0.5, kl_floor=0.0)
    _run(c, [(0.0, 0.1), (0.0, 1.0), (0.0, 10.0), (0.0, None), (0.0, math.nan)])
    assert c.temperature(6) == pytest.approx(0.6)
    assert c.last_step == 5


def test_kl_cooling_parameter_checks() -> None:
    with pytest.raises(ValueError):
        KLCoolingController(start=0.8, t_min=0.9)
    with pytest.raises(ValueError):
        KLCoolingController(factor=1.0)
    with pytest.raises(ValueError):
        KLCoolingController(growth=1.0)


# -------------------------------------------------------------------------------------------- spec


def test_make_controller_from_specs() -> None:
    assert isinstance(make_controller(0.8), FixedTemperature)
    assert make_controller(1).temperature(7) == 1.0
    lin = make_controller({"schedule": "linear", "start": 0.8, "end": 1.0}, total_steps=300)
    assert isinstance(lin, LinearSchedule) and lin.temperature(300) == pytest.approx(1.0)
    assert make_controller({"schedule": "linear", "start": 0.8, "end": 1.0, "total_steps": 3}).temperature(2) == (
        pytest.approx(0.9)
    )
    sat = make_controller({"controller": "saturation", "start": 0.8, "kl_gate": True})  # the default: run-wide
    assert isinstance(sat, SaturationController) and sat.kl_gate and sat.saturated == "all_correct"
    assert sat.temperatures(1, ["a", "b"]) == [0.8, 0.8]
    glob = make_controller({"controller": "saturation", "start": 0.8, "scope": "global", "saturated": "all_equal"})
    assert isinstance(glob, SaturationController) and glob.saturated == "all_equal" and glob.temperature(1) == 0.8
    per = make_controller({"controller": "saturation", "start": 0.8, "scope": "per_prompt"})
    assert isinstance(per, PerPromptSaturationController) and per.temperatures(1, ["a", "b"]) == [0.8, 0.8]
    klc = make_controller({"controller": "kl_cooling", "start": 0.8, "factor": 0.95})
    assert isinstance(klc, KLCoolingController) and klc.factor == 0.95
    for c in (lin, sat, glob, per, klc):
        assert isinstance(c, TemperatureController)


@pytest.mark.parametrize(
    "bad",
    [
        True,
        "0.8",
        {"schedule": "linear", "start": 0.8, "end": 1.0},  # no total_steps
        {"schedule": "cosine", "start": 0.8, "end": 1.0, "total_steps": 3},
        {"schedule": "linear", "start": 0.8, "end": 1.0, "total_steps": 3, "stop": 2},
        {"controller": "pid", "start": 0.8},
        {"controller": "saturation", "start": 0.8, "kl_gat": True},  # typo must not fall back to default
        {"controller": "saturation", "current": 1.0},  # state is not a parameter
        {"controller": "saturation", "scope": "per_prompt", "temps": {}},  # state is not a parameter
        {"controller": "saturation", "scope": "batch"},
        {"controller": "saturation", "saturated": "all_wrong"},
        {"controller": "kl_cooling", "saturated": "all_equal"},  # no saturation rule there
    ],
)
def test_make_controller_rejects_bad_specs(bad: object) -> None:
    with pytest.raises(ValueError):
        make_controller(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "tb",
    [
        Temperature("fixed", 0.8),
        Temperature("linear", 0.8, 1.0),
        Temperature("saturation", 0.8, None, False),
        Temperature("saturation", 0.8, None, True),
        Temperature("saturation", 0.8, None, True, "per_prompt"),
        Temperature("saturation", 0.8, None, False, "per_prompt", "all_equal"),
        Temperature("saturation", 0.8, None, False, "global", "all_equal"),
        Temperature("kl_cooling", 0.8),
    ],
)
def test_every_study_temperature_spec_builds(tb: Temperature) -> None:
    c = make_controller(tb.to_config(), total_steps=300)
    assert c.temperatures(1, [3, 4]) == pytest.approx([tb.initial] * 2)
    if tb.kind == "saturation":
        assert isinstance(c, PerPromptSaturationController if tb.scope == "per_prompt" else SaturationController)
        assert c.saturated == tb.saturated and c.kl_gate == tb.kl_gate


def test_study_and_controller_share_the_option_names() -> None:
    from coolsampler.spec import temperature

    assert temperature.SCOPES is SCOPES and temperature.SATURATION_RULES is SATURATION_RULES


@pytest.mark.parametrize(
    ("token", "scope", "saturated", "kl_gate"),
    [
        ("Tbsat0.8", "global", "all_correct", False),  # the paper's runs: one run-wide temperature
        ("Tbsat0.8kl", "global", "all_correct", True),
        ("Tbsat0.8-prompt", "per_prompt", "all_correct", False),
        ("Tbsat0.8-alleq", "global", "all_equal", False),
        ("Tbsat0.8kl-prompt-alleq", "per_prompt", "all_equal", True),
    ],
)
def test_controller_choice_is_in_the_run_key(token: str, scope: str, saturated: str, kl_gate: bool) -> None:
    key = f"qwen2.5-math-1.5b/gsm8k/N96_lr2e-6_tis_{token}_Tl1_s1"
    run = parse_key(key)
    assert (run.Tb.scope, run.Tb.saturated, run.Tb.kl_gate) == (scope, saturated, kl_gate)
    assert run.key == key
    assert run.Tb.token() == token and parse_token(token) == run.Tb
    assert Temperature.from_config(run.Tb.to_config()) == run.Tb
    expected = SaturationController if scope == "global" else PerPromptSaturationController
    assert type(make_controller(run.Tb.to_config())) is expected


def test_the_default_saturation_controller_is_run_wide() -> None:
    """``Tbsat0.8`` and a YAML controller without a scope mean one run-wide temperature: a paper run
    samples no prompt twice, so only state shared across prompts can heat the sampler."""
    yaml_form = Temperature.from_config({"controller": "saturation"})
    for tb in (parse_token("Tbsat0.8"), parse_token("Tbsat0.8kl"), yaml_form):
        assert tb.scope == "global"
        assert "scope" not in tb.to_config()  # the default is left out of the settings
    assert Temperature.from_config({"controller": "saturation", "scope": "global"}).token() == "Tbsat0.8"
    assert Temperature.from_config({"controller": "saturation", "scope": "per_prompt"}).token() == "Tbsat0.8-prompt"


def test_the_run_wide_default_heats_across_prompts_never_seen_twice() -> None:
    """The paper-scale case: every step brings new prompts. The default controller heats on their
    saturation; the per-prompt option stays at its start, as its documented caveat says."""
    default = make_controller({"controller": "saturation", "start": 0.8})
    per = make_controller({"controller": "saturation", "start": 0.8, "scope": "per_prompt"})
    for t in range(1, 61):
        ids = [f"p{t}-{j}" for j in range(16) for _ in range(8)]  # 16 fresh prompts, 8 samples each
        for c in (default, per):
            c.observe(t, ids, [1.0] * len(ids), 0.0)
    assert default.temperatures(61, ["new"]) == pytest.approx([1.1])  # 0.8 + 60 * 0.005
    assert per.temperatures(61, ["new"]) == [0.8]


@pytest.mark.parametrize(
    "token", ["Tbsat0.8-alleq-prompt", "Tbsat0.8-prompt-kl", "Tb0.8-prompt", "Tbklc0.8-alleq", "Tbsat0.8-per_prompt"]
)
def test_bad_controller_tokens_are_refused(token: str) -> None:
    with pytest.raises(ValueError):
        parse_key(f"qwen2.5-math-1.5b/gsm8k/N96_lr2e-6_tis_{token}_Tl1_s1")


@pytest.mark.parametrize(
    ("token", "canonical"),
    [("Tbsat0.8-global", "Tbsat0.8"), ("Tbsat0.8kl-global-alleq", "Tbsat0.8kl-alleq")],
)
def test_the_retired_global_suffix_is_refused_with_the_key_to_write(token: str, canonical: str) -> None:
    """One spelling per key: ``-global`` named the run-wide controller before it became the default;
    read as an alias it would give one run two directories, so it is refused, naming the token to write."""
    key = f"qwen2.5-math-1.5b/gsm8k/N96_lr2e-6_tis_{token}_Tl1_s1"
    with pytest.raises(ValueError, match="retired") as e:
        parse_key(key)
    assert key in str(e.value) and repr(canonical) in str(e.value)
    assert parse_token(canonical).scope == "global"


# -------------------------------------------------------------------------------------- per prompt


def _observe(c: PerPromptSaturationController, step: int, groups: dict, kl: float | None = 0.0) -> dict:
    ids = [p for p, scores in groups.items() for _ in scores]
    scores = [s for v in groups.values() for s in v]
    return c.observe(step, ids, scores, kl)


def test_per_prompt_heats_only_the_saturated_prompt() -> None:
    c = PerPromptSaturationController(start=0.8, step_up=0.1)
    m = _observe(c, 1, {"easy": [1, 1, 1], "mixed": [1, 0, 1], "hard": [0, 0, 0]})
    assert m["sampler/saturated_frac"] == pytest.approx(1 / 3)  # all-correct only, by default
    assert c.temperatures(2, ["easy", "mixed", "hard", "new"]) == pytest.approx([0.9, 0.8, 0.8, 0.8])
    m = _observe(c, 2, {"easy": [1, 1], "new": [0, 1]})  # one batch, two temperatures
    assert (m["sampler/temperature_min"], m["sampler/temperature_max"]) == pytest.approx((0.8, 0.9))
    assert m["sampler/temperature"] == pytest.approx(0.85)
    assert c.temperature_of("easy") == pytest.approx(1.0)


def test_per_prompt_all_equal_also_heats_all_wrong_groups() -> None:
    c = PerPromptSaturationController(start=0.8, step_up=0.1, saturated="all_equal")
    _observe(c, 1, {"easy": [1, 1], "mixed": [1, 0], "hard": [0, 0]})
    assert c.temperatures(2, ["easy", "mixed", "hard"]) == pytest.approx([0.9, 0.8, 0.9])


def test_per_prompt_kl_gate_blocks_raises_only() -> None:
    c = PerPromptSaturationController(start=0.8, step_up=0.1, step_down=0.05, kl_gate=True, kl_threshold=0.1)
    _observe(c, 1, {"a": [1, 1]}, kl=0.05)  # open: 0.9
    _observe(c, 2, {"a": [1, 1]}, kl=0.2)  # closed: held
    _observe(c, 3, {"a": [1, 1]}, kl=None)  # unknown: closed
    assert c.temperature_of("a") == pytest.approx(0.9)
    _observe(c, 4, {"a": [0, 1]}, kl=5.0)  # cooling back is never gated
    assert c.temperature_of("a") == pytest.approx(0.85)
    _observe(c, 5, {"a": [0, 1]}, kl=5.0)
    _observe(c, 6, {"a": [0, 1]}, kl=5.0)
    assert c.temperature_of("a") == pytest.approx(0.8)  # never below start


def test_per_prompt_stops_at_t_max_ignores_replays_and_padding() -> None:
    c = PerPromptSaturationController(start=0.8, step_up=0.3, t_max=1.0)
    _observe(c, 1, {"a": [1, 1]})
    _observe(c, 1, {"a": [1, 1]})  # replayed step (resume): not counted twice
    assert c.temperature_of("a") == pytest.approx(1.0)
    c.observe(2, ["b", "b", "c"], [1, 1, 1], 0.0, keep=[True, True, False])  # c is a padding row
    assert c.temperature_of("b") == pytest.approx(1.0) and c.temperature_of("c") == 0.8


def test_per_prompt_needs_distinct_ids_in_a_batch() -> None:
    with pytest.raises(ValueError, match="extra_info.index"):
        PerPromptSaturationController().temperatures(1, [0, 0, 1])


def test_prompt_ids_from_batch_columns() -> None:
    import numpy as np

    assert prompt_ids([3, "4", 5.0]) == ["3", "4", "5"]
    assert prompt_ids(np.array([7, 8], dtype=object)) == ["7", "8"]


def test_is_saturated_rules() -> None:
    assert is_saturated([1.0, 1.0]) and not is_saturated([0.0, 0.0]) and not is_saturated([1.0, 0.0])
    assert is_saturated([0.0, 0.0], "all_equal") and not is_saturated([1.0, 0.0], "all_equal")
    assert not is_saturated([])
    with pytest.raises(ValueError):
        is_saturated([1.0], "most")


def test_global_controller_uses_its_saturation_rule() -> None:
    c = SaturationController(start=0.8, step_up=0.1, ema=0.0, saturation_threshold=0.5)
    m = c.observe(1, ["a", "a", "b", "b"], [0, 0, 1, 0], 0.0)  # all-wrong a is not all-correct
    assert m["sampler/saturated_frac"] == 0.0 and c.temperature(2) == 0.8
    assert m["sampler/temperature_min"] == m["sampler/temperature_max"] == 0.8
    e = SaturationController(start=0.8, step_up=0.1, ema=0.0, saturation_threshold=0.5, saturated="all_equal")
    assert e.observe(1, ["a", "a", "b", "b"], [0, 0, 1, 0], 0.0)["sampler/saturated_frac"] == 0.5
    assert e.temperature(2) == pytest.approx(0.9)


def test_per_prompt_resume_continues_exactly() -> None:
    spec = {"controller": "saturation", "scope": "per_prompt", "start": 0.8, "step_up": 0.05, "kl_gate": True}
    spec["step_down"] = 0.01
    steps = [
        ({str((t * 3 + j) % 7): [float((t + j) % 3 != 0)] * 2 + [1.0] for j in range(3)}, 0.02 * (t % 9))
        for t in range(1, 30)
    ]

    def run(c: PerPromptSaturationController, part: list, first: int) -> list[dict]:
        return [_observe(c, first + i, g, kl) for i, (g, kl) in enumerate(part)]

    whole = make_controller(spec)
    expected = run(whole, steps, 1)  # type: ignore[arg-type]
    first = make_controller(spec)
    got = run(first, steps[:11], 1)  # type: ignore[arg-type]
    resumed = make_controller(spec)
    resumed.load_state_dict(json.loads(json.dumps(first.state_dict())))
    got += run(resumed, steps[11:], 12)  # type: ignore[arg-type]
    assert got == expected
    assert len({round(t, 6) for t in whole.temps.values()}) > 1  # prompts really went apart


# -------------------------------------------------------------------------------------- resumption


@pytest.mark.parametrize(
    "spec",
    [
        {"controller": "saturation", "scope": "global", "start": 0.8, "kl_gate": True, "step_down": 0.003},
        {"controller": "kl_cooling", "start": 0.8},
        {"schedule": "linear", "start": 0.8, "end": 1.0, "total_steps": 40},
        0.8,
    ],
)
def test_resume_continues_exactly(spec: object) -> None:
    stats = [((i * 37 % 10) / 10, 0.02 * (1 + i % 7)) for i in range(40)]
    whole = make_controller(spec)  # type: ignore[arg-type]
    expected = _run(whole, stats)
    first = make_controller(spec)  # type: ignore[arg-type]
    got = _run(first, stats[:17])
    saved = json.loads(json.dumps(first.state_dict()))  # what a checkpoint holds
    resumed = make_controller(spec)  # type: ignore[arg-type]
    resumed.load_state_dict(saved)
    resumed.update(17, *stats[16])  # a replayed step is ignored
    got += _run(resumed, stats[17:], first_step=18)
    assert got == pytest.approx(expected)


def test_load_state_dict_refuses_other_kind_or_changed_parameters() -> None:
    state = SaturationController(start=0.8).state_dict()
    with pytest.raises(ValueError, match="kl_cooling"):
        KLCoolingController().load_state_dict(state)
    with pytest.raises(ValueError, match="changed"):
        SaturationController(start=0.8, step_up=0.01).load_state_dict(state)


# -------------------------------------------------------------------------------------- statistics


def test_saturated_fraction_counts_all_correct_and_all_wrong_groups() -> None:
    uids = ["a", "a", "b", "b", "c", "c"]
    assert saturated_fraction(uids, [1, 1, 0, 1, 0, 0]) == pytest.approx(2 / 3)
    assert saturated_fraction(uids, [1, 1, 0, 1, 0, 0], keep=[1, 1, 1, 0, 1, 1]) == pytest.approx(1.0)
    assert saturated_fraction(["a"], [0.5]) == 1.0  # a lone response has zero group advantage
    assert math.isnan(saturated_fraction([], []))
    with pytest.raises(ValueError):
        saturated_fraction(["a"], [1.0, 0.0])


def test_kl_from_metrics_prefers_the_trainer_key() -> None:
    assert kl_from_metrics({"rollout_corr/kl": 0.2, "actor/rollout_corr/kl": 0.3}) == 0.2
    assert kl_from_metrics({"actor/rollout_corr/kl": 0.3}) == 0.3
    assert kl_from_metrics({"actor/pg_loss": 1.0}) is None


# ------------------------------------------------------- patches 0003/0003b: the plumbing in verl itself
# Unit-level: the patched methods are called on stand-in objects (no Ray, no vLLM, no TransferQueue).
# The installed verl must carry the patches: a wheel without them is the regression these catch.


def _patched_verl():
    from verl.trainer.ppo.v1 import agent_loop_tq, trainer_base

    assert hasattr(trainer_base.PPOTrainer, "_update_sampler_temperature"), (
        "installed verl wheel lacks patch 0003b-controller-wiring: rerun workflow/tools/setup_env.sh"
    )
    return trainer_base, agent_loop_tq


def test_agent_loop_samples_each_row_at_its_own_temperature(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio
    from types import SimpleNamespace

    from omegaconf import OmegaConf

    _, alt = _patched_verl()

    async def _noop(**kwargs: object) -> None:
        return None

    monkeypatch.setattr(alt.tq, "async_kv_put", _noop)
    seen: list[tuple[float, bool]] = []

    async def run_agent_loop(params: dict, trajectory: dict, **kwargs: object) -> None:
        seen.append((params["temperature"], "sampler_temperature" in kwargs))

    worker = SimpleNamespace(
        config=OmegaConf.create({"actor_rollout_ref": {"rollout": {"n": 2, "val_kwargs": {"n": 1}}}}),
        _run_agent_loop=run_agent_loop,
    )
    run_prompt = alt.AgentLoopWorkerTQ.__ray_metadata__.modified_class._run_prompt
    base = {"temperature": 0.8, "top_p": 1.0, "logprobs": True}

    def run(prompt: dict, validate: bool = False) -> list[tuple[float, bool]]:
        seen.clear()
        asyncio.run(run_prompt(worker, dict(prompt), base, trajectory={"validate": validate}))
        return sorted(seen)

    assert run({"uid": "a", "sampler_temperature": 0.05}) == [(0.05, False), (0.05, False)]  # both samples
    assert run({"uid": "b", "sampler_temperature": 1.2}) == [(1.2, False), (1.2, False)]
    assert run({"uid": "c"}) == [(0.8, False), (0.8, False)]  # absent: upstream
    # in validation too (a validation set's sampled copy beside its greedy rows); absent: upstream
    assert run({"uid": "d", "sampler_temperature": 1.2}, validate=True) == [(1.2, False)]
    assert run({"uid": "e"}, validate=True) == [(0.8, False)]
    assert base["temperature"] == 0.8  # the shared parameters are cloned, never edited


def test_trainer_tags_each_prompt_with_its_own_temperature_and_feeds_the_controller(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from types import SimpleNamespace

    import torch
    from verl.utils import tensordict_utils as tu

    tb, _ = _patched_verl()
    submitted: list = []
    monkeypatch.setattr(tb.tq, "kv_batch_put", lambda **kwargs: None)
    spec = {"controller": "saturation", "scope": "per_prompt", "start": 0.8, "step_up": 0.1, "kl_gate": True}
    ctrl = make_controller(spec)
    ctrl.temps["11"] = 1.0  # prompt 11 was heated on an earlier visit
    trainer = SimpleNamespace(
        _sampler_ctrl=ctrl,
        global_steps=3,
        trainer_mode="sync",
        agent_loop_manager=SimpleNamespace(generate_sequences=submitted.append),
    )
    batch = tu.get_tensordict({"uid": ["p", "q"], "index": torch.tensor([10, 11])})
    assert tb.PPOTrainer._submit_batch_to_rollout(trainer, batch) == 2
    assert list(submitted[0]["sampler_temperature"]) == pytest.approx([0.8, 1.0])

    # step 3's results: prompt 10 all correct (saturated), 11 mixed; the padding row (prompt 12,
    # all correct if it were counted) is ignored
    rows = [(10, [0.0, 1.0]), (10, [1.0]), (11, [0.0, 0.0, 1.0]), (11, [0.0]), (12, [1.0])]
    fields = [{"index": i, "rm_scores": torch.tensor(s)} for i, s in rows]
    monkeypatch.setattr(tb.tq, "kv_batch_get", lambda **kwargs: tu.list_of_dict_to_tensordict(fields))
    meta = SimpleNamespace(keys=list("abcde"), partition_id="train", tags=[{}] * 4 + [{"is_padding": True}])
    metrics = {"rollout_corr/kl": 0.01}
    tb.PPOTrainer._update_sampler_temperature(trainer, meta, metrics)
    assert metrics["sampler/temperature"] == pytest.approx(0.9)
    assert (metrics["sampler/temperature_min"], metrics["sampler/temperature_max"]) == pytest.approx((0.8, 1.0))
    assert metrics["sampler/saturated_frac"] == pytest.approx(0.5)
    assert ctrl.temperatures(4, [10, 11, 12]) == pytest.approx([0.9, 1.0, 0.8])  # KL under the gate


def test_async_submission_without_a_controller_is_upstream(monkeypatch: pytest.MonkeyPatch) -> None:
    """verl's own tests/trainer/ppo/v1/test_reissue_inflight_on_cpu.py::
    test_async_submission_persists_reissuable_prompt_fields, reproduced: a trainer stub that skipped
    __init__ (no _sampler_ctrl at all) submits exactly upstream's fields."""
    import torch
    from verl.utils import tensordict_utils as tu

    tb, _ = _patched_verl()
    stub = type("Stub", (), {})()
    stub.trainer_mode = "separate_async"
    stub.global_steps = 4
    sent: list = []
    stub.agent_loop_manager = type("M", (), {"generate_sequences": staticmethod(sent.append)})()
    batch = tu.get_tensordict(
        {"uid": ["a1", "b2"], "raw_prompt": ["prompt-a", "prompt-b"], "index": torch.tensor([0, 1])}
    )
    tu.assign_non_tensor_data(batch, "global_steps", stub.global_steps)
    puts: list = []
    monkeypatch.setattr(tb.tq, "kv_batch_put", lambda **kwargs: puts.append(kwargs))
    assert tb.PPOTrainer._submit_batch_to_rollout(stub, batch) == 2
    assert len(puts) == 1 and set(puts[0]["fields"].keys()) == {"uid", "raw_prompt", "index"}
    assert sent == [batch]


def test_sampler_ctrl_is_read_guarded_in_every_method_verl_tests_call_on_stubs() -> None:
    """fit, _save_checkpoint and _load_checkpoint are called by verl's tests on trainers that skipped
    __init__: each use of _sampler_ctrl there must follow a getattr(..., None) guard."""
    import inspect

    tb, _ = _patched_verl()
    for name in ("fit", "_save_checkpoint", "_load_checkpoint", "_submit_batch_to_rollout"):
        src = inspect.getsource(getattr(tb.PPOTrainer, name))
        bare = src.replace('getattr(self, "_sampler_ctrl", None)', "")
        guarded = [line for line in bare.splitlines() if "self._sampler_ctrl" in line]
        # every remaining use sits under a getattr guard on the line before or the same statement
        for line in guarded:
            before = src.splitlines()[src.splitlines().index(line) - 1]
            assert 'getattr(self, "_sampler_ctrl", None)' in before, (name, line)


def test_sampled_validation_rows_draw_with_their_own_seeds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under full_determinism verl's server gives every request without a seed the same one: a validation
    set's sampled rows would share one random stream, and their mean be one draw's. Patch 0005 seeds each
    row by (step, row, sample), in validation as in training: distinct across rows, the same on a rerun."""
    import asyncio
    from types import SimpleNamespace

    from omegaconf import OmegaConf

    _, alt = _patched_verl()

    async def _noop(**kwargs: object) -> None:
        return None

    monkeypatch.setattr(alt.tq, "async_kv_put", _noop)
    seen: list[int | None] = []

    async def run_agent_loop(params: dict, trajectory: dict, **kwargs: object) -> None:
        seen.append(params.get("seed"))

    rollout = {"n": 2, "val_kwargs": {"n": 1}, "full_determinism": True, "seed": 7}
    worker = SimpleNamespace(
        config=OmegaConf.create({"actor_rollout_ref": {"rollout": rollout}}), _run_agent_loop=run_agent_loop
    )
    run_prompt = alt.AgentLoopWorkerTQ.__ray_metadata__.modified_class._run_prompt

    def seeds(row: int, step: int = 8) -> list[int | None]:
        seen.clear()
        trajectory = {"validate": True, "step": step, "sample_index": row}
        prompt = {"uid": f"v{row}", "sampler_temperature": 1.0}
        asyncio.run(run_prompt(worker, prompt, {"temperature": 0.0}, trajectory=trajectory))
        return list(seen)

    rows = [seeds(r) for r in range(4)]
    assert all(len(s) == 1 and s[0] is not None for s in rows)
    assert len({s[0] for s in rows}) == 4  # one stream per row
    assert seeds(2) == rows[2] and seeds(2, step=16) != rows[2]  # reproducible; new draws at the next validation


def test_a_restarted_controller_without_its_state_warns(tmp_path, caplog):
    """patch 0003b's resume: the state from sampler_t.pt, or a warning that the controller starts afresh
    (a checkpoint of a run without one), never a silent restart."""
    from coolsampler.worker.controller import resume_state

    ctrl = make_controller({"controller": "saturation", "start": 0.8})
    ctrl.observe(1, ["a", "a"], [1.0, 1.0], 0.0)
    saved = tmp_path / "sampler_t.pt"
    saved.write_text(json.dumps(ctrl.state_dict()))
    fresh = make_controller({"controller": "saturation", "start": 0.8})
    assert resume_state(fresh, str(saved), lambda p: json.loads(Path(p).read_text()))
    assert fresh.state_dict() == ctrl.state_dict()
    again = make_controller({"controller": "saturation", "start": 0.8})
    with caplog.at_level("WARNING", logger="coolsampler.worker.controller"):
        assert not resume_state(again, str(tmp_path / "none" / "sampler_t.pt"), lambda p: {})
    assert "starts afresh" in caplog.text
