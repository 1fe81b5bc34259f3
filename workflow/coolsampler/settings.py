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


TASKS: dict[str, Task] = {
    "gsm8k": Task("gsm8k", "train", "test", 512, 512, 10, 300),
    "math": Task("math", "train_l3-5", "math500", 512, 1024, 20, 300),
    # The smoke study's synthetic task (coolsampler.toy): digits -> running sums, exact-match reward.
    "arith": Task("arith", "train", "test", 32, 24, 8, 64),
}

MODELS: dict[str, Model] = {
    "qwen2.5-math-1.5b": Model("qwen2.5-math-1.5b", "Qwen/Qwen2.5-Math-1.5B", "1.5B"),
    "qwen2.5-math-7b": Model("qwen2.5-math-7b", "Qwen/Qwen2.5-Math-7B", "7B"),
    "toy-qwen2": Model("toy-qwen2", "generated", "~0.2M"),
}

CORRECTIONS = ("tis", "none", "mu_grpo")
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
