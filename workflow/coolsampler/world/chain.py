"""The chain world's generator and reward: data, tokenizer and warm-started tiny Qwen2 from a study's knobs.

The task (knobs: ``coolsampler.spec.world.World``): a prompt of K digits, each behind its block's label,
then ``=``; the answer is K blocks, each its label, the prompt's digit of that label (the operand),
``words_per_block`` free words (single letters) and the running sum of the prompt's digits so far, mod 10.
``A3B1C4D1E5=`` -> ``A3abc3 B1aab4 C4dac8 D1aba9 E5cab4`` (without the spaces). The reward is 1 iff every
digit (operands and sums) is right; the words are free.

Why free words, Zipf-distributed, that predict errors: the paper's cooling benefit rests on a sampler
with real per-token entropy (natural language has it; a digits-only answer does not) whose rare choices
lead to mistakes, so that cooling concentrates a stale batch on the prefixes greedy validation follows.
In the supervised data a block's sum is wrong with a probability that grows with the rarity of its
words (``ErrorLink``); the warm-started model learns that link, as a model trained on text learns that
odd phrasing precedes odd answers.

The model is a real ``Qwen2ForCausalLM`` with a real one-character tokenizer (``toy.build_tokenizer``),
loaded by verl and vLLM as they load Qwen2.5-Math. ``compute_score`` is the reward verl loads from this
file by path; the module imports nothing of the package or the heavy stack at load, so it loads wherever
verl's reward workers run.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

DATA_SOURCE = "chain"


def running_sums(digits: str) -> str:
    """The running sums mod 10 of the prompt's digits: each block's last digit."""
    out, total = [], 0
    for d in digits:
        total += int(d)
        out.append(str(total % 10))
    return "".join(out)


def answer_digits(digits: str) -> str:
    """Every digit of a right answer, in order: each block's operand, then its running sum."""
    return "".join(d + s for d, s in zip(digits, running_sums(digits), strict=True))


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> dict[str, float]:
    """1 iff the response's digits are exactly the running sums (verl custom-reward signature).

    Also returns ``acc`` (the same 0/1, the name verl's validation reports as its core metric) and
    ``digit_error``: the share of the answer's digit positions that are wrong or missing (extra digits
    count as wrong too). Under greedy validation that is the learner's digit error on its own greedy path.
    """
    digits = [c for c in str(solution_str).replace("</s>", "") if c.isdigit()]
    truth = str(ground_truth)
    wrong = sum(a != b for a, b in zip(digits, truth, strict=False)) + abs(len(digits) - len(truth))
    right = float("".join(digits) == truth)
    return {"score": right, "acc": right, "digit_error": min(1.0, wrong / max(1, len(truth)))}


def zipf_weights(n: int, exponent: float) -> list[float]:
    raw = [1.0 / (k + 1) ** exponent for k in range(n)]
    total = sum(raw)
    return [w / total for w in raw]


def word_entropy(world) -> float:
    """Entropy (nats) of one free word in the supervised data."""
    import math

    return -sum(p * math.log(p) for p in zipf_weights(world.vocab_words, world.zipf))


def make_prompt(world, rng: random.Random) -> str:
    from coolsampler.spec.world import LABELS

    return "".join(f"{LABELS[i]}{rng.randrange(10)}" for i in range(world.chain_length)) + "="


def prompt_digits(prompt: str) -> str:
    return "".join(c for c in prompt if c.isdigit())


