"""A study's own models and tasks (its ``models:`` and ``tasks:`` blocks), on top of the built-in ones.

    models:
      qwen2.5-0.5b: {hf_id: Qwen/Qwen2.5-0.5B, revision: <commit>, params_b: 0.49}
      my-local:     {path: /data/models/my-model, params_b: 1.5, tensor_parallel: 1, gpus_per_run: 2}
      qwen2.5-math-1.5b: {revision: <commit>}        # a built-in model, pinned: prefetched and loaded offline
    tasks:
      sums:
        train: data/sums/train.parquet               # verl-format parquet (prompt, data_source, reward_model)
        val: data/sums/test.parquet
        reward: rewards/sums.py:score                # or verl (built-in scorers by data_source), coolsampler
        max_prompt_length: 32
        max_response_length: 16
        steps: 100
        val_every: 10
      hub-task:
        hub: {dataset: org/name, revision: <commit>, train: train, val: test}   # rule prepare_hub_task
        reward: verl
        ...

A world (``worlds:``, ``coolsampler.spec.world``) adds a model and a task under its name; its runs carry
``<name>-<key>`` for both, so the key of every setting that made them is in the run's path.

A hub model without a ``revision`` is fetched by each training job (the built-in paper models, whose
revision the paper does not record); with one, rule ``prefetch_model`` downloads it on the submitting
host and runs load it from disk offline. TP and GPUs per run follow from ``params_b``
(``coolsampler.spec.settings.derived_tensor_parallel`` / ``derived_gpus_per_run``) unless set.

No verl, vLLM or torch here; a reward file is checked by parsing it, never by importing it.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from coolsampler.spec.settings import MAX_GPUS_PER_RUN, MODELS, TASKS, Model, Task
from coolsampler.spec.validate import StudyError
from coolsampler.spec.world import study_worlds

BUILTIN_REWARDS = ("coolsampler", "verl")


def study_models(raw: Mapping[str, Any], origin: str) -> dict[str, Model]:
    """The built-in models, each one the study names updated, plus the study's new ones."""
    out = dict(MODELS)
    for name, spec in (raw.get("models") or {}).items():
        where = f"{origin}: models.{name}"
        base = MODELS.get(name)
        if base is None and not ("hf_id" in spec or "path" in spec):
            raise StudyError(f"{where}: a new model needs hf_id (+ revision) or path; allowed: one of them")
        if "hf_id" in spec and "path" in spec:
            raise StudyError(f"{where}: both hf_id and path; allowed: one of them")
        if base is None and "params_b" not in spec:
            raise StudyError(f"{where}.params_b: missing; TP and GPUs per run are derived from it")
        if base is not None and base.source == "generated":
            raise StudyError(f"{where}: {name} is made by a rule here; allowed: define a new model instead")
        model = replace(
            base or Model(name, "", ""),
            source="local" if "path" in spec else spec.get("hf_id", base.source if base else ""),
            params=str(spec.get("params_b", base.params if base else "")) + ("B" if "params_b" in spec else ""),
            params_b=float(spec.get("params_b", base.params_b if base else 0.0)),
            revision=spec.get("revision", base.revision if base else None),
            path=spec.get("path"),
            tp=spec.get("tensor_parallel", base.tp if base else None),
            gpus=spec.get("gpus_per_run", base.gpus if base else None),
            gpu_memory_gib=spec.get("gpu_memory_gib", base.gpu_memory_gib if base else None),
            micro_batch=spec.get("micro_batch", base.micro_batch if base else None),
            gpu_memory_utilization=spec.get("gpu_memory_utilization", base.gpu_memory_utilization if base else None),
        )
        if model.path is not None and model.revision is not None:
            raise StudyError(f"{where}.revision: a local model has no hub revision; allowed: remove it")
        if model.gpus_per_run > MAX_GPUS_PER_RUN:
            raise StudyError(
                f"{where}: {model.params_b}B parameters need {model.gpus_per_run} GPUs by the size rule, more than"
                f" one node ({MAX_GPUS_PER_RUN}); allowed: set gpus_per_run (and offloading via verl_overrides)"
            )
        if model.gpus_per_run % model.tensor_parallel:
            raise StudyError(
                f"{where}: tensor_parallel {model.tensor_parallel} does not divide gpus_per_run"
                f" {model.gpus_per_run}; allowed: a divisor"
            )
        out[name] = model
    for world in study_worlds(raw, origin).values():
        _check_world_name(world.name, out, f"{origin}: worlds.{world.name}", "model")
        out[world.name] = out[world.ident] = world.as_model()
    return out


def _check_world_name(name: str, table: Mapping[str, Any], where: str, kind: str) -> None:
    if name in table:
        raise StudyError(f"{where}: the name of a {kind} already; allowed: a new name")


def reward_target(reward: str) -> tuple[str, str] | None:
    """``FILE.py:FUNCTION`` -> (file, function); None for a built-in reward."""
    if reward in BUILTIN_REWARDS:
        return None
    file, _, fn = reward.rpartition(":")
    return file, fn


def check_reward(reward: str, where: str) -> None:
    """A reward by path must name a Python file that defines the function (parsed, not imported)."""
    target = reward_target(reward)
    if target is None:
        return
    file, fn = target
    path = Path(file)
    if not file.endswith(".py") or not fn.isidentifier():
        raise StudyError(f"{where}: {reward!r}; allowed: coolsampler, verl or FILE.py:FUNCTION")
    if not path.is_file():
        raise StudyError(f"{where}: {file} does not exist (paths are relative to the working directory)")
    tree = ast.parse(path.read_text(), filename=file)
    names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    if fn not in names:
        raise StudyError(
            f"{where}: {file} defines no function {fn}; allowed: one of {', '.join(sorted(names)) or '(none)'}"
        )


def study_tasks(raw: Mapping[str, Any], origin: str) -> dict[str, Task]:
    """The built-in tasks plus the study's own (parquet files by path, or a Hub dataset)."""
    out = dict(TASKS)
    for name, spec in (raw.get("tasks") or {}).items():
        where = f"{origin}: tasks.{name}"
        if name in TASKS:
            raise StudyError(f"{where}: a built-in task; allowed: a new name")
        local = "train" in spec or "val" in spec
        if local == ("hub" in spec):
            raise StudyError(f"{where}: give train and val (parquet paths) or hub (a dataset); allowed: one of them")
        if local and not ("train" in spec and "val" in spec):
            raise StudyError(f"{where}: {'val' if 'train' in spec else 'train'}: missing; allowed: both parquet paths")
        check_reward(spec["reward"], f"{where}.reward")
        hub = spec.get("hub")
        task = Task(
            name,
            "train",
            "val",
            int(spec["max_prompt_length"]),
            int(spec["max_response_length"]),
            int(spec["val_every"]),
            int(spec["steps"]),
            reward=spec["reward"],
            train_file=spec.get("train"),
            val_file=spec.get("val"),
            hub=tuple(sorted((k, str(v)) for k, v in hub.items())) if hub else None,
        )
        if task.val_every > task.steps:
            raise StudyError(f"{where}.val_every: {task.val_every} exceeds steps {task.steps}; allowed: 1..steps")
        out[name] = task
    for world in study_worlds(raw, origin).values():
        _check_world_name(world.name, out, f"{origin}: worlds.{world.name}", "task")
        out[world.name] = out[world.ident] = world.as_task()
    return out
