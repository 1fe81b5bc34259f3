"""Fixed facts of the paper's recipe and of the models and tasks a run may name.

One source of truth: the study schema, the run keys, the verl overrides and the analysis all read
these tables. Nothing here imports verl, vLLM or torch.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Task:
    """A task's data and the recipe constants the paper ties to it (Section 2)."""

    name: str
    train: str  # data file stem under <data>/<task>/
    val: str
    max_prompt_length: int
    max_response_length: int
    val_every: int  # "greedy validation every 10 steps on GSM8K and every 20 on MATH"
    steps: int  # 300 updates in every paper run
    first_cycle_kl_step: int = 110  # Figure 2: "KL at a fixed step of the first cycle (110, or 60 where N=96)"


@dataclass(frozen=True)
class Model:
    name: str
    source: str  # HF hub id, or "generated" for the smoke study's tiny model
    params: str
    tensor_parallel: int = 1  # vLLM tensor-parallel size on the gpu platform (4 GPUs per run)


TASKS: dict[str, Task] = {
    "gsm8k": Task("gsm8k", "train", "test", 512, 512, 10, 300),
    "math": Task("math", "train_l3-5", "math500", 512, 1024, 20, 300),
    # The smoke study's synthetic task (coolsampler.toy): digits -> running sums, exact-match reward.
    "arith": Task("arith", "train", "test", 32, 24, 8, 64),
}

MODELS: dict[str, Model] = {
    "qwen2.5-math-1.5b": Model("qwen2.5-math-1.5b", "Qwen/Qwen2.5-Math-1.5B", "1.5B"),
    "qwen2.5-math-7b": Model("qwen2.5-math-7b", "Qwen/Qwen2.5-Math-7B", "7B", tensor_parallel=2),
    "toy-qwen2": Model("toy-qwen2", "generated", "~0.2M"),
}

CORRECTIONS = ("tis", "none", "mu_grpo")
# The saturation controller (coolsampler.worker.controller): one temperature per prompt (default) or per
# batch, and when a group counts as saturated (default first).
SCOPES = ("per_prompt", "global")
SATURATION_RULES = ("all_correct", "all_equal")
REPLICATES = ("cut", "rerun")

# Paper recipe (Section 2); the overrides builder and the paper-settings test both read these.
PAPER_RECIPE = {
    "prompts_per_step": 16,
    "samples_per_prompt": 8,
    "lr": 2e-6,
    "kl_coef": 1e-3,
    "kl_loss_type": "low_var_kl",
    "entropy_coeff": 0.0,
    "ppo_epochs": 1,
    "tis_cap": 2.0,
    "gpus_per_run": 4,
}

# Paper, Appendix D ("Compute"): "a 1.5B run takes about 3.2 hours on four 32 GB GPUs (MATH: 3.6 hours);
# a 7B run takes about 9 hours on four 96 GB GPUs." Hours of one 300-step run, by (model, task).
PAPER_RUN_HOURS: dict[tuple[str, str], float] = {
    ("qwen2.5-math-1.5b", "gsm8k"): 3.2,
    ("qwen2.5-math-1.5b", "math"): 3.6,
    ("qwen2.5-math-7b", "gsm8k"): 9.0,
    ("qwen2.5-math-7b", "math"): 9.0,  # not run in the paper; the 7B GSM8K time as the estimate
}

# A preempted, timed-out or stalled run loses at most this much training (then resumes from its checkpoint).
CHECKPOINT_EVERY_S = 30 * 60

# Seed of vLLM's sampling (verl's rollout.seed, per replica seed + rank). verl's default is 42; a
# ``rerun`` replicate (Table 4: "re-run = sampling replicate") adds this offset, so it draws its own
# samples rather than differing from its twin only through GPU nondeterminism.
SAMPLING_SEED = 42
RERUN_SEED_OFFSET = 1000


def step_seconds(model: str, task: str) -> float | None:
    """Paper wall time of one learner step on four GPUs, or None where the paper gives none."""
    hours = PAPER_RUN_HOURS.get((model, task))
    return None if hours is None else hours * 3600 / TASKS[task].steps


def checkpoint_interval(model: str, task: str) -> int:
    """Steps between checkpoints so that a preemption loses at most ``CHECKPOINT_EVERY_S`` of a run
    (1.5B GSM8K: 46 steps, MATH: 41, 7B: 16); -1 (never) where no step time is known (the smoke study
    sets its own in ``recipe.save_every``)."""
    sec = step_seconds(model, task)
    return -1 if sec is None else max(1, int(CHECKPOINT_EVERY_S // sec))
