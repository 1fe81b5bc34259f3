"""A run's checkpoints on disk, as verl 0.9.1 lays them out, and the commit that makes a new one count.

verl writes the checkpoint of step k in this order (``trainer_base._save_checkpoint``): the refresh
gate's state ``refresh_gate.json`` and the staleness gate's snapshot shares (patch 0004), every rank's
model, optimiser and extra-state shard with ``fsdp_config.json``, then ``data.pt`` (the dataloader),
``sampler_t.pt`` (the temperature controller, patch 0003b), and last the tracker
``latest_checkpointed_iteration.txt``. Upstream, the end of the actor's save also deletes the previous
checkpoint's ``actor/`` (``max_actor_ckpt_to_keep``), before the new step's ``data.pt`` and tracker
exist, and writes the tracker with a plain ``open("w")``: a kill in between leaves no checkpoint at
all, and a crash can leave an empty tracker, or one that names shards the disk never got. Patch 0006
hands that last stage to :func:`commit`: the new checkpoint's files are flushed to disk, the tracker is
replaced atomically, and only then are older checkpoints retired (:func:`retire`), read from the disk,
so that the one a resumed attempt started from goes too.

Nothing here trusts a directory's existence, or a file's: a checkpoint counts once the tracker has
reached its step, every file of it is there and whole (a ``torch.save`` file is a zip archive, whole
once its end record is written), and none was written after the tracker (a later attempt rewriting it
under a stale tracker). Which shard files "every file" means is the run's: verl's FSDP checkpoint manager
writes one per rank for each of ``checkpoint.save_contents`` (``shard_kinds``); other backends
(Megatron's distributed checkpoints) are not known here, so a run on one that would retire checkpoints
is refused before it starts (``check_backend``, patch 0006). The refresh gate's state is optional: a
checkpoint without it was written without the gate, on fresh weights (``stale_at``). Runs in verl's
driver (the commit) and in the job (``coolsampler.train.checkpoints``, where a new attempt starts);
standard library only.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from coolsampler.worker.refresh import GATE_FILE

TRACKER = "latest_checkpointed_iteration.txt"  # verl writes it last, after data.pt
# verl's checkpoint.save_contents -> the per-rank shard file its FSDP checkpoint manager writes (None: none)
SAVE_CONTENTS = {"model": "model", "optimizer": "optim", "extra": "extra_state", "hf_model": None}
SHARD_KINDS = ("model", "optim", "extra_state")  # verl's FSDP checkpoint contents (save_contents default)
FSDP_STRATEGIES = ("fsdp", "fsdp2")  # actor strategies whose checkpoints are verl's FSDP ones
SNAPSHOT_SHARE = "sampler_snapshot_world_size_{world}_rank_{rank}.pt"  # coolsampler.worker.snapshot writes it
STEP_DIR = re.compile(r"global_step_(\d+)")
# verl's habit: a module logger at VERL_LOGGING_LEVEL, printed by the handler verl's import installs
logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "INFO"))
_ZIP_END = b"PK\x05\x06"  # a zip archive's end-of-central-directory record, written last
_ZIP_TAIL = 22 + 65535  # that record and the longest comment it may carry


@dataclass(frozen=True)
class Tracker:
    """verl's tracker as the disk holds it: ``step`` is None when it is absent (nothing was ever
    committed) or unreadable (``garbled``: then each checkpoint is judged by its files alone)."""

    step: int | None
    mtime_ns: int | None
    garbled: bool = False


def read_tracker(root: Path) -> Tracker:
    path = Path(root) / TRACKER
    try:
        text, mtime = path.read_text(), path.stat().st_mtime_ns
    except OSError:
        return Tracker(None, None)
    try:
        return Tracker(int(text.strip()), mtime)
    except ValueError:
        return Tracker(None, mtime, garbled=True)


def step_dirs(root: Path) -> dict[int, Path]:
    """Every ``global_step_k`` directory under ``root``, by step."""
    out = {}
    for p in Path(root).iterdir() if Path(root).is_dir() else ():
        m = STEP_DIR.fullmatch(p.name)
        if m and p.is_dir():
            out[int(m.group(1))] = p
    return dict(sorted(out.items()))


def _whole_zip(path: Path) -> bool:
    """A ``torch.save`` file whose write finished: its zip end record is in its tail."""
    try:
        with path.open("rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - _ZIP_TAIL))
            return _ZIP_END in f.read()
    except OSError:
        return False


def stale_at(step_dir: str | Path, step: int) -> bool:
    """Whether the sampler was stale at the checkpoint of ``step``, so that the checkpoint must hold its
    snapshot: the refresh gate's state saved with it says so (a guard or a schedule refreshes off the N
    grid: the sampler's version, not ``step mod N``, decides). A checkpoint without that state was written
    by a trainer without the gate (upstream verl, another trainer mode), on fresh weights: not stale (a run
    whose gate is active refuses to resume from it: ``coolsampler.worker.refresh.restore``). An unreadable
    state demands the snapshot. The one rule for the job's completeness check (``incomplete``) and the
    worker's resume (``coolsampler.worker.snapshot``)."""
    path = Path(step_dir) / GATE_FILE
    if not path.exists():
        return False
    try:
        return int(json.loads(path.read_text())["state"]["sampler_version"]) != step
    except (OSError, ValueError, KeyError, TypeError):
        return True


