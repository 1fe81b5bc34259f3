"""The staleness gate's host snapshot (coolsampler.worker.snapshot.SamplerSnapshot, which patches 0001 and
0004 call), without the stack: allocated once in the sampler's dtype, overwritten in place at each
refresh, split between the actor ranks (one copy per node, not one per rank), pushed back with each tensor
broadcast by the rank that keeps it, and read back from a checkpoint into the same buffers; each rank
writes its share before the actor's save can delete the previous checkpoint, and a resume inside a cycle
without every share fails on every rank before any collective. Inside a cycle is the refresh gate's
state saved with the checkpoint, not ``step mod N``: a guard refreshes off the N grid.

The two-rank tests run two real processes over gloo (forked)."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import traceback
from pathlib import Path

import pytest
import torch

from coolsampler.worker.refresh import GATE_FILE
from coolsampler.worker.snapshot import SamplerSnapshot


def _snap(dtype: str, rank: int | None = None, world: int | None = None) -> SamplerSnapshot:
    return SamplerSnapshot(dtype, "cpu", rank=rank, world=world)  # the cpu platform's push device


def _refresh(snap: SamplerSnapshot, weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """What the sampler is given at a refresh (the generator the engine consumes)."""
    return dict(snap.through(iter(weights.items())))


def _stale(snap: SamplerSnapshot) -> dict[str, torch.Tensor]:
    """What the sampler is given when the stale sampler is pushed back."""
    return dict(snap.replay())


def _resume(snap: SamplerSnapshot, actor_dir: Path) -> str | None:
    """What the patched load_checkpoint does with the snapshot: check first, then (after the actor's own
    load) read this rank's share."""
    share = snap.needed(actor_dir)
    if share:
        snap.restore(share)
    return share


def _gate(step_dir: Path, sampler_version: int) -> None:
    """The refresh gate's state as the driver saves it with a checkpoint (coolsampler.worker.refresh)."""
    step_dir.mkdir(parents=True, exist_ok=True)
    (step_dir / GATE_FILE).write_text(json.dumps({"state": {"sampler_version": sampler_version}}))


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
    snap = _snap("bfloat16")  # the gpu platform's rollout dtype
    first = _master(0)
    given = _refresh(snap, first)
    kept = snap.tensors
    assert {n: t.dtype for n, t in kept.items()} == {
        "embed": torch.bfloat16,
        "w": torch.bfloat16,
        "b": torch.bfloat16,
        "v": torch.bfloat16,
        "idx": torch.int64,
    }
    for name, t in first.items():
        assert torch.equal(kept[name], t.to(kept[name].dtype))
        assert torch.equal(given[name], kept[name])  # the sampler gets exactly the snapshot
    storage = {n: t.untyped_storage().data_ptr() for n, t in kept.items()}

    second = _master(1)
    _refresh(snap, second)
    assert snap.tensors is kept
    assert {n: t.untyped_storage().data_ptr() for n, t in kept.items()} == storage
    assert torch.equal(kept["w"], second["w"].to(torch.bfloat16))
    assert {n: torch.equal(t, kept[n]) for n, t in _stale(snap).items()} == dict.fromkeys(first, True)


def test_fp32_snapshot_on_the_cpu_stack_is_exact():
    snap = _snap("float32")  # the cpu platform's rollout dtype
    weights = _master(2)
    _refresh(snap, weights)
    for name, t in weights.items():
        assert snap.tensors[name].dtype == t.dtype
        assert torch.equal(snap.tensors[name], t)


def test_a_push_says_which_step_it_acted_on(caplog):
    """Every rank logs the refresh it pushed, through a module logger at verl's level (the two-rank
    rehearsal compares the ranks' lines)."""
    with caplog.at_level("INFO", logger="coolsampler.worker.snapshot"):
        dict(_snap("float32", 1, 2).through(iter(_master(0).items()), step=12))
    assert "staleness gate: rank 1 pushed the weights of step 12" in caplog.messages


def test_nothing_to_push_back_before_a_refresh_or_a_checkpoint():
    with pytest.raises(RuntimeError, match="no sampler snapshot to restore"):
        _stale(_snap("float32"))


