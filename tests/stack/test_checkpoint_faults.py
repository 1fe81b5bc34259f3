"""A run killed inside its first checkpoint save, in the two-rank shape, on the real stack.

The first attempt is killed (SIGKILL of its whole session) by ``coolsampler.testkit.faults`` between rank
0's snapshot write and the FSDP save of its first checkpoint: what is left is ``global_step_3/actor/``
with the stale sampler's shares and no model shard. The next attempt must not resume from that (FSDP's
load would fail on every later attempt); it starts over and finishes, its log whole. In that attempt rank
0 writes every snapshot share slowly, as a slow filesystem would: rank 1 waits that long in the save's
first barrier, under the process-group timeout the run's ``actor_rollout_ref.nccl_timeout`` sets (patch
0004; verl's engine workers leave torch's default otherwise), and the save goes through.
"""

from __future__ import annotations

import json

import pytest

from coolsampler.spec.settings import MODELS, collective_timeout_s
from coolsampler.testkit.faults import FAULT_ENV, FAULT_LOG_ENV, KILL_IN_FIRST_SAVE, SLOW_WRITE
from coolsampler.train.launch import TrainingFailed
from coolsampler.train.platform import get_platform
from tests.stack import records, run_stack, shared_world

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

KEY = "toy-qwen2/arith/N2_lr1e-4_tis_Tb0.8_Tl1_s1_st6_v3"  # refreshes at 2, 4, 6; step 3 inside a cycle
SLOW_S = 15


def _env(fault: str, log) -> dict[str, str]:
    modules = get_platform("cpu-2rank").env()["VERL_USE_EXTERNAL_MODULES"]
    return {
        "VERL_USE_EXTERNAL_MODULES": modules + ",coolsampler.testkit.faults",
        FAULT_ENV: fault,
        FAULT_LOG_ENV: str(log),
    }


def test_killed_in_its_first_save_the_run_starts_over_and_a_slow_write_times_out_no_barrier(tmp_path_factory):
    world = shared_world(tmp_path_factory)
    out = tmp_path_factory.mktemp("faults") / "run"
    log = out.parent / "faults.jsonl"
    kw = {"platform": "cpu-2rank", "recipe": {"save_every": 3}, "timeout_s": 900}

    with pytest.raises(TrainingFailed, match="exited with code"):
        run_stack(KEY, world, out, env_extra=_env(KILL_IN_FIRST_SAVE, log), **kw)
    actor = out / "checkpoints" / "global_step_3" / "actor"
    left = sorted(p.name for p in actor.iterdir())
    assert "sampler_snapshot_world_size_2_rank_0.pt" in left and not [f for f in left if f.startswith("model_")]
    assert not (out / "checkpoints" / "latest_checkpointed_iteration.txt").exists()

    run_stack(KEY, world, out, env_extra=_env(f"{SLOW_WRITE}{SLOW_S}", log), **kw)
    job_log = (out / "train.log").read_text()
    assert "attempt 2: no complete checkpoint: starting from step 0 (global_step_3:" in job_log
    assert len(list((out / "attempts").glob("*.jsonl"))) == 2
    rec = records(out / "train.jsonl")
    assert sorted(rec) == list(range(0, 7))
    assert [rec[t]["staleness/staleness"] for t in range(1, 7)] == [0, 1, 0, 1, 0, 1]
    assert all("critic/rewards/mean" in rec[t] for t in range(1, 7))

    saves = [json.loads(line) for line in log.read_text().splitlines()]
    step3 = {s["rank"]: s for s in saves if s["path"].endswith("global_step_3/actor")}
    assert set(step3) == {0, 1}  # the killed attempt logged no save: it never finished one
    assert step3[1]["save_s"] >= SLOW_S  # rank 1 waited out rank 0's slow write in the barrier
    toy = MODELS["toy-qwen2"]
    want = collective_timeout_s(toy.params_b, toy.gpus_per_run)  # the toy model: verl's own 600 s floor
    assert {s["pg_timeout_s"] for s in saves} == {float(want)}  # torch's gloo default would be 1800 s
    assert sorted(p.name for p in (out / "checkpoints" / "global_step_6" / "actor").glob("sampler_snapshot*")) == [
        "sampler_snapshot_world_size_2_rank_0.pt",
        "sampler_snapshot_world_size_2_rank_1.pt",
    ]
