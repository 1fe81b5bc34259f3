"""AReaL: one dict of stats a global step, from the actor's, the rollout's and the eval rollout's trackers.

Read at inclusionAI/AReaL 4aef98d8d818af55b43621aaadba047ae10f4e77 (paths and lines there). ``StatsLogger.commit``
(areal/utils/stats_logger.py L135-159) writes the merged dict (areal/trainer/rl_trainer.py L1183-1189) once a
step, on rank 0: always as a fancy_grid table on stdout (4 significant digits), and with
``stats_logger.tensorboard.path`` set (default none, areal/api/cli_args.py L2359-2362) as TensorBoard scalars
``add_scalar(key, value, step)`` (tensorboardX, float32), the one local full-precision file, read here. Its
step is the 0-based global step. The staleness keys exist from 83b786ed9 (2025-11-28), ``compute_logp/kl_div_*``
from dfeab6396 (2026-03-19). The full configuration is saved as ``config.yaml`` in
``<fileroot>/logs/<user>/<experiment>/<trial>/`` (areal/api/cli_args.py L2971-2995).
"""

from coolsampler.results.sources import Bound, Key, Source
from coolsampler.spec.lag import Lag

_ACTOR = "areal/trainer/ppo/actor.py"
_VERSIONS = "ppo_actor/update/version_stats/sample_staleness_theta"
_LAG = (
    "per token current_version - version of the token's generation (prompt tokens left out), current_version"
    " the trainer's version during the step (the 0-based global step: one version a global step, of"
    " actor.ppo_n_minibatches optimizer updates; rl_trainer.py L731-738); a scalar() stat, so the step's value"
    " is the mean over micro-batches and data-parallel ranks of each micro-batch's"
)
_LAG_CITE = f"{_ACTOR} L587-593, L1065-1109 (scopes L252, L341, L1078); areal/utils/stats_tracker.py L202-215"

SOURCE = Source(
    system="areal",
    repo="inclusionAI/AReaL",
    commit="4aef98d8d818af55b43621aaadba047ae10f4e77",
    formats=("TensorBoard",),
    files="<stats_logger.tensorboard.path>/events.out.tfevents.* (tensorboardX; the setting is off by default)",
    detect=(f"{_VERSIONS}_avg", "ppo_actor/update/compute_logp/kl_div_direct/avg"),
    step="the 0-based global step (log_step, areal/utils/stats_logger.py L145): every key of it, the evaluation's"
    " too (run after the update), belongs to learner step + 1 (each Key's offset)",
    keys=(
        Key(f"{_VERSIONS}_avg", "lag_mean", _LAG + " token mean", _LAG_CITE, offset=1),
        Key(
            f"{_VERSIONS}_max",
            "lag_max",
            _LAG + " largest token lag: the mean of the micro-batches' maxima, not the step's maximum",
            _LAG_CITE,
            offset=1,
        ),
        Key(
            f"{_VERSIONS}_min",
            "lag_min",
            _LAG + " smallest token lag: the mean of the micro-batches' minima, not the step's minimum",
            _LAG_CITE,
            offset=1,
        ),
        Key(
            "ppo_actor/update/compute_logp/kl_div_direct/avg",
            "kl_pi_theta",
            "per token -(log pi_theta - log old_logp), token mean over the step's micro-batches (stat(): AVG_MIN_MAX);"
            " pi_theta the training forward of each update, old_logp the inference engine's log-probs (by default;"
            " the recomputed pi_old with recompute_logprob and no decoupled loss, L175-190): verl's k1 direction,"
            " against pi_theta, not pi_old, so not kl",
            f"{_ACTOR} L1045-1061 (scope L995, logged only with versions L1006-1007)",
            offset=1,
        ),
        Key(
            "ppo_actor/update/grad_norm",
            "grad_norm",
            "the gradient norm of each update (one a minibatch), mean over the step's actor.ppo_n_minibatches",
            f"{_ACTOR} L341, L364-365; areal/engine/fsdp_engine.py L682-711",
            offset=1,
        ),
        Key(
            "rollout/reward",
            "reward",
            "mean reward of the rollouts finished since the last commit (scalar(): the mean of each sample's)",
            "areal/workflow/rlvr.py L135; areal/infra/workflow_context.py L51-59",
            offset=1,
        ),
        Key(
            "eval-rollout/reward",
            "val_acc",
            "mean reward of the evaluation rollouts of the step, merged into its dict (0/1 rewards: its accuracy)",
            "areal/workflow/rlvr.py L135; areal/infra/workflow_context.py L51-59; areal/trainer/rl_trainer.py"
            " L1183-1189",
            offset=1,
        ),
    ),
    lag=Lag("token", compared="pi_theta", truncation="none"),
    bound=Bound(
        "rollout.max_head_offpolicyness",
        0,
        ("rollout.max_head_offpolicyness",),
        meaning="policy versions a request may lag the trainer's, a capacity rule on submission, not a per-sample"
        " check (areal/api/cli_args.py L2039-2046; areal/infra/staleness_manager.py L93-112)",
    ),
    unknowable="the step's largest and smallest token lag (only the micro-batch means of them); no stale drops"
    " (AReaL drops none); the k1 against pi_old (its kl_div_* compare pi_theta)",
)
