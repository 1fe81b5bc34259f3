"""verl's fully_async recipe (``verl/experimental/fully_async_policy``): verl's file logger, one step a policy version.

Read at verl-project/verl 1dda039b9c6311889a9c9a26040677e1254814f9, whose files cited here are byte-identical to
verl 0.9.1's (the version this project pins; it has no tag). The trainer logs through verl's ``Tracking``: with
``trainer.logger`` holding ``file``, ``{"step": current_param_version, "data": {...}}`` lines in
``./<project_name>/<experiment_name>.jsonl`` (verl/utils/tracking.py, the ``FileLogger``). Several rows share a
step: the sync row (rollouter timings), the validation row and the aggregated training row, which alone carries
``training/global_step`` (the micro-step count); the shared JSONL reader merges them into one record a step.
It logs no lag: only running counts of stale trajectories and of a full queue's drops, and a sample budget.
"""

from coolsampler.results.sources import Key, Source
from coolsampler.spec.lag import Lag

_FA = "verl/experimental/fully_async_policy"
_TRAINER = f"{_FA}/fully_async_trainer.py"
_ROLLOUTER = f"{_FA}/fully_async_rollouter.py"
_CORR = "verl/trainer/ppo/rollout_corr_helper.py"
# bypass mode (the recipe's default): the metrics come from the actor's loss against the policy it updates,
# prefixed actor/ by the worker's output (verl/trainer/ppo/ray_trainer.py L1371)
_BYPASS = "verl/trainer/ppo/core_algos.py L2495-2508; verl/trainer/ppo/ray_trainer.py L1371"

SOURCE = Source(
    system="verl-fully-async",
    repo="verl-project/verl",
    commit="1dda039b9c6311889a9c9a26040677e1254814f9",
    formats=("verl JSONL",),
    files="./<trainer.project_name>/<trainer.experiment_name>.jsonl",
    detect=(
        "fully_async/count/current_param_version",
        "fully_async/count/stale_trajectory_processed",
        "fully_async/static/staleness_threshold",
    ),
    step=(
        "step: the parameter version (current_param_version), one per trigger_parameter_sync_step micro-steps"
        f" ({_TRAINER} L687, L783-786, L808); training/global_step in the row counts micro-steps"
    ),
    keys=(
        Key(
            "fully_async/count/stale_trajectory_processed",
            "stale_total",
            "running total of trajectories whose newest version (max_global_steps) is at least one behind"
            " current_param_version when collected",
            f"{_TRAINER} L1038-1043",
        ),
        Key(
            "fully_async/count/dropped_stale_samples",
            "queue_drops_total",
            "running total of samples the message queue dropped because it was full (the oldest queued);"
            " despite its name no staleness is tested",
            f"{_ROLLOUTER} L1014, L1177; {_FA}/message_queue.py L66-73",
        ),
        Key(
            "actor/rollout_corr/kl",
            "kl",
            "k1: token mean of log q - log pi_theta (bypass mode: against the policy being updated)",
            f"{_CORR} L959; {_BYPASS}",
        ),
        Key(
            "actor/rollout_corr/k3_kl",
            "k3_kl",
            "k3: token mean of exp(r) - r - 1, r = log pi_theta - log q",
            f"{_CORR} L964-966; {_BYPASS}",
        ),
        Key(
            "actor/rollout_corr/chi2_token",
            "chi2_token",
            "token mean of rho^2 - 1, rho = pi_theta/q clamped at e^+-20",
            f"{_CORR} L997-1001; {_BYPASS}",
        ),
        Key(
            "actor/rollout_corr/chi2_seq",
            "chi2_seq",
            "mean over responses of exp(2 clamp(sum log rho, +-20)) - 1",
            f"{_CORR} L1004-1008; {_BYPASS}",
        ),
        Key(
            "actor/rollout_corr/log_ppl_diff",
            "log_ppl_diff",
            "mean over responses of mean_t log q - mean_t log pi_theta",
            f"{_CORR} L978-980; {_BYPASS}",
        ),
        Key(
            "actor/rollout_corr/log_ppl_abs_diff",
            "log_ppl_abs_diff",
            "mean over responses of |mean_t log q - mean_t log pi_theta|",
            f"{_CORR} L981; {_BYPASS}",
        ),
        Key(
            "actor/entropy_loss",
            "entropy",
            "the actor update's token-mean entropy (bypass mode skips the old-log-prob pass that logs actor/entropy)",
            "verl/workers/utils/losses.py L122-129",
        ),
        Key("critic/score/mean", "reward", "mean sequence score of the step", "verl/trainer/ppo/metric_utils.py L556"),
        Key("actor/grad_norm", "grad_norm", "the actor's gradient norm", "verl/workers/engine/base.py L130-131"),
        Key(
            "val-core/*/acc/mean@1",
            "val_acc",
            "greedy validation accuracy of a data source",
            "verl/trainer/ppo/ray_trainer.py L734",
        ),
        Key(
            "val-core/*/reward/mean@1",
            "val_acc",
            "greedy validation reward of a data source (where no acc is logged)",
            "verl/trainer/ppo/ray_trainer.py L734",
        ),
    ),
    # bypass mode (config/fully_async_ppo_trainer.yaml, its last lines): the mismatch is against pi_theta, and
    # the recipe applies no IS weights unless rollout_is is set
    lag=Lag(None, compared="pi_theta", truncation="none"),
    bound=None,
    notes=(
        "async_training.staleness_threshold (default 0.1, logged as fully_async/static/staleness_threshold) is a"
        f" sample budget, not a lag bound: the rollouter pauses once the samples started since the last sync"
        f" reach required_samples x (staleness_threshold + 1) x trigger_parameter_sync_step ({_ROLLOUTER}"
        " L493-497, L1155); no setting bounds a sample's lag in versions",
        "decoupled mode (algorithm.rollout_correction.bypass_mode=False) logs rollout_corr/* against pi_old"
        " without the actor/ prefix: not read by this mapping, which reads the recipe's default",
        "the training row at step v aggregates the last micro-step of version v-1's cycle and the first"
        f" trigger-1 of v's ({_TRAINER} L602-604, L910)",
    ),
    unknowable="the lag's distribution (counts only, and those cumulative); drops for staleness (none are made)",
    needs=("training/global_step",),
)
