"""TRL's GRPOTrainer and AsyncGRPOTrainer: the ``log_history`` of transformers' ``trainer_state.json``.

Read at huggingface/trl f2cd57710ae345ea6428ae95363267fcf38a3dc8 (trl/ paths and lines there) and, for the
``Trainer`` both subclass, transformers 5.19.0 (the copy installed in this project's environment). Each logging
window (``logging_steps``: GRPOConfig 10, AsyncGRPOConfig 1) appends ``{**logs, "step": global_step}`` to
``state.log_history`` (transformers trainer.py L4148-4170), the trainer's metrics averaged over the window
(grpo_trainer.py L3272-3291); evaluation rows carry ``eval_``-prefixed keys at the same step. The file is written
at every checkpoint (``<output_dir>/checkpoint-<step>/trainer_state.json``) and by ``trainer.save_state()``
(``<output_dir>/trainer_state.json``). Neither trainer logs a lag; AsyncGRPOTrainer bounds it by
``max_staleness``, a setting saved only in ``training_args.bin`` (a torch pickle, never read here), so the bound
is taken from a ``config.yaml``/``run.yaml`` beside the log (TRL's CLI configs are flat YAML) or is its default.
"""

from coolsampler.results.sources import Bound, Key, Source
from coolsampler.spec.lag import Lag

_GRPO = "trl/trainer/grpo_trainer.py"
_ASYNC = "trl/experimental/async_grpo/async_grpo_trainer.py"
_WORKER = "trl/experimental/async_grpo/async_rollout_worker.py"
_TF_GRAD = "transformers 5.19.0 trainer.py L2237-2239"
_FILES = (
    "<output_dir>/trainer_state.json"  # by trainer.save_state(); at each save, checkpoint-<step>/trainer_state.json
)
# the IS ratio TRL applies: exp(old_logp - vLLM logp), per token (token_* modes) or per sequence (sequence_*,
# the default sequence_mask), clamped (*_truncate) or set to 0 outside [clip_min, clip_max] (*_mask)
_IS = (
    "the vLLM importance ratio exp(log pi_old - log q) after truncation or masking: per token in the token_* modes,"
    " per sequence in the sequence_* modes (vllm_importance_sampling_mode, default sequence_mask, which sets a"
    " ratio outside [clip_min, clip_max] to 0)"
)

GRPO = Source(
    system="trl",
    repo="huggingface/trl",
    commit="f2cd57710ae345ea6428ae95363267fcf38a3dc8",
    formats=("trainer_state.json",),
    files=_FILES,
    detect=(
        "frac_reward_zero_std",
        "completions/max_length",
        "sampling/sampling_logp_difference/mean",
        "sampling/importance_sampling_ratio/*",
    ),
    step="step: the optimizer step (state.global_step), a row every logging_steps; eval rows at the same step",
    keys=(
        Key(
            "sampling/sampling_logp_difference/mean",
            "logp_abs_diff",
            "per token |log pi_old - log q| (pi_old: the trainer's log-probs at generation; q: vLLM's) over the"
            " completion mask, before any IS truncation; mean per process, then over processes and the window",
            f"{_GRPO} L2779-2787",
        ),
        Key(
            "sampling/sampling_logp_difference/max",
            "logp_abs_diff_max",
            "largest per token |log pi_old - log q| of a generation (max over processes), averaged over the window",
            f"{_GRPO} L2788-2790",
        ),
        Key(
            "sampling/importance_sampling_ratio/mean",
            "is_applied_mean",
            "mean of " + _IS,
            f"{_GRPO} L2579-2622, L2808-2810",
        ),
        Key("sampling/importance_sampling_ratio/max", "is_applied_max", "largest of " + _IS, f"{_GRPO} L2811-2813"),
        Key("sampling/importance_sampling_ratio/min", "is_applied_min", "smallest of " + _IS, f"{_GRPO} L2791-2807"),
        Key("reward", "reward", "mean reward of the window's completions", f"{_GRPO} L2748"),
        Key(
            "completions/max_length",
            "response_length_max",
            "longest completion of a generation in tokens (over processes), averaged over the window",
            f"{_GRPO} L2231-2234",
        ),
        Key("entropy", "entropy", "token-mean entropy of the policy being updated", f"{_GRPO} L3240"),
        Key("grad_norm", "grad_norm", "the gradient norm of the logging window's last step", _TF_GRAD),
        Key(
            "kl",
            "kl_to_init",
            "token-mean k3 KL of the policy to the reference model (the initial one), only where beta != 0",
            f"{_GRPO} L3071-3076, L3237-3238",
        ),
        Key(
            "eval_reward",
            "val_acc",
            "mean reward on the evaluation set (0/1 rewards: its accuracy)",
            f"{_GRPO} L2748, L3286-3287",
        ),
    ),
    # sampling/*: pi_old (the weights just synced to vLLM) against vLLM, after truncation; no lag is logged:
    # generation is synchronous, its batch reused for steps_per_generation / gradient_accumulation_steps x
    # num_iterations optimizer steps (defaults: 1, so lag 0; grpo_trainer.py L1571-1579)
    lag=Lag(None, compared="pi_old", truncation="after"),
    notes=(
        "sampling/* are written only with use_vllm=True and vllm_importance_sampling_correction=True (the"
        f" default) ({_GRPO} L2579, L2779)",
        "no lag is logged: generation is synchronous; a generation serves steps_per_generation /"
        " gradient_accumulation_steps x num_iterations optimizer steps (1 by default)",
        "no raw (pre-truncation) IS ratio is logged",
        "the IS mode and clip bounds are saved only in training_args.bin (a pickle): whether the ratio is per"
        " token or per sequence, clamped or masked, cannot be read from the log",
    ),
    unknowable="the lag (none is logged); the raw IS ratio; per token or per sequence IS (the mode is in a pickle)",
    needs=("reward",),
)

