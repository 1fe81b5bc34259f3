"""slime: TensorBoard event files of the Megatron trainer's rows, its rollout rows and its evaluations.

Read at THUDM/slime 624b824a898ab0ec1fcb4d373004c7f3852bf515 (paths and lines there). With
``--use-tensorboard`` one writer (``$TENSORBOARD_DIR``, else ``tensorboard_log/<tb_project_name>/<tb_experiment_name>``,
slime/observability/tensorboard_utils.py L41-47) gets ``add_scalar(key, value, metrics[step_key])`` for every
key of a row but the step key itself (slime/observability/logging_utils.py L45-51): ``train/*`` at
``train/step``, ``rollout/*`` at ``rollout/step``, ``eval/*`` at ``eval/step``. The step slime passes is
0-based: ``rollout_id * num_steps_per_rollout + step_id`` for a training row (model.py L879, L897), the
rollout's id for a rollout row and for the evaluation after that rollout was trained. slime logs no lag
and saves no configuration file; wandb (online) is its other sink.
"""

from coolsampler.results.sources import Bound, Key, Source
from coolsampler.spec.lag import Lag

_LOSS = "slime/backends/megatron_utils/loss.py"
_MODEL = "slime/backends/megatron_utils/model.py"
# every train/* value is reduced per optimizer step as a mean over the step's samples of per-sample token
# means (a token mean under --calculate-per-token-loss): slime/observability/train_metric_utils.py L18-59
_MEAN = "; the step's mean over samples of each sample's token mean (train_metric_utils.py L18-59)"

SOURCE = Source(
    system="slime",
    repo="THUDM/slime",
    commit="624b824a898ab0ec1fcb4d373004c7f3852bf515",
    formats=("TensorBoard",),
    files="tensorboard_log/<tb_project_name>/<tb_experiment_name>/events.out.tfevents.*",
    detect=("train/train_rollout_logprob_abs_diff", "train/tis_clipfrac", "train/pg_clipfrac", "rollout/raw_reward"),
    step=(
        "the TensorBoard step slime passes to add_scalar: train/step = rollout_id * num_steps_per_rollout +"
        " step_id (0-based optimizer steps), read as learner step train/step + 1; rollout/step and eval/step ="
        " the rollout's id, read as the learner step of that rollout (one optimizer step per rollout)"
    ),
    keys=(
        Key(
            "train/train_rollout_logprob_abs_diff",
            "logp_abs_diff",
            "|log pi - log q| per token, q the rollout engine's (SGLang) log-probs, pi the actor's log-probs"
            " recomputed before training this rollout (pi_old), or the updating pi_theta with"
            " --use-rollout-logprobs" + _MEAN,
            f"{_LOSS} L1136-1140, L1150-1151; {_MODEL} L882-885",
            offset=1,
        ),
        Key(
            "train/tis",
            "is_raw_mean",
            "exp(log pi_old - log q) per token, before its clamp to [--tis-clip-low, --tis-clip] (logged only"
            " with --use-tis or --get-mismatch-metrics)" + _MEAN,
            f"{_LOSS} L893-900, L1050, L1156-1163",
            offset=1,
        ),
        Key(
            "train/entropy_loss",
            "entropy",
            "the updating actor's entropy per token" + _MEAN,
            f"{_LOSS} L1109-1112, L1145",
            offset=1,
        ),
        Key(
            "train/grad_norm",
            "grad_norm",
            "the actor's gradient norm of the optimizer step",
            f"{_MODEL} L886",
            offset=1,
        ),
        Key(
            "rollout/raw_reward",
            "reward",
            "mean raw reward of the rollout's samples (before any reward post-processing)",
            "slime/observability/train_metric_utils.py L189-221, L134-138; slime/ray/rollout.py L663, L809-812",
            offset=1,
        ),
        Key(
            "eval/*",
            "val_acc",
            "mean reward of an evaluation data set's samples (0/1 rewards: its accuracy), logged after the"
            " rollout of that id was trained; the first key in order is the data set's own (its"
            " eval/<name>/... and eval/<name>-... companions sort after it)",
            "slime/observability/rollout_metrics.py L229-251; train_async.py L72-73",
            offset=1,
        ),
    ),
    lag=Lag(None, compared="mixed", truncation="before"),
    bound=Bound(
        "--update-weights-interval",
        1,
        ("update_weights_interval", "update-weights-interval"),
        meaning="rollouts between weight pushes to SGLang in train_async.py (L66-70): rollout r+1 is dispatched"
        " before rollout r is trained (L32-40), so a trained rollout is 1 to update_weights_interval rollouts"
        " old, each one optimizer step with one step per rollout (slime/utils/arguments.py L537-541)",
    ),
    notes=(
        "train/* scalars are at slime's 0-based optimizer step (train/step), rollout/* and eval/* at the rollout's"
        " id; with one optimizer step per rollout both read as learner step + 1; with --num-steps-per-rollout > 1"
        " the rollout and evaluation rows count rollouts, not steps (--wandb-always-use-train-step moves them to"
        " the rollout's first optimizer step), which the event files do not say",
        "train_async.py evaluates only after a rollout was trained (L72-73); train.py also evaluates before"
        " training (L50-51), at eval/step 0, which reads as after step 1",
        "ois, tis_abs and the examples' mis_* keys are not read; slime keeps no max/min of any key",
    ),
    unknowable=(
        "the lag itself (only its bound: --update-weights-interval, from the launch command, which slime does"
        " not save); the largest or smallest ratio (means only); optimizer steps per rollout"
    ),
)
