"""The cliff study's round-6 predictions (config/cliff-round6-claims.yaml) on runs whose answer is known:
collapses counted over realizations per arm with the exact binomial interval beside the count, the arm
differences R2 and R3 read, the midpoint KL seed by seed, and the values read at the onset."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from coolsampler.paper.claims_report import ours_text
from coolsampler.results import claims as C
from coolsampler.results.analysis import binomial_interval
from coolsampler.spec.metrics_schema import RunStatus
from coolsampler.spec.study import load_study
from coolsampler.testkit.synthetic import make_metrics

REPO = Path(__file__).resolve().parents[2]
CLAIMS = C.load_claims(REPO / "config" / "cliff-round6-claims.yaml")
RUNS = load_study(REPO / "config" / "cliff-round6.yaml").runs
ARM = {(4, 1.0): "F", (144, 1.0): "A", (144, 0.8): "C"}


def data(collapsed: set[tuple[str, int]], kl: dict[tuple[str, int], float] | None = None) -> dict:
    """Every run flat at 0.6; a run in ``collapsed`` falls to 0.1 from step 96 on (a collapse at 96), with
    its IS ESS 0.7 there; a flat KL of ``kl[(arm, seed)]`` (0.1 if absent)."""
    out = {}
    for r in RUNS:
        arm = ARM[(r.N, r.Tb.initial)]
        m = make_metrics(r.N, r.steps, r.val_every, r.Tb.initial, None, seed=r.seed)
        val = m["val_acc"].notna()
        m.loc[val, "val_acc"] = 0.6
        m["is_ess"] = 0.95
        if (arm, r.seed) in collapsed:
            m.loc[val & (m["step"] >= 96), "val_acc"] = 0.1
            m.loc[m["step"] == 96, "is_ess"] = 0.7
        m["kl"] = (kl or {}).get((arm, r.seed), 0.1)
        out[r.key] = C.RunData(r, m, RunStatus(True, r.steps, r.steps, []), None)
    return out


def results(d) -> dict[str, C.Result]:
    return {c["id"]: C.evaluate_claim(CLAIMS, c, d, RUNS) for c in CLAIMS.claims}


def test_the_exact_interval_matches_known_clopper_pearson_values() -> None:
    # the textbook values (e.g. 1 of 5: 0.0051-0.7164; 0 of 10: 0-0.3085; 5 of 10: 0.1871-0.8129)
    assert binomial_interval(1, 5) == pytest.approx((0.00505, 0.71642), abs=1e-4)
    assert binomial_interval(0, 10) == pytest.approx((0.0, 0.30850), abs=1e-4)
    assert binomial_interval(5, 10) == pytest.approx((0.18709, 0.81291), abs=1e-4)
    assert binomial_interval(4, 4) == pytest.approx((0.39764, 1.0), abs=1e-4)
    lo, hi = binomial_interval(3, 7, level=0.9)
    assert 0 < lo < 3 / 7 < hi < 1
    with pytest.raises(ValueError):
        binomial_interval(3, 2)


def test_collapses_are_counted_per_arm_and_the_arms_compared() -> None:
    r = results(data({("A", 8), ("A", 10), ("C", 9)}))
    assert (r["r1-fresh-never-collapses"].verdict, r["r1-fresh-never-collapses"].value) == ("reproduced", 0)
    assert (r["r2-at-least-two"].verdict, r["r2-at-least-two"].value) == ("reproduced", 2)
    assert (r["r2-more-than-fresh"].verdict, r["r2-more-than-fresh"].value) == ("reproduced", 2)
    assert (r["r3-fewer-collapses"].verdict, r["r3-fewer-collapses"].value) == ("reproduced", -1)
    # each arm's k of n with its interval, the claim's runs first
    k, n, lo, hi = r["r3-fewer-collapses"].rates[0]
    assert (k, n) == (1, 4) and (lo, hi) == pytest.approx(binomial_interval(1, 4))
    assert r["r3-fewer-collapses"].rates[1][:2] == (2, 4)
    assert ours_text(r["r2-at-least-two"]) == "2 of 4 (0.07–0.93)"
    assert ours_text(r["r3-fewer-collapses"]) == "1 of 4 (0.01–0.81) vs 2 of 4 (0.07–0.93): -1"


def test_cooling_that_collapses_as_often_refutes_r3_and_one_stale_collapse_fires_the_stop_rule() -> None:
    r = results(data({("A", 8), ("C", 11)}))
    assert r["r2-at-least-two"].verdict == "differs"  # the stop rule
    assert r["r3-fewer-collapses"].verdict == "differs" and r["r3-fewer-collapses"].value == 0
    r = results(data({("A", 8), ("A", 9), ("F", 8), ("F", 9)}))
    assert r["r1-fresh-never-collapses"].verdict == "differs"
    assert r["r2-more-than-fresh"].value == 0 and r["r2-more-than-fresh"].verdict == "differs"


def test_midpoint_kl_is_compared_seed_by_seed() -> None:
    kl = {("A", s): 0.4 for s in (8, 9, 10, 11)}
    kl |= {("C", 8): 0.1, ("C", 9): 0.2, ("C", 10): 0.25, ("C", 11): 0.3}  # ratios 0.25, 0.5, 0.625, 0.75
    r = results(data(set(), kl))
    assert r["r3-midpoint-kl-halved"].verdict == "differs" and r["r3-midpoint-kl-halved"].value == 2
    kl[("C", 10)] = 0.2
    assert results(data(set(), kl))["r3-midpoint-kl-halved"].value == 3


def test_the_values_at_the_onset_are_read_there_and_nan_without_one() -> None:
    d = data({("A", 8)})
    at_onset = C.QUANTITIES["at_onset"]
    for r in RUNS:
        ess = at_onset(d[r.key], col="is_ess")
        if (ARM[(r.N, r.Tb.initial)], r.seed) == ("A", 8):
            assert ess == pytest.approx(0.7)  # the onset is the collapse's first validation, step 96
        else:
            assert math.isnan(ess)  # no onset
    reported = results(d)["ess-at-onset-each"].value
    assert sorted(v for v in reported if not math.isnan(v)) == [pytest.approx(0.7)]


def test_realizations_take_an_optional_versus_and_other_reductions_still_refuse_one() -> None:
    base = {"id": "x", "where": "Criterion t", "text": "a claim of ten characters", "runs": "a", "paper": 1}
    doc = {"filters": {"a": {"N": 4}}, "claims": [{**base, "quantity": {"fn": "collapse", "reduce": "realizations"}}]}
    C.check_claims(doc | {"claims": [doc["claims"][0] | {"tolerance": 0}]})
    bad = {**base, "tolerance": 0, "quantity": {"fn": "collapse", "reduce": "count", "versus": "a"}}
    with pytest.raises(C.ClaimError, match="takes no versus"):
        C.check_claims({"filters": {"a": {"N": 4}}, "claims": [bad]})
