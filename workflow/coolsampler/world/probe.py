"""What a warm-started chain world offers the paper's mechanism, measured from its model alone (no RL step).

The paper's cooling benefit (Sections 3.2 and 6) needs a sampler whose per-token distribution is peaked
with a real tail, a tail that tempering cuts, a tempering offset small beside the drift that breaks a
run, and rare choices that lead to mistakes. Each of the four is read here from the warm-started Qwen2 on
the world's own validation prompts:

* ``entropy``: nats per answer token of the model's T=1 distribution, on its T=1 samples (every response
  token, the end-of-sequence token included, as verl's token mean counts them);
* ``tail_ratio``: P_p(rank >= TAIL_RANK) / P_q(rank >= TAIL_RANK), the model's mass on the free words'
  tail at T=1 over its mass at the sampler temperature, on the free-word positions of T=1 samples;
* ``offset``: KL(q_Tb || p) per answer token on samples drawn at Tb, the exact sum over the vocabulary of
  what verl's k1 estimate reads at step 1, before any weight moves (the tempering alone);
* ``error_link``: P(block wrong | a tail word in it) - P(block wrong | none), over the blocks of T=1
  samples; a block is wrong if its operand or its running sum is (against the true sum);
* ``error_link_local``: the same with a block's sum judged against the sum the answer wrote before it
  plus its own operand (``block_errors``: the model carries its own mistakes on).

The distributions come from one forward pass over each sampled sequence, not from the sampler's own
scores, so the numbers do not depend on how ``generate`` processes logits. Torch and transformers only
(rule ``world_probe``); the screen that judges these numbers is ``coolsampler.results.world_screen``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from coolsampler.spec.world import LABELS, TAIL_RANK, World
from coolsampler.world import chain

# A block of a well-formed answer: its label, the operand, free words (letters that are not labels), the sum.
_BLOCK = re.compile(r"([A-I])(\d)([a-zJ-Z]*)(\d)")


def _sample(model, tok, world: World, prompts: list[str], temperature: float, seed: int):
    """Sampled answers, as (prompt + response) token ids and the response's length to its end token."""
    import torch

    ids = torch.tensor([tok.encode(p) for p in prompts])  # equal lengths: no padding
    torch.manual_seed(seed)
    with torch.no_grad():
        out = model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=world.response_tokens + 3,
            do_sample=True,
            temperature=temperature,
            top_k=0,
            top_p=None,
            pad_token_id=0,
            eos_token_id=2,
        )
    lengths = []
    for row in out[:, ids.shape[1] :].tolist():
        lengths.append(row.index(2) + 1 if 2 in row else len(row))
    return out, ids.shape[1], lengths


def _logits(model, seqs):
    import torch

    with torch.no_grad():
        return model(input_ids=seqs, attention_mask=torch.ones_like(seqs)).logits.double()


def block_errors(world: World, prompt: str, response: str, *, local: bool = False) -> list[tuple[bool, bool]]:
    """(has a tail word, is wrong) for each block of a response that parses, in order; stops at the first
    block that does not parse or carries the wrong label.

    A block is wrong if its operand is not the prompt's digit or its sum is not the true running sum;
    ``local``: or not its own operand added to the sum the response wrote in the block before. The true
    sum counts every block after a wrong one as wrong when the model carries its own sum on (it does:
    measured on round 3's worlds), so its link mixes a block's words with its predecessors' mistakes; the
    local one asks only whether this block's step went wrong."""
    operands = chain.prompt_digits(prompt)
    sums = chain.running_sums(operands)
    words = world.words()
    out = []
    pos, previous = 0, 0
    for i, (operand, total) in enumerate(zip(operands, sums, strict=True)):
        m = _BLOCK.match(response, pos)
        if m is None or m[1] != LABELS[i]:
            break
        tail = any(w in words and words.index(w) >= TAIL_RANK - 1 for w in m[3])
        want = str((previous + int(m[2])) % 10) if local else total
        out.append((tail, m[2] != operand or m[4] != want))
        previous, pos = int(m[4]), m.end()
    return out


