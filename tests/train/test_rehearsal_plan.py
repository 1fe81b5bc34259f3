"""The paper rehearsal's plan, without training: the runs it chooses cover every arm and panel of the
paper study, keep every setting but steps and validation, substitute the model and data in each task's
format, and the dry run lists every arm on the toy model. The rehearsal itself, through the real stack:
tests/stack/test_rehearsal.py (the one-process arms) and tests/stack/test_rehearsal_two_rank.py."""

from __future__ import annotations

import re
import subprocess
import sys

import pandas as pd
import pytest

from coolsampler.spec.targets import panel_filters
from coolsampler.train.paths import Layout
from coolsampler.train.rehearsal import (
    REHEARSAL_STEPS,
    TWO_RANK_GUARD,
    TWO_RANK_GUARD_N,
    TWO_RANK_N,
    TWO_RANK_STEPS,
    arm,
    choose_runs,
)
from tests.dry_run import results_config, temp_results
from tests.stack.rehearsal import GUARDED, PAPER, REHEARSAL, REPO, TWO_RANK


def test_rehearsal_covers_every_arm_and_every_panel():
    assert {arm(r) for r in REHEARSAL.runs} == {arm(r) for r in PAPER.runs}
    kinds = {r.Tb.kind for r in REHEARSAL.runs}
    assert kinds == {"fixed", "linear", "saturation", "kl_cooling"}
    assert {r.correction for r in REHEARSAL.runs} == {"tis", "none", "mu_grpo"}
    assert {r.replicate for r in REHEARSAL.runs} == {None, "cut", "rerun"}
    assert {r.task for r in REHEARSAL.runs} == {"gsm8k", "math"}
    assert any(r.Tl == "tied" for r in REHEARSAL.runs)
    assert any(r.Tb.kl_gate for r in REHEARSAL.runs) and any(
        r.Tb.kind == "saturation" and not r.Tb.kl_gate for r in REHEARSAL.runs
    )
    for target, entry in PAPER.figures.items():
        for panel, filt in panel_filters(entry).items():
            assert REHEARSAL.select(filt), f"{target} panel {panel} has no rehearsal run"
    # the fewest: removing any chosen run loses an arm or a panel
    assert len(REHEARSAL.runs) == len(choose_runs(PAPER)) <= 20


def test_rehearsal_keeps_every_setting_but_steps_and_validation():
    by_key = PAPER.by_key()
    for r in REHEARSAL.runs:
        paper = next(
            p
            for p in by_key.values()
            if p.settings() | {"steps": 0, "val_every": 0, "key": 0}
            == r.settings() | {"steps": 0, "val_every": 0, "key": 0}
        )
        assert r.steps == (REHEARSAL_STEPS - 1 if paper.replicate == "cut" else REHEARSAL_STEPS)


def test_two_rank_shape_covers_gate_controller_mu_grpo_guard_checkpoint_and_resume():
    assert [(r.Tb.kind, r.Tb.kl_gate, r.correction, r.refresh) for r in TWO_RANK.runs] == [
        ("saturation", True, "tis", "fixed"),
        ("fixed", False, "mu_grpo", "fixed"),
        ("fixed", False, "tis", "guard"),
    ]
    blank = {"N": 0, "steps": 0, "val_every": 0, "key": 0, "guard": 0}
    for r in TWO_RANK.runs:  # a paper arm's settings but N, steps, validation and the guard
        assert any(p.settings() | blank == r.settings() | blank for p in PAPER.runs), r.key
        n = TWO_RANK_GUARD_N if r is GUARDED else TWO_RANK_N
        assert (r.N, r.steps, r.val_every) == (n, TWO_RANK_STEPS, 3)
    assert GUARDED.guard == TWO_RANK_GUARD and TWO_RANK_GUARD.min == 3  # its first firing: the checkpoint of 3
    # inside the run: refreshes at 2, 4, 6; step 3 validates stale and checkpoints inside a cycle
    assert TWO_RANK.recipe["save_every"] == 3 and 3 % TWO_RANK_N == 1
    assert TWO_RANK.raw["profile"] == "cpu-2rank"


def test_rehearsal_substitutes_model_and_data_in_the_tasks_format():
    layout = Layout("results").rehearsal_layout()
    assert layout.results == "results/rehearsal"
    assert layout.model_path("qwen2.5-math-7b") == "results/models/toy-qwen2-rehearsal"
    assert layout.data_files("math") == {
        "train": "results/data/rehearsal/math/train_l3-5.parquet",
        "val": "results/data/rehearsal/math/math500.parquet",
    }


@pytest.mark.parametrize("task", ["gsm8k", "math"])
def test_rehearsal_data_takes_the_tasks_own_reward_route(task, tmp_path):
    pytest.importorskip("verl")
    from coolsampler.worker import rewards
    from coolsampler.world import toy

    paths = toy.write_rehearsal_task(tmp_path, task)
    for split, path in paths.items():
        df = pd.read_parquet(path)
        row = df.iloc[0]
        truth = row.reward_model["ground_truth"]
        source = row.data_source
        assert source in (rewards.GSM8K_SOURCES if task == "gsm8k" else rewards.MATH_SOURCES), split
        right = f"#### {truth}" if task == "gsm8k" else f"\\boxed{{{truth}}}"
        assert rewards.compute_score(source, right, truth) == 1.0
        assert rewards.compute_score(source, right.replace(truth, truth + "1"), truth) == 0.0
    only = toy.write_rehearsal_task(tmp_path / "one", task, only=list(paths)[0])
    assert list(only) == [list(paths)[0]]
    assert pd.read_parquet(only[list(paths)[0]]).equals(pd.read_parquet(paths[list(paths)[0]]))


def test_dry_run_rehearsal_lists_every_arm_on_the_toy_model(tmp_path):
    R = temp_results(tmp_path)
    res = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--configfile=config/paper.yaml", "rehearsal", *results_config(R)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    trains = set(re.findall(rf"output: {re.escape(str(R))}/rehearsal/runs/(\S+?)/train\.jsonl", res.stdout))
    assert trains == {r.key for r in REHEARSAL.runs}
    two = set(re.findall(rf"output: {re.escape(str(R))}/rehearsal/two-rank/runs/(\S+?)/train\.jsonl", res.stdout))
    assert two == {r.key for r in TWO_RANK.runs}
    assert "results/models/toy-qwen2-rehearsal/model.safetensors" in res.stdout
    assert not re.search(rf"output: {re.escape(str(R))}/runs/", res.stdout)  # no paper run is trained


def test_smoke_study_has_no_rehearsal(tmp_path):
    res = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "rehearsal", *results_config(tmp_path / "r")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert res.returncode != 0
    assert "is its own rehearsal" in res.stdout + res.stderr
