"""A run's checkpoint lifecycle across kills, a start-over and resumes, in the two-rank shape, on the real stack.

One run (steps 1-6, a checkpoint every 3 steps, the sampler refreshed every 2: step 3's checkpoint holds
the stale sampler) is killed three times by ``coolsampler.testkit.faults``, each attempt starting where
the job (``coolsampler.train.checkpoints``) says:

1. inside its first save, between rank 0's snapshot write and the FSDP save: no complete checkpoint, so
   the next attempt starts over, after removing what the killed one left;
2. that attempt writes every snapshot share slowly (rank 1 waits in the save's first barrier, under the
   process-group timeout that ``actor_rollout_ref.nccl_timeout`` sets, patch 0004), and at step 6 is
   killed after every file of the checkpoint is written and before the tracker: upstream verl had deleted
   step 3's ``actor/`` by then, and the run would have started over; step 3 must survive (patch 0006);
3. the next attempt resumes from step 3 with the stale sampler, and is killed inside its rewrite of step
   6 (rank 0's model shard cut short): a torn checkpoint that must never be resumed from;
4. the last attempt resumes from step 3 again and finishes.

At the end the log is whole, and exactly the last checkpoint is left: not the one the run resumed from
(upstream verl never deletes it), nor anything a killed attempt wrote.
"""

from __future__ import annotations

import json

import pytest

from coolsampler.spec.settings import MODELS, collective_timeout_s
from coolsampler.testkit.faults import (
    FAULT_ENV,
    FAULT_LOG_ENV,
    KILL_BEFORE_TRACKER,
    KILL_IN_FIRST_SAVE,
    SLOW_WRITE,
    TORN_SAVE,
)
from coolsampler.train.checkpoints import find_checkpoints
from coolsampler.train.launch import TrainingFailed
from coolsampler.train.platform import get_platform
from tests.stack import records, run_stack, shared_world

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

KEY = "toy-qwen2/arith/N2_lr1e-4_tis_Tb0.8_Tl1_s1_st6_v3"  # refreshes at 2, 4, 6; step 3 inside a cycle
SLOW_S = 15


def _env(faults: list[str], log) -> dict[str, str]:
    modules = get_platform("cpu-2rank").env()["VERL_USE_EXTERNAL_MODULES"]
    return {
        "VERL_USE_EXTERNAL_MODULES": modules + ",coolsampler.testkit.faults",
        FAULT_ENV: ",".join(faults),
        FAULT_LOG_ENV: str(log),
    }


def _attempt_lines(job_log: str, n: int) -> list[str]:
    return [line.split(": ", 1)[1] for line in job_log.splitlines() if line.startswith(f"attempt {n}: ")]


def test_kills_at_every_stage_of_a_save_lose_no_complete_checkpoint_and_leave_no_orphan(tmp_path_factory):
    world = shared_world(tmp_path_factory)
    out = tmp_path_factory.mktemp("faults") / "run"
    ckpt = out / "checkpoints"
    log = out.parent / "faults.jsonl"
    kw = {"platform": "cpu-2rank", "recipe": {"save_every": 3}, "timeout_s": 900}

    # 1. killed inside the first save: the stale sampler's share and no model shard
    with pytest.raises(TrainingFailed, match="exited with code"):
        run_stack(KEY, world, out, env_extra=_env([KILL_IN_FIRST_SAVE], log), **kw)
    left = sorted(p.name for p in (ckpt / "global_step_3" / "actor").iterdir())
    assert "sampler_snapshot_world_size_2_rank_0.pt" in left and not [f for f in left if f.startswith("model_")]
    assert not (ckpt / "latest_checkpointed_iteration.txt").exists()

    # 2. starts over (what attempt 1 left is removed first), saves step 3 slowly, killed before step 6's tracker
    with pytest.raises(TrainingFailed, match="exited with code"):
        run_stack(KEY, world, out, env_extra=_env([f"{SLOW_WRITE}{SLOW_S}", f"{KILL_BEFORE_TRACKER}6"], log), **kw)
    second = _attempt_lines((out / "train.log").read_text(), 2)
    assert second[1].startswith("no complete checkpoint: starting from step 0 (global_step_3:")
    assert second[2].startswith("removed global_step_3 (verl's tracker")
    found = find_checkpoints(ckpt)
    assert found.complete == [3]  # upstream verl deleted step 3's actor/ at the end of step 6's save
    assert list(found.incomplete) == [6] and "tracker" in found.incomplete[6]
    assert (ckpt / "global_step_6" / "actor" / "model_world_size_2_rank_1.pt").is_file()  # written, not counted

    # 3. resumes from step 3; the rewrite of step 6 is cut short
    with pytest.raises(TrainingFailed, match="exited with code"):
        run_stack(KEY, world, out, env_extra=_env([f"{TORN_SAVE}6"], log), **kw)
    third = _attempt_lines((out / "train.log").read_text(), 3)
    assert third[1].startswith("resuming from the complete checkpoint of step 3 (not complete: global_step_6:")
    assert third[2].startswith("removed global_step_6 (verl's tracker")
    found = find_checkpoints(ckpt)
    assert found.complete == [3] and list(found.incomplete) == [6]

    # 4. resumes from step 3 again and finishes
    run_stack(KEY, world, out, env_extra=_env([], log), **kw)
    fourth = _attempt_lines((out / "train.log").read_text(), 4)
    assert fourth[1].startswith("resuming from the complete checkpoint of step 3")
    assert len(list((out / "attempts").glob("*.jsonl"))) == 4
    rec = records(out / "train.jsonl")
    assert sorted(rec) == list(range(0, 7))
    assert [rec[t]["staleness/staleness"] for t in range(1, 7)] == [0, 1, 0, 1, 0, 1]
    assert all("critic/rewards/mean" in rec[t] for t in range(1, 7))
    # no orphan: neither the checkpoint resumed from nor anything a killed attempt wrote
    assert sorted(p.name for p in ckpt.iterdir()) == ["global_step_6", "latest_checkpointed_iteration.txt"]
    assert find_checkpoints(ckpt).complete == [6]
    assert sorted(p.name for p in (ckpt / "global_step_6" / "actor").glob("sampler_snapshot*")) == [
        "sampler_snapshot_world_size_2_rank_0.pt",
        "sampler_snapshot_world_size_2_rank_1.pt",
    ]

    saves = [json.loads(line) for line in log.read_text().splitlines()]
    step3 = [s for s in saves if s["path"].endswith("global_step_3/actor")]
    assert {s["rank"] for s in step3} == {0, 1}  # only attempt 2 saved step 3 (attempt 1 was killed in it)
    assert min(s["save_s"] for s in step3 if s["rank"] == 1) >= SLOW_S  # rank 1 waited out the slow write
    toy = MODELS["toy-qwen2"]
    want = collective_timeout_s(toy.params_b, toy.gpus_per_run)  # the toy model: verl's own 600 s floor
    assert {s["pg_timeout_s"] for s in saves} == {float(want)}  # torch's gloo default would be 1800 s
