"""The staleness gate's host snapshot (patches 0001 and 0004), on the actor worker's own methods
without the stack: allocated once in the sampler's dtype, overwritten in place at each refresh, split
between the actor ranks (one copy per node, not one per rank), pushed back with each tensor broadcast
by the rank that keeps it, and read back from a checkpoint into the same buffers; each rank writes its
share before the actor's save can delete the previous checkpoint, and a resume inside a cycle without
every share fails on every rank before any collective.

The two-rank tests run two real processes over gloo (forked, so verl is imported once)."""

from __future__ import annotations

import multiprocessing as mp
import os
import traceback
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from omegaconf import OmegaConf
from verl.workers.engine_workers import ActorRolloutRefWorker

W = ActorRolloutRefWorker


class _Worker(SimpleNamespace):
    """The attributes the checkpoint and push methods read, with the worker's own helpers bound; the
    FSDP actor's save and load only record what they found on disk when called."""

    SAMPLER_SNAPSHOT = W.SAMPLER_SNAPSHOT
    _snapshot_group = W._snapshot_group
    _snapshot_to_restore = W._snapshot_to_restore
    _save_sampler_snapshot = W._save_sampler_snapshot
    _through_sampler_snapshot = W._through_sampler_snapshot
    _from_sampler_snapshot = W._from_sampler_snapshot


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
    return dict(worker._through_sampler_snapshot(iter(weights.items())))


def _stale(worker) -> dict[str, torch.Tensor]:
    """What the sampler is given when the stale sampler is pushed back."""
    return dict(worker._from_sampler_snapshot())


@pytest.fixture(autouse=True)
def _on_cpu(monkeypatch):
    """The push's device is verl's accelerator; here, as on the cpu platform, the CPU."""
    from verl.workers import engine_workers

    monkeypatch.setattr(engine_workers, "get_device_name", lambda: "cpu")


def _master(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "embed": torch.randn(16, 4, generator=g),
        "w": torch.randn(8, 4, generator=g),
        "b": torch.randn(4, generator=g),
        "v": torch.randn(6, 4, generator=g),
        "idx": torch.arange(3),
    }


def test_bf16_snapshot_is_allocated_once_and_updated_in_place():
    worker = _worker("bfloat16")  # the gpu platform's rollout dtype
    first = _master(0)
    given = _refresh(worker, first)
    snap = worker._sampler_snapshot
    assert {n: t.dtype for n, t in snap.items()} == {
        "embed": torch.bfloat16,
        "w": torch.bfloat16,
        "b": torch.bfloat16,
        "v": torch.bfloat16,
        "idx": torch.int64,
    }
    for name, t in first.items():
        assert torch.equal(snap[name], t.to(snap[name].dtype))
        assert torch.equal(given[name], snap[name])  # the sampler gets exactly the snapshot
    storage = {n: t.untyped_storage().data_ptr() for n, t in snap.items()}

    second = _master(1)
    _refresh(worker, second)
    assert worker._sampler_snapshot is snap
    assert {n: t.untyped_storage().data_ptr() for n, t in snap.items()} == storage
    assert torch.equal(snap["w"], second["w"].to(torch.bfloat16))
    assert {n: torch.equal(t, snap[n]) for n, t in _stale(worker).items()} == dict.fromkeys(first, True)


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
    W.save_checkpoint(worker, str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == ["sampler_snapshot_world_size_1_rank_0.pt"]
    saved = {n: t.clone() for n, t in worker._sampler_snapshot.items()}
    storage = {n: t.untyped_storage().data_ptr() for n, t in worker._sampler_snapshot.items()}
    _refresh(worker, _master(4))  # the learner moves on; the checkpoint holds the older sampler
    W.load_checkpoint(worker, str(tmp_path))
    assert {n: t.untyped_storage().data_ptr() for n, t in worker._sampler_snapshot.items()} == storage
    for name, t in saved.items():
        assert torch.equal(worker._sampler_snapshot[name], t)

    fresh = _worker("bfloat16")  # a restarted run: no snapshot until the checkpoint is read
    W.load_checkpoint(fresh, str(tmp_path))
    pushed = _stale(fresh)
    assert list(pushed) == list(saved)  # the push order is the first refresh's
    for name, t in saved.items():
        assert torch.equal(fresh._sampler_snapshot[name], t) and torch.equal(pushed[name], t)


def test_resuming_inside_a_cycle_without_the_snapshot_fails_at_once_naming_it(tmp_path):
    calls: list = []
    inside = tmp_path / "global_step_6" / "actor"  # 6 % 4 != 0: the sampler is 2 steps stale
    inside.mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match=r"global_step_6/actor/sampler_snapshot_world_size_1_rank_0\.pt"):
        W.load_checkpoint(_worker("bfloat16", 0, 4, calls), str(inside))
    assert calls == []  # before the FSDP load and its collectives

    at_refresh = tmp_path / "global_step_8" / "actor"  # 8 % 4 == 0: the sampler is fresh, nothing to restore
    at_refresh.mkdir(parents=True)
    fresh = _worker("bfloat16", 0, 4, calls)
    W.load_checkpoint(fresh, str(at_refresh))
    assert calls == [("load", 0, [])] and getattr(fresh, "_sampler_snapshot", None) is None


# --------------------------------------------------------------------------------------------------
# Two actor ranks, two real processes over gloo


