"""Where a retried or resumed attempt restarts, and what it clears first: the newest complete checkpoint
whose step the log covers, never a directory a killed save, a torn rewrite under a stale tracker or a
cut-short retirement left behind (coolsampler.train.checkpoints, coolsampler.worker.checkpoint_files).

The checkpoints here are laid out file by file in the order verl 0.9.1 with patch 0006 writes them, each
``.pt`` a zip archive as ``torch.save`` writes it, and each test stops that order where a kill would."""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from pathlib import Path

import pytest

from coolsampler.spec.guard import RefreshGate, make_gate
from coolsampler.train.checkpoints import clear, find_checkpoints, resume_point
from coolsampler.train.launch import logged_step
from coolsampler.worker.checkpoint_files import TRACKER, commit, read_tracker
from coolsampler.worker.refresh import save as save_gate

WORLD = 2


def _log(path: Path, last: int) -> Path:
    lines = (json.dumps({"step": t, "data": {"training/global_step": t}}) for t in range(1, last + 1))
    path.write_text("".join(line + "\n" for line in lines))
    return path


def _pt(path: Path) -> None:
    """A file as ``torch.save`` leaves it: a zip archive, its end record written last."""
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", b"x" * 64)


def _gate(step: int, refresh_interval: int) -> RefreshGate:
    """The refresh gate of a fixed N as the driver holds it after deciding ``step``."""
    gate = make_gate(refresh_interval)
    for s in range(1, step + 1):
        gate.decide(s)
    return gate


def _save(root: Path, step: int, stop_after: str | None = None, refresh_interval: int = 4, keep: int = 1) -> None:
    """verl's save of ``step``, in its order, stopped after the named stage (None: all of it)."""
    actor = root / f"global_step_{step}" / "actor"
    stages = [
        ("mkdir", lambda: actor.mkdir(parents=True, exist_ok=True)),
        ("gate", lambda: save_gate(_gate(step, refresh_interval), actor.parent)),
        *[
            (f"snapshot {r}", lambda r=r: _pt(actor / f"sampler_snapshot_world_size_{WORLD}_rank_{r}.pt"))
            for r in range(WORLD)
            if refresh_interval > 1
        ],
        ("fsdp_config", lambda: (actor / "fsdp_config.json").write_text(json.dumps({"world_size": WORLD}))),
        *[
            (f"{kind} {r}", lambda k=kind, r=r: _pt(actor / f"{k}_world_size_{WORLD}_rank_{r}.pt"))
            for kind in ("model", "optim", "extra_state")
            for r in range(WORLD)
        ],
        ("data.pt", lambda: _pt(actor.parent / "data.pt")),
        ("commit", lambda: commit(root, step, keep)),
    ]
    for name, do in stages:
        do()
        if name == stop_after:
            return


def _ov(root: Path, n: int = 4) -> list[str]:
    return [f"trainer.default_local_dir={root}", f"trainer.refresh_interval={n}"]


def _at(root: Path, step: int) -> list[str]:
    return ["trainer.resume_mode=resume_path", f"trainer.resume_from_path={root}/global_step_{step}"]


START_OVER = ["trainer.resume_mode=disable"]


def _later(path: Path, seconds: float = 5) -> None:
    """Stamp ``path`` as written ``seconds`` after now (a later attempt's write)."""
    t = path.stat().st_mtime + seconds
    os.utime(path, (t, t))


def test_before_the_first_save_the_run_starts_from_step_0(tmp_path):
    root = tmp_path / "ckpt"
    assert resume_point(_ov(root), 2).overrides == []
    root.mkdir()
    assert resume_point(_ov(root), 2).overrides == START_OVER


@pytest.mark.parametrize(
    "stop", ["mkdir", "snapshot 0", "snapshot 1", "model 1", "extra_state 1", "fsdp_config", "data.pt"]
)
def test_killed_during_the_first_save_the_next_attempt_starts_over(tmp_path, stop):
    """The directory rank 0's first write creates, and every later point of the save before verl's
    tracker: never a resume point (it was one before, and FSDP's load failed on every attempt)."""
    root = tmp_path / "ckpt"
    _save(root, 3, stop_after=stop)
    point = resume_point(_ov(root), 2)
    assert point.overrides == START_OVER
    assert "global_step_3" in point.reason and "starting from step 0" in point.reason


