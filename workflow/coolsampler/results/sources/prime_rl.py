"""prime-rl: the trainer's and the orchestrator's rows of each step, appended to one ``metrics.jsonl``.

Read at PrimeIntellect-ai/prime-rl 559b44772e471d1538537b8805cc77f3824a5e64 (paths and lines there). Its
``FileMonitor.log_metrics`` (src/prime_rl/monitors/file.py L33-41) appends ``{"step": step, "time": ...,
**metrics}`` rows to ``<output_dir>/<run.name>/metrics.jsonl``, on by default from 9975d8868 (2026-08-15):
five trainer rows (train.py L658-693) and one orchestrator row a step, and an evaluation row whose step is a
float (orchestrator.py L937-938). A trace's reward is keyed by its agent's name (metrics.py L334-335). The
``off_policy/*`` lag keys exist from 2441fd514 (2026-08-21); older versions logged their lag to wandb only.
"""

from coolsampler.results.sources import Bound, Key, Source
from coolsampler.spec.lag import Lag

_ORCH = "src/prime_rl/orchestrator/orchestrator.py"
_LAG = (
    "per episode max(0, (step - 1) - policy.start): the batch of step N trains on v{N-1}, policy.start is the"
    " version its generation started at (src/prime_rl/orchestrator/utils.py L57-70)"
)

SOURCE = Source(
    system="prime-rl",
    repo="PrimeIntellect-ai/prime-rl",
    commit="559b44772e471d1538537b8805cc77f3824a5e64",
    formats=("flat JSONL",),
    files="<output_dir>/<run.name>/metrics.jsonl",
    detect=("off_policy/mean", "mismatch_kl/all/mean", "off_policy/dropped"),
    step="step: the trainer's optimizer step (1-based), one policy version each; evaluation rows carry it as a float",
    keys=(
        Key(
            "off_policy/mean",
            "lag_mean",
            "mean over the step's episodes of " + _LAG,
            f"{_ORCH} L731-735, L747",
            component="orchestrator",
        ),
        Key(
            "off_policy/max",
            "lag_max",
            "largest over the step's episodes of " + _LAG,
            f"{_ORCH} L731-736, L747",
            component="orchestrator",
        ),
        Key(
            "off_policy/dropped",
            "lag_drops",
            "queued traces voided since the last ship because policy.start < (step - 1) - max_off_policy_steps",
            f"{_ORCH} L742; src/prime_rl/orchestrator/train_sink.py L166-205",
            component="orchestrator",
        ),
        Key(
            "mismatch_kl/all/mean",
            "k3_kl",
            "per token k3 (r - log r - 1), r = exp(log pi_trainer - log pi_inference), over the loss mask",
            "src/prime_rl/trainer/rl/loss.py L100-106; src/prime_rl/trainer/rl/train.py L496-512, L676",
            component="trainer",
        ),
        Key(
            "entropy/all/mean",
            "entropy",
            "the trainer's entropy per token, mean over the step's loss-masked tokens",
            "src/prime_rl/trainer/rl/train.py L484, L623, L676; src/prime_rl/trainer/utils.py L245-275",
            component="trainer",
        ),
        Key(
            "optim/grad_norm",
            "grad_norm",
            "the gradient norm of the step's one optimizer update (logged where optim.max_norm is set; default 1.0)",
            "src/prime_rl/trainer/rl/train.py L561-567, L660-667",
            component="trainer",
        ),
        Key(
            "train/agg/effective/*/reward/mean",
            "reward",
            "mean reward of the traces of the step's shipped cohort (effective), per agent (the key's second *;"
            " prime-rl pools no reward across agents: the first agent by name is read)",
            f"{_ORCH} L696-702; src/prime_rl/orchestrator/metrics.py L177-192, L244-248, L324-336",
            component="orchestrator",
        ),
        Key(
            "eval/*/effective/*/reward/mean",
            "val_acc",
            "mean reward of an evaluation's non-errored episodes, per environment and agent (0/1 rewards: its"
            " accuracy; the same value as its avg@k)",
            f"{_ORCH} L932-938; src/prime_rl/orchestrator/metrics.py L244-248, L324-336, L372-388",
            component="eval",
        ),
    ),
    lag=Lag("dispatch", compared="pi_old", truncation="none"),
    bound=Bound(
        "orchestrator.max_off_policy_steps",
        8,
        ("orchestrator.max_off_policy_steps", "max_off_policy_steps"),
        meaning="policy versions from dispatch to step - 1, enforced by dropping"
        " (packages/prime-rl-configs/src/prime_rl/configs/orchestrator.py L532-533)",
    ),
    components=("time",),
    unknowable="the lag's smallest value (no min is logged); the raw importance ratio (token exports only)",
)
