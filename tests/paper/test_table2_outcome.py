"""Table 2's outcome words, from a run's metrics through ``summarize_run`` to ``outcome_text``: the
recovery test is the analysis's (``recovers_later``), and the captions state the analysis's numbers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from coolsampler.paper.tables import TABLE2_CAPTION, TABLE4_CAPTION, outcome_text
from coolsampler.results import analysis as A
from coolsampler.spec.settings import nat_text


def _run(points: dict[int, float]) -> dict:
    metrics = pd.DataFrame({"step": list(points), "val_acc": list(points.values())})
    s = A.summarize_run(metrics, {"N": 96, "key": "k"}, None)
    s["n_val"] = len(points)  # summarize_run's count; set for runs built without it
    return s


def _sustained_then(final: float) -> dict[int, float]:
    """Up to 0.80 at step 100, down to 0.60 for well over the recovery window, then ``final`` at 300."""
    rise = {s: 0.8 * s / 100 for s in range(10, 101, 10)}
    low = {s: 0.60 for s in range(110, 300, 10)}
    return {**rise, **low, 300: final}


@pytest.mark.parametrize(
    ("final", "words"),
    [
        (0.80 - A.RECOVERY_BAND, "sustained, recovers later"),
        (0.80 - A.RECOVERY_BAND - 0.001, "sustained"),
    ],
)
def test_sustained_run_recovers_later_on_both_sides_of_the_band(final: float, words: str) -> None:
    s = _run(_sustained_then(final))
    assert s["kind"] == "sustained" and s["onset"] == 110
    assert outcome_text(s) == words


def test_stable_and_transient_runs() -> None:
    assert outcome_text(_run({s: 0.8 * s / 100 for s in range(10, 101, 10)})) == "stable"
    dip = {**{s: 0.8 * s / 100 for s in range(10, 101, 10)}, 110: 0.6, 120: 0.8}
    assert outcome_text(_run(dip)) == "transient dip at 110"


def test_captions_state_the_analysis_numbers() -> None:
    for caption in (TABLE2_CAPTION, TABLE4_CAPTION):
        assert f"running max - {A.ONSET_DROP:.2f} after step {A.AFTER_STEP}" in caption
    assert f"max - {A.SEVERE_DROP:.2f}" in TABLE4_CAPTION
    # the fixed-step rule as kl_step_for applies it, on every side of both boundaries
    for N, step in ((A.KL_STEP + 1, A.KL_STEP), (A.KL_STEP, A.KL_STEP_SHORT), (A.KL_STEP_SHORT, A.KL_STEP_SHORT)):
        assert A.kl_step_for(N) == step
    assert A.kl_step_for(32) == 32 and f"step N where N <= {A.KL_STEP_SHORT}" in TABLE4_CAPTION
    assert not np.isnan(A.KL_LEAD_NAT) and nat_text(A.KL_LEAD_NAT) in TABLE4_CAPTION
