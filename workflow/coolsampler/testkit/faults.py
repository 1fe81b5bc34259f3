"""Test instrument: faults injected into a real run's checkpoint save, and what each rank saw of it.

Enabled only when ``COOLSAMPLER_FAULT`` is set (one fault, or several separated by commas); loaded like
the tap through ``VERL_USE_EXTERNAL_MODULES`` (in verl's driver and in every worker).
Each fault stops the save where a preemption could:

* ``kill-in-first-save``: rank 0 writes its snapshot share (``coolsampler.worker.snapshot.SamplerSnapshot.save``,
  which patch 0004 has every actor rank call before the FSDP save and its barriers), then SIGKILLs every process of
  its session (verl's driver, Ray, vLLM: a preemption) before the FSDP save starts, at the first save;
* ``kill-before-tracker@K``: at step K's save the driver is killed (with its session) after every file
  of the checkpoint is written and before the commit writes the tracker (patch 0006): upstream verl had
  deleted the previous checkpoint by then;
* ``torn-save@K``: at step K's save, once the actor's save returns, rank 0's model shard is cut to half
  its length (a ``torch.save`` killed mid-write leaves such a file) and the session is killed;
* ``slow-snapshot-write=<seconds>``: rank 0 sleeps that long before writing its share at every save, as a
  slow filesystem would, so the other ranks wait that long in the save's first barrier.

One fault breaks the staleness gate instead, so that the acceptance check can show that its sampler
check catches a broken gate (``coolsampler acceptance --break-gate``):

* ``refresh-every-step``: after every step that is not a refresh, verl's driver pushes the learner's
  fresh weights to the sampler; the gate's bookkeeping (``staleness/*``) and its snapshot are left as
  they are, so only what the engine really holds shows the fault;
* ``fresh-sampler-on-resume``: a run resumed inside a refresh cycle gives the sampler the checkpointed
  learner's weights, as upstream verl does, instead of the stale snapshot saved with the checkpoint
  (patch 0004's restore undone); the bookkeeping again says stale.

Each rank appends one JSON line per save to ``COOLSAMPLER_FAULT_LOG``: its rank, the step, how long its
whole checkpoint save took (a rank held in a barrier by a slow writer takes as long) and the timeout of
its process group as torch holds it. Runs inside verl's processes; imports torch there.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path
from types import ModuleType

from coolsampler.train.launch import proc_table
from coolsampler.worker import checkpoint_files
from coolsampler.worker.after_import import patch_after_import

FAULT_ENV = "COOLSAMPLER_FAULT"
FAULT_LOG_ENV = "COOLSAMPLER_FAULT_LOG"
KILL_IN_FIRST_SAVE = "kill-in-first-save"
SLOW_WRITE = "slow-snapshot-write="
KILL_BEFORE_TRACKER = "kill-before-tracker@"
TORN_SAVE = "torn-save@"
REFRESH_EVERY_STEP = "refresh-every-step"
FRESH_ON_RESUME = "fresh-sampler-on-resume"


def _faults() -> list[str]:
    return [f for f in os.environ.get(FAULT_ENV, "").split(",") if f]


def _at_step(prefix: str, path: str) -> bool:
    """A fault ``prefix<K>`` is set and ``path`` is inside ``global_step_<K>``."""
    parts = Path(path).parts
    return any(f.startswith(prefix) and f"global_step_{f.removeprefix(prefix)}" in parts for f in _faults())


def _kill_session() -> None:
    """SIGKILL every process of this session, this one last (the run's whole process tree)."""
    me, sid = os.getpid(), os.getsid(0)
    for p in proc_table():
        if p.session == sid and p.pid != me:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGKILL)
    os.kill(me, signal.SIGKILL)


def _pg_timeout_s() -> float | None:
    import torch

    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return None
    group = torch.distributed.distributed_c10d._get_default_group()
    for device in ("cuda", "cpu"):
        try:
            return group._get_backend(torch.device(device)).options._timeout.total_seconds()
        except (RuntimeError, AttributeError):
            continue
    return None