def supervised_answer(world, prompt: str, rng: random.Random) -> str:
    """One answer as the supervised data writes it: Zipf words (flatter after a tail word where the world
    has ``tail_zipf``), each block's digit wrong with the probability its words' rarity gives
    (``ErrorLink``)."""
    words = world.words()
    weights = {z: zipf_weights(world.vocab_words, z) for z in {world.zipf, world.tail_zipf} if z is not None}
    scale = max(1, world.vocab_words - 1)
    out = []
    from coolsampler.spec.world import LABELS

    operands = prompt_digits(prompt)
    previous: int | None = None  # the answer's previous free word: with tail_zipf, what follows a rare word is flatter
    for label, operand, digit in zip(LABELS, operands, running_sums(operands), strict=False):
        ranks = []
        for _ in range(world.words_per_block):
            previous = rng.choices(range(world.vocab_words), weights=weights[world.word_zipf(previous)])[0]
            ranks.append(previous)
        rarity = sum(ranks) / len(ranks) / scale
        if rng.random() < world.error.p_error(rarity):
            digit = rng.choice([d for d in "0123456789" if d != digit])
        out.append(label + operand + "".join(words[k] for k in ranks) + digit)
    return "".join(out)


def split_prompts(world) -> dict[str, list[str]]:
    """Disjoint validation and training prompts (the validation split first, so it does not depend on
    the size of the training split)."""
    rng = random.Random(world.seed)
    seen: set[str] = set()
    out: dict[str, list[str]] = {}
    space = 10**world.chain_length
    for split, n in (("val", world.val_prompts), ("train", world.train_prompts)):
        if len(seen) + n > space // 2:
            raise ValueError(f"{n} {split} prompts of {world.chain_length} digits: too few distinct prompts")
        rows: list[str] = []
        while len(rows) < n:
            p = make_prompt(world, rng)
            if p not in seen:
                seen.add(p)
                rows.append(p)
        out[split] = rows
    return out


def write_data(world, out_dir: str | Path) -> dict[str, Path]:
    """verl-format parquet of both splits: one-message chat prompt, ground truth the answer's digits.

    With ``world.sampled_val`` the validation parquet holds, after every prompt, a second copy of its
    first ``sampled_val`` prompts under the data source ``chain`` + ``SAMPLED_SUFFIX``; every validation
    row then carries its ``sampler_temperature`` (0: greedy, 1 for the copy), which the patched verl
    honours in validation, so one validation pass logs the greedy and the sampled score apart."""
    import pandas as pd

    from coolsampler.spec.metrics_schema import SAMPLED_SUFFIX, SAMPLED_TEMPERATURE

    def row(p: str, split: str, i: int, source: str = DATA_SOURCE) -> dict[str, Any]:
        return {
            "data_source": source,
            "prompt": [{"role": "user", "content": p}],
            "ability": "arithmetic",
            "reward_model": {"style": "rule", "ground_truth": answer_digits(prompt_digits(p))},
            "extra_info": {"split": split, "index": i},
        }

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for split, prompts in split_prompts(world).items():
        rows = [row(p, split, i) for i, p in enumerate(prompts)]
        if split == "val" and world.sampled_val:
            for r in rows:
                r["sampler_temperature"] = 0.0
            for i, p in enumerate(prompts[: world.sampled_val]):
                rows.append(
                    {**row(p, split, i, DATA_SOURCE + SAMPLED_SUFFIX), "sampler_temperature": SAMPLED_TEMPERATURE}
                )
        paths[split] = out / f"{split}.parquet"
        pd.DataFrame(rows).to_parquet(paths[split])
    return paths


