"""Memory budget of one paper training run (4 GPUs, one node): host memory per rank and per node, and
GPU memory per phase, from the models' parameter counts and the dtypes verl and vLLM keep them in.

Why: the staleness gate keeps the stale sampler's weights on the host (a snapshot on every actor rank,
and vLLM's own copy while it sleeps at level 1), and a checkpoint save stages the FSDP shards there
too; and a run starts some sixty processes (verl's defaults on the gpu platform), each counted
from the run's overrides and costed at its measured PSS (``coolsampler.train.processes``). This module
says whether that fits the SLURM profile's ``mem_mb`` and an 80 GB GPU, naming every assumption;
``coolsampler memory`` prints the README's table and the processes. The run settings (GPUs,
tensor-parallel size, gpu_memory_utilization, micro-batch size, lengths) come from
``coolsampler.train.overrides.verl_overrides`` for the gpu platform, never copied here.
Light module: no torch, verl or vLLM import.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from coolsampler.spec.settings import TASKS
from coolsampler.spec.study import parse_key
from coolsampler.train import processes
from coolsampler.train.overrides import RunPaths, verl_overrides

GIB = 1024**3
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

    def kv_bytes_per_token(self, tp: int) -> int:
        """K and V of every layer for one token, bf16, on one of ``tp`` tensor-parallel GPUs."""
        return 2 * self.layers * self.kv_heads * self.head_dim * BF16 // tp


# Qwen/Qwen2.5-Math-1.5B and Qwen/Qwen2.5-Math-7B config.json (hidden_size, num_hidden_layers,
# intermediate_size, num_attention_heads, num_key_value_heads, vocab_size, tie_word_embeddings).
ARCH: dict[str, Arch] = {
    "qwen2.5-math-1.5b": Arch(1536, 28, 8960, 12, 2, 151936, True),
    "qwen2.5-math-7b": Arch(3584, 28, 18944, 28, 4, 152064, False),
}

# Assumptions that are not parameter counts, each used once below.
GPU_BYTES = 80 * GIB  # an 80 GB A100/H100: 81920 MiB as nvidia-smi reports it, rounded down
CUDA_CONTEXT = 1 * GIB  # per GPU: the actor worker's and the vLLM worker's CUDA/NCCL contexts together
# Host memory of a process that opened a CUDA context (the FSDP actor workers, vLLM's TP workers),
# beyond what the same process holds on the CPU stack: the CUDA driver's and runtime's host state and
# the host pages of the CUDA libraries torch loads (cuBLAS, cuDNN, NCCL). Not measurable on the CPU
# stack: an assumption until a GPU run is measured with ``coolsampler memory --measure``.
CUDA_HOST_OVERHEAD = 2 * GIB
# Kinds the CPU stack does not start as processes of their own: its "uni" executor runs the model
# inside vLLM's engine-core process, so there are no TP workers; on gpu each TP worker (imports torch
# and vLLM, runs its share of the model) is assumed to hold what the CPU stack's engine core holds.
STAND_INS: dict[str, str] = {processes.TP_WORKER: processes.ENGINE_CORE}
LOGIT_COPIES = 3  # fp32 logits of a micro-batch: the logits, log-softmax/entropy, and their gradient
WEIGHT_BUCKET = 2048 * 1024**2  # rollout.checkpoint_engine.update_weights_bucket_megabytes (verl default)


@dataclass(frozen=True)
class Item:
    what: str
    bytes: int
    why: str


@dataclass(frozen=True)
class Setting:
    """What the gpu platform's overrides say about a paper run of ``model`` (its longest task)."""

    gpus: int
    tp: int
    gpu_memory_utilization: float
    micro_batch: int  # sequences per GPU in one forward/backward
    seq_len: int  # prompt + response, the longest paper task


def setting(model: str) -> Setting:
    best = None
    for task in (t for t in TASKS if t != "arith"):  # the paper's tasks
        run = parse_key(f"{model}/{task}/N4_lr2e-6_tis_Tb1_Tl1_s1")
        o = dict(x.split("=", 1) for x in verl_overrides(run, RunPaths("m", "t", "v", "o"), platform="gpu"))
        s = Setting(
            gpus=int(o["trainer.n_gpus_per_node"]) * int(o["trainer.nnodes"]),
            tp=int(o["actor_rollout_ref.rollout.tensor_model_parallel_size"]),
            gpu_memory_utilization=float(o["actor_rollout_ref.rollout.gpu_memory_utilization"]),
            micro_batch=int(o["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"]),
            seq_len=int(o["data.max_prompt_length"]) + int(o["data.max_response_length"]),
        )
        if best is None or s.seq_len * s.micro_batch > best.seq_len * best.micro_batch:
            best = s
    assert best is not None
    return best