def shard_kinds(save_contents: Sequence[str] | None = None) -> tuple[str, ...]:
    """The per-rank shard files an FSDP checkpoint of verl's ``checkpoint.save_contents`` holds (None:
    verl's default, model, optimizer and extra): the completeness rule of a checkpoint saved with them."""
    contents = ("model", "optimizer", "extra") if save_contents is None else tuple(save_contents)
    unknown = sorted(set(contents) - set(SAVE_CONTENTS))
    if unknown:
        raise ValueError(f"checkpoint.save_contents: {unknown[0]!r} is not valid; allowed: {', '.join(SAVE_CONTENTS)}")
    return tuple(SAVE_CONTENTS[c] for c in SAVE_CONTENTS if c in contents and SAVE_CONTENTS[c])


def check_backend(strategy: str, keep: int | None, save_freq: int | None = None) -> None:
    """Refuse, in one line and before anything starts, a run whose older checkpoints the lifecycle would
    have to judge without knowing their files: only verl's FSDP checkpoints are known (``shard_kinds``).
    A run that keeps every checkpoint (``keep`` None or < 1) or saves none retires nothing."""
    if not keep or keep < 1 or (save_freq is not None and save_freq <= 0) or strategy in FSDP_STRATEGIES:
        return
    raise ValueError(
        f"trainer.max_actor_ckpt_to_keep={keep} with actor strategy {strategy}: coolsampler's checkpoint lifecycle "
        f"retires only FSDP checkpoints ({', '.join(FSDP_STRATEGIES)}); set trainer.max_actor_ckpt_to_keep=null"
    )


