"""The cliff study's round-5 predictions (config/cliff-round5-claims.yaml) on runs whose answer is known:
a run's end (its last three greedy validations), the staleness gap seed by seed, B1's two conditions in
the same seed (a third run of the seed, ``also``), the strict and at-most counts, and B2 read from the
drift probe. Stage B's block is commented out in the committed study: its claims say "not run"."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from coolsampler.results import claims as C
from coolsampler.spec.metrics_schema import RunStatus
from coolsampler.spec.study import load_study, study_from_dict
from coolsampler.testkit.synthetic import make_metrics

REPO = Path(__file__).resolve().parents[2]
CLAIMS = C.load_claims(REPO / "config" / "cliff-round5-claims.yaml")
STAGE_A = load_study(REPO / "config" / "cliff-round5.yaml").runs


def with_stage_b() -> list:
    """The study with stage B's block uncommented as written (the header says: only if A1 holds)."""
    raw = yaml.safe_load((REPO / "config" / "cliff-round5.yaml").read_text())
    raw["runs"].append({"source": "cliff round 5, stage B", "N": 96, "Tb": 0.8, "seed": [5, 6, 7]})
    return study_from_dict(raw, origin="cliff-round5").runs


ALL = with_stage_b()
ARM = {(4, 1.0): "fresh", (96, 1.0): "stale", (96, 0.8): "cooled"}


def data(ends: dict[tuple[str, int], float], kl: dict[tuple[str, int], float] | None = None, probes=None, runs=ALL):
    """Each run ends (validations 80-96) at ``ends[(arm, seed)]`` after a flat 0.5, with a flat KL of
    ``kl[(arm, seed)]`` (0.1 if absent) and the probe ``probes[seed]`` on the stale runs."""
    out = {}
    for r in runs:
        arm = ARM[(r.N, r.Tb.initial)]
        m = make_metrics(r.N, r.steps, r.val_every, r.Tb.initial, None, seed=r.seed)
        val = m["val_acc"].notna()
        m.loc[val, "val_acc"] = 0.5
        m.loc[val & (m["step"] >= 80), "val_acc"] = ends.get((arm, r.seed), 0.5)
        m["kl"] = (kl or {}).get((arm, r.seed), 0.1)
        probe = (probes or {}).get(r.seed) if arm == "stale" else None
        out[r.key] = C.RunData(r, m, RunStatus(True, r.steps, r.steps, []), probe)
    return out


def verdicts(d, runs=ALL) -> dict[str, tuple[str, object]]:
    out = {}
    for c in CLAIMS.claims:
        r = C.evaluate_claim(CLAIMS, c, d, runs)
        out[c["id"]] = (r.verdict, r.value)
    return out


def test_the_gap_is_counted_seed_by_seed_and_the_stop_rule_reads_its_mean() -> None:
    v = verdicts(data({("stale", 5): 0.3, ("stale", 6): 0.34}))  # gaps 0.2, 0.16, 0
    assert v["a1-gap"] == ("reproduced", 2) and v["a1-control-holds"][0] == "reproduced"
    assert v["a1-mean-gap"][0] == "reproduced" and v["a1-mean-gap"][1] == pytest.approx(0.12)
    v = verdicts(data({("stale", 5): 0.3, ("stale", 6): 0.36}))  # 0.14 is below the bound
    assert v["a1-gap"] == ("differs", 1)
    assert v["a1-mean-gap"][0] == "reproduced" and v["a1-mean-gap"][1] == pytest.approx(0.34 / 3)
    v = verdicts(data({("stale", 5): 0.45}))
    assert v["a1-mean-gap"] == ("differs", pytest.approx(0.05 / 3))


def test_a_control_that_collapses_fails_a1() -> None:
    d = data({})
    run = next(r for r in ALL if r.N == 4 and r.seed == 6)
    m = d[run.key].metrics
    m.loc[m["val_acc"].notna() & (m["step"] >= 48), "val_acc"] = 0.2  # 0.3 below its best from step 48 on
    v = verdicts(d)
    assert v["a1-control-holds"] == ("differs", [None, 48, None])


