"""The staleness gate's host snapshot: what the sampler was given at its last refresh, kept by the actor
ranks so that the stale sampler can be pushed back (after a fresh-weights validation, and on resume).

Paper, Appendix C: "training samples come from a sampler that is up to N-1 steps old", while
"validation is on fresh weights". vLLM keeps its stale weights through a level-1 sleep, but a
fresh-weights validation overwrites them; the actor ranks therefore keep a copy, and write it with each
checkpoint taken inside a refresh cycle.

- Kept in the sampler's dtype (``rollout.dtype``: what vLLM holds; verl's and vLLM's spellings such as
  ``bf16`` or ``fp16`` are understood, ``auto`` keeps what the push sends and warns, an unknown name
  raises), allocated at the first refresh and overwritten in place at each later one.
- Split between the actor ranks: each tensor is kept by one rank (the least loaded when it is first
  seen, the same choice on every rank), so the ranks hold one copy between them, not one each; pushed
  back with each tensor broadcast by the rank that keeps it.
- Each rank writes its share atomically, next to verl's model shards and before the actor's save (which
  may delete the previous checkpoint); each reads its share back through mmap, into the same buffers.
- Whether a checkpoint needs it is the refresh gate's state saved with it (``stale_at``): a guard or a
  schedule refreshes off the N grid, so ``step mod N`` would demand a snapshot a fresh sampler never
  needed, or skip one a stale sampler does.

The verl patches (0001 pushes through it, 0004 saves and restores it) only call this class. Imports
torch; the share's file name and ``stale_at`` are ``checkpoint_files``'s (the job reads them too,
without torch).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import torch

from coolsampler.worker.checkpoint_files import SNAPSHOT_SHARE, STEP_DIR, stale_at

# verl's habit: a module logger at VERL_LOGGING_LEVEL, printed by the handler verl's import installs
logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "INFO"))

Params = Iterable[tuple[str, torch.Tensor]]


# verl's and vLLM's names of a floating dtype (``rollout.dtype``) -> torch's; "auto" is vLLM's choice from
# the model's config, which the snapshot does not see: it keeps each tensor as the push sends it
DTYPE_NAMES = {
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
    "half": "float16",
    "float32": "float32",
    "fp32": "float32",
    "float": "float32",
    "auto": None,
}


def snapshot_dtype(name: Any) -> torch.dtype | None:
    """The dtype the snapshot keeps floating tensors in for the rollout's ``dtype`` ``name`` (a torch
    dtype passes as it is); None for ``auto`` (kept as pushed, with a warning: it may be twice the
    sampler's size). An unknown name raises: it would otherwise keep fp32 without a word."""
    if isinstance(name, torch.dtype):
        return name
    key = str(name).lower().removeprefix("torch.")
    if key not in DTYPE_NAMES:
        raise ValueError(
            f"rollout.dtype={name!r}: unknown to the staleness gate's snapshot; allowed: {', '.join(DTYPE_NAMES)}"
        )
    if DTYPE_NAMES[key] is None:
        logger.warning(
            "staleness gate: rollout.dtype=auto, so the host snapshot keeps each tensor in the dtype the push sends, "
            "which may be wider than the sampler's; set actor_rollout_ref.rollout.dtype to the sampler's dtype"
        )
        return None
    return getattr(torch, DTYPE_NAMES[key])


def process_group() -> tuple[int, int]:
    """(this rank, number of actor ranks): the snapshot is split between the actor ranks."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


class SamplerSnapshot:
    """One actor rank's part of the stale sampler (module docstring). ``dtype``: the rollout's dtype name
    (floating tensors are kept in it; others as they are); ``device``: where a push sends tensors."""

    def __init__(self, dtype: str, device: str, *, rank: int | None = None, world: int | None = None) -> None:
        self.dtype = snapshot_dtype(dtype)
        self.device = device
        group = process_group()
        self.rank = group[0] if rank is None else rank
        self.world = group[1] if world is None else world
        self.tensors: dict[str, torch.Tensor] = {}  # the tensors this rank keeps, on the host
        self.layout: dict[str, tuple[int, tuple[int, ...], torch.dtype]] = {}  # name -> (owner, shape, dtype)

    @property
    def empty(self) -> bool:
        """Nothing given yet (no refresh pushed through it, no checkpoint read)."""
        return not self.layout

    def through(self, params: Params, step: int | None = None) -> Iterator[tuple[str, torch.Tensor]]:
        """The push of a refresh: every rank sees every full tensor and passes it on as the snapshot
        holds it (the same rounding as its copy), keeping those it owns."""
        load = [0] * self.world
        for owner, shape, dt in self.layout.values():
            load[owner] += torch.Size(shape).numel() * dt.itemsize
        for name, t in params:
            keep = self.dtype if self.dtype is not None and t.is_floating_point() else t.dtype
            if name not in self.layout:
                owner = min(range(self.world), key=lambda r: (load[r], r))
                load[owner] += t.numel() * keep.itemsize
                self.layout[name] = (owner, tuple(t.shape), keep)
                if owner == self.rank:
                    self.tensors[name] = torch.empty(t.shape, dtype=keep, device="cpu")
            if name in self.tensors:
                self.tensors[name].copy_(t)
            yield name, t.to(keep)
        if step is not None:  # the driver decided this refresh once; every rank says it acted on it
            logger.info("staleness gate: rank %d pushed the weights of step %d", self.rank, step)

    def replay(self) -> Iterator[tuple[str, torch.Tensor]]:
        """The stale sampler's weights for a push, in the first refresh's order: each tensor broadcast by
        the rank that keeps it."""
        if self.empty:
            raise RuntimeError("staleness gate: no sampler snapshot to restore (checkpoint saved without one?)")
        for name, (owner, shape, dt) in self.layout.items():
            if owner == self.rank:
                t = self.tensors[name].to(self.device)
            else:
                t = torch.empty(shape, dtype=dt, device=self.device)
            if self.world > 1:
                torch.distributed.broadcast(t, src=owner)
            yield name, t

    def share(self, actor_dir: str | Path, rank: int | None = None) -> str:
        """The file of one rank's share in a checkpoint's actor directory."""
        name = SNAPSHOT_SHARE.format(world=self.world, rank=self.rank if rank is None else rank)
        return os.path.join(actor_dir, name)

    def save(self, actor_dir: str | Path) -> None:
        """This rank's share, written atomically (temporary file, then rename); a no-op before any refresh."""
        if self.empty:
            return
        os.makedirs(actor_dir, exist_ok=True)
        path = self.share(actor_dir)
        layout = {n: (o, list(s), str(d).removeprefix("torch.")) for n, (o, s, d) in self.layout.items()}
        torch.save({"layout": layout, "tensors": self.tensors}, path + ".tmp")
        os.replace(path + ".tmp", path)

    def needed(self, actor_dir: str | Path) -> str | None:
        """This rank's share where the checkpoint has every rank's; None where it has none and needs none.
        A checkpoint taken inside a refresh cycle (``stale_at``) without every share raises, on every
        rank alike, before any collective of the load."""
        paths = [self.share(actor_dir, r) for r in range(self.world)]
        missing = [p for p in paths if not os.path.exists(p)]
        if not missing:
            return paths[self.rank]
        step = STEP_DIR.search(str(actor_dir))
        if step and stale_at(Path(actor_dir).parent, int(step[1])):
            raise FileNotFoundError(
                f"staleness gate: resuming at step {step[1]} needs the stale sampler (the refresh gate's state "
                f"says it was stale there); missing: {', '.join(missing)}"
            )
        return None

    def restore(self, path: str) -> None:
        """Read this rank's share (file-backed) into the host snapshot's buffers, with the layout."""
        saved = torch.load(path, weights_only=True, mmap=True)
        self.layout = {n: (o, tuple(s), getattr(torch, d)) for n, (o, s, d) in saved["layout"].items()}
        for name, t in saved["tensors"].items():
            self.tensors.setdefault(name, torch.empty_like(t, device="cpu")).copy_(t)
        logger.info("staleness gate: rank %d restored the stale sampler from %s", self.rank, path)


__all__ = ["DTYPE_NAMES", "SamplerSnapshot", "process_group", "snapshot_dtype"]
