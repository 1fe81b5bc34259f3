"""The per-run metrics table: one row per training step. Defined once, here.

``metrics.parquet`` in every run directory has exactly these columns (``veto_frac`` and the
``temperature*`` columns may be all-NaN where the run has no such mechanism). The parser
(``coolsampler.metrics``) fills it from verl's JSONL; the analysis reads nothing else.
Run-level facts (finished or not, why) live in the table's metadata (see ``RunStatus``).
"""

from __future__ import annotations

from dataclasses import dataclass

# column -> (dtype, meaning, verl JSONL source key(s))
COLUMNS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "step": ("int64", "learner step t (1-based; verl's global step)", ("training/global_step",)),
    "sampler_version": (
        "int64",
        "learner step whose weights the sampler held when it drew this step's batch (0 = initial)",
        ("staleness/sampler_version",),
    ),
    "staleness": ("int64", "t - 1 - sampler_version ... = (t-1) mod N under the gate", ("staleness/staleness",)),
    "refreshed": ("bool", "the sampler's weights were pushed at the end of this step", ("staleness/refreshed",)),
    "val_acc": (
        "float64",
        "greedy validation accuracy after this step (NaN where not validated)",
        ("val-core/*/acc/mean@1", "val-core/*/reward/mean@1"),
    ),
    # mu-GRPO runs in bypass mode, where verl skips its rollout-correction metrics: the loss logs it.
    "kl": (
        "float64",
        "learner-sampler KL per token, mean(log q - log pi)",
        ("rollout_corr/kl", "actor/rollout_corr/kl"),
    ),
    "entropy": ("float64", "learner entropy per token", ("actor/entropy",)),
    "clip_frac": ("float64", "fraction of responses at the length limit", ("response_length/clip_ratio",)),
    "reward": ("float64", "mean training reward", ("critic/score/mean",)),
    "grad_norm": ("float64", "actor gradient norm", ("actor/grad_norm",)),
    "is_cap_frac": (
        "float64",
        "fraction of tokens whose IS weight hit the cap",
        ("rollout_corr/rollout_is_ratio_fraction_high",),
    ),
    "kl_to_init": ("float64", "learner KL to the initial (reference) policy", ("actor/kl_loss",)),
    "veto_frac": ("float64", "mu-GRPO: fraction of responses vetoed (NaN otherwise)", ("actor/mu_grpo/veto_frac",)),
    "temperature": ("float64", "sampler temperature used this step (mean over its prompts)", ("sampler/temperature",)),
    "temperature_min": ("float64", "lowest per-prompt sampler temperature this step", ("sampler/temperature_min",)),
    "temperature_max": ("float64", "highest per-prompt sampler temperature this step", ("sampler/temperature_max",)),
}

REQUIRED = ("step", "kl", "entropy", "reward", "grad_norm", "kl_to_init")


@dataclass
class RunStatus:
    """Whether a run's log is whole. Analysis refuses to present incomplete data silently."""

    complete: bool
    last_step: int
    expected_steps: int
    problems: list[str]
