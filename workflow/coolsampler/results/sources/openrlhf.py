"""OpenRLHF: TensorBoard event files of the PPO/GRPO trainer's rows and its evaluations, one row per global step.

Read at OpenRLHF/OpenRLHF 3c3be6234e0cb353e76bb8019947db9dfe99fca7 (paths and lines there). With
``--logger.tensorboard_dir`` its ``TensorboardLogger`` writes ``add_scalar("train/<k>", v, global_step)``
for every value of the step's status and ``add_scalar("eval/<k>", v, global_step)`` for an evaluation, into
``<tensorboard_dir>/<logger.wandb.run_name>`` (openrlhf/utils/logging_utils.py L112-135). ``global_step`` is
1-based: ``train_step`` returns ``global_step + 1`` before the row is logged (openrlhf/trainer/ppo_trainer.py
L264, L383-389), one policy version a step (the weights are broadcast to vLLM once a step, L244-248). The
dotted flags date from ed62d0e2 (2026-04-19); before it ``--async_queue_size``, and before 62987083
(2026-01-05) the environment variable ``OPENRLHF_ASYNC_QUEUE_SIZE``. OpenRLHF logs no lag and saves no
configuration file; wandb (online) and the stdout line ``Global step N: {...}`` are its other sinks.
"""

from coolsampler.results.sources import Bound, Key, Source
from coolsampler.spec.lag import Lag

_ACTOR = "openrlhf/trainer/ray/ppo_actor.py"
_TRAINER = "openrlhf/trainer/ppo_trainer.py"

SOURCE = Source(
    system="openrlhf",
    repo="OpenRLHF/OpenRLHF",
    commit="3c3be6234e0cb353e76bb8019947db9dfe99fca7",
    formats=("TensorBoard",),
    files="<logger.tensorboard_dir>/<logger.wandb.run_name>/events.out.tfevents.*",
    detect=("train/vllm_kl", "train/actor_grad_norm", "train/rollout/reward_mean", "train/ppo_clip_ratio"),
    step=(
        "the TensorBoard step OpenRLHF passes to add_scalar: global_step (1-based, one rollout batch and one"
        " weight broadcast each); an evaluation is logged at the step whose weights it scored"
    ),
    keys=(
        Key(
            "train/vllm_kl",
            "kl",
            "k1 mean over the step's action tokens of log q - log pi_old, q the vLLM engine's (processed)"
            " log-probs, pi_old the actor's log-probs recomputed at the start of the step; token-weighted over"
            " micro-batches and ranks (only with --algo.advantage.is_correction_enable and policy loss ppo):"
            " verl's rollout_corr/kl, the same estimator in the same direction",
            f"openrlhf/models/loss.py L196-218; {_ACTOR} L305-317, L385-388; {_ACTOR} L198-258",
        ),
        Key(
            "train/entropy_loss",
            "entropy",
            "the updating actor's entropy per action token (only with --actor.entropy_coef set)",
            f"{_ACTOR} L345-353, L371-373",
        ),
        Key("train/actor_grad_norm", "grad_norm", "the actor's gradient norm", f"{_ACTOR} L376-381"),
        Key(
            "train/rollout/reward_mean",
            "reward",
            "mean reward of the step's rollout samples (before dynamic batching)",
            f"{_TRAINER} L412-427, L260-261",
        ),
        Key(
            "eval/eval_*_pass1",
            "val_acc",
            "mean over an evaluation data set's prompts of the mean reward of its samples (0/1 rewards: the"
            " accuracy, at --eval.temperature)",
            f"{_TRAINER} L126-131, L578-589; openrlhf/trainer/ppo_trainer_async.py L211-218",
        ),
    ),
    lag=Lag(None, compared="pi_old", truncation="none"),
    bound=Bound(
        "--train.async_queue_size",
        1,
        ("train.async_queue_size", "async_queue_size"),
        meaning="rollout batches generated ahead of the trainer in the async trainer (--train.async_enable):"
        " a batch is trained at most this many global steps after the weights that generated it"
        " (openrlhf/cli/train_ppo_ray.py L275; openrlhf/trainer/ppo_trainer_async.py L287-297, L110, L229-230);"
        " the synchronous trainer's lag is 0",
    ),
    notes=(
        "train/* and eval/* scalars are at global_step as OpenRLHF passes it, the learner step itself",
        "the async trainer logs an evaluation at the step carried by the generator's slot token, which can be"
        " behind the latest training row (ppo_trainer_async.py L110-124, L211-218)",
        "the IS weights of the vLLM correction, their clip fraction and mask are not logged: vllm_kl is the only"
        " train/infer mismatch key",
    ),
    unknowable=(
        "the lag itself (only its bound: --train.async_queue_size, from the launch command, which OpenRLHF does"
        " not save; over-sampling (--rollout.vllm_generate_batch_size) and partial rollouts add to it); any"
        " importance ratio"
    ),
)
