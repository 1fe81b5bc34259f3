"""The staleness gate's decision in verl's trainer: the glue between patch 0001/0004 and ``spec.guard``.

Patch 0001's sync trainer asks this module, once per learner step and in the driver (verl's trainer
process), whether the sampler gets the learner's weights at the end of the step; patch 0004 asks it,
on resume, what the sampler held at the checkpoint. The decision itself is
``coolsampler.spec.guard.RefreshGate`` (pure, replayable): here it is built from verl's config, fed
the step's signal from verl's metrics, logged, saved with the checkpoint and restored.

* **Config** (``coolsampler.worker.trainer_keys``): ``trainer.refresh_interval`` = N (the longest
  interval), ``trainer.refresh_guard`` (a run's ``guard:`` block, or null) and ``trainer.refresh_schedule``
  (a schedule's steps, or null). Without the last two the gate refreshes after every N-th step, as
  patch 0001 always did.
* **When**: right after verl's ``step`` has computed and reduced the step's metrics, before the step's
  checkpoint is saved. The signal of step t is then the learner's log-probs against the batch the stale
  sampler drew for step t (verl's ``rollout_corr/*``, ``training/rollout_probs_diff_*``, or the μ-GRPO
  loss's ``actor/rollout_corr/*``, averaged over the ranks by the driver). The decision is made once,
  in the driver, and every rank acts on it (the push is one call to all of them): the ranks cannot
  disagree. Made before the save, it is part of the checkpoint: a run killed between a firing and its
  push resumes at that step, reads the decision back (``RefreshGate.decide`` answers the last decided
  step from its state) and pushes the fresh weights, as the uninterrupted run did.
* **Logged** every step (``coolsampler.spec.metrics_schema``): ``staleness/sampler_version``,
  ``staleness/staleness``, ``staleness/refreshed``, ``staleness/refreshes``, and for a guard run
  ``guard/fired`` and ``guard/value`` (its reading; absent until its window holds a majority).
* **Checkpointed**: ``refresh_gate.json`` (``RefreshGate.state_dict``) in the step's ``global_step_K``
  folder, beside verl's ``data.pt`` and the controller's ``sampler_t.pt``, written before the actor's
  save. Whether the sampler was stale there, and so whether the checkpoint holds its snapshot, is read
  from it alone (``coolsampler.worker.checkpoint_files.stale_at``). A checkpoint without it was written
  by a trainer without the gate, on fresh weights: an inactive gate (``spec.guard.gate_active``) resumes
  from it as verl would; an active one refuses it.

Pure Python (no torch, verl or numpy): verl's trainer process imports it.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

from coolsampler.spec.guard import Decision, RefreshGate, make_gate, signal_value, staleness
from coolsampler.worker.trainer_keys import TrainerKeys

GATE_FILE = "refresh_gate.json"


def gate_from_keys(keys: TrainerKeys) -> RefreshGate:
    """The run's gate from its trainer keys (module docstring)."""
    return make_gate(keys.refresh_interval, keys.refresh_guard, keys.refresh_schedule)


def decide(gate: RefreshGate, step: int, metrics: Mapping[str, Any] | None) -> Decision:
    """Step ``step``'s decision from its (reduced) metrics; the same step again is answered from the state."""
    if gate.last_step == int(step) and gate.last is not None:
        return gate.decide(step)
    value = signal_value(metrics or {}, gate.guard.signal) if gate.guard is not None else None
    return gate.decide(step, value)


def step_metrics(gate: RefreshGate, decision: Decision, sampler_version: int) -> dict[str, float]:
    """What the step logs: ``sampler_version`` is the learner step whose weights drew this step's batch."""
    out: dict[str, float] = {
        "staleness/sampler_version": sampler_version,
        "staleness/staleness": staleness(decision.step, sampler_version),
        "staleness/refreshed": float(decision.refresh),
        "staleness/refreshes": gate.refreshes,
    }
    if gate.guard is not None:
        out["guard/fired"] = float(decision.reason == "signal")
        if decision.reading is not None and math.isfinite(decision.reading):
            out["guard/value"] = float(decision.reading)
    return out


def check_kept(levels: Sequence[int | None]) -> None:
    """Waking the replicas on the weights their sleep kept is sound only if every one slept at level 1
    (level 2 discards them): the sync trainer asks before each such wake."""
    if any(level != 1 for level in levels):
        levels = list(levels)
        raise RuntimeError(f"staleness gate: replicas slept at levels {levels}; keeping the stale sampler needs 1")


def save(gate: RefreshGate, folder: str | os.PathLike) -> str:
    """Write the gate's state into a checkpoint's ``global_step_K`` folder, atomically."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, GATE_FILE)
    with open(path + ".tmp", "w") as f:
        json.dump(gate.state_dict(), f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(path + ".tmp", path)
    return path


def restore(gate: RefreshGate, step: int, folder: str | os.PathLike) -> RefreshGate:
    """The gate as it was at the checkpoint of ``step``, read from ``folder``'s ``refresh_gate.json``.
    Without the file (a checkpoint of upstream verl, or of a trainer without the gate) an inactive
    gate resumes as verl would, on fresh weights; an active one cannot know its sampler and refuses."""
    path = os.path.join(folder, GATE_FILE)
    if not os.path.exists(path):
        if not gate.active:
            gate.fresh_at(step)
            return gate
        raise FileNotFoundError(f"staleness gate: resuming at step {step} needs the refresh gate's state, {path}")
    with open(path) as f:
        gate.load_state_dict(json.load(f))
    if gate.last_step != int(step):
        raise ValueError(f"staleness gate: {path} holds step {gate.last_step}, the checkpoint is of step {step}")
    return gate


def resume_version(gate: RefreshGate, step: int) -> int:
    """The learner step whose weights the sampler holds after step ``step`` (the gate has decided it):
    ``step`` itself where that step refreshed, else the last refresh before it."""
    if int(step) == 0:
        return 0
    if gate.last_step != int(step):
        raise ValueError(f"staleness gate: the gate has decided step {gate.last_step}, not the checkpoint's {step}")
    return gate.sampler_version


__all__ = [
    "GATE_FILE",
    "check_kept",
    "decide",
    "gate_from_keys",
    "restore",
    "resume_version",
    "save",
    "step_metrics",
]
