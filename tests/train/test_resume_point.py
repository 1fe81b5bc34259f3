"""Where a retried or resumed attempt restarts: the newest complete checkpoint whose step the log covers,
never a directory a killed save or a cut-short deletion left behind (coolsampler.train.checkpoints).

The checkpoints here are laid out file by file in the order verl 0.9.1 writes them, and each test stops
that order where a kill would."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from coolsampler.train.checkpoints import find_checkpoints, resume_point
from coolsampler.train.launch import resume_overrides

WORLD = 2


def _log(path: Path, last: int) -> Path:
    lines = (json.dumps({"step": t, "data": {"training/global_step": t}}) for t in range(1, last + 1))
    path.write_text("".join(line + "\n" for line in lines))
    return path


def _save(root: Path, step: int, stop_after: str | None = None, refresh_interval: int = 4) -> None:
    """verl's save of ``step``, in its order, stopped after the named stage (None: all of it)."""
    actor = root / f"global_step_{step}" / "actor"
    stages = [
        ("mkdir", lambda: actor.mkdir(parents=True, exist_ok=True)),
        *[
            (
                f"snapshot {r}",
                lambda r=r: (actor / f"sampler_snapshot_world_size_{WORLD}_rank_{r}.pt").write_bytes(b"s"),
            )
            for r in range(WORLD)
            if refresh_interval > 1
        ],
        *[
            (f"{kind} {r}", lambda k=kind, r=r: (actor / f"{k}_world_size_{WORLD}_rank_{r}.pt").write_bytes(b"x"))
            for kind in ("model", "optim", "extra_state")
            for r in range(WORLD)
        ],
        ("fsdp_config", lambda: (actor / "fsdp_config.json").write_text(json.dumps({"world_size": WORLD}))),
        ("data.pt", lambda: (actor.parent / "data.pt").write_bytes(b"d")),
        ("tracker", lambda: (root / "latest_checkpointed_iteration.txt").write_text(str(step))),
    ]
    for name, do in stages:
        do()
        if name == stop_after:
            return


def _delete_previous(root: Path, step: int, files: int | None = None) -> None:
    """verl's retention removing ``global_step_<step>/actor`` (``files``: cut short after that many)."""
    actor = root / f"global_step_{step}" / "actor"
    if files is None:
        shutil.rmtree(actor)
        return
    for p in sorted(actor.iterdir())[:files]:
        p.unlink()


def _ov(root: Path, n: int = 4) -> list[str]:
    return [f"trainer.default_local_dir={root}", f"+trainer.refresh_interval={n}"]


def _at(root: Path, step: int) -> list[str]:
    return ["trainer.resume_mode=resume_path", f"trainer.resume_from_path={root}/global_step_{step}"]


START_OVER = ["trainer.resume_mode=disable"]


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


@pytest.mark.parametrize("stop", ["mkdir", "snapshot 1", "optim 0", "fsdp_config"])
def test_killed_during_a_later_save_it_resumes_from_the_previous_one(tmp_path, stop):
    root = tmp_path / "ckpt"
    _save(root, 3)
    _save(root, 6, stop_after=stop)
    point = resume_point(_ov(root), 5)
    assert point.overrides == _at(root, 3)
    assert "not complete: global_step_6" in point.reason


def test_a_deletion_cut_short_is_no_resume_point(tmp_path):
    """The new save is whole, the previous one half-deleted, and neither data.pt nor the tracker of the
    new one written yet: no checkpoint is complete, so the attempt starts over (verl's auto-resume would
    trust the tracker and load the half-deleted one)."""
    root = tmp_path / "ckpt"
    _save(root, 3)
    _save(root, 6, stop_after="fsdp_config")
    _delete_previous(root, 3, files=2)
    found = find_checkpoints(root, 4)
    assert found.complete == [] and set(found.incomplete) == {3, 6}
    assert resume_point(_ov(root), 5).overrides == START_OVER


def test_after_a_later_save_the_newest_covered_one(tmp_path):
    root = tmp_path / "ckpt"
    _save(root, 3)
    _save(root, 6)
    _delete_previous(root, 3)  # what retention leaves of step 3: its data.pt
    assert resume_point(_ov(root), 6).overrides == _at(root, 6)
    assert resume_point(_ov(root), 7).overrides == _at(root, 6)


def test_a_checkpoint_inside_a_cycle_needs_every_snapshot_share(tmp_path):
    root = tmp_path / "ckpt"
    _save(root, 3)
    (root / "global_step_3" / "actor" / f"sampler_snapshot_world_size_{WORLD}_rank_1.pt").unlink()
    assert find_checkpoints(root, 4).incomplete == {3: f"missing actor/sampler_snapshot_world_size_{WORLD}_rank_1.pt"}
    assert find_checkpoints(root, 3).complete == [3]  # at a refresh (3 % 3 == 0) the sampler is fresh: not needed
    _save(root, 4, refresh_interval=1)
    assert resume_point(_ov(root, 1), 4).overrides == _at(root, 4)  # N=1 writes no snapshot


def test_resume_overrides_reads_the_logged_step_from_the_attempts(tmp_path):
    root = tmp_path / "ckpt"
    _save(root, 3)
    _save(root, 6)
    _delete_previous(root, 3)
    log = tmp_path / "01.jsonl"
    assert resume_overrides(_ov(root), [_log(log, 6)]) == _at(root, 6)
    assert resume_overrides(_ov(root), [_log(log, 5)]) == _at(root, 6)  # only 6 is left: one row lost
    assert resume_overrides([], [log]) == []