ASYNC = Source(
    system="trl-async",
    repo="huggingface/trl",
    commit="f2cd57710ae345ea6428ae95363267fcf38a3dc8",
    formats=("trainer_state.json",),
    files=_FILES,
    detect=("weight_sync_time_s", "queue_wait_time_s", "buffer_qsize"),
    step="step: the optimizer step (state.global_step), a row every logging_steps (1 by default)",
    keys=(
        Key(
            "ratio",
            "is_raw_mean",
            "token mean of exp(log pi_theta - log q), q the vLLM sampling log-probs sent with the sample,"
            " unclipped (the raw ratio, against the policy being updated)",
            f"{_ASYNC} L937-938, L965-967, L1025",
        ),
        Key(
            "kl",
            "k3_kl",
            "token mean of k3 (r - 1) - log r, r = pi_theta/q",
            f"{_ASYNC} L969-973, L1026",
        ),
        Key("entropy", "entropy", "token-mean entropy of the policy being updated", f"{_ASYNC} L1027"),
        Key(
            "reward",
            "reward",
            "mean reward of the trained samples (the rollout worker's per-sample metric, averaged)",
            f"{_WORKER} L875-877; {_ASYNC} L1043-1062",
        ),
        Key("grad_norm", "grad_norm", "the gradient norm of the logging window's last step", _TF_GRAD),
        Key("eval_reward", "val_acc", "mean reward on the evaluation set, where one is run", f"{_ASYNC} L1093-1096"),
    ),
    lag=Lag(None, compared="pi_theta", truncation="before"),
    bound=Bound(
        "max_staleness",
        4,
        ("max_staleness", "args.max_staleness"),
        meaning="weight syncs a sample may lag (model_version - its dispatch version) before it is dropped"
        f" ({_ASYNC} L277-280; trl/experimental/async_grpo/async_grpo_config.py L282-287); one sync per"
        " weight_sync_steps optimizer steps (default 1, read as such)",
    ),
    notes=(
        "the lag is computed per sample and never logged; stale drops are an info log line, not a metric"
        f" ({_ASYNC} L277-280)",
        "the bound is in weight syncs: with weight_sync_steps > 1 it is that many optimizer steps per sync",
    ),
    unknowable="the lag and its drops (computed, never logged); the mismatch at one weight version (only against"
    " the evolving pi_theta)",
    needs=("reward",),
)

SOURCES = (GRPO, ASYNC)
