"""ROLL: the driver's ``metrics_tag:`` lines, one a pipeline step, in ``log_rank_DRIVER_0_1.log``.

Read at alibaba/ROLL 8eb27cc2dc34c4d1310b169d9b86d339004d811a (paths and lines there). With ``track_with:
stdout`` the tracker logs ``metrics_tag: {"step": global_step, "metrics": {...}}`` once a pipeline step, the
metric names stripped of their reducer tags (roll/utils/tracking.py L15-53, L154-164; rlvr_pipeline.py
L815-822); every driver line also goes to ``<logging_dir>/<exp_name>/log_rank_DRIVER_0_1.log``
(``logging_dir`` default ``./output/logs``; roll/utils/logging.py L20-47), opened anew on each start. The
default tracker, TensorBoard, writes the same names at the same step. ``global_step`` counts from 0, and the
row of step g holds the validation of the weights pushed at its start (after g updates, rlvr_pipeline.py
L516-533) beside the metrics of the update it then makes (the (g+1)-th). On resume the driver re-logs the
history saved with the checkpoint (roll/pipeline/base_pipeline.py L79-83). The RLVR pipeline logs the lag;
the agentic pipeline does not.
"""

from coolsampler.results.sources import Bound, Key, Source
from coolsampler.spec.lag import Lag

_RLVR = "roll/pipeline/rlvr/rlvr_pipeline.py"
_CORR = "roll/utils/train_infer_corrections.py"
_MM = "roll/utils/metrics/metrics_manager.py"

SOURCE = Source(
    system="roll",
    repo="alibaba/ROLL",
    commit="8eb27cc2dc34c4d1310b169d9b86d339004d811a",
    formats=("metrics_tag lines", "TensorBoard"),
    files="output/logs/<exp_name>/log_rank_DRIVER_0_1.log",
    detect=("*/scheduler/off_policy_ratio", "actor/train_infer_ratio_token_mean", "actor/is_weight_clipfrac"),
    step=(
        "the metrics_tag line's step: ROLL's global_step (0-based pipeline steps, one weight push each); its"
        " training metrics read as learner step global_step + 1, its validation as learner step global_step"
        " (the weights after global_step updates)"
    ),
    keys=(
        Key(
            "*/scheduler/off_policy_ratio",
            "lag_mean",
            "mean over the step's collected samples of current_step - sampling_start_step, the replay buffer's"
            " step when the prompt's generation began (a mean age in pipeline steps, not a ratio); <domain>/ is"
            " the data set's domain, and of several domains the first in order is read",
            f"roll/distributed/scheduler/generate_scheduler.py L703-727; {_MM} L41-48; {_RLVR} L549-553",
            offset=1,
        ),
        Key(
            "actor/train_infer_ratio_token_mean",
            "is_raw_mean",
            "exp(log pi_old - log q) per token, q the inference engine's log-probs, before any clamp, reduced"
            " seq-mean-token-mean (each sequence's token mean, then the mean over sequences); always logged",
            f"{_CORR} L14-20, L96-103; roll/utils/tracking.py L15-53",
            offset=1,
        ),
        Key(
            "actor/is_weight_clipfrac",
            "is_cap_frac",
            "fraction of the step's tokens whose IS weight (the token ratio under the default weight_type token)"
            " is above train_infer_correction.is_weight.upper_bound, where it is clamped (only with is_weight"
            " enabled)",
            f"{_CORR} L111-124; roll/configs/base_config.py L424-441",
            offset=1,
        ),
        Key(
            "critic/entropy/mean",
            "entropy",
            "token-mean entropy of the actor's old-log-prob pass (0 where that pass is skipped)",
            f"{_MM} L186, L194; {_RLVR} L650-655",
            offset=1,
        ),
        Key(
            "actor_train/grad_norm",
            "grad_norm",
            "the actor's gradient norm",
            "roll/distributed/strategy/megatron_strategy.py L1348; roll/distributed/strategy/fsdp2_strategy.py"
            " L1663; roll/configs/base_config.py L651",
            offset=1,
        ),
        Key(
            "critic/score/mean",
            "reward",
            "mean score of the step's training responses",
            f"{_MM} L174-177, L206; {_RLVR} L751-757",
            offset=1,
        ),
        Key(
            "val_correct/all/mean",
            "val_acc",
            "fraction of the validation responses scored 1, with the weights pushed at the start of the step",
            f"{_RLVR} L528-533, L876-877",
        ),
    ),
    lag=Lag("dispatch", compared="pi_old", truncation="before"),
    bound=Bound(
        "async_generation_ratio",
        0,
        ("async_generation_ratio",),
        meaning="pipeline steps of generation ahead of training; 0, the default, means a synchronous pipeline"
        " (lag 0), and an asynchronous one needs at least 1 (roll/configs/base_config.py L502-507;"
        " roll/pipeline/rlvr/rlvr_config.py L221-222); groups older than ceil(ratio) steps are not trained"
        " (roll/distributed/scheduler/generate_scheduler.py L349-366)",
    ),
    notes=(
        "each row's training metrics are moved to learner step global_step + 1 and its validation kept at"
        " global_step, so that the validation after the last update is in a row of its own, as ROLL would log"
        " it at the next pipeline step",
        "metrics_tag lines exist only with track_with: stdout; the raw json.dumps(metrics) line beside them"
        " keeps the reducer tags and no step wrapper, and is not read",
        "the samples dropped as too stale are only said in log lines (ReplayBuffer ... garbage collect"
        " groups), never counted in a metric",
    ),
    unknowable=(
        "the lag's max and min (a mean only), and any lag in the agentic pipeline; the samples dropped as too"
        " stale; the largest importance ratio"
    ),
)
