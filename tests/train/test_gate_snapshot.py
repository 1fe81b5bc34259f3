"""The staleness gate's host snapshot (patches 0001 and 0004), on the actor worker's own methods
without the stack: allocated once in the sampler's dtype, overwritten in place at each refresh, read
back from a checkpoint into the same buffers; a checkpoint holds one copy, written before the
actor's save can delete the previous checkpoint, and a resume inside a cycle without it fails on
every rank before any collective."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
import torch
from omegaconf import OmegaConf
from verl.workers.engine_workers import ActorRolloutRefWorker


class _Worker(SimpleNamespace):
    """The attributes the checkpoint methods read, with the worker's own helpers bound; the FSDP
    actor's save and load only record what they found on disk when called."""

    SAMPLER_SNAPSHOT = getattr(ActorRolloutRefWorker, "SAMPLER_SNAPSHOT", None)
    _snapshot_to_restore = getattr(ActorRolloutRefWorker, "_snapshot_to_restore", None)


def _worker(dtype: str, rank: int = 0, refresh_interval: int = 1, calls: list | None = None) -> _Worker:
    calls = [] if calls is None else calls

    def listing(path: str) -> list[str]:
        return sorted(os.listdir(path)) if os.path.isdir(path) else []

    return _Worker(
        config=OmegaConf.create({"rollout": {"dtype": dtype, "custom": {"refresh_interval": refresh_interval}}}),
        rank=rank,
        role="actor_rollout_ref",
        actor=SimpleNamespace(
            load_checkpoint=lambda path, *a, **k: calls.append(("load", rank, listing(path))),
            save_checkpoint=lambda path, *a, **k: calls.append(("save", rank, listing(path))),
        ),
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


def test_a_checkpoint_holds_one_snapshot_written_before_the_actors_save(tmp_path):
    """Every rank holds the same full snapshot: rank 0 writes the one copy, complete (atomic rename)
    before its FSDP save starts; that save deletes the previous checkpoint only at its end, and its
    first barrier holds the other ranks until the file is there."""
    calls: list = []
    path = str(tmp_path / "global_step_6" / "actor")
    workers = [_worker("bfloat16", rank=r, refresh_interval=4, calls=calls) for r in (0, 1)]
    for w in workers:
        _refresh(w, _master(5))
    for w in workers:
        ActorRolloutRefWorker.save_checkpoint(w, path)
    assert calls[0] == ("save", 0, ["sampler_snapshot.pt"])  # already whole when rank 0's save began
    assert sorted(os.listdir(path)) == ["sampler_snapshot.pt"]  # one copy, no rank files, no temp file


def test_resuming_inside_a_cycle_without_the_snapshot_fails_at_once_naming_it(tmp_path):
    calls: list = []
    inside = tmp_path / "global_step_6" / "actor"  # 6 % 4 != 0: the sampler is 2 steps stale
    inside.mkdir(parents=True)
    for rank in (0, 1):
        with pytest.raises(FileNotFoundError, match=r"global_step_6/actor/sampler_snapshot\.pt"):
            ActorRolloutRefWorker.load_checkpoint(_worker("bfloat16", rank, 4, calls), str(inside))
    assert calls == []  # before the FSDP load and its collectives: no rank waits for another

    at_refresh = tmp_path / "global_step_8" / "actor"  # 8 % 4 == 0: the sampler is fresh, nothing to restore
    at_refresh.mkdir(parents=True)
    fresh = _worker("bfloat16", 1, 4, calls)
    ActorRolloutRefWorker.load_checkpoint(fresh, str(at_refresh))
    assert calls == [("load", 1, [])] and getattr(fresh, "_sampler_snapshot", None) is None