def test_after_the_first_save_it_resumes_there(tmp_path):
    root = tmp_path / "ckpt"
    _save(root, 3)
    assert resume_point(_ov(root), 3).overrides == _at(root, 3)
    assert resume_point(_ov(root), 4).overrides == _at(root, 3)
    # killed between the save and the log of step 3: the oldest newer complete checkpoint loses least
    assert resume_point(_ov(root), 2).overrides == _at(root, 3)


@pytest.mark.parametrize("stop", ["mkdir", "snapshot 1", "fsdp_config", "optim 0", "data.pt"])
def test_killed_during_a_later_save_it_resumes_from_the_previous_one(tmp_path, stop):
    """Every point of a later save before its tracker, including the one where upstream verl had already
    deleted the previous checkpoint's ``actor/`` (after the shards, before ``data.pt``): the previous one
    is whole and is the resume point."""
    root = tmp_path / "ckpt"
    _save(root, 3)
    _save(root, 6, stop_after=stop)
    point = resume_point(_ov(root), 5)
    assert point.overrides == _at(root, 3)
    assert "not complete: global_step_6" in point.reason


def test_the_commit_retires_the_previous_checkpoint_only_after_the_tracker(tmp_path):
    root = tmp_path / "ckpt"
    _save(root, 3)
    assert read_tracker(root).step == 3 and not (root / f"{TRACKER}.tmp").exists()
    _save(root, 6)
    assert sorted(p.name for p in root.iterdir()) == ["global_step_6", TRACKER]
    assert find_checkpoints(root).complete == [6]


def test_keep_counts_only_complete_checkpoints(tmp_path):
    root = tmp_path / "ckpt"
    _save(root, 3, keep=2)
    _save(root, 6, stop_after="optim 1")  # cut short, then resumed from 3 and saved again at 9
    _save(root, 9, keep=2)
    assert sorted(p.name for p in root.glob("global_step_*")) == ["global_step_3", "global_step_9"]
    _save(root, 12, keep=None)  # verl's None: keep all
    assert find_checkpoints(root).complete == [3, 9, 12]


def test_a_retirement_cut_short_leaves_the_new_checkpoint_and_goes_at_the_next_commit(tmp_path):
    root = tmp_path / "ckpt"
    _save(root, 3)
    _save(root, 6, keep=None)
    for p in sorted((root / "global_step_3" / "actor").iterdir())[:2]:  # the rmtree killed after two files
        p.unlink()
    found = find_checkpoints(root)
    assert found.complete == [6] and set(found.incomplete) == {3}
    assert resume_point(_ov(root), 6).overrides == _at(root, 6)
    _save(root, 9)
    assert sorted(p.name for p in root.glob("global_step_*")) == ["global_step_9"]


def test_a_torn_file_is_no_checkpoint(tmp_path):
    """``torch.save`` killed mid-write leaves a file that exists: its zip end record is missing."""
    root = tmp_path / "ckpt"
    _save(root, 3)
    shard = root / "global_step_3" / "actor" / f"model_world_size_{WORLD}_rank_0.pt"
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    assert find_checkpoints(root).incomplete == {3: f"cut short: actor/model_world_size_{WORLD}_rank_0.pt"}


def test_a_rewrite_under_a_stale_tracker_is_no_checkpoint(tmp_path):
    """The tracker says 6 and step 6's files are all there, but a later attempt rewrote some of them
    after it (upstream verl: a start-over after the previous checkpoint was deleted before the tracker)."""
    root = tmp_path / "ckpt"
    _save(root, 6)
    _later(root / "global_step_6" / "actor" / "fsdp_config.json")
    _later(root / "global_step_6" / "actor" / f"model_world_size_{WORLD}_rank_0.pt")
    why = find_checkpoints(root).incomplete[6]
    assert why.startswith("written after verl's tracker") and "actor/fsdp_config.json" in why
    assert resume_point(_ov(root), 6).overrides == START_OVER