def build_model(world):
    """The world's randomly initialised Qwen2 (fp32, CPU)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from coolsampler.spec.world import HEAD_DIM

    torch.manual_seed(world.seed)
    shape = world.model
    cfg = Qwen2Config(
        vocab_size=len(world.vocab()),
        hidden_size=shape.hidden_size,
        intermediate_size=shape.intermediate_size,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.heads,
        head_dim=HEAD_DIM,
        max_position_embeddings=128,
        tie_word_embeddings=True,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        torch_dtype="float32",
    )
    return Qwen2ForCausalLM(cfg)


def evaluate(model, tok, world, prompts: list[str], *, temperature: float = 0.0, seed: int = 0) -> dict[str, float]:
    """Accuracy and digit error of the model's answers to ``prompts``: greedy (temperature 0) or sampled."""
    import torch

    model.eval()
    with torch.no_grad():
        ids = torch.tensor([tok.encode(p) for p in prompts])  # equal lengths: no padding
        torch.manual_seed(seed)
        out = model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=world.response_tokens + 3,
            do_sample=temperature > 0,
            temperature=temperature if temperature > 0 else None,
            top_k=0 if temperature > 0 else None,
            top_p=None,
            pad_token_id=0,
            eos_token_id=2,
        )
    model.train()
    acc = err = 0.0
    for p, row in zip(prompts, out[:, ids.shape[1] :].tolist(), strict=True):
        row = row[: row.index(2)] if 2 in row else row
        s = compute_score(DATA_SOURCE, tok.decode(row), answer_digits(prompt_digits(p)))
        acc += s["acc"]
        err += s["digit_error"]
    return {"acc": acc / len(prompts), "digit_error": err / len(prompts)}


def warm_start(world, out_dir: str | Path, *, log=print) -> dict[str, Any]:
    """Tokenizer + model, trained on the supervised data until greedy accuracy on the validation prompts
    first reaches ``warm_start.greedy_acc``; saved with ``warmstart.json`` (its history, and greedy and
    T=1 sampled accuracy at the end)."""
    import torch

    from coolsampler.world.toy import build_tokenizer, numerics_record

    # One thread: as for the toy model, two OpenMP threads beside a loaded CI only spin-wait.
    torch.set_num_threads(1)
    ws = world.warm_start
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer(out, world.vocab())
    model = build_model(world)
    opt = torch.optim.AdamW(model.parameters(), lr=ws.lr, weight_decay=0.0)
    check = split_prompts(world)["val"][: ws.check_prompts]
    rng = random.Random(world.seed + 1)
    eos = tok.eos_token_id
    t0, history, greedy = time.time(), [], {"acc": 0.0, "digit_error": 1.0}
    for step in range(1, ws.max_steps + 1):
        prompts = [make_prompt(world, rng) for _ in range(ws.batch)]
        seqs = [tok.encode(p) + tok.encode(supervised_answer(world, p, rng)) + [eos] for p in prompts]
        ids = torch.tensor(seqs)  # every sequence has the same length
        plen = world.prompt_tokens
        logits = model(input_ids=ids).logits[:, plen - 1 : -1]
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, plen:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % ws.check_every == 0 or step == ws.max_steps:
            greedy = evaluate(model, tok, world, check)
            history.append({"step": step, "loss": float(loss.detach()), **greedy})
            log(
                f"warm start step {step}/{ws.max_steps}: loss {loss.item():.3f}, greedy accuracy {greedy['acc']:.3f},"
                f" digit error {greedy['digit_error']:.3f} ({time.time() - t0:.0f} s)"
            )
            if greedy["acc"] >= ws.greedy_acc:
                break
    sampled = evaluate(model, tok, world, check, temperature=1.0, seed=world.seed)
    model.save_pretrained(out, safe_serialization=True)
    info = {
        "world": world.ident,
        "knobs": world.knobs(),
        "parameters": sum(p.numel() for p in model.parameters()),
        "greedy_acc": greedy["acc"],
        "greedy_digit_error": greedy["digit_error"],
        "sampled_acc": sampled["acc"],
        "sampled_digit_error": sampled["digit_error"],
        "word_entropy_nats": word_entropy(world),
        "steps": history[-1]["step"] if history else 0,
        "reached_target": greedy["acc"] >= ws.greedy_acc,
        "seconds": time.time() - t0,
        "history": history,
        "numerics": numerics_record(),
    }
    (out / "warmstart.json").write_text(json.dumps(info, indent=1))
    if not info["reached_target"]:
        raise RuntimeError(
            f"world {world.ident}: greedy accuracy {greedy['acc']:.3f} after {ws.max_steps} warm-start steps,"
            f" below its target {ws.greedy_acc}; raise worlds.<name>.warm_start.max_steps or lr"
        )
    return info
