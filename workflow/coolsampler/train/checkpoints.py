"""Which of a run's checkpoints a new attempt may resume from: only a complete one.

verl 0.9.1 writes a checkpoint of step k in this order (``trainer_base._save_checkpoint``): the staleness
gate's snapshot shares (patch 0004), then every rank's model, optimiser and extra-state shard with
``fsdp_config.json`` (the actor's save; with ``max_actor_ckpt_to_keep=1`` its end deletes the previous
checkpoint's ``actor/``), then ``data.pt`` (the dataloader), ``sampler_t.pt`` (the temperature
controller, patch 0003b), and last the tracker ``latest_checkpointed_iteration.txt``. A job killed
anywhere in between leaves a directory that looks like a checkpoint and is not one: rank 0's first write
creates ``global_step_k/actor/`` before any shard exists, and the deletion of the previous ``actor/`` can
be cut short. Resuming from such a directory fails in FSDP's load on every later attempt, so nothing here
trusts a directory's existence: a checkpoint counts once the tracker has reached its step and every file
of it is there (``incomplete`` says what is missing). This module never imports verl.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

TRACKER = "latest_checkpointed_iteration.txt"  # verl writes it last, after data.pt
SHARD_KINDS = ("model", "optim", "extra_state")  # verl's FSDP checkpoint contents (save_contents default)
SNAPSHOT_SHARE = "sampler_snapshot_world_size_{world}_rank_{rank}.pt"  # patch 0004


@dataclass(frozen=True)
class Found:
    """The checkpoint directories under a run's ``trainer.default_local_dir``: complete ones by step, and
    for every other ``global_step_k`` what it lacks."""

    complete: list[int]
    incomplete: dict[int, str]


def _tracker(root: Path) -> int | None:
    try:
        return int((root / TRACKER).read_text().strip())
    except (OSError, ValueError):
        return None


def incomplete(step_dir: Path, step: int, tracker: int | None, refresh_interval: int = 1) -> str | None:
    """Why ``step_dir`` is not a checkpoint to resume from, or None if it is complete."""
    if tracker is None or tracker < step:
        return f"verl's tracker {TRACKER} has not reached step {step} (its last write)"
    if not (step_dir / "data.pt").is_file():
        return "no data.pt"
    actor = step_dir / "actor"
    try:
        world = int(json.loads((actor / "fsdp_config.json").read_text())["world_size"])
    except (OSError, ValueError, KeyError, TypeError):
        return "no readable actor/fsdp_config.json"
    missing = [
        f"{kind}_world_size_{world}_rank_{r}.pt"
        for kind in SHARD_KINDS
        for r in range(world)
        if not (actor / f"{kind}_world_size_{world}_rank_{r}.pt").is_file()
    ]
    if refresh_interval > 1 and step % refresh_interval:  # inside a cycle: the stale sampler is part of it
        missing += [
            name for r in range(world) if not (actor / (name := SNAPSHOT_SHARE.format(world=world, rank=r))).is_file()
        ]
    return f"missing actor/{', actor/'.join(missing)}" if missing else None


def find_checkpoints(root: Path, refresh_interval: int = 1) -> Found:
    """Every ``global_step_k`` under ``root``, complete or not (with the reason)."""
    tracker = _tracker(root)
    complete, broken = [], {}
    for p in root.iterdir() if root.is_dir() else ():
        m = re.fullmatch(r"global_step_(\d+)", p.name)
        if not m or not p.is_dir():
            continue
        k = int(m.group(1))
        why = incomplete(p, k, tracker, refresh_interval)
        if why is None:
            complete.append(k)
        else:
            broken[k] = why
    return Found(sorted(complete), dict(sorted(broken.items())))


def _override(overrides: list[str], key: str) -> str | None:
    return next((o.split("=", 1)[1] for o in overrides if o.lstrip("+").startswith(key + "=")), None)


@dataclass(frozen=True)
class ResumePoint:
    """What a new attempt does: ``overrides`` for verl, and one line saying why (for the job's log)."""

    overrides: list[str]
    reason: str


def resume_point(overrides: list[str], logged: int) -> ResumePoint:
    """Where a new attempt starts, given the last step the earlier attempts logged.

    The newest complete checkpoint at or before ``logged``: verl saves the checkpoint of step k before it
    logs step k, so a checkpoint the log does not cover would leave a step missing from the log. Where
    there is none (one checkpoint is kept), the oldest complete newer one loses least: one metrics row,
    which the parser reports, where starting over would lose the whole run. With no complete checkpoint
    the attempt starts over, explicitly (``resume_mode=disable``), so that verl's own auto-resume, which
    trusts the tracker alone, cannot pick a half-deleted one."""
    root = _override(overrides, "trainer.default_local_dir")
    if root is None:
        return ResumePoint([], "no checkpoint directory")
    n = int(_override(overrides, "trainer.refresh_interval") or 1)
    found = find_checkpoints(Path(root), n)
    skipped = "; ".join(f"global_step_{k}: {why}" for k, why in found.incomplete.items())
    usable = [k for k in found.complete if k <= logged]
    later = [k for k in found.complete if k > logged]
    pick = usable[-1] if usable else (later[0] if later else None)
    if pick is None:
        if not Path(root).is_dir():
            return ResumePoint([], "no checkpoint yet: starting from step 0")
        why = f" ({skipped})" if skipped else ""
        return ResumePoint(["trainer.resume_mode=disable"], f"no complete checkpoint: starting from step 0{why}")
    note = f" (not complete: {skipped})" if skipped else ""
    return ResumePoint(
        ["trainer.resume_mode=resume_path", f"trainer.resume_from_path={root}/global_step_{pick}"],
        f"resuming from the complete checkpoint of step {pick}{note}",
    )
