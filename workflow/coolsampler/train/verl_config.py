"""verl's own configuration checks on a run's overrides, without starting verl.

A paper run costs hours on 4 GPUs; a configuration verl rejects should fail in CI, not after the job
has queued, started Ray and loaded a 7B model. This module composes verl's real Hydra config with a
run's overrides and walks the path ``python -m verl.trainer.main_ppo`` takes until it would touch a
GPU, the model or the data, running every check verl runs on that path (verl 0.9.1, patched):

1. ``verl/trainer/main_ppo.py``, ``main``: ``@hydra.main(config_path="config",
   config_name="ppo_trainer")`` -> here Hydra's compose API on the same directory and name (an
   unknown key, a bad type or a missing ``+`` fails here, as on the command line);
   ``auto_set_device(config)``; ``validate_config(config, need_reference_policy(config),
   need_critic(config))`` (batch divisibility by n_gpus, micro-batch settings, the actor config's
   ``__post_init__``/``validate``, critic, validation sampling, LoRA).
2. ``trainer.use_v1`` (the default) -> ``TaskRunnerV1.run``: ``config.transfer_queue.enable =
   True``, ``OmegaConf.resolve(config)`` (every interpolation), ``get_trainer_cls(trainer.v1.
   trainer_mode)`` and the trainer's ``__init__`` (``verl/trainer/ppo/v1/trainer_base.py``
   ``PPOTrainer.__init__``: checkpoint callback, KL controller, replay buffer, and patch 0003's
   sampler-temperature controller from ``trainer.sampler_temperature_spec``).
3. ``PPOTrainer._setup``: ``_init_resource_pool_mgr`` (roles, pools, reward-model pool sizes), the
   optimiser horizon ``_init_dataloader`` writes into ``actor.optim.total_training_steps``, the
   critic / distillation / checkpoint-engine conversions (``omega_conf_to_dataclass``).
4. ``verl/workers/engine_workers.py``, ``ActorRolloutRefWorker.__init__`` and ``init_model``, as the
   role the trainer picks: profiler configs; the ref config rewritten from ``log_prob_*`` keys
   exactly as ``init_model`` does, then ``ActorConfig``; the actor's ``ActorConfig``; the
   ``TrainingWorkerConfig`` each gets (engine, optimiser, checkpoint config); the assertions on
   dynamic batch size and micro-batch sizes; ``RolloutConfig`` and the rollout world-size
   divisibility (world size = the actor-rollout worker group = n_gpus); the checkpoint-engine
   backend. Registries are looked up by name without importing the backend (engine by model type
   and strategy, rollout by name and mode, checkpoint engine, advantage estimator, policy loss).
5. Runtime checks verl only makes once data flows, mirrored with their source cited:
   ``verl/workers/engine/utils.py`` ``prepare_micro_batches`` asserts each data-parallel rank's
   batch divides by its micro-batch size (per-rank mini-batch for ``update_actor``, per-rank batch
   for the log-prob passes); the policy loss is looked up in ``POLICY_LOSS_REGISTRY`` by
   ``ppo_loss`` (``coolsampler.worker.losses`` is imported first, as ``VERL_USE_EXTERNAL_MODULES``
   does in every worker); the reward function is loaded from its path as the reward workers do
   (``verl/trainer/ppo/reward.py``, ``get_custom_reward_fn``).

Where it stops (what it does NOT check, because it needs the model or the data):
``HFModelConfig.__post_init__`` downloads/reads the tokenizer and the HF config from
``actor_rollout_ref.model.path`` (``PPOTrainer._init_tokenizer``, ``init_model``), so the model
section is only merged onto the ``HFModelConfig`` schema (unknown keys and bad types fail) and not
instantiated; datasets (``_init_dataloader``: prompt length vs ``data.max_prompt_length``,
``truncation``), the FSDP engine and the vLLM server (engine arguments, attention backend, memory)
are not built. ``migrate_legacy_reward_impl`` (``verl/experimental/reward_loop``) is called only by
the fully-async entry point, not by ``main_ppo``, so it is not applied here either.

    python -m coolsampler.train.verl_check --study config/paper.yaml --platform gpu

prints one line per run (``ok`` or verl's message) and exits 1 if any run fails.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import verl
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig, OmegaConf, open_dict

CONFIG_DIR = Path(verl.__file__).parent / "trainer" / "config"  # main_ppo's config_path="config"
CONFIG_NAME = "ppo_trainer"  # main_ppo's config_name


class VerlConfigError(ValueError):
    """verl rejects a run's configuration; the message names the run and quotes verl."""


