"""Where a stale sampler and its learner have drifted apart, token by token, in a generated chain world.

The paper's mechanism (Sections 3.2 and 6): the learner-sampler ratio drifts fastest on the tail, the
low-probability tokens a hot sampler proposes, and cooling the sampler helps by sampling that tail less.
A run whose sampler is never refreshed (N >= its length) keeps its initial model as the sampler, so the
drift at step t is between two models on disk: the world's warm start at the run's sampler temperature
(q) and the learner of the run's step-t checkpoint (pi, at learner temperature 1).

On samples drawn from q at the run's Tb, each response position's exact KL(q || pi) over the vocabulary
(the sum that verl's k1 estimates on the sampled token) is attributed to the class of the token sampled
there: a free word of rank < TAIL_RANK (head), one of rank >= TAIL_RANK (tail), a digit (operands and
running sums), or anything else (block labels, the end token). Per class: its share of the positions, its
mean KL, and its part of the per-token total (share x mean; the parts add up to the total). A
measurement, not a verdict: the cliff study reports it beside its claims.

Torch and transformers only (rule ``drift_probe``); the checkpoint is read as verl's FSDP checkpoint
manager writes it (``actor/model_world_size_<W>_rank_<r>.pt``, FSDP2 DTensor shards on dim 0).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from coolsampler.spec.drift import CLASSES
from coolsampler.spec.world import TAIL_RANK, World
from coolsampler.testkit import chain
from coolsampler.testkit.world_probe import _logits, _sample

_SHARD = re.compile(r"model_world_size_(\d+)_rank_(\d+)\.pt")


def _full(parts: list[Any]) -> Any:
    """One tensor from its per-rank pieces: a DTensor's local shards joined on dim 0 (FSDP2 shards there,
    in rank order), a plain tensor as it is."""
    import torch

    local = [p.to_local() if hasattr(p, "to_local") else p for p in parts]
    if len(local) == 1 or not hasattr(parts[0], "to_local"):
        return local[0]
    return torch.cat(local, dim=0)


def load_learner(actor_dir: str | Path, base_model_dir: str | Path):
    """The learner of a verl FSDP checkpoint (its ``actor/`` directory) as a Qwen2 model, on the
    architecture of the world's warm start (``base_model_dir``). Every parameter must come from the
    checkpoint: a missing or surplus one is an error naming it (a tied output layer may be absent)."""
    import torch
    from transformers import Qwen2ForCausalLM

    actor_dir = Path(actor_dir)
    shards = sorted(
        (
            (int(m[1]), int(m[2]), p)
            for p in actor_dir.glob("model_world_size_*_rank_*.pt")
            if (m := _SHARD.fullmatch(p.name))
        ),
        key=lambda t: t[1],
    )
    if not shards:
        raise FileNotFoundError(
            f"{actor_dir}: no model_world_size_*_rank_*.pt (a verl FSDP checkpoint's actor directory?)"
        )
    size = shards[0][0]
    if sorted(r for _, r, _ in shards) != list(range(size)) or any(w != size for w, _, _ in shards):
        raise ValueError(
            f"{actor_dir}: expected the shards of ranks 0..{size - 1} of one world size,"
            f" found {[p.name for *_, p in shards]}"
        )
    states = [torch.load(p, map_location="cpu", weights_only=False) for *_, p in shards]
    state = {k: _full([s[k] for s in states]).to(torch.float32) for k in states[0]}
    model = Qwen2ForCausalLM.from_pretrained(str(base_model_dir), torch_dtype=torch.float32).eval()
    missing, unexpected = model.load_state_dict(state, strict=False)
    tied = {"lm_head.weight"} if model.config.tie_word_embeddings else set()
    if unexpected or set(missing) - tied:
        raise ValueError(
            f"{actor_dir}: checkpoint does not fit the world's model:"
            f" missing {sorted(set(missing) - tied)}, surplus {sorted(unexpected)}"
        )
    return model


def probe(
    world: World, sampler_dir: str | Path, learner, *, Tb: float, prompts: int = 256, seed: int = 0
) -> dict[str, Any]:
    """KL(q_Tb || pi) per answer token on ``prompts`` of ``world``'s validation prompts sampled from the
    sampler's model (``sampler_dir``) at ``Tb``, split by the class of the sampled token (module docstring);
    ``learner`` is the model pi (``load_learner``)."""
    import torch
    from transformers import AutoTokenizer, Qwen2ForCausalLM

    torch.set_num_threads(1)
    tok = AutoTokenizer.from_pretrained(str(sampler_dir))
    sampler = Qwen2ForCausalLM.from_pretrained(str(sampler_dir), torch_dtype=torch.float32).eval()
    words = world.words()
    cls_of = {tok.convert_tokens_to_ids(w): ("tail" if i >= TAIL_RANK - 1 else "head") for i, w in enumerate(words)}
    cls_of.update({tok.convert_tokens_to_ids(str(d)): "digit" for d in range(10)})
    val = chain.split_prompts(world)["val"][:prompts]

    seqs, plen, lengths = _sample(sampler, tok, world, val, Tb, seed)
    lq_all = torch.log_softmax(_logits(sampler, seqs)[:, plen - 1 : -1] / Tb, -1)
    lp_all = torch.log_softmax(_logits(learner, seqs)[:, plen - 1 : -1], -1)
    kl_sum = dict.fromkeys(CLASSES, 0.0)
    count = dict.fromkeys(CLASSES, 0)
    k1 = 0.0
    for b, n in enumerate(lengths):
        lq, lp = lq_all[b, :n], lp_all[b, :n]
        per_pos = (lq.exp() * (lq - lp)).sum(-1)
        resp = seqs[b, plen : plen + n].tolist()
        k1 += float(
            (lq.gather(-1, seqs[b, plen : plen + n, None]) - lp.gather(-1, seqs[b, plen : plen + n, None])).sum()
        )
        for t, kl in zip(resp, per_pos.tolist(), strict=True):
            c = cls_of.get(t, "other")
            kl_sum[c] += kl
            count[c] += 1
    tokens = sum(count.values())
    out: dict[str, Any] = {
        "world": world.ident,
        "Tb": Tb,
        "prompts": len(val),
        "tail_rank": TAIL_RANK,
        "answer_tokens": tokens,
        "kl": sum(kl_sum.values()) / tokens,
        "k1": k1 / tokens,
    }
    for c in CLASSES:
        out[f"{c}_share"] = count[c] / tokens
        out[f"{c}_kl"] = kl_sum[c] / count[c] if count[c] else None
        out[f"{c}_part"] = kl_sum[c] / tokens
    return out


__all__ = ["CLASSES", "load_learner", "probe"]
