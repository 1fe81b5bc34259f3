"""Memory budget of a training run on the gpu platform: host memory of its node at the checkpoint-save
peak, and GPU memory in each phase of a step, from the model's shapes, the dtypes verl and vLLM keep them
in and the way torch allocates them; checked against the machines a study declares.

Why: the staleness gate keeps the stale sampler on the host twice over: the actor ranks' snapshot (split
between them, patch 0001) and vLLM's own copy while it sleeps at level 1. vLLM's sleep backs each GPU
memory segment of its weights up into a pinned host tensor (``CuMemAllocator.sleep``), and torch's pinned
host allocator rounds every such allocation up to a power of two (``CachingHostAllocator``), so a
7B TP=2 worker pins 13.4 GiB for 7.1 GiB of weights. A checkpoint save stages the FSDP shards on the host
too, and a run starts some sixty processes (verl's defaults), each counted from the run's overrides and
costed at its measured PSS (``coolsampler.train.processes``). On the GPU, what vLLM keeps while it sleeps
(its CUDA graphs) stays beside the learner's phases.

The run settings (GPUs, TP, gpu_memory_utilization, micro-batch, lengths, offload) come from
``coolsampler.train.overrides.verl_overrides`` for the gpu platform, never copied here; the machines from
the platform (``Platform.gpu_memory_gib``, ``host_memory_gib``), a study's ``hardware:`` block and a
model's ``gpu_memory_gib``. Where a run does not fit, ``fixes`` names the setting that makes it fit.
``coolsampler memory`` and ``coolsampler plan`` print all of it. Every number that is an assumption, not
arithmetic, is a named constant below. Light module: no torch, verl or vLLM import.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from coolsampler.spec.settings import CHECKPOINT_BYTES_PER_PARAM, MODELS, TASKS
from coolsampler.spec.study import Run, Study, parse_key
from coolsampler.train import processes
from coolsampler.train.overrides import RunPaths, verl_overrides
from coolsampler.train.platform import Platform, get_platform
from coolsampler.train.profile import load_profile

GIB = 1024**3
MIB = 1024**2
FP32, BF16 = 4, 2  # bytes per element


@dataclass(frozen=True)
class Arch:
    """A Qwen2 decoder's shape, from the model's config.json on the Hugging Face hub."""

    hidden: int
    layers: int
    intermediate: int
    heads: int
    kv_heads: int
    vocab: int
    tied_embeddings: bool

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def layer_params(self) -> int:
        h, kv = self.hidden, self.kv_heads * self.head_dim
        attention = (h * h + h) + 2 * (h * kv + kv) + h * h  # q, k, v with bias; o without
        return attention + 3 * h * self.intermediate + 2 * h  # gate/up/down MLP, two RMSNorms

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    @property
    def params(self) -> int:
        heads = 1 if self.tied_embeddings else 2  # embedding and lm_head
        return self.layers * self.layer_params + heads * self.embedding_params + self.hidden  # + final norm

    @property
    def state_dict_params(self) -> int:
        """Parameters FSDP yields for the snapshot and the checkpoint: a tied model's embedding twice, as
        ``embed_tokens`` and ``lm_head`` (its state dict names both; vLLM holds it once)."""
        return self.layers * self.layer_params + 2 * self.embedding_params + self.hidden

    @property
    def largest_tensor(self) -> int:
        """Elements of the largest single parameter: the embedding, or an MLP projection."""
        return max(self.embedding_params, self.hidden * self.intermediate)

    def kv_bytes_per_token(self, tp: int) -> int:
        """K and V of every layer for one token, bf16, on one of ``tp`` tensor-parallel GPUs."""
        return 2 * self.layers * self.kv_heads * self.head_dim * BF16 // tp

    def vllm_tensors(self, tp: int) -> list[int]:
        """Bytes of every bf16 weight tensor one of ``tp`` vLLM workers holds, in the order vLLM's Qwen2
        creates them: the embedding, then per layer the fused qkv (weight, bias), o, fused gate/up and down
        projections (sharded by TP) and the two norms (replicated), the final norm and an untied lm_head.
        The vocabulary is split between the workers (both paper models' vocabularies divide by 64 x TP:
        vLLM's padding adds nothing)."""
        h, kv = self.hidden, self.kv_heads * self.head_dim
        layer = [
            (h + 2 * kv) // tp * h,
            (h + 2 * kv) // tp,
            h * h // tp,
            2 * self.intermediate // tp * h,
            h * self.intermediate // tp,
            h,
            h,
        ]
        embed = self.vocab // tp * h
        elems = [embed, *layer * self.layers, h] + ([] if self.tied_embeddings else [embed])
        return [e * BF16 for e in elems]


# Qwen/Qwen2.5-Math-1.5B and Qwen/Qwen2.5-Math-7B config.json (hidden_size, num_hidden_layers,
# intermediate_size, num_attention_heads, num_key_value_heads, vocab_size, tie_word_embeddings).
ARCH: dict[str, Arch] = {
    "qwen2.5-math-1.5b": Arch(1536, 28, 8960, 12, 2, 151936, True),
    "qwen2.5-math-7b": Arch(3584, 28, 18944, 28, 4, 152064, False),
}

# torch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp), which vLLM's CuMemAllocator backs
# with one cuMem allocation per segment: a request of at most 1 MiB is placed in a 2 MiB segment shared
# with others, one under 10 MiB in a 20 MiB segment, a larger one gets a segment of its own rounded up to
# 2 MiB. Requests are rounded to 512 bytes.
SMALL_REQUEST, SMALL_SEGMENT = 1 * MIB, 2 * MIB
MID_REQUEST, MID_SEGMENT = 10 * MIB, 20 * MIB
LARGE_ROUND, REQUEST_ROUND = 2 * MIB, 512


def _round_up(n: int, unit: int) -> int:
    return -(-n // unit) * unit


def _pow2_ceil(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def weight_segments(tensors: Iterable[int]) -> list[int]:
    """The GPU memory segments that hold ``tensors`` (bytes, in allocation order), packed as torch's
    caching allocator packs them (first fit within a segment kind). Assumes loading's temporaries have
    gone back to the driver (vLLM empties the cache after loading), so only the weights' segments stay."""
    segments: list[int] = []
    free: dict[int, list[int]] = {SMALL_SEGMENT: [], MID_SEGMENT: []}
    for size in tensors:
        size = _round_up(size, REQUEST_ROUND)
        if size >= MID_REQUEST:
            segments.append(_round_up(size, LARGE_ROUND))
            continue
        kind = SMALL_SEGMENT if size <= SMALL_REQUEST else MID_SEGMENT
        pool = free[kind]
        for i, left in enumerate(pool):
            if left >= size:
                pool[i] -= size
                break
        else:
            pool.append(kind - size)
            segments.append(kind)
    return segments


def sleep_backup_bytes(arch: Arch, tp: int) -> int:
    """Host memory one vLLM worker pins while it sleeps at level 1: a pinned backup of each weight
    segment (vLLM ``CuMemAllocator.sleep``: ``torch.empty(size, pin_memory=True)``), each rounded up to a
    power of two by torch's pinned host allocator (``CachingHostAllocator``: ``PowerOf2Ceil``), which also
    keeps those blocks cached after the wake."""
    return sum(_pow2_ceil(s) for s in weight_segments(arch.vllm_tensors(tp)))


# Assumptions that are not arithmetic on the models, each used once below.
CUDA_CONTEXT = 1 * GIB  # per GPU: the actor worker's and the vLLM worker's CUDA/NCCL contexts together
# Host memory of a process that opened a CUDA context (the FSDP actor workers, vLLM's TP workers),
# beyond what the same process holds on the CPU stack: the CUDA driver's and runtime's host state and
# the host pages of the CUDA libraries torch loads (cuBLAS, cuDNN, NCCL). Not measurable on the CPU
# stack: an assumption until a GPU run is measured with ``coolsampler memory --measure``.
CUDA_HOST_OVERHEAD = 2 * GIB
# What a sleeping vLLM worker keeps on its GPU: sleep frees the weights and the KV cache, not the CUDA
# graphs it captured (nor NCCL's buffers). vLLM >= 0.21 counts the graphs inside gpu_memory_utilization
# while it is awake; asleep they sit beside the learner. A log of vLLM 0.27 put a TP=2 worker's graphs at
# 0.36 GiB; assumed about three times that.
CUDA_GRAPH_BYTES = 1 * GIB
# Kinds the CPU stack does not start as processes of their own: its "uni" executor runs the model
# inside vLLM's engine-core process, so there are no TP workers; on gpu each TP worker (imports torch and
# vLLM, runs its share of the model) is assumed to hold what the CPU stack's engine core holds.
STAND_INS: dict[str, str] = {processes.TP_WORKER: processes.ENGINE_CORE}
LOGIT_COPIES = 3  # fp32 logits of a micro-batch: the logits, log-softmax/entropy, and their gradient
WEIGHT_BUCKET = 2048 * MIB  # rollout.checkpoint_engine.update_weights_bucket_megabytes (verl default)
# "Fits" leaves room for what no row itemises: on the GPU the caching allocator's fragmentation and the
# driver's own reservation; on the host the page cache a checkpoint write needs and the kernel.
GPU_MARGIN = 0.05
HOST_MARGIN = 0.10


@dataclass(frozen=True)
class Item:
    what: str
    bytes: int
    why: str


@dataclass(frozen=True)
class Setting:
    """What the gpu platform's overrides say about one run, and the machines it runs on."""

    model: str
    task: str
    gpus: int
    tp: int
    gpu_memory_utilization: float
    micro_batch: int  # sequences per GPU in one forward/backward
    seq_len: int  # prompt + response
    gpu_bytes: int  # one GPU's memory (declared)
    entropy_chunking: bool = False  # actor.entropy_from_logits_with_chunking: one logits copy fewer
    actor_offload: bool = False  # actor fsdp param + optimizer offload: its state lives on the host
    ref_offload: bool = False  # ref fsdp param offload

    @property
    def arch(self) -> Arch:
        return ARCH[self.model]

    @property
    def replicas(self) -> int:
        return self.gpus // self.tp


def _flag(o: Mapping[str, str], key: str) -> bool:
    return str(o.get(key, "false")).lower() == "true"


def setting_of(run: Run, platform: Platform | None = None, study_recipe: Mapping[str, Any] | None = None) -> Setting:
    """The run's setting, read from the overrides rule train gives it on the gpu platform."""
    platform = platform or get_platform("gpu")
    run = replace(run, guard=None, schedule=None)  # when the sampler is refreshed moves no memory
    raw = verl_overrides(run, RunPaths("m", "t", "v", "o"), platform="gpu", study_recipe=dict(study_recipe or {}))
    o = {k.lstrip("+"): v for k, _, v in (x.partition("=") for x in raw)}
    gib = run.model_info.gpu_memory_gib or platform.gpu_memory_gib
    return Setting(
        model=run.model,
        task=run.task,
        gpus=int(o["trainer.n_gpus_per_node"]) * int(o["trainer.nnodes"]),
        tp=int(o["actor_rollout_ref.rollout.tensor_model_parallel_size"]),
        gpu_memory_utilization=float(o["actor_rollout_ref.rollout.gpu_memory_utilization"]),
        micro_batch=int(o["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"]),
        seq_len=int(o["data.max_prompt_length"]) + int(o["data.max_response_length"]),
        gpu_bytes=int(gib * GIB),
        entropy_chunking=_flag(o, "actor_rollout_ref.actor.entropy_from_logits_with_chunking"),
        actor_offload=_flag(o, "actor_rollout_ref.actor.fsdp_config.param_offload")
        and _flag(o, "actor_rollout_ref.actor.fsdp_config.optimizer_offload"),
        ref_offload=_flag(o, "actor_rollout_ref.ref.fsdp_config.param_offload"),
    )


def _paper_run(model: str, task: str) -> Run:
    return parse_key(f"{model}/{task}/N4_lr2e-6_tis_Tb1_Tl1_s1")


def setting(model: str, task: str | None = None, platform: Platform | None = None) -> Setting:
    """A paper model's setting at the built-in defaults: on ``task``, else its longest paper task."""
    tasks = [task] if task else [t for t in TASKS if t != "arith"]
    found = [setting_of(_paper_run(model, t), platform) for t in tasks]
    return max(found, key=lambda s: s.seq_len * s.micro_batch)


def study_settings(study: Study, platform: Platform | None = None) -> list[Setting]:
    """One setting per model and task of the study's runs whose architecture this module knows (runs of one
    model and task share their memory), on the study's declared machines."""
    platform = (platform or get_platform("gpu")).for_study(study.raw)
    out: dict[tuple[str, str], Setting] = {}
    for run in study.runs:
        if run.model in ARCH and (run.model, run.task) not in out:
            out[run.model, run.task] = setting_of(run, platform, study.recipe)
    return list(out.values())


def on_gpus(settings: list[Setting], gpu_memory_gib: float | None) -> list[Setting]:
    """``settings`` on GPUs of ``gpu_memory_gib`` GiB each, over every model's declared size: the card one
    has (``coolsampler memory|plan --gpu-memory-gib``), checked without editing the study. None: as declared."""
    if gpu_memory_gib is None:
        return settings
    if not math.isfinite(gpu_memory_gib) or gpu_memory_gib <= 0:  # NaN passes a <= 0 test
        raise ValueError(
            f"--gpu-memory-gib {gpu_memory_gib}: a GPU's memory in GiB, > 0 (nvidia-smi memory.total / 1024)"
        )
    return [replace(s, gpu_bytes=int(gpu_memory_gib * GIB)) for s in settings]


# --------------------------------------------------------------------------------------------------
# Host


def _counts(s: Setting) -> dict[str, int]:
    return processes.process_counts(verl_overrides(_paper_run(s.model, s.task), RunPaths("m", "t", "v", "o")))


def process_counts(model: str) -> dict[str, int]:
    """How many processes of each kind a gpu run of ``model`` starts on its node (Ray's daemons apart)."""
    return _counts(setting(model))


def process_rows(counts: dict[str, int], table: dict | None = None) -> list[Item]:
    """One host row per process kind: count x the kind's measured PSS (a stand-in's where the CPU
    stack has no such process, named in the row), Ray's daemons as many as the measured run had, and
    the CUDA host overhead of the processes that open a CUDA context (an assumption)."""
    kinds = (table or processes.measured_pss())["kinds"]
    rows = []
    for kind, n in counts.items():
        source = STAND_INS.get(kind, kind) if kind not in kinds else kind
        mib = kinds[source]["pss_mib"]
        why = f"{n} x {mib:.0f} MiB measured PSS" + (
            f" (as {source}: no such process on cpu)" if source != kind else ""
        )
        rows.append(Item(kind, int(n * mib * processes.MIB), why))
    for kind, row in kinds.items():
        if kind in counts:
            continue
        # Ray's daemons and any kind the overrides do not count: as many as the measured run had
        n = int(row["count_seen"])
        rows.append(Item(kind, int(n * row["pss_mib"] * processes.MIB), f"{n} as seen x {row['pss_mib']:.0f} MiB PSS"))
    cuda = processes.cuda_processes(counts)
    rows.append(
        Item("CUDA host overhead (assumed)", cuda * CUDA_HOST_OVERHEAD, f"{cuda} CUDA processes x CUDA_HOST_OVERHEAD")
    )
    return rows


SNAPSHOT_ROW = "stale sampler snapshot (bf16, split between the actor ranks)"
BACKUP_ROW = "vLLM weights pinned by sleep level 1 (power-of-two blocks)"
STAGING_ROW = "checkpoint save staging (one fp32 shard storage at a time, per rank)"


def held_per_process(s: Setting) -> dict[str, Item]:
    """What one process of a kind holds at the save peak beyond its measured PSS: an actor rank its share
    of the stale sampler's snapshot and of the checkpoint's staging, a vLLM TP worker its pinned sleep
    backup. ``coolsampler memory`` prints it beside each kind."""
    a = s.arch
    p = a.state_dict_params
    backup = sleep_backup_bytes(a, s.tp)
    return {
        processes.ACTOR: Item(
            "snapshot share + checkpoint staging",
            p * BF16 // s.gpus + staging_bytes(a, s.gpus) // s.gpus,
            "bf16 snapshot / ranks; the largest fp32 shard torch.save copies",
        ),
        processes.TP_WORKER: Item(
            "pinned sleep backup",
            backup,
            f"{backup / GIB:.1f} GiB for {sum(a.vllm_tensors(s.tp)) / GIB:.1f} GiB of bf16 weights",
        ),
    }


def host_budget(s: Setting | str) -> list[Item]:
    """Host memory of the whole node at its peak: a checkpoint save (vLLM asleep, weights offloaded),
    with every process the gpu platform starts (``process_rows``)."""
    s = setting(s) if isinstance(s, str) else s
    a = s.arch
    p = a.params
    backup = sleep_backup_bytes(a, s.tp)
    rows = [
        Item(
            SNAPSHOT_ROW,
            a.state_dict_params * BF16,
            f"the full model in rollout.dtype once: each of the {s.gpus} ranks keeps {1 / s.gpus:.0%} (patch 0001)",
        ),
        Item(
            BACKUP_ROW,
            s.gpus * backup,
            f"{s.gpus} workers x {backup / GIB:.1f} GiB: each weight segment's pinned backup rounded up to a power "
            f"of two ({sum(a.vllm_tensors(s.tp)) / GIB:.1f} GiB of bf16 weights each)",
        ),
        Item(
            STAGING_ROW,
            staging_bytes(a, s.gpus),
            "FSDP2 keeps the shards on the GPU and torch.save copies one storage at a time: the largest "
            f"fp32 tensor's shard on each of the {s.gpus} ranks",
        ),
    ]
    if s.actor_offload:
        rows.append(
            Item("actor state offloaded (fp32 params, grads, Adam m, v)", p * 4 * FP32, "param+optimizer offload")
        )
    if s.ref_offload:
        rows.append(Item("reference params offloaded (fp32)", p * FP32, "ref param offload"))
    return rows + process_rows(_counts(s))


def staging_bytes(a: Arch, gpus: int) -> int:
    """Host memory a checkpoint save stages, all ranks together. Under FSDP2 the state dict's shards stay
    GPU tensors (verl's ``get_fsdp_state_ctx`` is a no-op there) and ``torch.save`` copies one storage to
    the host at a time: each rank holds at most its shard of the largest fp32 tensor."""
    return gpus * (a.largest_tensor * FP32 // gpus)


def checkpoint_bytes(model: str) -> int:
    """One checkpoint of a run: the fp32 parameters and Adam moments (12 bytes a parameter) plus the
    stale sampler's bf16 snapshot once (its shares, one per rank, add up to one copy), each counted as
    FSDP's state dict yields it (a tied embedding twice)."""
    return ARCH[model].state_dict_params * CHECKPOINT_BYTES_PER_PARAM


def checkpoint_disk_bytes(model: str, keep: int = 1) -> int:
    """Disk one run needs at its peak: ``keep`` checkpoints (the recipe's ``keep_checkpoints``, verl's
    ``max_actor_ckpt_to_keep``) and one more, since the oldest is retired only once the new one is
    committed (patch 0006), so a save holds them all."""
    return (keep + 1) * checkpoint_bytes(model)


def host_limit_bytes(profile: Path | None, platform: Platform | None = None) -> tuple[int, str]:
    """What a training job may hold on its node: the SLURM profile's ``mem_mb`` for rule train (read as
    10^6 bytes; SLURM's --mem counts MiB, so this errs on the safe side), or the declared node memory
    where that is less. ``profile`` None: no scheduler between the run and its machine (one's own GPU
    box), so the declared host memory alone (``on_host``)."""
    host = (platform or get_platform("gpu")).host_memory_gib
    if profile is None:
        if host is None:
            raise ValueError("no host memory to check against: give a SLURM profile or the host's (--host-memory-gib)")
        return int(host * GIB), f"host memory ({host:g} GiB declared)"
    limit, what = slurm_train_mem_bytes(profile, platform), f"SLURM mem_mb ({profile.parent.name} profile)"
    if host is not None and host * GIB < limit:
        return int(host * GIB), "node memory (hardware.host_memory_gib)"
    return limit, what


def on_host(platform: Platform, host_memory_gib: float | None) -> Platform:
    """``platform`` on a host of ``host_memory_gib`` GiB, over the study's declared one: the machine one
    has (``coolsampler memory|plan --host-memory-gib``), checked without editing the study. None: as
    declared."""
    if host_memory_gib is None:
        return platform
    if not math.isfinite(host_memory_gib) or host_memory_gib <= 0:
        raise ValueError(f"--host-memory-gib {host_memory_gib}: a host's memory in GiB, > 0 (free -g: total)")
    return replace(platform, host_memory_gib=float(host_memory_gib))


# --------------------------------------------------------------------------------------------------
# GPU


def gpu_budget(s: Setting | str) -> dict[str, list[Item]]:
    """Memory of one GPU in each phase of a step; the budget is the largest phase."""
    s = setting(s) if isinstance(s, str) else s
    a = s.arch
    p, w = a.params, s.gpus
    state = [
        Item(
            "actor fp32 params, grads, Adam m, v (FSDP shard)",
            0 if s.actor_offload else 4 * p * FP32 // w,
            "offloaded to the host" if s.actor_offload else "no offload (verl default)",
        ),
        Item(
            "reference fp32 params (FSDP shard)",
            0 if s.ref_offload else p * FP32 // w,
            "offloaded to the host" if s.ref_offload else "KL to the initial policy; no offload",
        ),
        Item("CUDA contexts", CUDA_CONTEXT, "assumed"),
    ]
    tokens = s.micro_batch * s.seq_len
    unit = max(a.layer_params, a.embedding_params)  # the largest module FSDP gathers at once
    asleep = Item("sleeping vLLM: CUDA graphs (assumed)", CUDA_GRAPH_BYTES, "sleep frees weights and KV cache only")
    push = [
        Item("vLLM bf16 weights (woken, no KV cache yet)", p * BF16 // s.tp, "level-1 wake"),
        Item("largest full tensor (fp32 gather + bf16 copy)", a.embedding_params * (FP32 + BF16), "one at a time"),
        Item("weight-transfer bucket", WEIGHT_BUCKET, "update_weights_bucket_megabytes"),
        asleep,
    ]
    copies = LOGIT_COPIES - (1 if s.entropy_chunking else 0)
    return {
        "generate": state
        + [
            Item(
                f"vLLM at gpu_memory_utilization {s.gpu_memory_utilization}",
                int(s.gpu_memory_utilization * s.gpu_bytes),
                f"bf16 weights/TP {p * BF16 // s.tp / GIB:.1f} GiB, CUDA graphs, the rest activations and KV cache "
                f"({a.kv_bytes_per_token(s.tp) // 1024} KiB/token)",
            )
        ],
        "train": state
        + [
            Item("gathered modules (bf16 params x2, bf16 + fp32 grads)", unit * (2 * BF16 + BF16 + FP32), "prefetch 1"),
            Item("checkpointed activations (bf16)", tokens * a.hidden * BF16 * a.layers, "gradient checkpointing"),
            Item(f"fp32 logits x{copies}", tokens * a.vocab * FP32 * copies, f"{tokens} tokens/micro-batch"),
            asleep,
        ],
        "refresh": state + push,
        # a validation at a step where the sampler is stale validates the learner's fresh weights: they
        # are pushed into the sleeping replicas, at the cost of a refresh push
        "validation push": state + push,
    }


def total(items: list[Item]) -> int:
    return sum(i.bytes for i in items)


def kv_cache_needed(s: Setting, samples_per_step: int) -> int:
    """KV cache one replica needs to hold its share of a step's samples at full length at once."""
    per_replica = -(-samples_per_step // s.replicas)
    return per_replica * s.seq_len * s.arch.kv_bytes_per_token(s.tp)


def slurm_train_mem_bytes(profile: Path, platform: Platform | None = None) -> int:
    """The host memory a SLURM training job gets: rule train's ``mem_mb``, its platform's (default the
    gpu platform's), unless the profile's ``set-resources.train.mem_mb`` overrides it (read and checked
    by ``coolsampler.train.profile``); read as 10^6 bytes (SLURM's --mem counts MiB, so this errs on the
    safe side)."""
    override = load_profile(profile).mem_mb
    return (override or (platform or get_platform("gpu")).mem_mb) * 10**6


# --------------------------------------------------------------------------------------------------
# Fit


@dataclass(frozen=True)
class Fit:
    """Whether a run's budget fits its machines, phase by phase, with the limits used."""

    setting: Setting
    gpu: dict[str, int]  # phase -> bytes
    gpu_limit: int
    host: int
    host_limit: int
    host_limit_what: str

    @property
    def gpu_peak(self) -> tuple[str, int]:
        """The phase that needs the most GPU memory, and how much."""
        phase = max(self.gpu, key=self.gpu.get)  # type: ignore[arg-type]
        return phase, self.gpu[phase]

    @property
    def gpu_fits(self) -> bool:
        return self.gpu_peak[1] <= self.gpu_limit

    @property
    def host_fits(self) -> bool:
        return self.host <= self.host_limit

    @property
    def fits(self) -> bool:
        return self.gpu_fits and self.host_fits


def fit(s: Setting, profile: Path | None, platform: Platform | None = None) -> Fit:
    limit, what = host_limit_bytes(profile, platform)
    return Fit(
        s,
        {k: total(v) for k, v in gpu_budget(s).items()},
        int(s.gpu_bytes * (1 - GPU_MARGIN)),
        total(host_budget(s)),
        int(limit * (1 - HOST_MARGIN)),
        what,
    )


@dataclass(frozen=True)
class Fix:
    """A setting that changes a run's budget: where it goes in the study, and the budget with it."""

    change: str
    fit: Fit


def _candidates(s: Setting, samples_per_step: int) -> list[tuple[str, str, Setting]]:
    """(knob, where to set it, the setting with it) for what verl 0.9.1 offers, cheapest in time first: a
    smaller micro-batch (the same batch in more accumulation steps), chunked entropy (one logits copy
    fewer), a smaller vLLM share (never below its weights, a full step's KV cache and its graphs), the
    reference's then the actor's parameters on the host (slower steps, more host memory)."""
    out: list[tuple[str, str, Setting]] = []
    mb = s.micro_batch
    while mb > 1:
        mb //= 2
        out.append(("micro_batch", f"models: {{{s.model}: {{micro_batch: {mb}}}}}", replace(s, micro_batch=mb)))
    if not s.entropy_chunking:
        change = "verl_overrides: [actor_rollout_ref.actor.entropy_from_logits_with_chunking=true]"
        out.append(("entropy_chunking", change, replace(s, entropy_chunking=True)))
    floor = s.arch.params * BF16 // s.tp + kv_cache_needed(s, samples_per_step) + CUDA_GRAPH_BYTES
    for util in (0.45, 0.4, 0.35, 0.3, 0.25, 0.2):
        if util < s.gpu_memory_utilization and util * s.gpu_bytes >= floor:
            change = f"models: {{{s.model}: {{gpu_memory_utilization: {util}}}}}"
            out.append(("gpu_memory_utilization", change, replace(s, gpu_memory_utilization=util)))
    if not s.ref_offload:
        change = "verl_overrides: [actor_rollout_ref.ref.fsdp_config.param_offload=true]"
        out.append(("ref_offload", change, replace(s, ref_offload=True)))
    if not s.actor_offload:
        change = (
            "verl_overrides: [actor_rollout_ref.actor.fsdp_config.param_offload=true, "
            "actor_rollout_ref.actor.fsdp_config.optimizer_offload=true]"
        )
        out.append(("actor_offload", change, replace(s, actor_offload=True)))
    return out


def fixes(s: Setting, profile: Path | None, platform: Platform | None = None, samples_per_step: int = 128) -> list[Fix]:
    """For a run that does not fit: the first single setting that makes it fit (``_candidates``' order);
    where none does alone, every knob in that order at its strongest value, one after another, until it
    fits (each with the budget so far). Empty when the run fits; the last budget says if nothing does."""
    if fit(s, profile, platform).fits:
        return []
    candidates = _candidates(s, samples_per_step)
    for _knob, change, alt in candidates:
        f = fit(alt, profile, platform)
        if f.fits:
            return [Fix(change, f)]
    strongest = {knob: (change, alt) for knob, change, alt in candidates}  # the last of each knob
    steps, cur = [], s
    for knob, (change, alt) in strongest.items():
        cur = replace(cur, **{knob: getattr(alt, knob)})
        steps.append(Fix(change, fit(cur, profile, platform)))
        if steps[-1].fit.fits:
            break
    return steps


# --------------------------------------------------------------------------------------------------
# Tables (coolsampler memory, coolsampler plan)


def _label(s: Setting) -> str:
    return f"{s.model} {s.task} ({s.arch.params / 1e9:.2f}B, TP={s.tp}, {s.gpus} x {s.gpu_bytes / GIB:g} GiB GPUs)"


def markdown_table(settings: list[Setting], profile: Path | None, platform: Platform | None = None) -> str:
    """Every item in GiB for each setting (model and task), the totals and the limits."""

    def gib(b: int) -> str:
        return f"{b / GIB:.1f}"

    def row(name: str, cells: Iterable[str]) -> str:
        return f"| {name} | " + " | ".join(cells) + " |"

    def item_rows(budgets: list[list[Item]], skip: set[str]) -> list[str]:
        names = dict.fromkeys(i.what for b in budgets for i in b if i.what not in skip)
        return [row(name, (next((gib(i.bytes) for i in b if i.what == name), "-") for b in budgets)) for name in names]

    n = len(settings)
    rows = ["| | " + " | ".join(_label(s) for s in settings) + " |", "|---" * (n + 1) + "|"]
    rows.append("| **host, per node (GiB)** |" + " |" * n)
    hosts = [host_budget(s) for s in settings]
    rows += item_rows(hosts, set())
    rows.append(row("**host total**", (f"**{gib(total(h))}**" for h in hosts)))
    limit, what = host_limit_bytes(profile, platform)
    rows.append(row(what, (gib(limit) for _ in settings)))
    fits = [fit(s, profile, platform) for s in settings]
    left = ((("yes" if f.host_fits else "NO") + f", {gib(f.host_limit - f.host)} left") for f in fits)
    rows.append(row(f"fits ({HOST_MARGIN:.0%} margin)", left))
    gpus = [gpu_budget(s) for s in settings]
    for phase in gpus[0]:
        rows.append(f"| **GPU, per device: {phase} (GiB)** |" + " |" * n)
        seen = {i.what for i in gpus[0]["generate"][:3]} if phase != "generate" else set()
        rows += item_rows([g[phase] for g in gpus], seen)
        rows.append(row(f"{phase} total", (gib(total(g[phase])) for g in gpus)))
    rows.append(row("**GPU peak**", (f"**{gib(f.gpu_peak[1])}** ({f.gpu_peak[0]})" for f in fits)))
    rows.append(row("GPU memory (declared)", (gib(s.gpu_bytes) for s in settings)))
    left = ((("yes" if f.gpu_fits else "NO") + f", {gib(f.gpu_limit - f.gpu_peak[1])} left") for f in fits)
    rows.append(row(f"fits ({GPU_MARGIN:.0%} margin)", left))
    return "\n".join(rows) + "\n"


def fit_lines(settings: list[Setting], profile: Path | None, platform: Platform | None = None) -> list[str]:
    """One line per setting: fits, or what does not and the setting that makes it fit."""
    out = []
    for s in settings:
        f = fit(s, profile, platform)
        head = f"{s.model} {s.task} on {s.gpus} x {s.gpu_bytes / GIB:g} GiB GPUs"
        phase, peak = f.gpu_peak
        state = (
            f"GPU peak {peak / GIB:.1f} GiB ({phase}) of {f.gpu_limit / GIB:.1f}; "
            f"host {f.host / GIB:.1f} of {f.host_limit / GIB:.1f} GiB"
        )
        if f.fits:
            out.append(f"{head}: fits ({state})")
            continue
        out.append(f"{head}: DOES NOT FIT ({state})")
        for fx in fixes(s, profile, platform):
            g = fx.fit
            phase, peak = g.gpu_peak
            out.append(
                f"  set {fx.change}: GPU peak {peak / GIB:.1f} GiB ({phase}), host {g.host / GIB:.1f} GiB"
                + (": fits" if g.fits else ": not yet")
            )
    return out


def assumptions() -> str:
    """The named assumptions, for the text under the table."""
    return "\n".join(
        f"- {name} = {value}"
        for name, value in (
            ("CUDA_CONTEXT", f"{CUDA_CONTEXT / GIB:.0f} GiB per GPU"),
            ("CUDA_HOST_OVERHEAD", f"{CUDA_HOST_OVERHEAD / GIB:.0f} GiB per process with a CUDA context"),
            ("CUDA_GRAPH_BYTES", f"{CUDA_GRAPH_BYTES / GIB:.0f} GiB per sleeping vLLM worker"),
            ("STAND_INS", ", ".join(f"{k} as {v}" for k, v in STAND_INS.items()) + " (measured PSS)"),
            ("LOGIT_COPIES", str(LOGIT_COPIES)),
            ("WEIGHT_BUCKET", f"{WEIGHT_BUCKET / MIB:.0f} MiB"),
            ("GPU_MARGIN, HOST_MARGIN", f"{GPU_MARGIN:.0%}, {HOST_MARGIN:.0%} left free"),
        )
    )


def process_table(settings: list[Setting]) -> str:
    """Every process kind of a gpu run: its measured PSS (cpu stack), how many the measured run had, how
    many a gpu run starts, the host memory they take there, and what one such process also holds at the
    save peak (Markdown)."""
    doc = processes.measured_pss()
    kinds = doc["kinds"]
    models = list(dict.fromkeys(s.model for s in settings))
    by_model = {m: next(s for s in settings if s.model == m) for m in models}
    counts = {m: _counts(by_model[m]) for m in models}
    rows_by_model = {m: {i.what: i for i in process_rows(counts[m], doc)} for m in models}
    held = {m: held_per_process(by_model[m]) for m in models}
    names = list(rows_by_model[models[0]])
    # the model's size as the paper writes it (1.5B), not its name: seven columns must fit a 1280 px page
    label = {m: MODELS[m].params if m in MODELS else m for m in models}
    head = "| process kind | PSS MiB (cpu, measured) | seen (cpu run) | " + " | ".join(
        f"{label[m]}: count, GiB | {label[m]}: each also holds at the save peak" for m in models
    )
    out = [head + " |", "|---" * (3 + 2 * len(models)) + "|"]
    for name in names:
        source = STAND_INS.get(name, name) if name not in kinds else name
        pss = (
            f"{kinds[source]['pss_mib']:.0f}" + ("" if source == name else f" (as {source})")
            if source in kinds
            else "-"
        )
        seen = str(kinds[name]["count_seen"]) if name in kinds else "0"
        cells = []
        for m in models:
            item = rows_by_model[m][name]
            n = counts[m].get(name)
            if n is None:
                n = kinds[name]["count_seen"] if name in kinds else processes.cuda_processes(counts[m])
            extra = held[m].get(name)
            cells.append(f"{n}, {item.bytes / GIB:.1f}")
            cells.append(f"{extra.bytes / GIB:.1f} GiB ({extra.what})" if extra else "")
        out.append(f"| {name} | {pss} | {seen} | " + " | ".join(cells) + " |")
    out.append(
        "| **all processes** | | | "
        + " | ".join(f"{total(list(rows_by_model[m].values())) / GIB:.1f} | " for m in models)
        + " |"
    )
    return "\n".join(out) + f"\n\nPSS measured {doc['when']} ({doc['machine']}): {doc['how']}\n"


def paper_settings() -> list[Setting]:
    """The paper study's settings on its declared machines (config/paper.yaml)."""
    from coolsampler.spec.study import load_study
    from coolsampler.train.version import REPO

    return study_settings(load_study(REPO / "config" / "paper.yaml"))