def compose_config(overrides: Sequence[str]) -> DictConfig:
    """verl's config for ``overrides``, as ``@hydra.main`` in ``main_ppo`` builds it.

    ``hydra.*`` overrides (``hydra.run.dir``, ``hydra.output_subdir``) are passed too: compose
    accepts them (they set Hydra's own node, which ``@hydra.main`` strips from the job config, as
    compose does). Hydra's global state is cleared before and after, so calls do not leak into each
    other or into a caller's Hydra.
    """
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
            return compose(config_name=CONFIG_NAME, overrides=list(overrides))
    finally:
        GlobalHydra.instance().clear()


def check_config(config: DictConfig, n_gpus: int | None = None) -> None:
    """Run verl's checks (module docstring, steps 1-5) on a composed config, mutating it as verl does.

    ``n_gpus``: the GPUs the job gets; it must equal ``trainer.n_gpus_per_node * trainer.nnodes``,
    which is what verl itself uses. Raises whatever verl raises (AssertionError, ValueError, ...).
    """
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config
    from verl.utils.device import auto_set_device

    # 1. main_ppo.main
    auto_set_device(config)
    world = int(config.trainer.n_gpus_per_node) * int(config.trainer.nnodes)
    if n_gpus is not None and world != n_gpus:
        raise ValueError(f"trainer.n_gpus_per_node * trainer.nnodes = {world}, but the job gets {n_gpus} GPUs")
    use_ref, use_critic = need_reference_policy(config), need_critic(config)
    validate_config(config=config, use_reference_policy=use_ref, use_critic=use_critic)
    if not config.trainer.use_v1:
        raise ValueError("trainer.use_v1=false selects verl's deprecated v0 trainer; the patches target v1")

    # 2. TaskRunnerV1.run and the trainer's __init__
    from verl.trainer.ppo.v1 import get_trainer_cls

    trainer_cls = get_trainer_cls(config.trainer.v1.trainer_mode)
    config.transfer_queue.enable = True
    OmegaConf.resolve(config)
    trainer = trainer_cls(config=config)

    # 3. PPOTrainer._setup, up to the worker groups
    trainer._init_resource_pool_mgr()
    _optimiser_horizon(trainer)
    if use_critic:
        critic = omega_conf_to_dataclass(config.critic)
        if config.critic.get("profiler", {}):
            omega_conf_to_dataclass(config.critic.profiler)
        mini = "critic.ppo_mini_batch_size"
        _check_micro_batches("critic update", mini, config, critic.ppo_micro_batch_size_per_gpu, world)
    from verl.trainer.distillation import is_distillation_enabled

    if is_distillation_enabled(config.get("distillation")):
        omega_conf_to_dataclass(config.distillation)
    ckpt_engine = omega_conf_to_dataclass(config.actor_rollout_ref.rollout.checkpoint_engine)
    ckpt_engine.backend = "naive"  # the trainer's manager; the worker keeps the configured backend

    # 4. the actor-rollout(-ref) worker
    from verl.trainer.ppo.utils import Role

    mapping = trainer.role_worker_mapping
    actor_role = next(r for r in (Role.Actor, Role.ActorRolloutRef, Role.ActorRollout) if r in mapping)
    _check_worker(copy.deepcopy(config.actor_rollout_ref), str(actor_role), world)
    if Role.RefPolicy in mapping:  # a separate ref worker (no colocated rollout)
        _check_worker(copy.deepcopy(config.actor_rollout_ref), str(Role.RefPolicy), world)

    # 5. checks verl makes only at run time
    _check_runtime(config, world, use_ref)


def _optimiser_horizon(trainer) -> None:
    """What ``PPOTrainer._init_dataloader`` writes into the optimiser configs (needs no data when
    ``trainer.total_training_steps`` is set, as every coolsampler run sets it)."""
    config = trainer.config
    steps = config.trainer.total_training_steps
    if steps is None:
        raise ValueError("trainer.total_training_steps is null: verl would derive it from the dataset size")
    with open_dict(config):
        if OmegaConf.select(config, "actor_rollout_ref.actor.optim"):
            config.actor_rollout_ref.actor.optim.total_training_steps = steps * trainer.parameter_sync_step
        if OmegaConf.select(config, "critic.optim"):
            config.critic.optim.total_training_steps = steps * trainer.parameter_sync_step