def _two_ranks(body, tmp_path: Path, *args) -> None:
    """Run ``body(rank, tmp_path, *args)`` in two forked processes joined by a gloo process group;
    a failure on either rank fails the test with that rank's traceback."""
    ctx = mp.get_context("fork")
    errors = ctx.Queue()

    def main(rank: int) -> None:
        try:
            torch.distributed.init_process_group(
                "gloo", init_method=f"file://{tmp_path / 'pg'}", rank=rank, world_size=2
            )
            body(rank, tmp_path, *args)
            torch.distributed.barrier()
            torch.distributed.destroy_process_group()
        except BaseException:
            errors.put(f"rank {rank}:\n{traceback.format_exc()}")
            os._exit(1)

    procs = [ctx.Process(target=main, args=(r,)) for r in (0, 1)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    for p in procs:
        if p.is_alive():
            p.kill()
    failures = [errors.get() for _ in range(errors.qsize())]
    assert not failures and all(p.exitcode == 0 for p in procs), "\n".join(failures) or [p.exitcode for p in procs]


def _split_save_push_resume(rank: int, tmp: Path) -> None:
    calls: list = []
    worker = _worker("bfloat16", rank, refresh_interval=4, calls=calls)
    first = _master(5)
    given = _refresh(worker, first)
    want = {n: t.to(torch.bfloat16) if t.is_floating_point() else t for n, t in first.items()}
    assert {n: torch.equal(given[n], want[n]) for n in want} == dict.fromkeys(want, True)  # every rank pushes all
    # each tensor is kept by exactly one rank, balanced by size: one copy between the two
    mine = {n: t.clone() for n, t in worker._sampler_snapshot.items()}
    torch.save(mine, tmp / f"kept_{rank}.pt")
    torch.distributed.barrier()
    other = torch.load(tmp / f"kept_{1 - rank}.pt")
    assert not set(mine) & set(other) and set(mine) | set(other) == set(first)
    # the stale sampler pushed back: every rank gets every tensor, in the first refresh's order
    stale = _stale(worker)
    assert list(stale) == list(first) and all(torch.equal(stale[n], want[n]) for n in want)

    # a checkpoint inside the cycle: every rank writes its share before its actor save begins
    ckpt = tmp / "global_step_6" / "actor"
    W.save_checkpoint(worker, str(ckpt))
    assert calls[0][:2] == ("save", rank)
    assert f"sampler_snapshot_world_size_2_rank_{rank}.pt" in calls[0][2]
    assert not [f for f in calls[0][2] if f.endswith(".tmp")]
    _refresh(worker, _master(6))  # the learner moves on
    torch.distributed.barrier()

    # a restarted run (no snapshot in memory) resumes from the checkpoint and pushes the stale sampler
    fresh = _worker("bfloat16", rank, refresh_interval=4, calls=calls)
    W.load_checkpoint(fresh, str(ckpt))
    assert set(fresh._sampler_snapshot) == set(mine)
    restored = _stale(fresh)
    assert list(restored) == list(first) and all(torch.equal(restored[n], want[n]) for n in want)


def test_two_ranks_keep_one_copy_between_them_and_push_it_back_whole(tmp_path):
    _two_ranks(_split_save_push_resume, tmp_path)
    files = sorted(p.name for p in (tmp_path / "global_step_6" / "actor").iterdir())
    assert files == ["sampler_snapshot_world_size_2_rank_0.pt", "sampler_snapshot_world_size_2_rank_1.pt"]


def _resume_without_one_share(rank: int, tmp: Path) -> None:
    worker = _worker("bfloat16", rank, refresh_interval=4)
    _refresh(worker, _master(7))
    ckpt = tmp / "global_step_6" / "actor"
    W.save_checkpoint(worker, str(ckpt))
    torch.distributed.barrier()
    if rank == 0:
        (ckpt / "sampler_snapshot_world_size_2_rank_1.pt").unlink()
    torch.distributed.barrier()
    calls: list = []
    with pytest.raises(FileNotFoundError, match=r"missing: \S*sampler_snapshot_world_size_2_rank_1\.pt"):
        W.load_checkpoint(_worker("bfloat16", rank, 4, calls), str(ckpt))
    assert calls == []  # both ranks refuse before the FSDP load: neither waits for the other


def test_a_missing_share_fails_every_rank_before_any_collective(tmp_path):
    _two_ranks(_resume_without_one_share, tmp_path)


def test_the_split_is_balanced_by_size():
    """Shares are about equal (the largest tensors first go to different ranks), so no rank writes much
    more than another inside a checkpoint's barriers."""
    layout_src = {f"layer{i}": torch.empty(100 + 10 * i, dtype=torch.float32) for i in range(8)}
    layout_src = {"embed": torch.empty(1000), **layout_src}
    sizes = []
    for rank in range(4):
        worker = _worker("float32", rank)
        worker._snapshot_group = lambda r=rank: (r, 4)
        _refresh(worker, layout_src)
        sizes.append(sum(t.numel() for t in worker._sampler_snapshot.values()))
    assert sum(sizes) == sum(t.numel() for t in layout_src.values())
    assert max(sizes) == 1000  # the embedding alone; the layers spread over the other three
    assert max(sizes[1:]) - min(sizes[1:]) <= 170
