"""The staleness gate's host snapshot (patches 0001 and 0004), on the actor worker's own methods
without the stack: allocated once in the sampler's dtype, overwritten in place at each refresh, and
read back from a checkpoint into the same buffers."""

from __future__ import annotations

from types import SimpleNamespace

import torch
from omegaconf import OmegaConf
from verl.workers.engine_workers import ActorRolloutRefWorker


def _worker(dtype: str) -> SimpleNamespace:
    return SimpleNamespace(
        config=OmegaConf.create({"rollout": {"dtype": dtype}}),
        rank=0,
        role="actor_rollout_ref",
        actor=SimpleNamespace(load_checkpoint=lambda *a, **k: None, save_checkpoint=lambda *a, **k: None),
    )


def _refresh(worker, weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """What the sampler is given at a refresh (the generator the engine consumes)."""
    return dict(ActorRolloutRefWorker._through_sampler_snapshot(worker, iter(weights.items())))


def _master(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"w": torch.randn(8, 4, generator=g), "b": torch.randn(4, generator=g), "idx": torch.arange(3)}


def test_bf16_snapshot_is_allocated_once_and_updated_in_place():
    worker = _worker("bfloat16")  # the gpu platform's rollout dtype
    first = _master(0)
    given = _refresh(worker, first)
    snap = worker._sampler_snapshot
    assert {n: t.dtype for n, t in snap.items()} == {"w": torch.bfloat16, "b": torch.bfloat16, "idx": torch.int64}
    for name, t in first.items():
        assert torch.equal(snap[name], t.to(snap[name].dtype))
        assert torch.equal(given[name], snap[name])  # the sampler gets exactly the snapshot
    storage = {n: t.untyped_storage().data_ptr() for n, t in snap.items()}

    second = _master(1)
    _refresh(worker, second)
    assert worker._sampler_snapshot is snap
    assert {n: t.untyped_storage().data_ptr() for n, t in snap.items()} == storage
    assert torch.equal(snap["w"], second["w"].to(torch.bfloat16))


def test_fp32_snapshot_on_the_cpu_stack_is_exact():
    worker = _worker("float32")  # the cpu platform's rollout dtype
    weights = _master(2)
    _refresh(worker, weights)
    for name, t in weights.items():
        assert worker._sampler_snapshot[name].dtype == t.dtype
        assert torch.equal(worker._sampler_snapshot[name], t)


def test_checkpoint_round_trip_reads_back_into_the_same_buffers(tmp_path):
    worker = _worker("bfloat16")
    _refresh(worker, _master(3))
    ActorRolloutRefWorker.save_checkpoint(worker, str(tmp_path))
    saved = {n: t.clone() for n, t in worker._sampler_snapshot.items()}
    storage = {n: t.untyped_storage().data_ptr() for n, t in worker._sampler_snapshot.items()}
    _refresh(worker, _master(4))  # the learner moves on; the checkpoint holds the older sampler
    ActorRolloutRefWorker.load_checkpoint(worker, str(tmp_path))
    assert {n: t.untyped_storage().data_ptr() for n, t in worker._sampler_snapshot.items()} == storage
    for name, t in saved.items():
        assert torch.equal(worker._sampler_snapshot[name], t)

    fresh = _worker("bfloat16")  # a restarted run: no snapshot until the checkpoint is read
    ActorRolloutRefWorker.load_checkpoint(fresh, str(tmp_path))
    for name, t in saved.items():
        assert torch.equal(fresh._sampler_snapshot[name], t)