def _check_worker(arr: DictConfig, role: str, world: int) -> None:
    """``ActorRolloutRefWorker.__init__`` + ``init_model`` for ``role``, minus models and devices."""
    from verl.checkpoint_engine import CheckpointEngineRegistry
    from verl.utils.config import omega_conf_to_dataclass
    from verl.utils.profiler import ProfilerConfig
    from verl.workers.config import ActorConfig, HFModelConfig, TrainingWorkerConfig
    from verl.workers.engine import EngineRegistry
    from verl.workers.rollout.base import _ROLLOUT_REGISTRY

    is_actor = role in ("actor", "actor_rollout", "actor_rollout_ref")
    is_rollout = role in ("rollout", "actor_rollout", "actor_rollout_ref")
    omega_profiler = arr.actor.get("profiler", {}) if is_actor else arr.rollout.get("profiler", {})
    omega_conf_to_dataclass(omega_profiler, dataclass_type=ProfilerConfig)
    tool = omega_profiler.get("tool", None)
    if tool in ["npu", "nsys", "torch", "torch_memory", "precision_debugger"]:
        omega_conf_to_dataclass(omega_profiler.get("tool_config", {}).get(tool))

    # HFModelConfig.__post_init__ reads the tokenizer and HF config from model.path: schema only
    OmegaConf.merge(OmegaConf.structured(HFModelConfig), arr.model)
    use_remove_padding = arr.model.get("use_remove_padding", False)

    def training_config(actor: ActorConfig, profiler: DictConfig) -> TrainingWorkerConfig:
        if actor.strategy not in EngineRegistry._engines["language_model"]:
            raise ValueError(f"no verl training engine for strategy {actor.strategy!r}")
        return TrainingWorkerConfig(
            model_type="language_model",
            engine_config=actor.engine,
            optimizer_config=actor.optim,
            checkpoint_config=actor.checkpoint,
            profiler_config=omega_conf_to_dataclass(profiler) if profiler else None,
        )

    if "ref" in role:
        with open_dict(arr.ref):
            arr.ref.ppo_mini_batch_size = arr.actor.ppo_mini_batch_size
            arr.ref.ppo_micro_batch_size = arr.ref.pop("log_prob_micro_batch_size", None)
            arr.ref.ppo_micro_batch_size_per_gpu = arr.ref.pop("log_prob_micro_batch_size_per_gpu", None)
            arr.ref.use_dynamic_bsz = arr.ref.pop("log_prob_use_dynamic_bsz", False)
            arr.ref.ppo_max_token_len_per_gpu = arr.ref.pop("log_prob_max_token_len_per_gpu", None)
        ref = omega_conf_to_dataclass(arr.ref)
        cfg = training_config(ref, arr.ref.get("profiler", {}))
        cfg.engine_config.use_dynamic_bsz = arr.ref.use_dynamic_bsz
        cfg.engine_config.infer_max_token_len_per_gpu = arr.ref.ppo_max_token_len_per_gpu
        cfg.engine_config.infer_micro_batch_size_per_gpu = arr.ref.ppo_micro_batch_size_per_gpu
        cfg.engine_config.use_remove_padding = use_remove_padding
        if not arr.ref.use_dynamic_bsz:
            assert arr.ref.ppo_micro_batch_size_per_gpu is not None, "ref log_prob_micro_batch_size_per_gpu is null"

    if is_actor:
        actor = omega_conf_to_dataclass(arr.actor)
        cfg = training_config(actor, omega_profiler)
        assert arr.actor.use_dynamic_bsz == arr.rollout.log_prob_use_dynamic_bsz, (
            "actor.use_dynamic_bsz must equal rollout.log_prob_use_dynamic_bsz (engine_workers.init_model)"
        )
        cfg.engine_config.use_dynamic_bsz = arr.actor.use_dynamic_bsz
        cfg.engine_config.infer_max_token_len_per_gpu = arr.rollout.log_prob_max_token_len_per_gpu
        cfg.engine_config.infer_micro_batch_size_per_gpu = arr.rollout.log_prob_micro_batch_size_per_gpu
        cfg.engine_config.max_token_len_per_gpu = arr.actor.ppo_max_token_len_per_gpu
        cfg.engine_config.micro_batch_size_per_gpu = arr.actor.ppo_micro_batch_size_per_gpu
        cfg.engine_config.use_remove_padding = use_remove_padding
        if arr.actor.use_dynamic_bsz:
            assert arr.rollout.log_prob_max_token_len_per_gpu is not None
            assert arr.actor.ppo_max_token_len_per_gpu is not None
        else:
            assert arr.rollout.log_prob_micro_batch_size_per_gpu is not None
            assert arr.actor.ppo_micro_batch_size_per_gpu is not None
        if cfg.engine_config.ulysses_sequence_parallel_size > 1 and not use_remove_padding:
            # FSDPEngine.__init__
            raise ValueError("ulysses_sequence_parallel_size > 1 needs model.use_remove_padding")
        ckpt = omega_conf_to_dataclass(arr.rollout.checkpoint_engine)
        if ckpt.backend not in CheckpointEngineRegistry._registry:
            raise ValueError(f"checkpoint engine backend {ckpt.backend!r} is not registered")

    if is_rollout:
        rollout = omega_conf_to_dataclass(arr.rollout)
        infer_world = (
            rollout.tensor_model_parallel_size * rollout.data_parallel_size * rollout.pipeline_model_parallel_size
        )
        assert world % infer_world == 0, (
            f"rollout world_size: {world} is not divisible by infer_world_size: {infer_world}"
        )
        if (rollout.name, rollout.mode) not in _ROLLOUT_REGISTRY:
            raise ValueError(f"Rollout {rollout.name} with mode {rollout.mode} not found")


