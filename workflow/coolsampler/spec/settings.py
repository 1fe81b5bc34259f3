"""Fixed facts of the paper's recipe and of the models and tasks a run may name.

One source of truth: the study schema, the run keys, the verl overrides and the analysis all read
these tables. Nothing here imports verl, vLLM or torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from coolsampler.spec.corrections import NAMES


@dataclass(frozen=True)
class Task:
    """A task's data and the recipe constants the paper ties to it (Section 2).

    A study may define more tasks (its ``tasks:`` block, ``coolsampler.spec.study``): then ``train_file`` /
    ``val_file`` name verl-format parquet files (else ``<data>/<task>/<train|val>.parquet``, made by a
    prepare rule), ``hub`` the Hugging Face dataset they are prepared from, and ``reward`` the scorer.
    """

    name: str
    train: str  # data file stem under <data>/<task>/
    val: str
    max_prompt_length: int
    max_response_length: int
    val_every: int  # "greedy validation every 10 steps on GSM8K and every 20 on MATH"
    steps: int  # 300 updates in every paper run
    first_cycle_kl_step: int = 110  # Figure 2: "KL at a fixed step of the first cycle (110, or 60 where N=96)"
    # The reward: "coolsampler" (coolsampler.worker.rewards.compute_score, routed by data_source: the paper's and the
    # toy tasks), "verl" (verl's built-in default_compute_score, routed by data_source) or "FILE.py:FUNCTION".
    reward: str = "coolsampler"
    train_file: str | None = None  # a verl-format parquet given by path (study tasks)
    val_file: str | None = None
    hub: tuple[tuple[str, str], ...] | None = None  # {dataset, revision, config?, train, val} (study tasks)


# Parallelism derived from a model's size (the rule ``Model.tensor_parallel`` / ``gpus_per_run`` apply
# unless a study sets them). Constants of the gpu platform's recipe: vLLM takes gpu_memory_utilization 0.5
# of an 80 GiB GPU; the learner shards fp32 parameters, gradients and Adam moments (16 bytes a parameter)
# over the run's GPUs with FSDP.
GPU_GIB = 80
VLLM_SHARE = 0.5
TP_WEIGHT_FRACTION = 0.25  # one TP rank's bf16 weights may take at most this share of vLLM's memory
FSDP_STATE_FRACTION = 0.4  # one GPU's FSDP shard of fp32 params + grads + Adam may take this share of it
MIN_GPUS_PER_RUN = 4  # the paper's "four GPUs per run" (Section 2), the floor of the rule
MAX_GPUS_PER_RUN = 8  # one node: larger runs need a per-study gpus_per_run and offloading
_GIB = 1024**3


def derived_tensor_parallel(params_b: float) -> int:
    """vLLM tensor-parallel size: the smallest power of two at which one rank's bf16 weights take at most
    ``TP_WEIGHT_FRACTION`` of vLLM's memory (0.25 x 0.5 x 80 GiB = 10 GiB), so the KV cache keeps the rest.
    Qwen2.5-Math-1.5B (2.9 GiB) -> 1, -7B (14.2 GiB) -> 2: the paper's settings."""
    budget = TP_WEIGHT_FRACTION * VLLM_SHARE * GPU_GIB * _GIB
    tp = 1
    while params_b * 1e9 * 2 / tp > budget:
        tp *= 2
    return tp


def derived_gpus_per_run(params_b: float, tensor_parallel: int = 1) -> int:
    """GPUs per run: the smallest power of two, at least ``MIN_GPUS_PER_RUN`` and the TP size, at which
    one GPU's FSDP shard of the learner state (16 bytes a parameter) takes at most ``FSDP_STATE_FRACTION``
    of the GPU (32 GiB). 1.5B (5.7 GiB on 4) and 7B (28.4 GiB on 4) -> 4; 14B -> 8."""
    budget = FSDP_STATE_FRACTION * GPU_GIB * _GIB
    gpus = max(MIN_GPUS_PER_RUN, tensor_parallel)
    while params_b * 1e9 * 16 / gpus > budget:
        gpus *= 2
    return gpus


