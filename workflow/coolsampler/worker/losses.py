"""mu-GRPO as a verl policy loss: the update-side stabiliser of Section 4, ported as in Appendix C.

Paper, Appendix C ("mu-GRPO port"): "rho = exp(log pi_theta - log beta) with beta the sampler's
processed log-probabilities (a cooled sampler enters through its actual temperature-T_b
distribution), surrogate min(rho A, clip(rho, 0, 5) A), and a negative-advantage response containing
a token with rho < 1e-4 removed from the loss through the mask. The truncated importance multiplier
is off. Aggregation is the recipe's token mean and the KL penalty to the reference is kept."

Where beta comes from. verl hands every policy loss ``old_log_prob``. With
``algorithm.rollout_correction.bypass_mode=true`` the v1 trainer
(``verl/trainer/ppo/v1/trainer_base.py``, ``_compute_old_log_prob``) skips the learner's old-policy
forward pass and writes ``old_log_probs := rollout_log_probs``, i.e. the log-probs vLLM recorded
while sampling; with ``rollout.logprobs_mode=processed_logprobs`` those are of the tempered
distribution that produced the tokens. So under bypass mode ``old_log_prob`` *is* log beta, and rho
below is exactly the paper's ratio. Without bypass mode ``old_log_prob`` would be the learner's own
recomputed log-probs and this loss would silently be a different rule: run it only with
bypass_mode (``coolsampler.train.overrides`` sets it for the ``mu_grpo`` correction). Unlike verl 0.9.1's
legacy ``ray_trainer``, the v1 trainer does not rewrite ``policy_loss.loss_mode`` to ``bypass_mode``,
so ``loss_mode=mu_grpo`` is what the actor calls.

No truncated-IS multiplier. In bypass mode the v1 trainer never computes ``rollout_is_weights`` (it
skips the rollout-correction step of ``_compute_advantage``), so the actor passes ``None``. Weights
arriving here mean the run is in decoupled mode, where ``old_log_prob`` is not the sampler's: that
is a configuration error and raises, rather than being multiplied in or silently dropped.

Registration in every process. verl looks the loss up by name in ``POLICY_LOSS_REGISTRY`` inside
each actor worker (``verl/workers/utils/losses.py::ppo_loss`` -> ``get_policy_loss_fn``), so this
module must be imported in every Ray worker, not only the driver. verl 0.9.1 imports the
comma-separated modules of the environment variable ``VERL_USE_EXTERNAL_MODULES`` at the end of
``import verl`` in every process; Ray workers of a local cluster inherit the driver's environment.
Use::

    VERL_USE_EXTERNAL_MODULES=coolsampler.worker.losses            # GPU
    VERL_USE_EXTERNAL_MODULES=coolsampler.worker.cpu_platform,coolsampler.worker.losses   # CPU

(for a multi-node Ray cluster also forward it with
``+ray_kwargs.ray_init.runtime_env.env_vars.VERL_USE_EXTERNAL_MODULES=...``). The alternative
``actor_rollout_ref.model.external_lib=coolsampler.worker.losses`` also works (``HFModelConfig``
imports it in each worker that builds the model config) but it is meant for model code and holds
one value, so the environment variable is the wiring of record.

Metrics. The actor prefixes every loss metric with ``actor/`` (``trainer_base._update_actor`` ->
``rename_dict(..., "actor/")``), so the JSONL keys are ``actor/mu_grpo/veto_frac``,
``actor/mu_grpo/clip_frac`` and ``actor/rollout_corr/kl``. The last is the learner-sampler KL, which
a bypass-mode run would otherwise not log at all (the trainer's rollout-correction step is skipped).

This module runs inside verl workers: it imports torch and verl, and nothing of coolsampler's
analysis layer.
"""

from __future__ import annotations

from typing import Any

import torch
import verl.utils.torch_functional as verl_F
from verl.trainer.ppo.core_algos import agg_loss, register_policy_loss
from verl.trainer.ppo.rollout_corr_helper import compute_rollout_corr_metrics_from_logprobs

LOSS_NAME = "mu_grpo"
RATIO_CLIP_MAX = 5.0  # clip(rho, 0, 5)
VETO_RATIO = 1e-4  # a negative-advantage response with a token below this ratio is vetoed
LOG_RATIO_BOUND = 20.0  # verl's own clamp on log-ratios (exp(-20) << VETO_RATIO, so the veto is unaffected)


