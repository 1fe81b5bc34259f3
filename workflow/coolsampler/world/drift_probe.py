"""Where a stale sampler's learner has drifted from it, candidate token by candidate token, in a generated
chain world.

The paper's mechanism (Sections 3.2 and 6): the learner-sampler ratio drifts fastest on the tail, the
low-probability tokens a hot sampler proposes, and cooling the sampler helps by sampling that tail less.
A run whose sampler is never refreshed (N >= its length) keeps its initial model as the sampler, so the
drift at step t is between two models on disk: the world's warm start at the run's sampler temperature
(q) and the learner of the run's step-t checkpoint (pi, at learner temperature 1).

At each answer position of samples drawn from q at Tb, KL(q || pi) = sum_a q(a) (log q(a) - log pi(a))
over the candidate tokens a. Each term goes to the class of its candidate a (``spec.drift.CLASSES``: head
word, tail word, the digit a right step writes here, another digit, anything else) and, apart from that,
to the bin of q(a) (``spec.drift.BINS``). Which token was sampled does not decide where a term goes: a
drift carried by a token the sampler never draws is still seen, on the token that carries it.

The same sums with the initial model as pi give the tempering offset KL(q_Tb || p0) (zero at Tb = 1);
the learner's probe minus it is the drift, sum_a q(a) (log p0(a) - log pi(a)), per class and per bin,
the parts adding up to the total. Beside them, per class of the sampled token: its share of the samples
and the fraction whose truncated-IS weight pi/q (and p0/q) exceeds TIS's cap of 2.

Torch and transformers only (rule ``drift_probe``); the checkpoint is read as verl's FSDP checkpoint
manager writes it (``actor/model_world_size_<W>_rank_<r>.pt``, FSDP2 DTensor shards on dim 0).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from coolsampler.spec.drift import BIN_NAMES, BINS, CLASSES
from coolsampler.spec.world import TAIL_RANK, World
from coolsampler.world import chain
from coolsampler.world.probe import _logits, _sample

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


# TIS's cap (verl's algorithm.rollout_correction.rollout_is_threshold in every cliff study): a sampled
# token whose weight is above it counts as capped.
IS_CAP = 2.0


def right_digits(world: World, prompt: str, response: str) -> list[str | None]:
    """For each position of ``response`` (the token predicted there), the digit a right step writes at
    that position, else None. A block is laid out as label, operand, ``words_per_block`` words, sum: the
    operand's position wants the prompt's digit of that block; the sum's wants the sum the response wrote
    in the block before plus the operand it wrote in this one, mod 10 (a right step from the answer's
    own prefix, as the screen's local error link judges it; a position whose needed digit the response did
    not write as a digit falls back on the true one). Positions past the last block (the end token) want none."""
    operands = chain.prompt_digits(prompt)
    truth = chain.running_sums(operands)
    width = world.words_per_block + 3
    out: list[str | None] = []
    for i in range(len(response)):
        block, offset = divmod(i, width)
        if block >= len(operands):
            out.append(None)
        elif offset == 1:
            out.append(operands[block])
        elif offset == width - 1:
            op = response[block * width + 1]
            op = op if op.isdigit() else operands[block]
            if block == 0:
                before = 0
            else:
                prev = response[block * width - 1]
                before = int(prev) if prev.isdigit() else int(truth[block - 1])
            out.append(str((before + int(op)) % 10))
        else:
            out.append(None)
    return out


def decompose(lq, lp, lp0, cls, sampled) -> dict[str, Any]:
    """The probe's sums over answer positions, from log-probabilities of shape (positions, vocabulary):
    ``lq`` the sampler's at Tb, ``lp`` the learner's, ``lp0`` the initial model's (both at T=1); ``cls``
    (positions, vocabulary) the class index (into CLASSES) of each candidate at each position; ``sampled``
    (positions,) the token drawn there. Returns, per token: ``learner``/``offset``/``drift`` totals and
    their parts by class and by bin (``<probe>_<class or bin>``), and per class of the sampled token its
    share, its capped fraction under pi and under p0 (``capped_<class>``, ``capped0_<class>``), plus the
    k1 estimate verl logs (log q - log pi on the sampled token). Pure: tested on hand-made distributions."""
    import torch

    n = lq.shape[0]
    q = lq.exp()
    (low, _, cut), _, (high, top, _) = BINS
    bins = {low: q < cut, high: q > top}
    bins[BINS[1][0]] = ~(bins[low] | bins[high])
    terms = {"learner": q * (lq - lp), "offset": q * (lq - lp0)}
    terms["drift"] = terms["learner"] - terms["offset"]
    out: dict[str, Any] = {"answer_tokens": n}
    for what, t in terms.items():
        out[what] = float(t.sum()) / n
        for i, c in enumerate(CLASSES):
            out[f"{what}_{c}"] = float(t[cls == i].sum()) / n
        for name, inside in bins.items():
            out[f"{what}_{name}"] = float(t[inside].sum()) / n
    rows = torch.arange(n)
    s_cls = cls[rows, sampled]
    lq_s, lp_s, lp0_s = lq[rows, sampled], lp[rows, sampled], lp0[rows, sampled]
    out["k1"] = float((lq_s - lp_s).sum()) / n
    capped, capped0 = (lp_s - lq_s).exp() > IS_CAP, (lp0_s - lq_s).exp() > IS_CAP
    out["capped"] = float(capped.double().mean()) if n else math.nan
    out["capped0"] = float(capped0.double().mean()) if n else math.nan
    for i, c in enumerate(CLASSES):
        mine = s_cls == i
        k = int(mine.sum())
        out[f"sampled_{c}"] = k / n if n else math.nan
        out[f"capped_{c}"] = float(capped[mine].double().mean()) if k else None
        out[f"capped0_{c}"] = float(capped0[mine].double().mean()) if k else None
    # the drift's shares (B2 of the cliff study reads them): None where the learner did not drift
    for name in (*CLASSES, *BIN_NAMES):
        out[f"drift_frac_{name}"] = out[f"drift_{name}"] / out["drift"] if out["drift"] > 0 else None
    return out


def probe(
    world: World, sampler_dir: str | Path, learner, *, Tb: float, prompts: int = 256, seed: int = 0
) -> dict[str, Any]:
    """KL(q_Tb || pi), the tempering offset and the drift per answer token on ``prompts`` of ``world``'s
    validation prompts sampled from the sampler's model (``sampler_dir``) at ``Tb``, by candidate class
    and by bin of q (``decompose``); ``learner`` is the model pi (``load_learner``)."""
    import torch
    from transformers import AutoTokenizer, Qwen2ForCausalLM

    torch.set_num_threads(1)
    tok = AutoTokenizer.from_pretrained(str(sampler_dir))
    sampler = Qwen2ForCausalLM.from_pretrained(str(sampler_dir), torch_dtype=torch.float32).eval()
    words = world.words()
    vocab = len(tok)
    word_cls = torch.full((vocab,), CLASSES.index("other"), dtype=torch.long)
    for i, w in enumerate(words):
        word_cls[tok.convert_tokens_to_ids(w)] = CLASSES.index("tail" if i >= TAIL_RANK - 1 else "head")
    digit_ids = {str(d): tok.convert_tokens_to_ids(str(d)) for d in range(10)}
    word_cls[list(digit_ids.values())] = CLASSES.index("wrong_digit")
    val = chain.split_prompts(world)["val"][:prompts]

    seqs, plen, lengths = _sample(sampler, tok, world, val, Tb, seed)
    logits_q = _logits(sampler, seqs)[:, plen - 1 : -1]
    lq_all = torch.log_softmax(logits_q / Tb, -1)
    lp0_all = torch.log_softmax(logits_q, -1)
    lp_all = torch.log_softmax(_logits(learner, seqs)[:, plen - 1 : -1], -1)
    lq, lp, lp0, cls, sampled = [], [], [], [], []
    for b, n in enumerate(lengths):
        resp_ids = seqs[b, plen : plen + n]
        # one character a token (the world's tokenizer); a special token (the end) as a non-digit
        text = "".join(t if len(t) == 1 else "\0" for t in tok.convert_ids_to_tokens(resp_ids.tolist()))
        right = right_digits(world, val[b], text)
        c = word_cls.expand(n, vocab).clone()
        for i, d in enumerate(right[:n]):
            if d is not None:
                c[i, digit_ids[d]] = CLASSES.index("right_digit")
        lq.append(lq_all[b, :n]), lp.append(lp_all[b, :n]), lp0.append(lp0_all[b, :n])
        cls.append(c), sampled.append(resp_ids)
    out = decompose(torch.cat(lq), torch.cat(lp), torch.cat(lp0), torch.cat(cls), torch.cat(sampled))
    return {"world": world.ident, "Tb": Tb, "prompts": len(val), "tail_rank": TAIL_RANK, **out}


__all__ = ["CLASSES", "IS_CAP", "decompose", "load_learner", "probe", "right_digits"]