def test_checkpoint_round_trip_reads_back_into_the_same_buffers(tmp_path):
    snap = _snap("bfloat16")
    _snap("bfloat16").save(tmp_path / "never")  # before any refresh: nothing to write
    assert not (tmp_path / "never").exists()
    _refresh(snap, _master(3))
    snap.save(tmp_path)
    assert sorted(os.listdir(tmp_path)) == ["sampler_snapshot_world_size_1_rank_0.pt"]
    saved = {n: t.clone() for n, t in snap.tensors.items()}
    storage = {n: t.untyped_storage().data_ptr() for n, t in snap.tensors.items()}
    _refresh(snap, _master(4))  # the learner moves on; the checkpoint holds the older sampler
    _resume(snap, tmp_path)
    assert {n: t.untyped_storage().data_ptr() for n, t in snap.tensors.items()} == storage
    for name, t in saved.items():
        assert torch.equal(snap.tensors[name], t)

    fresh = _snap("bfloat16")  # a restarted run: no snapshot until the checkpoint is read
    _resume(fresh, tmp_path)
    pushed = _stale(fresh)
    assert list(pushed) == list(saved)  # the push order is the first refresh's
    for name, t in saved.items():
        assert torch.equal(fresh.tensors[name], t) and torch.equal(pushed[name], t)


def test_resuming_inside_a_cycle_without_the_snapshot_fails_at_once_naming_it(tmp_path):
    inside = tmp_path / "global_step_6" / "actor"  # the gate's state: the sampler of step 4 at step 6
    _gate(inside.parent, sampler_version=4)
    inside.mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match=r"global_step_6/actor/sampler_snapshot_world_size_1_rank_0\.pt"):
        _resume(_snap("bfloat16"), inside)

    at_refresh = tmp_path / "global_step_8" / "actor"  # refreshed at 8: the sampler is fresh, nothing to restore
    _gate(at_refresh.parent, sampler_version=8)
    at_refresh.mkdir(parents=True)
    fresh = _snap("bfloat16")
    assert _resume(fresh, at_refresh) is None and fresh.empty

    unreadable = tmp_path / "global_step_12" / "actor"  # an unreadable gate state: the snapshot is required
    unreadable.mkdir(parents=True)
    (unreadable.parent / GATE_FILE).write_text("{")
    with pytest.raises(FileNotFoundError, match=r"global_step_12/actor/sampler_snapshot"):
        _resume(_snap("bfloat16"), unreadable)


def test_a_checkpoint_without_the_gates_state_resumes_on_fresh_weights(tmp_path):
    """No refresh_gate.json: written by a trainer without the gate (upstream verl, a run at interval 1 of
    another trainer), whose sampler was fresh. The worker's load needs no snapshot there (the driver's
    gate refuses such a checkpoint only when it is active: coolsampler.worker.refresh.restore)."""
    upstream = tmp_path / "global_step_12" / "actor"
    upstream.mkdir(parents=True)
    snap = _snap("bfloat16")
    assert _resume(snap, upstream) is None and snap.empty


def test_the_gate_state_decides_not_the_step_mod_n(tmp_path):
    """A guard run refreshed at step 3 (off the N = 4 grid) and checkpointed there: its sampler is fresh,
    so a checkpoint without the snapshot resumes (step mod N would refuse it); checkpointed at step 8
    with its last refresh at 5, the sampler is stale although 8 % 4 == 0, and the snapshot is required."""
    fired = tmp_path / "global_step_3"
    _gate(fired, sampler_version=3)
    (fired / "actor").mkdir()
    snap = _snap("float32")
    assert _resume(snap, fired / "actor") is None and snap.empty

    stale = tmp_path / "global_step_8"
    _gate(stale, sampler_version=5)
    (stale / "actor").mkdir()
    with pytest.raises(FileNotFoundError, match=r"resuming at step 8 needs the stale sampler"):
        _resume(_snap("float32"), stale / "actor")


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
    failures = [errors.get(timeout=30) for _ in range(errors.qsize())]  # a rank killed mid-put: fail, not hang
    assert not failures and all(p.exitcode == 0 for p in procs), "\n".join(failures) or [p.exitcode for p in procs]


def _split_save_push_resume(rank: int, tmp: Path) -> None:
    snap = _snap("bfloat16")  # rank and world from the process group, as on the stack
    assert (snap.rank, snap.world) == (rank, 2)
    first = _master(5)
    given = _refresh(snap, first)
    want = {n: t.to(torch.bfloat16) if t.is_floating_point() else t for n, t in first.items()}
    assert {n: torch.equal(given[n], want[n]) for n in want} == dict.fromkeys(want, True)  # every rank pushes all
    # each tensor is kept by exactly one rank, balanced by size: one copy between the two
    mine = {n: t.clone() for n, t in snap.tensors.items()}
    torch.save(mine, tmp / f"kept_{rank}.pt")
    torch.distributed.barrier()
    other = torch.load(tmp / f"kept_{1 - rank}.pt")
    assert not set(mine) & set(other) and set(mine) | set(other) == set(first)
    # the stale sampler pushed back: every rank gets every tensor, in the first refresh's order
    stale = _stale(snap)
    assert list(stale) == list(first) and all(torch.equal(stale[n], want[n]) for n in want)

    # a checkpoint inside the cycle: every rank writes its share, atomically
    ckpt = tmp / "global_step_6" / "actor"
    snap.save(ckpt)
    assert os.path.exists(ckpt / f"sampler_snapshot_world_size_2_rank_{rank}.pt")
    _refresh(snap, _master(6))  # the learner moves on
    torch.distributed.barrier()
    assert not [f for f in os.listdir(ckpt) if f.endswith(".tmp")]

    # a restarted run (no snapshot in memory) resumes from the checkpoint and pushes the stale sampler
    fresh = _snap("bfloat16")
    _resume(fresh, ckpt)
    assert set(fresh.tensors) == set(mine)
    restored = _stale(fresh)
    assert list(restored) == list(first) and all(torch.equal(restored[n], want[n]) for n in want)