@pytest.mark.parametrize("text", ["", "16\x00", "sixteen"])
def test_an_unreadable_tracker_leaves_each_checkpoint_judged_by_its_files(tmp_path, text):
    root = tmp_path / "ckpt"
    _save(root, 3, keep=None)
    _save(root, 6, stop_after="optim 1")
    (root / TRACKER).write_text(text)
    point = resume_point(_ov(root), 6)
    assert point.overrides == _at(root, 3)
    assert f"{TRACKER} unreadable" in point.reason
    missing = ", ".join(["data.pt", *(f"actor/extra_state_world_size_{WORLD}_rank_{r}.pt" for r in range(WORLD))])
    assert clear(point) == [
        f"removed global_step_6 (missing {missing})",
        f"verl's tracker {TRACKER} set back to step 3 (it was unreadable)",
    ]
    assert read_tracker(root).step == 3


def test_a_start_over_clears_every_checkpoint_and_the_tracker(tmp_path):
    """The state upstream verl left after a kill between its deletion and its tracker: the tracker at 16,
    step 16's ``data.pt`` and no ``actor/``, step 32 written but never committed. Nothing of it may be
    taken for the new attempt's own rewrite of those steps."""
    root = tmp_path / "ckpt"
    _save(root, 16)
    shutil.rmtree(root / "global_step_16" / "actor")
    _save(root, 32, stop_after="data.pt")
    point = resume_point(_ov(root), 31)
    assert point.overrides == START_OVER
    lines = clear(point)
    assert [line.split(" (")[0] for line in lines] == [
        "removed global_step_16",
        "removed global_step_32",
        f"removed verl's tracker {TRACKER}: no checkpoint it named is complete",
    ]
    assert list(root.iterdir()) == []
    _save(root, 16, stop_after="model 1")  # the new attempt's rewrite, killed
    assert resume_point(_ov(root), 15).overrides == START_OVER


def test_a_resume_clears_what_is_newer_and_sets_the_tracker_back(tmp_path):
    root = tmp_path / "ckpt"
    _save(root, 3, keep=None)
    _save(root, 6, keep=None)  # committed, but the log ends at 5 ...
    _save(root, 6, keep=None)
    point = resume_point(_ov(root), 5)
    assert point.overrides == _at(root, 3)  # ... the newest the log covers
    assert clear(point) == [
        "removed global_step_6 (complete, but not covered by the log)",
        f"verl's tracker {TRACKER} set back to step 3 (it was at step 6)",
    ]
    assert read_tracker(root).step == 3 and find_checkpoints(root).complete == [3]
    assert clear(resume_point(_ov(root), 5)) == []  # nothing left to clear


def test_a_checkpoint_inside_a_cycle_needs_every_snapshot_share(tmp_path):
    root = tmp_path / "ckpt"
    _save(root, 3)
    actor = root / "global_step_3" / "actor"
    before = actor.stat()
    (actor / f"sampler_snapshot_world_size_{WORLD}_rank_1.pt").unlink()
    # a save that never wrote the share: the removal must not also move the folder's time past the
    # tracker's (which reads as a later rewrite; whether it does depends on the clock's tick)
    os.utime(actor, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert find_checkpoints(root).incomplete == {3: f"missing actor/sampler_snapshot_world_size_{WORLD}_rank_1.pt"}
    _save(root, 6, refresh_interval=3)
    (root / "global_step_6" / "actor" / f"sampler_snapshot_world_size_{WORLD}_rank_1.pt").unlink()
    (root / TRACKER).write_text("6")  # written last, as verl does
    # at a refresh (the gate's state: the sampler of step 6) the sampler is fresh: no share needed
    assert find_checkpoints(root).complete == [6]
    _save(root, 4, refresh_interval=1)
    assert resume_point(_ov(root, 1), 4).overrides == _at(root, 4)  # N=1 writes no snapshot


def test_the_resume_point_reads_the_logged_step_from_the_attempts(tmp_path):
    root = tmp_path / "ckpt"
    _save(root, 3)
    _save(root, 6)
    log = tmp_path / "01.jsonl"
    assert resume_point(_ov(root), logged_step([_log(log, 6)])).overrides == _at(root, 6)
    # only 6 is left: one row lost
    assert resume_point(_ov(root), logged_step([_log(log, 5)])).overrides == _at(root, 6)
    assert resume_point([], logged_step([log])).overrides == []
    assert logged_step([]) == 0