def incomplete(step_dir: Path, step: int, tracker: Tracker, kinds: Sequence[str] = SHARD_KINDS) -> str | None:
    """Why ``step_dir`` is not a checkpoint to resume from, or None if it is complete. ``kinds``: the
    shard files the run's ``save_contents`` writes (``shard_kinds``; default: verl's default contents)."""
    if not tracker.garbled and (tracker.step is None or tracker.step < step):
        return f"verl's tracker {TRACKER} has not reached step {step} (its last write)"
    actor = step_dir / "actor"
    try:
        world = int(json.loads((actor / "fsdp_config.json").read_text())["world_size"])
    except (OSError, ValueError, KeyError, TypeError):
        return "no readable actor/fsdp_config.json"
    gate = step_dir / GATE_FILE
    try:
        if gate.exists():
            json.loads(gate.read_text())["state"]["sampler_version"]
    except (OSError, ValueError, KeyError, TypeError):
        return f"unreadable {GATE_FILE} (the refresh gate's state)"
    names = ["data.pt", *(f"actor/{k}_world_size_{world}_rank_{r}.pt" for k in kinds for r in range(world))]
    if stale_at(step_dir, step):  # the stale sampler is part of the checkpoint
        names += [f"actor/{SNAPSHOT_SHARE.format(world=world, rank=r)}" for r in range(world)]
    missing = [n for n in names if not (step_dir / n).is_file()]
    if missing:
        return f"missing {', '.join(missing)}"
    torn = [n for n in names if not _whole_zip(step_dir / n)]
    if torn:
        return f"cut short: {', '.join(torn)}"
    if tracker.mtime_ns is not None and not tracker.garbled:
        newer = [str(p.relative_to(step_dir)) for p in step_dir.rglob("*") if p.stat().st_mtime_ns > tracker.mtime_ns]
        if newer:
            return f"written after verl's tracker (a later attempt's save, cut short): {', '.join(sorted(newer))}"
    return None


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_tracker(root: Path, step: int) -> None:
    """The tracker, atomically: a temporary file, flushed, renamed over the old one, the rename flushed."""
    root = Path(root)
    tmp = root / f"{TRACKER}.tmp"
    with tmp.open("w") as f:
        f.write(str(step))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, root / TRACKER)
    _fsync(root)


def retire(root: Path, step: int, keep: int | None, kinds: Sequence[str] = SHARD_KINDS) -> list[Path]:
    """Remove the checkpoints older than ``step`` beyond verl's ``keep`` count (None or < 1: keep all),
    counting only complete ones (by ``kinds``, the run's shard files) as kept; the directories removed,
    oldest first. One whose removal fails is logged as failed, with the error, and not listed.

    Read from the disk, not from verl's in-process list (which starts empty in every attempt): the
    checkpoint a resumed attempt started from, and whatever an earlier attempt left cut short, go too.
    """
    if not keep or keep < 1:
        return []
    tracker = read_tracker(root)
    older = {k: p for k, p in step_dirs(root).items() if k < step}
    complete = [k for k, p in older.items() if incomplete(p, k, tracker, kinds) is None]
    kept = set(complete[len(complete) - (keep - 1) :] if keep > 1 else [])
    gone = []
    for k, p in older.items():
        if k in kept:
            continue
        try:
            shutil.rmtree(p)
        except OSError as err:
            logger.warning("checkpoint lifecycle: step %d committed; FAILED to remove %s: %s", step, p, err)
        else:
            gone.append(p)
    return gone


def commit(
    root: str | os.PathLike, step: int, keep: int | None, save_contents: Sequence[str] | None = None
) -> list[Path]:
    """What makes the checkpoint of ``step`` count (patch 0006 calls it where verl wrote its tracker):
    its files on disk, then the tracker, then the older checkpoints retired by the rule of the run's
    ``save_contents`` (``shard_kinds``); the directories removed."""
    root = Path(root)
    step_dir = root / f"global_step_{step}"
    for dirpath, _, files in os.walk(step_dir):
        for name in files:
            _fsync(Path(dirpath) / name)
        _fsync(Path(dirpath))
    write_tracker(root, step)
    gone = retire(root, step, keep, shard_kinds(save_contents))
    for p in gone:
        logger.info("checkpoint lifecycle: step %d committed; removed %s", step, p)
    return gone


__all__ = [
    "FSDP_STRATEGIES",
    "SAVE_CONTENTS",
    "SHARD_KINDS",
    "check_backend",
    "shard_kinds",
    "SNAPSHOT_SHARE",
    "stale_at",
    "TRACKER",
    "Tracker",
    "commit",
    "incomplete",
    "read_tracker",
    "retire",
    "step_dirs",
    "write_tracker",
]
