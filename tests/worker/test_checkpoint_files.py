"""The checkpoint lifecycle's rules as verl driven directly meets them (coolsampler.worker.checkpoint_files):
a checkpoint is complete by the files its own backend and ``save_contents`` write, one without the refresh
gate's state (a trainer without the gate wrote it) is complete and not stale, a backend whose files the
lifecycle does not know is refused before anything starts, and a removal that fails is reported as failed."""

from __future__ import annotations

import json
import logging
import shutil
import zipfile
from pathlib import Path

import pytest

from coolsampler.worker import checkpoint_files
from coolsampler.worker.checkpoint_files import check_backend, commit, incomplete, read_tracker, shard_kinds, stale_at

WORLD = 2


def _pt(path: Path) -> None:
    """A file as ``torch.save`` leaves it: a zip archive, its end record written last."""
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", b"x" * 64)


def _save(root: Path, step: int, kinds: tuple[str, ...], keep: int | None, contents: list[str] | None) -> list[Path]:
    """An FSDP checkpoint of ``step`` with the shard ``kinds`` of its save_contents and no refresh gate's state
    (as the colocate_async trainer, or upstream verl, writes one), then the commit of patch 0006."""
    actor = root / f"global_step_{step}" / "actor"
    actor.mkdir(parents=True)
    (actor / "fsdp_config.json").write_text(json.dumps({"world_size": WORLD}))
    for kind in kinds:
        for r in range(WORLD):
            _pt(actor / f"{kind}_world_size_{WORLD}_rank_{r}.pt")
    _pt(actor.parent / "data.pt")
    return commit(root, step, keep, contents)


def test_a_reduced_save_contents_keeps_its_complete_checkpoints(tmp_path):
    """save_contents [model]: no optimiser or extra-state shards. Judged by FSDP's full set, every older
    checkpoint would be incomplete and removed whatever max_actor_ckpt_to_keep says."""
    assert shard_kinds(["model"]) == ("model",) and shard_kinds(None) == checkpoint_files.SHARD_KINDS
    for step in (1, 2, 3):
        _save(tmp_path, step, ("model",), keep=2, contents=["model"])
    assert sorted(p.name for p in tmp_path.glob("global_step_*")) == ["global_step_2", "global_step_3"]


def test_a_checkpoint_without_the_gates_state_is_complete_and_fresh(tmp_path):
    """A trainer without the gate (another v1 mode, upstream verl) writes no refresh_gate.json: its
    checkpoints count (retire keeps them), and its sampler was fresh (no snapshot needed on resume)."""
    for step in (1, 2):
        _save(tmp_path, step, checkpoint_files.SHARD_KINDS, keep=2, contents=None)
    assert incomplete(tmp_path / "global_step_1", 1, read_tracker(tmp_path)) is None
    assert (tmp_path / "global_step_1").is_dir()
    assert stale_at(tmp_path / "global_step_1", 1) is False


def test_a_backend_whose_files_the_lifecycle_does_not_know_is_refused_in_one_line():
    with pytest.raises(ValueError, match=r"^trainer\.max_actor_ckpt_to_keep=2 with actor strategy megatron: [^\n]*$"):
        check_backend("megatron", 2)
    check_backend("megatron", None)  # keeps everything: nothing to judge
    check_backend("megatron", 2, save_freq=-1)  # saves nothing
    check_backend("fsdp2", 2)
    with pytest.raises(ValueError, match="save_contents"):
        shard_kinds(["model", "weights"])


def test_a_removal_that_fails_is_reported_as_failed(tmp_path, monkeypatch, caplog):
    _save(tmp_path, 1, checkpoint_files.SHARD_KINDS, keep=None, contents=None)

    def refuse(path, *args, **kwargs):
        if kwargs.get("ignore_errors"):
            return None  # what rmtree(ignore_errors=True) does with a failure: nothing, silently
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(shutil, "rmtree", refuse)
    with caplog.at_level(logging.INFO, logger=checkpoint_files.__name__):
        gone = _save(tmp_path, 2, checkpoint_files.SHARD_KINDS, keep=1, contents=None)  # step 1 is to go
    assert gone == [] and (tmp_path / "global_step_1").is_dir()
    assert "FAILED to remove" in caplog.text and "removed" not in caplog.text.replace("FAILED to remove", "")