def test_b1_needs_both_conditions_in_the_same_seed() -> None:
    ends = {("stale", s): 0.3 for s in (5, 6, 7)}  # gap 0.2 in every seed
    kl = {("stale", s): 0.2 for s in (5, 6, 7)}
    # seed 5 closes 3/4 of the gap but its KL is 0.75 x; seed 6 KL 0.4 x but closes 1/4; seed 7 both
    ends |= {("cooled", 5): 0.45, ("cooled", 6): 0.35, ("cooled", 7): 0.42}
    kl |= {("cooled", 5): 0.15, ("cooled", 6): 0.08, ("cooled", 7): 0.08}
    v = verdicts(data(ends, kl))
    assert v["b1-closes-half-and-cools"] == ("differs", 1)
    assert v["gap-closed"][1] == pytest.approx([0.75, 0.25, 0.6])
    assert v["kl-ratio-cooled"][1] == pytest.approx([0.75, 0.4, 0.4])
    assert v["b1-not-refuted"] == ("reproduced", 3)
    kl[("cooled", 5)] = 0.1  # now seed 5 holds both too
    assert verdicts(data(ends, kl))["b1-closes-half-and-cools"] == ("reproduced", 2)


def test_b1_is_refuted_when_the_cooled_end_is_at_or_below_the_stale_one_in_two_seeds() -> None:
    ends = {("stale", s): 0.3 for s in (5, 6, 7)} | {("cooled", 5): 0.3, ("cooled", 6): 0.2, ("cooled", 7): 0.5}
    v = verdicts(data(ends))
    assert v["b1-not-refuted"] == ("differs", 1)  # equal counts as at or below: strictly above is needed


def test_b2_reads_the_probes_share_of_the_drift_in_each_bin() -> None:
    probes = {
        5: {"drift_frac_low": 0.6, "drift_frac_high": 0.1},
        6: {"drift_frac_low": 0.5, "drift_frac_high": 0.2},
        7: {"drift_frac_low": 0.2, "drift_frac_high": 0.7},
    }
    v = verdicts(data({}, probes=probes))
    assert v["b2-low-q-carries-the-drift"] == ("reproduced", 2)
    assert v["b2-not-refuted"] == ("reproduced", 2)
    probes[6]["drift_frac_high"] = 0.51
    assert verdicts(data({}, probes=probes))["b2-not-refuted"] == ("differs", 1)
    # a stale run without its probe cannot be judged
    v = verdicts(data({}, probes={5: probes[5]}))
    assert v["b2-low-q-carries-the-drift"][0] == "differs" and v["b2-low-q-carries-the-drift"][1] == 1


def test_the_committed_study_trains_stage_a_only_and_stage_bs_claims_are_not_run() -> None:
    assert sorted((r.N, r.Tb.initial, r.seed) for r in STAGE_A) == [(n, 1.0, s) for n in (4, 96) for s in (5, 6, 7)]
    v = verdicts(data({("stale", 5): 0.3}, runs=STAGE_A), runs=STAGE_A)
    for cid in ("b1-closes-half-and-cools", "b1-not-refuted", "gap-closed", "kl-ratio-cooled"):
        assert v[cid][0] == "not run", cid
    assert v["a1-gap"] == ("differs", 1)


def test_the_report_prints_each_count_with_its_own_sign() -> None:
    from coolsampler.paper.claims_report import ours_text

    ends = {("stale", s): 0.3 for s in (5, 6, 7)} | {("cooled", 5): 0.3, ("cooled", 6): 0.2, ("cooled", 7): 0.5}
    results = {r.claim["id"]: r for r in C.evaluate(CLAIMS, ALL, data(ends))}
    assert ours_text(results["b1-not-refuted"]).startswith("1 of 3 > 0: ")
    assert ours_text(results["a1-gap"]).startswith("3 of 3 ≥ 0.15: ")


def test_round_5_trains_in_round_4s_world() -> None:
    """config/cliff-round5.yaml declares round 4's screened world r3a again, with no screen of its own: it
    must be the same world, knob for knob (the same key, the same warm start)."""
    from coolsampler.spec.world import study_screen, study_worlds

    four = study_worlds(load_study(REPO / "config" / "cliff.yaml").raw, "m")["r3a"]
    raw = load_study(REPO / "config" / "cliff-round5.yaml").raw
    five = study_worlds(raw, "r5")["r3a"]
    assert five.knobs() == four.knobs() and five.ident == four.ident
    assert study_screen(raw, "r5") is None
    assert {r.seed for r in ALL} == {5, 6, 7}  # outside every seed used before
