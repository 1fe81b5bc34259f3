"""The toy world (coolsampler.world.toy) as the rehearsal uses it: its prompts ask for the format their
task's reward route scores, and its model is warm-started far enough that the paper's saturation
controllers act.

Fast: no model is trained here (the slow rehearsal test trains the model and runs every arm)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from coolsampler.train.rehearsal import REHEARSAL_RECIPE

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("task", ["gsm8k", "math"])
def test_rehearsal_prompts_ask_for_the_format_their_route_scores(task, tmp_path):
    """Each task's prompts carry its format cue, so the model can answer in the one format its route
    scores (the other format scores 0: without the cue a sum the model knows is right one time in two,
    and a group of 4 all correct one time in 16)."""
    pytest.importorskip("verl")
    from coolsampler.worker import rewards
    from coolsampler.world import toy

    assert len(set(toy.REHEARSAL_CUES.values())) == len(toy.REHEARSAL_CUES) == 2
    assert all(c in toy.REHEARSAL_VOCAB for c in toy.REHEARSAL_CUES.values())
    other = next(t for t in toy.REHEARSAL_CUES if t != task)
    for path in toy.write_rehearsal_task(tmp_path, task).values():
        df = pd.read_parquet(path)
        assert all(p[0]["content"].startswith(toy.REHEARSAL_CUES[task]) for p in df.prompt)
        row = df.iloc[0]
        truth = row.reward_model["ground_truth"]
        x, y = row.prompt[0]["content"].removeprefix(toy.REHEARSAL_CUES[task]).removesuffix("=").split("+")
        assert int(x) + int(y) == int(truth)
        assert rewards.compute_score(row.data_source, toy.rehearsal_answer(truth, task), truth) == 1.0
        assert rewards.compute_score(row.data_source, toy.rehearsal_answer(truth, other), truth) == 0.0


def test_rehearsal_model_is_warm_started_for_the_saturation_controller():
    """Rule rehearsal_model trains to ``REHEARSAL_TARGET_ACC``: high enough that at least half of the
    groups of 4 are all correct (the controller's reheat threshold in the paper's arms), short of 1 so
    that some groups still hold a wrong sample."""
    from coolsampler.worker.controller import SaturationController
    from coolsampler.world import toy

    assert 0.5 <= toy.REHEARSAL_TARGET_ACC ** REHEARSAL_RECIPE["samples_per_prompt"] < 1
    assert SaturationController().saturation_threshold == 0.5
    rule = (REPO / "workflow/rules/toy.smk").read_text().split("rule rehearsal_model:")[1].split("\nrule ")[0]
    assert "target_acc=toy.REHEARSAL_TARGET_ACC," in rule and "max_steps=toy.REHEARSAL_MAX_STEPS," in rule
