"""A verl file-logger log as unpatched verl 0.9.1 writes it for a GRPO run with default settings.

Why: users bring their own verl logs, which lack everything the paper's patches and settings add
(``staleness/*``, ``sampler/*``, ``rollout_corr/*`` without rollout correction, ``actor/kl_loss``
without ``use_kl_loss``). The analysis must compute what such a log allows and name what it lacks;
this log is the test of that.

The keys are those verl 0.9.1 logs with its defaults (``trainer.logger`` including ``file``;
``algorithm.rollout_correction.rollout_is`` null; ``actor_rollout_ref.actor.use_kl_loss`` false;
``actor_rollout_ref.rollout.calculate_log_probs`` true), read from the installed verl:

* ``training/global_step``, ``training/epoch``: ``trainer/ppo/ray_trainer.py`` (``fit``);
* ``critic/score|rewards|advantages|returns/{mean,max,min}``, ``response_length/*``,
  ``response_length_non_aborted/*``, ``prompt_length/*``: ``trainer/ppo/metric_utils.py``
  (``compute_data_metrics``, no critic for GRPO);
* ``timing_s/*``, ``timing_per_token_ms/*``: ``metric_utils.compute_timing_metrics``; ``perf/*``:
  ``metric_utils.compute_throughout_metrics`` and the actor's ``perf/mfu/actor``;
* ``actor/entropy``: ``ray_trainer.py``, the old-log-prob pass; ``actor/pg_loss``: ``workers/utils/losses.py``;
  ``actor/pg_clipfrac``, ``actor/ppo_kl``, ``actor/pg_clipfrac_lower``: ``trainer/ppo/core_algos.py``
  (``compute_policy_loss_vanilla``); ``actor/grad_norm``, ``actor/lr``: the actor's update;
* ``training/rollout_probs_diff_{max,mean,std}``: ``utils/debug/metrics.py`` (``calculate_debug_metrics``,
  logged because ``calculate_log_probs`` defaults to true);
* ``val-core/<data_source>/acc/mean@1``, ``val-aux/<data_source>/reward/mean@1``:
  ``ray_trainer._val_metrics_update`` (one greedy sample, the data source of the test set).

``tests/results/test_plain_verl.py`` checks that every key below occurs in the installed verl's source.
Imports numpy only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

DATA_SOURCE = "openai/gsm8k"

# every key a default GRPO step logs (the values are made up; the names are verl's)
STEP_KEYS: tuple[str, ...] = (
    "training/global_step", "training/epoch",
    "critic/score/mean", "critic/score/max", "critic/score/min",
    "critic/rewards/mean", "critic/rewards/max", "critic/rewards/min",
    "critic/advantages/mean", "critic/advantages/max", "critic/advantages/min",
    "critic/returns/mean", "critic/returns/max", "critic/returns/min",
    "response_length/mean", "response_length/max", "response_length/min", "response_length/clip_ratio",
    "response_length_non_aborted/mean", "response_length_non_aborted/max", "response_length_non_aborted/min",
    "response_length_non_aborted/clip_ratio",
    "prompt_length/mean", "prompt_length/max", "prompt_length/min", "prompt_length/clip_ratio",
    "actor/entropy", "actor/pg_loss", "actor/pg_clipfrac", "actor/ppo_kl", "actor/pg_clipfrac_lower",
    "actor/grad_norm", "actor/lr",
    "training/rollout_probs_diff_max", "training/rollout_probs_diff_mean", "training/rollout_probs_diff_std",
    "timing_s/gen", "timing_s/reward", "timing_s/old_log_prob", "timing_s/adv", "timing_s/update_actor",
    "timing_s/step", "timing_per_token_ms/gen", "timing_per_token_ms/update_actor",
    "perf/total_num_tokens", "perf/time_per_step", "perf/throughput", "perf/mfu/actor",
)  # fmt: skip

VAL_KEYS: tuple[str, ...] = (f"val-core/{DATA_SOURCE}/acc/mean@1", f"val-aux/{DATA_SOURCE}/reward/mean@1")


def _val(step: int, collapse_at: int | None) -> float:
    acc = 0.30 + 0.5 * (1.0 - np.exp(-step / 30.0))
    return 0.2 if collapse_at is not None and step >= collapse_at else float(acc)


def records(steps: int = 60, test_freq: int = 10, *, collapse_at: int | None = None, seed: int = 0) -> list[dict]:
    """The log's records: validation at step 0 (``val_before_train``), then one per step, validation
    metrics merged into every ``test_freq``-th step and the last, as verl's ``fit`` logs them."""
    rng = np.random.default_rng(seed)
    out: list[dict[str, Any]] = [{"step": 0, "data": {k: _val(0, None) for k in VAL_KEYS}}]
    for t in range(1, steps + 1):
        data: dict[str, Any] = {k: float(rng.uniform(0.0, 1.0)) for k in STEP_KEYS}
        data["training/global_step"] = t
        data["training/epoch"] = 0
        data["response_length/max"] = 1024.0
        data["response_length/clip_ratio"] = 0.01
        data["actor/grad_norm"] = float(0.2 + rng.uniform(0.0, 0.1))
        # |pi - q| per token: small where the sampler is refreshed every step (vLLM vs FSDP numerics)
        data["training/rollout_probs_diff_mean"] = float(0.01 + rng.uniform(0.0, 0.005))
        data["training/rollout_probs_diff_std"] = float(0.03 + rng.uniform(0.0, 0.01))
        if t % test_freq == 0 or t == steps:
            data.update({k: _val(t, collapse_at) for k in VAL_KEYS})
        out.append({"step": t, "data": data})
    return out


def write_log(path: str | Path, steps: int = 60, test_freq: int = 10, **kw: Any) -> Path:
    """Write the log as verl's file logger does (one JSON object a line) and return its path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records(steps, test_freq, **kw)))
    return path