def mu_grpo_terms(
    log_prob: torch.Tensor,
    behaviour_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
) -> dict[str, torch.Tensor]:
    """The per-token mu-GRPO loss, the veto-applied mask and the statistics, before aggregation.

    Args: all (batch, response_length). ``behaviour_log_prob`` is log beta (the sampler's processed
    log-probs); ``response_mask`` marks valid response tokens.

    Returns a dict with ``pg_losses`` (-min(rho A, clip(rho, 0, 5) A) per token), ``mask`` (the
    response mask with vetoed responses zeroed), ``vetoed`` (bool per response), ``clipped`` (bool per
    token: rho > 5 with A > 0, the only case where min() picks the clipped term; for A < 0 and rho > 5
    the unclipped rho A is the smaller and the clip is inactive) and ``ratio``.

    The veto is per response: GRPO gives every token of a response the same advantage, and a
    response is vetoed when some valid token has A < 0 and rho < 1e-4. A positive-advantage response
    with such a token is kept (its term is bounded by rho A, which is then tiny anyway).
    """
    mask = response_mask.bool()
    log_ratio = torch.clamp(log_prob - behaviour_log_prob, min=-LOG_RATIO_BOUND, max=LOG_RATIO_BOUND)
    ratio = torch.exp(log_ratio)
    unclipped = ratio * advantages
    clipped_term = torch.clamp(ratio, 0.0, RATIO_CLIP_MAX) * advantages
    pg_losses = -torch.minimum(unclipped, clipped_term)
    with torch.no_grad():
        veto_tokens = (advantages < 0) & (ratio < VETO_RATIO) & mask
        vetoed = veto_tokens.any(dim=-1)
        clipped = (ratio > RATIO_CLIP_MAX) & (advantages > 0) & mask
    effective_mask = mask & ~vetoed.unsqueeze(-1)
    return {
        "pg_losses": pg_losses,
        "mask": effective_mask,
        "vetoed": vetoed,
        "clipped": clipped,
        "ratio": ratio,
        "log_ratio": log_ratio,
    }


@register_policy_loss(LOSS_NAME)  # type: ignore[arg-type]
def compute_policy_loss_mu_grpo(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    config: Any | None = None,
    rollout_is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """verl policy loss ``mu_grpo`` (signature and return type of verl's ``PolicyLossFn``).

    ``old_log_prob`` must be the sampler's log-probs (bypass mode, see the module docstring).
    Aggregation is verl's ``agg_loss`` with the run's ``loss_agg_mode`` over the veto-applied mask.
    Inside verl, ``config.global_batch_info`` carries the global token count of the mini-batch, taken
    from the response mask before the veto, so a vetoed response contributes zero to the token mean
    but stays in its denominator (the same convention as verl's own rejection masks in bypass mode).
    Called without that info (unit tests, ``config=None``) the denominator is the kept tokens.

    Returns ``(loss, metrics)``; metric values are Python floats, which ``ppo_loss`` wraps as
    ``Metric(aggregation=MEAN)`` across micro-batches.
    """
    if rollout_is_weights is not None:
        raise ValueError(
            "mu_grpo takes no truncated-IS multiplier, and receiving rollout_is_weights means the run is "
            "not in algorithm.rollout_correction.bypass_mode, so old_log_prob is not the sampler's log-prob. "
            "Set algorithm.rollout_correction.bypass_mode=true and rollout_is=null."
        )
    terms = mu_grpo_terms(log_prob, old_log_prob, advantages, response_mask)
    batch_info = dict(getattr(config, "global_batch_info", None) or {}) if config is not None else {}
    if terms["mask"].any():
        pg_loss = agg_loss(
            loss_mat=terms["pg_losses"], loss_mask=terms["mask"], loss_agg_mode=loss_agg_mode, **batch_info
        )
    else:  # every response vetoed (or padding only): a zero that keeps the graph, not 0/0 = nan
        pg_loss = (terms["pg_losses"] * 0.0).sum()

    valid = response_mask.bool()
    has_tokens = valid.any(dim=-1)
    n_responses = int(has_tokens.sum().item())
    veto_frac = float((terms["vetoed"] & has_tokens).sum().item()) / n_responses if n_responses else 0.0
    metrics: dict[str, Any] = {
        f"{LOSS_NAME}/veto_frac": veto_frac,
        f"{LOSS_NAME}/clip_frac": verl_F.masked_mean(terms["clipped"].float(), valid).item(),
        "actor/ppo_kl": verl_F.masked_mean(-terms["log_ratio"], valid).detach().item(),
        "actor/pg_clipfrac": verl_F.masked_mean(terms["clipped"].float(), valid).item(),
    }
    if valid.any():
        # learner-sampler mismatch (rollout_corr/kl etc.), which bypass mode would otherwise not log
        metrics.update(
            compute_rollout_corr_metrics_from_logprobs(
                log_prob=log_prob.detach(), rollout_log_prob=old_log_prob, response_mask=valid
            )
        )
    return pg_loss, metrics


__all__ = ["LOSS_NAME", "RATIO_CLIP_MAX", "VETO_RATIO", "compute_policy_loss_mu_grpo", "mu_grpo_terms"]