def _link(blocks: list[tuple[bool, bool]]) -> tuple[float | None, float | None, float | None]:
    """P(wrong | a tail word), P(wrong | none) and their difference, over ``blocks``."""
    with_tail = [wrong for tail, wrong in blocks if tail]
    without = [wrong for tail, wrong in blocks if not tail]
    p_tail = sum(with_tail) / len(with_tail) if with_tail else None
    p_none = sum(without) / len(without) if without else None
    return p_tail, p_none, (p_tail - p_none if p_tail is not None and p_none is not None else None)


def probe(world: World, model_dir: str | Path, *, prompts: int = 512, Tb: float = 0.8, seed: int = 0) -> dict[str, Any]:
    """The four properties of ``world``'s warm-started model (module docstring), on its first ``prompts``
    validation prompts, with the offset and tail ratio at sampler temperature ``Tb``."""
    import torch
    from transformers import AutoTokenizer, Qwen2ForCausalLM

    torch.set_num_threads(1)
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    model = Qwen2ForCausalLM.from_pretrained(str(model_dir), torch_dtype=torch.float32).eval()
    val = chain.split_prompts(world)["val"][:prompts]
    words = world.words()
    word_ids = torch.tensor([tok.convert_tokens_to_ids(w) for w in words])
    tail_ids = word_ids[TAIL_RANK - 1 :]
    word_set = set(word_ids.tolist())

    # T=1 samples: entropy, tail ratio, error link
    seqs, plen, lengths = _sample(model, tok, world, val, 1.0, seed)
    logits = _logits(model, seqs)[:, plen - 1 : -1]  # position t predicts response token t
    ent = tails_p = tails_q = 0.0
    tokens = free = 0
    for b, n in enumerate(lengths):
        lp = torch.log_softmax(logits[b, :n], -1)
        ent += float(-(lp.exp() * lp).sum())
        tokens += n
        resp = seqs[b, plen : plen + n]
        at = torch.tensor([t in word_set for t in resp.tolist()])
        if at.any():
            p = lp[at].exp()
            q = torch.softmax(logits[b, :n][at] / Tb, -1)
            tails_p += float(p[:, tail_ids].sum())
            tails_q += float(q[:, tail_ids].sum())
            free += int(at.sum())
    answers = [tok.decode(seqs[b, plen : plen + n].tolist(), skip_special_tokens=True) for b, n in enumerate(lengths)]
    blocks = [be for p, a in zip(val, answers, strict=True) for be in block_errors(world, p, a)]
    local = [be for p, a in zip(val, answers, strict=True) for be in block_errors(world, p, a, local=True)]
    p_tail, p_none, link = _link(blocks)

    # samples at Tb: the step-1 offset KL(q_Tb || p) per answer token
    seqs_b, plen_b, lengths_b = _sample(model, tok, world, val, Tb, seed + 1)
    logits_b = _logits(model, seqs_b)[:, plen_b - 1 : -1]
    kl = 0.0
    tokens_b = 0
    for b, n in enumerate(lengths_b):
        lp = torch.log_softmax(logits_b[b, :n], -1)
        lq = torch.log_softmax(logits_b[b, :n] / Tb, -1)
        kl += float((lq.exp() * (lq - lp)).sum())
        tokens_b += n

    return {
        "world": world.ident,
        "prompts": len(val),
        "Tb": Tb,
        "tail_rank": TAIL_RANK,
        "entropy": ent / tokens,
        "tail_ratio": tails_p / tails_q if tails_q > 0 else None,
        "tail_mass": tails_p / free if free else None,
        "offset": kl / tokens_b,
        "error_link": link,
        "p_wrong_tail": p_tail,
        "p_wrong_none": p_none,
        "error_link_local": _link(local)[2],
        "blocks_tail": sum(tail for tail, _ in blocks),
        "blocks_none": sum(not tail for tail, _ in blocks),
        "free_positions": free,
        "answer_tokens": tokens,
    }


__all__ = ["block_errors", "probe"]