def test_two_ranks_keep_one_copy_between_them_and_push_it_back_whole(tmp_path):
    _two_ranks(_split_save_push_resume, tmp_path)
    files = sorted(p.name for p in (tmp_path / "global_step_6" / "actor").iterdir())
    assert files == ["sampler_snapshot_world_size_2_rank_0.pt", "sampler_snapshot_world_size_2_rank_1.pt"]


def _resume_without_one_share(rank: int, tmp: Path) -> None:
    snap = _snap("bfloat16")
    _refresh(snap, _master(7))
    ckpt = tmp / "global_step_6" / "actor"
    snap.save(ckpt)
    torch.distributed.barrier()
    if rank == 0:
        (ckpt / "sampler_snapshot_world_size_2_rank_1.pt").unlink()
        _gate(ckpt.parent, sampler_version=4)  # the gate's state: stale at step 6, so every share is needed
    torch.distributed.barrier()
    with pytest.raises(FileNotFoundError, match=r"missing: \S*sampler_snapshot_world_size_2_rank_1\.pt"):
        _snap("bfloat16").needed(ckpt)  # both ranks refuse before any collective: neither waits


def test_a_missing_share_fails_every_rank_before_any_collective(tmp_path):
    _two_ranks(_resume_without_one_share, tmp_path)


def test_the_split_is_balanced_by_size():
    """Shares are about equal (the largest tensors first go to different ranks), so no rank writes much
    more than another inside a checkpoint's barriers."""
    layout_src = {f"layer{i}": torch.empty(100 + 10 * i, dtype=torch.float32) for i in range(8)}
    layout_src = {"embed": torch.empty(1000), **layout_src}
    sizes = []
    for rank in range(4):
        snap = _snap("float32", rank, 4)
        _refresh(snap, layout_src)
        sizes.append(sum(t.numel() for t in snap.tensors.values()))
    assert sum(sizes) == sum(t.numel() for t in layout_src.values())
    assert max(sizes) == 1000  # the embedding alone; the layers spread over the other three
    assert max(sizes[1:]) - min(sizes[1:]) <= 170


def test_the_patches_only_call_the_snapshot():
    """The patches hold no snapshot logic of their own, and no ``step mod N`` decides a resume."""
    patches = Path(__file__).resolve().parents[2] / "patches" / "verl"
    text = "".join(p.read_text() for p in sorted(patches.glob("*.patch")))
    added = "\n".join(line for line in text.splitlines() if line.startswith("+"))
    for gone in ("_through_sampler_snapshot", "_from_sampler_snapshot", "SAMPLER_SNAPSHOT", "mmap=True", "% n"):
        assert gone not in added, gone
    assert "self._stale_sampler().needed(" in added and "self._stale_sampler().restore(" in added


@pytest.mark.parametrize(
    ("name", "dtype"),
    [("bf16", torch.bfloat16), ("bfloat16", torch.bfloat16), ("fp16", torch.float16), ("float16", torch.float16),
     ("half", torch.float16), ("fp32", torch.float32), ("float32", torch.float32)],
)  # fmt: skip
def test_the_snapshot_keeps_the_dtype_the_rollout_names_in_any_spelling(name, dtype):
    """verl's and vLLM's spellings of rollout.dtype: "bf16" kept as fp32 would double the host memory."""
    snap = _snap(name)
    _refresh(snap, _master(0))
    assert {n: t.dtype for n, t in snap.tensors.items() if t.is_floating_point()} == dict.fromkeys(
        [n for n, t in _master(0).items() if t.is_floating_point() and n in snap.tensors], dtype
    )


def test_an_auto_dtype_warns_and_an_unknown_one_is_refused(caplog):
    with caplog.at_level("WARNING", logger="coolsampler.worker.snapshot"):
        assert _snap("auto").dtype is None  # vLLM picks it from the model's config: kept as pushed
    assert "rollout.dtype=auto" in caplog.text
    with pytest.raises(ValueError, match=r"rollout\.dtype='bfloat17': unknown"):
        _snap("bfloat17")