@dataclass(frozen=True)
class Model:
    """A model a run may train: the paper's two and the toy, or one a study defines (``models:``).

    ``source`` is the Hugging Face id (or "generated": made by a rule here); with a ``revision`` it is
    downloaded once on the submitting host (rule ``prefetch_model``) and loaded offline from there. ``path``
    is a local model directory instead. TP and GPUs per run follow from ``params_b`` by the rule above
    unless set."""

    name: str
    source: str  # HF hub id, or "generated" for the smoke study's tiny model
    params: str  # the size as written in the paper ("1.5B")
    params_b: float = 0.0  # parameters, billions: what TP and GPUs per run are derived from
    revision: str | None = None  # a pinned hub commit: prefetched, loaded offline
    path: str | None = None  # a local model directory (made by a rule or by hand)
    tp: int | None = None  # vLLM tensor-parallel size on the gpu platform, else derived
    gpus: int | None = None  # GPUs one run holds on the gpu platform, else derived
    # The machines this model's runs get on the gpu platform, and what makes a run fit them (checked by
    # coolsampler.train.memory): GPU memory as nvidia-smi's memory.total in GiB (else the study's
    # hardware block, else GPU_GIB), the learner's micro-batch per GPU (else the recipe's quarter of a
    # rank's share) and vLLM's gpu_memory_utilization (else VLLM_SHARE). None of them is a setting of
    # the run's result (numerics aside): they are not in its key.
    gpu_memory_gib: float | None = None
    micro_batch: int | None = None
    gpu_memory_utilization: float | None = None

    @property
    def tensor_parallel(self) -> int:
        return self.tp if self.tp is not None else derived_tensor_parallel(self.params_b)

    @property
    def gpus_per_run(self) -> int:
        return self.gpus if self.gpus is not None else derived_gpus_per_run(self.params_b, self.tensor_parallel)


TASKS: dict[str, Task] = {
    "gsm8k": Task("gsm8k", "train", "test", 512, 512, 10, 300),
    "math": Task("math", "train_l3-5", "math500", 512, 1024, 20, 300),
    # The smoke study's synthetic task (coolsampler.world.toy): digits -> running sums, exact-match reward.
    "arith": Task("arith", "train", "test", 32, 24, 8, 64),
}

# Parameter counts: the models' config.json (coolsampler.train.memory.ARCH holds their shapes).
MODELS: dict[str, Model] = {
    "qwen2.5-math-1.5b": Model("qwen2.5-math-1.5b", "Qwen/Qwen2.5-Math-1.5B", "1.5B", 1.54),
    "qwen2.5-math-7b": Model("qwen2.5-math-7b", "Qwen/Qwen2.5-Math-7B", "7B", 7.62),
    "toy-qwen2": Model("toy-qwen2", "generated", "~0.2M", 0.0002),
}

CORRECTIONS = NAMES  # the registry's built-in corrections (coolsampler.spec.corrections)
# The saturation controller (coolsampler.worker.controller): one run-wide temperature (default) or one
# per prompt identity, and when a group counts as saturated (default first). Run-wide is the default
# because only state that carries across prompts can move in a paper run: 300 steps of 16 prompts visit
# fewer prompts than GSM8K or MATH holds, so a prompt-keyed temperature never leaves its start there.
SCOPES = ("global", "per_prompt")
# Learner-sampler KL levels (nats per token): the first crossing of KL_LEAD_NAT is what Table 2's lead is
# measured from; KL_EARLY_NAT is Figure 2b's earlier reading, and the KL gate's default threshold (a
# controller holds the temperature above it). Here, not in the analysis, because worker code reads them too.
KL_LEAD_NAT = 1.0
KL_EARLY_NAT = 0.1


def nat_text(level: float) -> str:
    """A KL level for people: '1 nat', '0.1 nat'. Every label, caption and message that names a level
    prints it from its constant through here (or ``kl_above_text``), so none can state another level."""
    return f"{level:g} nat"


def kl_above_text(level: float) -> str:
    """'KL > 1': the first step above a KL level, as the tables' columns, captions and the CLI name it."""
    return f"KL > {level:g}"


