"""SkyRL: the fully-async trainer's flat dict of metrics a global step, through its one tracker backend.

Read at NovaSky-AI/SkyRL a9564572eb8e91076be43c1bd5e4615e3de17265 (paths and lines there).
``FullyAsyncRayPPOTrainer`` (skyrl/train/fully_async_trainer.py, ``trainer.fully_async.enabled=true``) logs its
step's dict, then its timings, at ``step=global_step`` (L622, L641): 1-based, the evaluation before training at
step 0 (L486-494). ``trainer.logger=tensorboard`` writes ``add_scalar(key, value, step)`` per key into
``$TENSORBOARD_DIR``, default ``tensorboard_log`` below the launch directory (skyrl/train/utils/tracking.py
L207-220): the one backend SkyRL itself gives a local file at full precision (its console prints 4 decimals),
read here. The synchronous trainer and the one-step-off example log no ``async/*`` keys. SkyRL saves no
configuration file beside its log (its config goes to the tracker and into checkpoints' trainer_state.pt).
"""

from coolsampler.results.sources import Bound, Key, Source
from coolsampler.spec.lag import Lag

_ASYNC = "skyrl/train/fully_async_trainer.py"
_LAG = (
    "over the step's kept groups (one prompt's samples each) of global_step - global_step_when_scheduled, the"
    " step being trained when the group's generation was dispatched (read after its capacity slot, L909-915,"
    " L934); weight syncs during its generation do not change it"
)
_LOSS = (
    "skyrl/backends/skyrl_train/utils/off_policy_correction_utils.py L307-312; prefixes"
    " skyrl/backends/skyrl_train/workers/worker.py L1121-1122, skyrl/train/trainer.py L1577-1578; reduced"
    " skyrl/backends/skyrl_train/workers/worker_utils.py L61-128"
)
_DIFF = (
    "|rollout_logprobs - action_log_probs| over the batch's loss-masked tokens, action_log_probs the"
    " trainer's forward pass at the step's start (pi_old); logged only where that pass runs (skipped for"
    " rollout_is/dppo without off-policy correction or KL: trainer.py L1279-1304)"
)

SOURCE = Source(
    system="skyrl",
    repo="NovaSky-AI/SkyRL",
    commit="a9564572eb8e91076be43c1bd5e4615e3de17265",
    formats=("TensorBoard",),
    files="tensorboard_log/events.out.tfevents.* below the launch directory ($TENSORBOARD_DIR moves it)",
    detect=("async/staleness_mean", "policy/loss_metrics/is_ratio_mean", "policy/rollout_train_logprobs_abs_diff_mean"),
    step="global_step: the trainer's step (1-based), one weight sync each; the evaluation before training at 0",
    keys=(
        Key("async/staleness_mean", "lag_mean", "mean " + _LAG, f"{_ASYNC} L997, L1117"),
        Key("async/staleness_max", "lag_max", "largest " + _LAG, f"{_ASYNC} L997, L1118"),
        Key("async/staleness_min", "lag_min", "smallest " + _LAG, f"{_ASYNC} L997, L1119"),
        Key(
            "policy/loss_metrics/is_ratio_mean",
            "is_raw_mean",
            "per token exp(old - rollout logprobs) (pi_old / q, log-ratio clamped at +-20 against overflow only),"
            " masked mean a micro-batch, before the off-policy masks and the TIS truncation; the mean over"
            " micro-batches, ranks and mini-batches; only with trainer.algorithm.off_policy_correction on",
            _LOSS,
        ),
        Key(
            "policy/loss_metrics/is_ratio_max",
            "is_raw_max",
            "largest (is_ratio * loss_mask) of the step (max over micro-batches, ranks and mini-batches), before"
            " the masks and the TIS truncation",
            _LOSS,
        ),
        Key(
            "policy/rollout_train_logprobs_abs_diff_mean",
            "logp_abs_diff",
            "mean " + _DIFF,
            "skyrl/train/trainer.py L1383-1405",
        ),
        Key(
            "policy/rollout_train_logprobs_abs_diff_max",
            "logp_abs_diff_max",
            "largest " + _DIFF,
            "skyrl/train/trainer.py L1383-1405",
        ),
        Key(
            "policy/grad_norm",
            "grad_norm",
            "the gradient norm of each optimizer step (one a mini-batch), mean over the step's",
            "skyrl/train/trainer.py L1546-1552, L1577-1578",
        ),
        Key(
            "reward/avg_raw_reward",
            "reward",
            "mean reward of the step's training responses (with sample_full_batch, the zero-variance groups it"
            " dropped included)",
            f"skyrl/train/trainer.py L1110-1115 (postprocess_generator_output, called at {_ASYNC} L1126)",
        ),
        Key(
            "eval/all/avg_score",
            "val_acc",
            "mean reward of the evaluation responses over every data source (0/1 rewards: its accuracy), merged"
            " into the step's dict (L613-619)",
            "skyrl/train/evaluate.py L133-140, L294-300",
        ),
    ),
    lag=Lag("dispatch", compared="pi_old", truncation="before"),
    bound=Bound(
        "trainer.fully_async.max_staleness_steps",
        4,
        ("trainer.fully_async.max_staleness_steps",),
        meaning="global steps from a group's dispatch to its training (j - i <= S), enforced as a capacity rule;"
        " a group past it is trained and counted in async/staleness_violation_count (skyrl/train/config/"
        "config.py L951-953; fully_async_trainer.py L181-187, L1019-1029); saved in no file beside the log",
    ),
    unknowable="stale drops (SkyRL trains a group past the bound, async/num_groups_dropped counts zero-variance"
    " groups); the gap to the evolving pi_theta (policy/minibatch_rollout_logprobs_abs_diff_*, unmapped)",
)