def _gpu_overrides(model: str) -> list[str]:
    task = next(t for t in TASKS if t != "arith")  # process counts do not depend on the task
    run = parse_key(f"{model}/{task}/N4_lr2e-6_tis_Tb1_Tl1_s1")
    return verl_overrides(run, RunPaths("m", "t", "v", "o"), platform="gpu")


def process_counts(model: str) -> dict[str, int]:
    """How many processes of each kind a gpu run of ``model`` starts on its node (Ray's daemons apart)."""
    return processes.process_counts(_gpu_overrides(model))


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


def host_budget(model: str) -> list[Item]:
    """Host memory of the whole node at its peak: a checkpoint save (vLLM asleep, weights offloaded),
    with every process the gpu platform starts (``process_rows``)."""
    a, s = ARCH[model], setting(model)
    p, w = a.params, s.gpus
    return [
        Item(
            "sampler snapshot (bf16, every actor rank)",
            w * p * BF16,
            "staleness gate: the full model in rollout.dtype on each of the ranks, updated in place",
        ),
        Item(
            "vLLM weights offloaded by sleep level 1 (bf16)",
            (w // s.tp) * p * BF16,
            "each of the GPUs/TP replicas backs its bf16 weights up to the host while asleep",
        ),
        Item(
            "checkpoint save staging (fp32 params + Adam m, v)",
            p * (FP32 + 2 * FP32),
            "FSDP sharded state dicts offloaded to CPU before torch.save; all ranks together",
        ),
        *process_rows(process_counts(model)),
    ]


def checkpoint_disk_bytes(model: str) -> int:
    """Disk one run keeps (one checkpoint, ``max_actor_ckpt_to_keep=1``): the fp32 parameters and Adam
    moments (12 bytes a parameter) plus one bf16 copy of the stale sampler's snapshot (every rank holds
    the same weights, so the checkpoint keeps one; a resume gets the sampler of its last refresh).
    ``coolsampler plan`` reads this."""
    a = ARCH[model]
    return a.params * (FP32 + 2 * FP32) + a.params * BF16


def gpu_budget(model: str) -> dict[str, list[Item]]:
    """Memory of one GPU in each phase of a step; the budget is the largest phase."""
    a, s = ARCH[model], setting(model)
    p, w = a.params, s.gpus
    state = [
        Item("actor fp32 params, grads, Adam m, v (FSDP shard)", 4 * p * FP32 // w, "no offload (verl default)"),
        Item("reference fp32 params (FSDP shard)", p * FP32 // w, "KL to the initial policy; no offload"),
        Item("CUDA contexts", CUDA_CONTEXT, "assumed"),
    ]
    tokens = s.micro_batch * s.seq_len
    unit = max(a.layer_params, a.embedding_params)  # the largest module FSDP gathers at once
    push = [
        Item("vLLM bf16 weights (woken, no KV cache yet)", p * BF16 // s.tp, "level-1 wake"),
        Item("largest full tensor (fp32 gather + bf16 copy)", a.embedding_params * (FP32 + BF16), "one at a time"),
        Item("weight-transfer bucket", WEIGHT_BUCKET, "update_weights_bucket_megabytes"),
    ]
    return {
        "generate": state
        + [
            Item(
                f"vLLM at gpu_memory_utilization {s.gpu_memory_utilization}",
                int(s.gpu_memory_utilization * GPU_BYTES),
                f"bf16 weights/TP {p * BF16 // s.tp / GIB:.1f} GiB, the rest activations and KV cache "
                f"({a.kv_bytes_per_token(s.tp) // 1024} KiB/token)",
            )
        ],
        "train": state
        + [
            Item("gathered modules (bf16 params x2, bf16 + fp32 grads)", unit * (2 * BF16 + BF16 + FP32), "prefetch 1"),
            Item("checkpointed activations (bf16)", tokens * a.hidden * BF16 * a.layers, "gradient checkpointing"),
            Item(
                f"fp32 logits x{LOGIT_COPIES}", tokens * a.vocab * FP32 * LOGIT_COPIES, f"{tokens} tokens/micro-batch"
            ),
        ],
        "refresh": state + push,
        # a validation at a step where the sampler is stale validates the learner's fresh weights: they
        # are pushed into the sleeping replicas, at the cost of a refresh push
        "validation push": state + push,
    }


def total(items: list[Item]) -> int:
    return sum(i.bytes for i in items)


def gpu_peak(model: str) -> tuple[str, int]:
    phases = gpu_budget(model)
    phase = max(phases, key=lambda k: total(phases[k]))
    return phase, total(phases[phase])


def slurm_train_mem_bytes(profile: Path) -> int:
    """The host memory a SLURM training job gets: rule train's ``mem_mb``, the gpu platform's, unless the
    profile's ``set-resources.train.mem_mb`` overrides it; read as 10^6 bytes (SLURM's --mem counts MiB,
    so this errs on the safe side)."""
    from coolsampler.train.platform import get_platform

    cfg = yaml.safe_load(profile.read_text())
    override = ((cfg.get("set-resources") or {}).get("train") or {}).get("mem_mb")
    return int(override or get_platform("gpu").mem_mb) * 10**6


def markdown_table(profile: Path, models: tuple[str, ...] = tuple(ARCH)) -> str:
    """The README's table: every item in GiB for each model, the totals and the limits."""

    def gib(b: int) -> str:
        return f"{b / GIB:.1f}"

    head = "| | " + " | ".join(f"{m} ({ARCH[m].params / 1e9:.2f}B params, TP={setting(m).tp})" for m in models) + " |"
    rows = [head, "|---" * (len(models) + 1) + "|"]
    rows.append("| **host, per node (GiB)** |" + " |" * len(models))
    hosts = {m: host_budget(m) for m in models}
    for i, item in enumerate(hosts[models[0]]):
        rows.append(f"| {item.what} | " + " | ".join(gib(hosts[m][i].bytes) for m in models) + " |")
    rows.append("| **host total** | " + " | ".join(f"**{gib(total(hosts[m]))}**" for m in models) + " |")
    rows.append(
        "| host per GPU (total / GPUs) | " + " | ".join(gib(total(hosts[m]) // setting(m).gpus) for m in models) + " |"
    )
    limit = slurm_train_mem_bytes(profile)
    rows.append(
        f"| SLURM mem_mb limit ({profile.parent.name} profile) | " + " | ".join(gib(limit) for _ in models) + " |"
    )
    gpus = {m: gpu_budget(m) for m in models}
    for phase in gpus[models[0]]:
        rows.append(f"| **GPU, per device: {phase} (GiB)** |" + " |" * len(models))
        for i, item in enumerate(gpus[models[0]][phase]):
            if i < 3 and phase != "generate":
                continue  # the resident state, listed under generate
            rows.append(f"| {item.what} | " + " | ".join(gib(gpus[m][phase][i].bytes) for m in models) + " |")
        rows.append(f"| {phase} total | " + " | ".join(gib(total(gpus[m][phase])) for m in models) + " |")
    rows.append(
        "| **GPU peak** | " + " | ".join(f"**{gib(gpu_peak(m)[1])}** ({gpu_peak(m)[0]})" for m in models) + " |"
    )
    rows.append("| GPU memory | " + " | ".join(gib(GPU_BYTES) for _ in models) + " |")
    return "\n".join(rows) + "\n"


def assumptions() -> str:
    """The named assumptions, for the text under the table."""
    return "\n".join(
        f"- {name} = {value}"
        for name, value in (
            ("GPU_BYTES", f"{GPU_BYTES / GIB:.0f} GiB"),
            ("CUDA_CONTEXT", f"{CUDA_CONTEXT / GIB:.0f} GiB per GPU"),
            ("CUDA_HOST_OVERHEAD", f"{CUDA_HOST_OVERHEAD / GIB:.0f} GiB per process with a CUDA context"),
            ("STAND_INS", ", ".join(f"{k} as {v}" for k, v in STAND_INS.items()) + " (measured PSS)"),
            ("LOGIT_COPIES", str(LOGIT_COPIES)),
            ("WEIGHT_BUCKET", f"{WEIGHT_BUCKET / 1024**2:.0f} MiB"),
        )
    )


def process_table(models: tuple[str, ...] = tuple(ARCH)) -> str:
    """Every process kind of a gpu run: its measured PSS (cpu stack), how many the measured run had, how
    many a gpu run of each model starts, and the host memory they take there (Markdown)."""
    doc = processes.measured_pss()
    kinds = doc["kinds"]
    counts = {m: process_counts(m) for m in models}
    rows_by_model = {m: {i.what: i for i in process_rows(counts[m], doc)} for m in models}
    names = list(rows_by_model[models[0]])
    head = "| process kind | PSS MiB (cpu, measured) | seen (cpu run) | " + " | ".join(
        f"{m}: count, GiB" for m in models
    )
    out = [head + " |", "|---" * (3 + len(models)) + "|"]
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
            cells.append(f"{n}, {item.bytes / GIB:.1f}")
        out.append(f"| {name} | {pss} | {seen} | " + " | ".join(cells) + " |")
    out.append(
        "| **all processes** | | | "
        + " | ".join(f"{total(list(rows_by_model[m].values())) / GIB:.1f}" for m in models)
        + " |"
    )
    return "\n".join(out) + f"\n\nPSS measured {doc['when']} ({doc['machine']}): {doc['how']}\n"
