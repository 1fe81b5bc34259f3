"""Claims that pair two arms seed by seed (reduce ``paired``) and count how many values reach a bound
(``count_at_least``), on the cliff study's round-3 predictions (config/cliff-round3-claims.yaml): each verdict
follows the runs, and flips when the runs do."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from coolsampler.results import claims as C
from coolsampler.spec.metrics_schema import RunStatus
from coolsampler.spec.study import load_study
from coolsampler.testkit.synthetic import make_metrics

REPO = Path(__file__).resolve().parents[2]
CLAIMS = C.load_claims(REPO / "config" / "cliff-round3-claims.yaml")
RUNS = load_study(REPO / "config" / "cliff-round3.yaml").runs


def world(
    onsets: dict[tuple[float, int, int], int | None],
    kl: dict[tuple[float, int], float] | None = None,
    behind: float = 0.0,
) -> dict[str, C.RunData]:
    """Every run of the study: a collapse at ``onsets[(Tb, N, seed)]`` (absent: none), a flat KL of
    ``kl[(Tb, seed)]``, and the cooled runs ``behind`` the uncooled ones of their seed at every validation."""
    out = {}
    for r in RUNS:
        m = make_metrics(r.N, r.steps, r.val_every, r.Tb.initial, onsets.get((r.Tb.initial, r.N, r.seed)), seed=r.seed)
        m["val_acc"] = make_metrics(
            r.N, r.steps, r.val_every, 1.0, onsets.get((r.Tb.initial, r.N, r.seed)), seed=r.seed
        )["val_acc"] - (behind if r.Tb.initial < 1 else 0.0)
        if kl is not None:
            m["kl"] = kl.get((r.Tb.initial, r.seed), 0.1)
        out[r.key] = C.RunData(r, m, RunStatus(True, r.steps, r.steps, []))
    return out


def verdicts(data: dict[str, C.RunData]) -> dict[str, tuple[str, object]]:
    out = {}
    for c in CLAIMS.claims:
        r = C.evaluate_claim(CLAIMS, c, data, RUNS)
        out[c["id"]] = (r.verdict, r.value)
    return out


HOT = {(1.0, 64, s): 40 for s in (1, 2, 3)}  # three of four uncooled runs collapse at step 40
KL = {**{(1.0, s): 0.2 for s in (1, 2, 3, 4)}, **{(0.8, s): 0.08 for s in (1, 2, 3, 4)}}


def test_the_headline_shape_reproduces_every_prediction() -> None:
    v = verdicts(world(HOT, KL))
    assert {k: verdict for k, (verdict, _) in v.items()} == {c["id"]: "reproduced" for c in CLAIMS.claims}
    assert v["precondition-tb1-degrades"][1] == 3 and v["precondition-control-holds"][1] == 0
    assert v["h1-kl-ratio"][1] == 4  # 0.2 / 0.08 = 2.5 in every seed
    assert v["h2-cooled-later"][1] == [math.inf] * 3  # no cooled onset: infinitely later, seed 4 has no pair
    assert v["h3-learning-not-slowed"][1] == pytest.approx(0.0, abs=1e-12)


def test_a_cooled_collapse_soon_after_the_uncooled_one_fails_h2_but_one_later_passes() -> None:
    v = verdicts(world({**HOT, (0.8, 64, 1): 48}, KL))
    assert v["h2-cooled-later"] == ("differs", [48 / 40, math.inf, math.inf])
    assert v["h2-cooled-holds"] == ("reproduced", 1)
    v = verdicts(world({**HOT, (0.8, 64, 1): 64}, KL))
    assert v["h2-cooled-later"] == ("reproduced", [64 / 40, math.inf, math.inf])
    v = verdicts(world({**HOT, (0.8, 64, 1): 64, (0.8, 64, 2): 64}, KL))
    assert v["h2-cooled-holds"][0] == v["not-falsified-cooled"][0] == "differs"


def test_kl_ratios_are_counted_seed_by_seed_against_both_bounds() -> None:
    kl = {**KL, (0.8, 3): 0.15, (0.8, 4): 0.15}  # seeds 3, 4: 1.33
    v = verdicts(world(HOT, kl))
    assert v["h1-kl-ratio"] == ("differs", 2) and v["not-falsified-kl"] == ("differs", 2)
    kl = {**KL, (0.8, 4): 0.12}  # seed 4: 1.67, below 2 but above 1.5
    v = verdicts(world(HOT, kl))
    assert v["h1-kl-ratio"] == ("reproduced", 3) and v["not-falsified-kl"] == ("reproduced", 4)


def test_a_cooled_run_behind_before_the_onset_fails_h3_and_the_precondition_reads_the_control() -> None:
    v = verdicts(world(HOT, KL, behind=0.05))
    assert v["h3-learning-not-slowed"][0] == "differs"
    assert v["h3-learning-not-slowed"][1] == pytest.approx(-0.05, abs=1e-9)
    v = verdicts(world({**HOT, (1.0, 8, 2): 48}, KL))
    assert v["precondition-control-holds"] == ("differs", 1)
    v = verdicts(world({(1.0, 64, 1): 40, (1.0, 64, 2): 40}, KL))
    assert v["precondition-tb1-degrades"] == ("differs", 2)


def test_a_paired_claim_checks_its_measure_by_name() -> None:
    bad = {
        "filters": CLAIMS.filters,
        "claims": [{**CLAIMS.claims[4], "quantity": {"fn": "onset", "reduce": "paired", "versus": "tb1"}}],
    }
    with pytest.raises(C.ClaimError, match=r"quantity.fn: unknown paired measure 'onset' \(allowed: onset_ratio"):
        C.check_claims(bad)


# --------------------------------------------------------------------------------------------------
# Round 4 (config/cliff.yaml, stage M): the KL's growth above its own step-1 offset, paired by seed


def test_the_growth_ratio_reads_past_the_tempering_offset() -> None:
    """H1 and H1b on synthetic KL curves: a cooled run that starts at the tempering offset and drifts
    half as fast fails H1 (the offset inflates its KL) and passes H1b (its growth is half)."""
    claims = C.load_claims(REPO / "config" / "cliff-claims.yaml")
    runs = load_study(REPO / "config" / "cliff.yaml").runs

    def run_data(growth: dict[float, float], offset: dict[float, float]) -> dict[str, C.RunData]:
        out = {}
        for r in runs:
            m = make_metrics(r.N, r.steps, r.val_every, r.Tb.initial, None, seed=r.seed)
            t = m["step"].to_numpy(dtype="float64")
            m["kl"] = offset[r.Tb.initial] + growth[r.Tb.initial] * (t - 1) / 40.0
            out[r.key] = C.RunData(r, m, RunStatus(True, r.steps, r.steps, []))
        return out

    def judged(data: dict[str, C.RunData]) -> dict[str, tuple[str, object]]:
        return {
            c["id"]: (lambda r: (r.verdict, r.value))(C.evaluate_claim(claims, c, data, runs)) for c in claims.claims
        }

    # uncooled: no offset, grows 0.06 over 40 steps; cooled: offset 0.018, grows 0.03
    v = judged(run_data({1.0: 0.06, 0.8: 0.03}, {1.0: 0.0, 0.8: 0.018}))
    assert v["h1-kl-ratio"][0] == "differs" and v["h1-kl-ratio"][1] == 0  # (0.0525 / 0.0443) < 2
    assert v["h1b-kl-growth-ratio"] == ("reproduced", 4)  # growth 2x in every seed
    assert v["not-falsified-growth"] == ("reproduced", 4)
    assert v["collapse-tb1"] == ("reported", [None] * 4) and v["onset-tb1"][0] == "reported"
    # a cooled run that never drifts, beside an uncooled one that does: above any bound
    assert judged(run_data({1.0: 0.06, 0.8: 0.0}, {1.0: 0.0, 0.8: 0.018}))["h1b-kl-growth-ratio"] == ("reproduced", 4)
    # equal growth at both temperatures: the mechanism is falsified (ratio 1 < 1.5 in every seed)
    v = judged(run_data({1.0: 0.05, 0.8: 0.05}, {1.0: 0.0, 0.8: 0.018}))
    assert v["h1b-kl-growth-ratio"] == ("differs", 0) and v["not-falsified-growth"] == ("differs", 0)


def test_stage_l_reads_collapse_and_the_cooled_pair_only_where_it_was_trained() -> None:
    claims = C.load_claims(REPO / "config" / "cliff-long-claims.yaml")
    runs = load_study(REPO / "config" / "cliff-long.yaml").runs
    assert {(r.N, r.Tb.initial, r.seed, r.steps, r.val_every) for r in runs} == {
        (192, 1.0, 101, 192, 16),
        (192, 1.0, 102, 192, 16),
    }
    data = {}
    for r in runs:
        m = make_metrics(r.N, r.steps, r.val_every, r.Tb.initial, None, seed=r.seed)
        m["kl"] = 0.18
        data[r.key] = C.RunData(r, m, RunStatus(True, r.steps, r.steps, []))
    v = {c["id"]: C.evaluate_claim(claims, c, data, runs) for c in claims.claims}
    assert (v["long-no-collapse"].verdict, v["long-no-collapse"].value) == ("reproduced", 0)
    assert v["long-kl-at-192"].verdict == "reproduced"
    assert v["long-h2-cooled-later"].verdict == "not run"  # the contingent cooled runs are not in the study


def test_both_stages_of_round_4_train_in_one_world() -> None:
    """config/cliff-long.yaml repeats round 4's world r3a; it must be the same world, knob for knob (one
    warm-started model for both stages)."""
    from coolsampler.spec.world import study_worlds

    m = study_worlds(load_study(REPO / "config" / "cliff.yaml").raw, "m")["r3a"]
    long = study_worlds(load_study(REPO / "config" / "cliff-long.yaml").raw, "l")["r3a"]
    assert m.knobs() == long.knobs() and m.ident == long.ident


def test_a_count_keeps_the_values_it_counted_and_the_report_prints_them() -> None:
    from coolsampler.paper.claims_report import ours_text

    kl = {**KL, (0.8, 3): 0.15, (0.8, 4): 0.16}  # seeds 3, 4: 1.33 and 1.25
    data = world(HOT, kl)
    claim = next(c for c in CLAIMS.claims if c["id"] == "h1-kl-ratio")
    r = C.evaluate_claim(CLAIMS, claim, data, RUNS)
    assert r.value == 2 and r.counted == pytest.approx([2.5, 2.5, 0.2 / 0.15, 1.25])
    assert ours_text(r) == "2 of 4 ≥ 2: 2.500 / 2.500 / 1.333 / 1.250"
    other = next(c for c in CLAIMS.claims if "count_at_least" not in c["quantity"])
    plain = C.evaluate_claim(CLAIMS, other, data, RUNS)
    assert plain.counted is None and " of " not in ours_text(plain)