def _check_micro_batches(what: str, prompts: str, config: DictConfig, micro: int | None, world: int) -> None:
    """``prepare_micro_batches`` (verl/workers/engine/utils.py) asserts ``len(data) % micro == 0`` on
    each rank, and ``train_mini_batch`` (engine_workers.py) that a mini-batch splits over the dp ranks.
    A rank holds ``prompts * rollout.n / dp`` samples: ``prompts`` is ``actor.ppo_mini_batch_size``
    for an update (``trainer_base._update_actor`` sends mini-batches of it times n), the step's
    ``data.train_batch_size`` for a log-prob pass."""
    if micro is None:
        return
    count = int(OmegaConf.select(config, prompts))
    n = int(config.actor_rollout_ref.rollout.n)
    # the FSDP actor's data-parallel ranks: the world size over Ulysses sequence parallelism
    actor = config.actor_rollout_ref.actor
    sp = int(actor.get("ulysses_sequence_parallel_size", 1))
    dp = world // max(sp, int(actor.fsdp_config.get("ulysses_sequence_parallel_size", 1)))
    per_rank, rem = divmod(count * n, dp)
    if rem or per_rank % micro:
        raise ValueError(
            f"{what}: a data-parallel rank gets {prompts} * rollout.n / dp = {count}*{n}/{dp} samples, not "
            f"divisible by its micro batch {micro} (verl asserts this at the first step: 'data size must be "
            "divisible by force_group_size * micro_batch_size_per_gpu')"
        )


def _check_runtime(config: DictConfig, world: int, use_ref: bool) -> None:
    """Step 5 of the module docstring. Each log-prob pass is checked only where the v1 trainer runs
    it: the old-policy pass not in bypass mode (``_compute_old_log_prob`` then reuses the sampler's
    log-probs), the reference pass only with a reference policy."""
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn, get_policy_loss_fn
    from verl.trainer.ppo.reward import get_custom_reward_fn

    import coolsampler.worker.losses  # noqa: F401  (registers the corrections' policy losses, as VERL_USE_EXTERNAL_MODULES does)

    actor = config.actor_rollout_ref.actor
    if not actor.use_dynamic_bsz:
        mini = "actor_rollout_ref.actor.ppo_mini_batch_size"
        _check_micro_batches("actor update", mini, config, actor.ppo_micro_batch_size_per_gpu, world)
        # old-policy / reference log-prob passes run on the whole step batch (train_batch_size * n)
        batch = "data.train_batch_size"
        bypass = bool((config.algorithm.get("rollout_correction") or {}).get("bypass_mode", False))
        if not bypass:
            micro = config.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu
            _check_micro_batches("old log-prob pass", batch, config, micro, world)
        if use_ref:
            micro = config.actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu
            _check_micro_batches("ref log-prob pass", batch, config, micro, world)
    get_policy_loss_fn(actor.policy_loss.loss_mode)
    get_adv_estimator_fn(config.algorithm.adv_estimator)
    get_custom_reward_fn(config)


def check_run_config(overrides: Sequence[str], n_gpus: int | None = None, name: str = "run") -> None:
    """Compose verl's config with ``overrides`` and run verl's checks; raise ``VerlConfigError``
    naming ``name`` and quoting verl on the first failure."""
    try:
        check_config(compose_config(overrides), n_gpus)
    except Exception as err:  # verl raises AssertionError, ValueError, Hydra and OmegaConf errors
        raise VerlConfigError(f"{name}: verl rejects its config: {_verl_message(err)}") from err


def _verl_message(err: BaseException) -> str:
    """One line: verl's own exception, unwrapped from Hydra's ``InstantiationException`` (which
    ``omega_conf_to_dataclass`` raises around a dataclass's ``__post_init__`` error), with the
    config section it came from."""
    from hydra.errors import InstantiationException

    where = ""
    while isinstance(err, InstantiationException) and err.__cause__ is not None:
        key = re.search(r"full_key: (\S+)", str(err))
        where = f" (in {key.group(1)})" if key else where
        err = err.__cause__
    msg = " ".join(str(err).split()) or "(no message)"
    return f"{type(err).__name__}: {msg}{where}"


def check_study(study: str | Path, platform: str | None = None) -> Iterator[tuple[str, str | None]]:
    """Every run of ``study``: (key, None) if verl accepts its config, else (key, the error)."""
    from coolsampler.train.overrides import overrides_for, training_study

    for key in training_study(study).by_key():
        try:
            check_run_config(overrides_for(key, study, platform), name=key)
            yield key, None
        except VerlConfigError as err:
            yield key, str(err)