SATURATION_RULES = ("all_correct", "all_equal")
REPLICATES = ("cut", "rerun")

# Paper recipe (Section 2); the overrides builder and the paper-settings test both read these.
PAPER_RECIPE = {
    "prompts_per_step": 16,
    "samples_per_prompt": 8,
    "lr": 2e-6,
    "kl_coef": 1e-3,
    "kl_loss_type": "low_var_kl",
    "entropy_coeff": 0.0,
    "ppo_epochs": 1,
    "tis_cap": 2.0,
    "gpus_per_run": 4,
}

# Paper, Appendix D ("Compute"): "a 1.5B run takes about 3.2 hours on four 32 GB GPUs (MATH: 3.6 hours);
# a 7B run takes about 9 hours on four 96 GB GPUs." Hours of one 300-step run, by (model, task).
PAPER_RUN_HOURS: dict[tuple[str, str], float] = {
    ("qwen2.5-math-1.5b", "gsm8k"): 3.2,
    ("qwen2.5-math-1.5b", "math"): 3.6,
    ("qwen2.5-math-7b", "gsm8k"): 9.0,
    ("qwen2.5-math-7b", "math"): 9.0,  # not run in the paper; the 7B GSM8K time as the estimate
}

# A preempted, timed-out or stalled run loses at most this much training (then resumes from its checkpoint).
CHECKPOINT_EVERY_S = 30 * 60

# Seed of vLLM's sampling (verl's rollout.seed, per replica seed + rank). verl's default is 42; a
# ``rerun`` replicate (Table 4: "re-run = sampling replicate") adds this offset, so it draws its own
# samples rather than differing from its twin only through GPU nondeterminism.
SAMPLING_SEED = 42
RERUN_SEED_OFFSET = 1000


# A checkpoint's writes sit between two barriers of the actor's process group: each rank writes its
# shard of the fp32 parameters and Adam moments (12 bytes a parameter) and its share of the stale
# sampler's bf16 snapshot (2 bytes a parameter), all ranks at once. verl's engine workers open that group
# with torch's default timeout (NCCL: 10 minutes) unless told (patch 0004 passes verl's nccl_timeout);
# a 7B run's 26.7 GB per rank takes 18 minutes at 25 MB/s. The slowest filesystem planned for is
# CHECKPOINT_MIN_WRITE_BYTES_PER_S per rank; the timeout is twice the write at that speed, at least
# verl's own default.
CHECKPOINT_BYTES_PER_PARAM = 12 + 2
CHECKPOINT_MIN_WRITE_BYTES_PER_S = 25e6
VERL_NCCL_TIMEOUT_S = 600


def collective_timeout_s(params_b: float, gpus: int) -> int:
    """Seconds a collective of the actor's process group may wait (``actor_rollout_ref.nccl_timeout``):
    twice one rank's checkpoint write at ``CHECKPOINT_MIN_WRITE_BYTES_PER_S``, in whole minutes, at least
    ``VERL_NCCL_TIMEOUT_S``. Qwen2.5-Math-1.5B on 4 GPUs: 600 s; 7B: 2160 s."""
    write_s = params_b * 1e9 * CHECKPOINT_BYTES_PER_PARAM / max(1, gpus) / CHECKPOINT_MIN_WRITE_BYTES_PER_S
    return max(VERL_NCCL_TIMEOUT_S, 60 * math.ceil(2 * write_s / 60))


def step_seconds(model: str, task: str) -> float | None:
    """Paper wall time of one learner step on four GPUs, or None where the paper gives none."""
    hours = PAPER_RUN_HOURS.get((model, task))
    return None if hours is None else hours * 3600 / TASKS[task].steps


def checkpoint_interval(model: str, task: str) -> int:
    """Steps between checkpoints so that a preemption loses at most ``CHECKPOINT_EVERY_S`` of a run
    (1.5B GSM8K: 46 steps, MATH: 41, 7B: 16); -1 (never) where no step time is known (the smoke study
    sets its own in ``recipe.save_every``)."""
    sec = step_seconds(model, task)
    return -1 if sec is None else max(1, int(CHECKPOINT_EVERY_S // sec))
