"""Fingerprints of runs and models: identical tables agree, any one-ulp change is found at its step and metric."""

from __future__ import annotations

import numpy as np
import pytest

from coolsampler.results import fingerprint as fpr
from coolsampler.testkit.synthetic import make_metrics


@pytest.fixture
def table():
    return make_metrics(N=8, steps=24, val_every=4, seed=3)


def test_a_copy_agrees_and_one_ulp_of_what_samples_decide_is_found_at_its_step(table):
    ref = fpr.run_fingerprint(table)
    assert fpr.compare_runs(fpr.run_fingerprint(table.copy()), ref) == ""
    changed = table.copy()
    i = changed.index[changed["step"] == 11][0]
    changed.loc[i, "reward"] = np.nextafter(changed.loc[i, "reward"], 1.0)  # the smallest change a float can make
    assert fpr.compare_runs(fpr.run_fingerprint(changed), ref) == "differs from step 11, in reward"
    changed.loc[i, "response_length_max"] += 1
    assert fpr.compare_runs(fpr.run_fingerprint(changed), ref) == "differs from step 11, in response_length_max, reward"


def test_learner_metrics_are_compared_to_float_rounding(table):
    """KL, IS and entropy statistics are not bitwise reproducible on CPU: a change of them leaves the run a
    match, and the comparison says how far they moved and where."""
    assert "kl" not in fpr.EXACT_COLUMNS and "reward" in fpr.EXACT_COLUMNS and "val_acc" in fpr.EXACT_COLUMNS
    ref = fpr.run_fingerprint(table)
    changed = table.copy()
    changed.loc[changed.index[changed["step"] == 5][0], "kl"] += 3e-6
    mine = fpr.run_fingerprint(changed)
    assert fpr.compare_runs(mine, ref) == ""
    worst, col = fpr.float_deviation(mine, ref)
    assert col == "kl" and worst == pytest.approx(3e-6, rel=1e-3)
    [diff] = fpr.compare({"runs": {"r": mine}}, {"runs": {"r": ref}})
    assert diff.same and diff.line("X") == (
        "run r: matches the reference of X (compared 24 steps x 14 columns; learner metrics within 3.0e-06, in kl)"
    )


def test_first_k_steps(table):
    """A reference over the first K steps: a run that goes on agrees while its first K steps do."""
    ref = fpr.run_fingerprint(table, steps=10)
    assert ref["steps"][-1] == 10 and len(ref["columns"]["reward"]) == 10 * fpr.STEP_DIGEST_HEX
    assert fpr.compare_runs(fpr.run_fingerprint(table), ref) == ""
    late = table.copy()
    late.loc[late.index[late["step"] == 20][0], "reward"] = 1.0  # past the reference's steps: not its business
    assert fpr.compare_runs(fpr.run_fingerprint(late), ref) == ""
    short = fpr.run_fingerprint(table, steps=6)
    assert fpr.compare_runs(short, ref) == "logged steps differ from step 7 (here 6 steps, last 6)"


def test_compare_names_each_artefact(table, tmp_path):
    ref = {"models": {"toy": "a" * 64}, "runs": {"m/t/N8": fpr.run_fingerprint(table)}}
    path = fpr.write({"format": fpr.FORMAT, **ref}, tmp_path / "ref.json")
    ref = fpr.read(path)
    same = fpr.compare({"models": {"toy": "a" * 64}, "runs": {"m/t/N8": fpr.run_fingerprint(table)}}, ref)
    assert [d.line("AMD EPYC") for d in same] == [
        "model toy: matches the reference of AMD EPYC",
        "run m/t/N8: matches the reference of AMD EPYC (compared 24 steps x 14 columns; learner metrics identical)",
    ]
    other = fpr.compare({"models": {"toy": "b" * 64}, "runs": {}}, ref)
    assert [d.line("x") for d in other] == ["model toy: weights differ (bbbbbbbb…)", "run m/t/N8: not trained here"]
    assert not any(d.same for d in other)


def test_unknown_format_is_refused(tmp_path):
    (tmp_path / "f.json").write_text('{"format": 99}')
    with pytest.raises(ValueError, match="format 99"):
        fpr.read(tmp_path / "f.json")