def _wrap(module: ModuleType) -> None:
    from coolsampler.worker import snapshot as stale

    worker = module.ActorRolloutRefWorker
    faults = _faults()
    slow = next((float(f.removeprefix(SLOW_WRITE)) for f in faults if f.startswith(SLOW_WRITE)), None)
    write, save = stale.SamplerSnapshot.save, worker.save_checkpoint
    if getattr(write, "_coolsampler_fault", False):
        return

    def save_share(self, actor_dir):
        if self.empty:  # nothing to write (no refresh through it yet): no fault either
            return write(self, actor_dir)
        if self.rank == 0 and slow:
            time.sleep(slow)
        write(self, actor_dir)
        if self.rank == 0 and KILL_IN_FIRST_SAVE in faults and not getattr(worker, "_coolsampler_saved", False):
            _kill_session()  # between the snapshot write and the FSDP save

    def save_checkpoint(self, local_path, *args, **kwargs):
        t0 = time.time()
        out = save(self, local_path, *args, **kwargs)
        rank, world = stale.process_group()
        if rank == 0 and _at_step(TORN_SAVE, local_path):
            shard = Path(local_path) / f"model_world_size_{world}_rank_0.pt"
            with shard.open("r+b") as f:
                f.truncate(shard.stat().st_size // 2)
            _kill_session()
        worker._coolsampler_saved = True
        line = {"rank": rank, "path": local_path, "save_s": round(time.time() - t0, 3), "pg_timeout_s": _pg_timeout_s()}
        if os.environ.get(FAULT_LOG_ENV):
            with open(os.environ[FAULT_LOG_ENV], "a") as f:
                f.write(json.dumps(line) + "\n")
        return out

    save_share._coolsampler_fault = True
    # the wrapped method stays what verl's dispatch registered (its Ray decorator's attributes)
    save_checkpoint.__dict__.update(save.__dict__)
    stale.SamplerSnapshot.save = save_share
    worker.save_checkpoint = save_checkpoint


def _wrap_commit() -> None:
    """In verl's driver: the kill before the tracker (patch 0006 calls ``checkpoint_files.commit`` there)."""
    commit = checkpoint_files.commit
    if not any(f.startswith(KILL_BEFORE_TRACKER) for f in _faults()) or getattr(commit, "_coolsampler_fault", False):
        return

    def fault_commit(root, step, *args, **kwargs):
        if _at_step(KILL_BEFORE_TRACKER, str(Path(root) / f"global_step_{step}")):
            _kill_session()
        return commit(root, step, *args, **kwargs)

    fault_commit._coolsampler_fault = True
    checkpoint_files.commit = fault_commit


def _break_gate(module: ModuleType) -> None:
    """In verl's driver: after every step that is not a refresh, the learner's fresh weights are pushed to
    the sampler (without touching the gate's snapshot), where the gate would keep it stale: through a
    "keep" wake where the engine sleeps between steps, and where it does not (the CPU platform), instead
    of nothing. A stale validation still restores the snapshot, so the sampler is stale again for the
    step after it."""
    trainer = module.PPOTrainerSync
    on_step_end = trainer.on_step_end
    if getattr(on_step_end, "_coolsampler_fault", False):
        return

    def broken_on_step_end(self):
        on_step_end(self)
        if not self._decide_refresh({}).refresh:  # the step's own decision, made in step()
            self._push(snapshot=None)

    broken_on_step_end._coolsampler_fault = True
    trainer.on_step_end = broken_on_step_end


def _undo_restore(module: ModuleType) -> None:
    """In verl's driver: on a resume inside a cycle, push the learner where patch 0004 loads the snapshot."""
    trainer = module.PPOTrainerSync
    on_init_end = trainer.on_init_end
    if getattr(on_init_end, "_coolsampler_fault", False):
        return

    def fresh_on_init_end(self):
        stale = self.global_steps % self.coolsampler_keys.refresh_interval  # the fault: a fixed N's grid
        if not stale:
            return on_init_end(self)
        self._push(snapshot=None, fresh_version=self.global_steps - stale)
        self.sampler_version = self.global_steps - stale

    fresh_on_init_end._coolsampler_fault = True
    trainer.on_init_end = fresh_on_init_end


def install() -> None:
    if _faults():
        patch_after_import("verl.workers.engine_workers", _wrap)
        _wrap_commit()
    if REFRESH_EVERY_STEP in _faults():
        patch_after_import("verl.trainer.ppo.v1.trainer_sync", _break_gate)
    if FRESH_ON_RESUME in _faults():
        patch_after_import("verl.trainer.ppo.v1.trainer_sync", _undo_restore)


install()
