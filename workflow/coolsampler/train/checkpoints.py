"""Where a new attempt of a run starts: only from a complete checkpoint, with nothing left beside it
that a later attempt could mistake for its own.

What makes a checkpoint complete, and how verl writes one, is ``coolsampler.worker.checkpoint_files``
(verl's driver commits each checkpoint through it, patch 0006). Here, before verl starts, the job picks
the checkpoint to resume from (``resume_point``) and clears the ground (``clear``): every directory newer
than that checkpoint (a save cut short, or one the log does not cover) is removed, and verl's tracker is
set back to it, so that the new attempt rewrites those steps under a tracker that does not vouch for
them; a start-over removes every checkpoint and the tracker. This module never imports verl.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from coolsampler.worker.checkpoint_files import TRACKER, incomplete, read_tracker, step_dirs, write_tracker


@dataclass(frozen=True)
class Found:
    """The checkpoint directories under a run's ``trainer.default_local_dir``: complete ones by step, and
    for every other ``global_step_k`` what it lacks."""

    complete: list[int]
    incomplete: dict[int, str]
    tracker_garbled: bool = False


def find_checkpoints(root: Path) -> Found:
    """Every ``global_step_k`` under ``root``, complete or not (with the reason)."""
    tracker = read_tracker(root)
    complete, broken = [], {}
    for k, p in step_dirs(root).items():
        why = incomplete(p, k, tracker)
        if why is None:
            complete.append(k)
        else:
            broken[k] = why
    return Found(complete, broken, tracker.garbled)


def _override(overrides: list[str], key: str) -> str | None:
    return next((o.split("=", 1)[1] for o in overrides if o.lstrip("+").startswith(key + "=")), None)


@dataclass(frozen=True)
class ResumePoint:
    """What a new attempt does: ``overrides`` for verl, one line saying why (for the job's log), and the
    checkpoint directory with the step it resumes from (None: from step 0)."""

    overrides: list[str]
    reason: str
    root: Path | None = None
    step: int | None = None
    incomplete: dict[int, str] = field(default_factory=dict)


def resume_point(overrides: list[str], logged: int) -> ResumePoint:
    """Where a new attempt starts, given the last step the earlier attempts logged.

    The newest complete checkpoint at or before ``logged``: verl saves the checkpoint of step k before it
    logs step k, so a checkpoint the log does not cover would leave a step missing from the log. Where
    there is none, the oldest complete newer one loses least: one metrics row, which the parser reports,
    where starting over would lose the whole run. With no complete checkpoint the attempt starts over,
    explicitly (``resume_mode=disable``), so that verl's own auto-resume, which trusts the tracker alone,
    cannot pick a half-written one."""
    root = _override(overrides, "trainer.default_local_dir")
    if root is None:
        return ResumePoint([], "no checkpoint directory")
    found = find_checkpoints(Path(root))
    skipped = "; ".join(f"global_step_{k}: {why}" for k, why in found.incomplete.items())
    if found.tracker_garbled:
        skipped = f"{TRACKER} unreadable, checkpoints judged by their files" + (f"; {skipped}" if skipped else "")
    usable = [k for k in found.complete if k <= logged]
    later = [k for k in found.complete if k > logged]
    pick = usable[-1] if usable else (later[0] if later else None)
    if pick is None:
        if not Path(root).is_dir():
            return ResumePoint([], "no checkpoint yet: starting from step 0")
        why = f" ({skipped})" if skipped else ""
        return ResumePoint(
            ["trainer.resume_mode=disable"],
            f"no complete checkpoint: starting from step 0{why}",
            Path(root),
            None,
            found.incomplete,
        )
    note = f" (not complete: {skipped})" if skipped else ""
    return ResumePoint(
        ["trainer.resume_mode=resume_path", f"trainer.resume_from_path={root}/global_step_{pick}"],
        f"resuming from the complete checkpoint of step {pick}{note}",
        Path(root),
        pick,
        found.incomplete,
    )


def clear(point: ResumePoint) -> list[str]:
    """Remove what the attempt starting at ``point`` will not resume from and could later mistake for
    its own: every checkpoint newer than its resume point (all of them on a start-over), and a tracker
    that does not name that point, which is set back to it (removed on a start-over). One line per
    removal, for the job's log.

    Why: the new attempt rewrites those steps file by file (rank 0's ``fsdp_config.json`` first, each
    ``torch.save`` creating its file when it starts), and a tracker that had already reached them would
    vouch for the rewrite while it is cut short. The older checkpoints stay until the next commit
    retires them (``checkpoint_files.retire``): a complete one always survives until a newer one counts.
    """
    if point.root is None or not point.root.is_dir():
        return []
    lines = []
    for k, p in step_dirs(point.root).items():
        if point.step is None or k > point.step:
            why = point.incomplete.get(k, "complete, but not covered by the log")
            shutil.rmtree(p)
            lines.append(f"removed {p.name} ({why})")
    tracker = read_tracker(point.root)
    if point.step is None:
        if (point.root / TRACKER).exists():
            (point.root / TRACKER).unlink()
            lines.append(f"removed verl's tracker {TRACKER}: no checkpoint it named is complete")
    elif tracker.step != point.step:
        write_tracker(point.root, point.step)
        was = "unreadable" if tracker.garbled else f"at step {tracker.step}"
        lines.append(f"verl's tracker {TRACKER} set back to step {point.step} (it was {was})")
    return lines
