"""The smoke study's tiny world: a synthetic addition task, a character tokenizer, a tiny Qwen2.

Why this shape: the paper's phenomena need a sampler that learns from reward and drifts from a stale
copy. At toy scale 3-digit sums with exact-match reward, a ~0.2M
parameter decoder warm-started to about half accuracy, show the *correction is necessary* result
(no-IS collapses under staleness, TIS holds) within a few hundred GRPO steps on a CPU.

The model is a real ``Qwen2ForCausalLM`` with a real ``PreTrainedTokenizerFast`` saved to disk, so
verl and vLLM load it exactly as they load Qwen2.5-Math. head_dim is 32 because vLLM's CPU attention
supports head sizes 32, 64, 80, ... only.

Imports torch and transformers when a model is made (the rules that make the toy model and data).
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pandas as pd

from coolsampler.spec import numerics

# verl's Qwen token builder needs "\n" as one token and an "<|im_end|>" token to exist.
VOCAB = ["<pad>", "<s>", "</s>", *"0123456789", "+", "=", " ", "\n", "<|im_end|>"]
DATA_SOURCE = "arith"

# The rehearsal's world (coolsampler.train.rehearsal): the same sums, answered in either paper task's format,
# so that the GSM8K (`#### n`) and MATH (`\boxed{n}`) reward routes both score real answers.
REHEARSAL_VOCAB = [*VOCAB, *"#\\boxed{}"]
REHEARSAL_SOURCES = {  # task -> split stem -> data_source (as coolsampler.train.data writes them)
    "gsm8k": {"train": "openai/gsm8k", "test": "openai/gsm8k"},
    "math": {"train_l3-5": "DigitalLearningGmbH/MATH-lighteval", "math500": "HuggingFaceH4/MATH-500"},
}
# Each task's prompt starts with one character that asks for its answer format, as the paper's prompts do
# in words (GSM8K: 'output the final answer after "####"'; MATH: a boxed answer): the model answers in the
# format its reward route scores, so a sum it knows scores 1 on either route, not one time in two.
REHEARSAL_CUES = {"gsm8k": "#", "math": "\\"}
# The rehearsal model's warm start (rule rehearsal_model): greedy accuracy it trains to, and its step cap.
# High on purpose: the paper's saturation controllers (Fig 7) reheat only while at least half of the
# step's groups are all correct (coolsampler.worker.controller), and the rehearsal must show them acting
# within its 4 steps of 4 prompts x 4 samples. A model right on ~90% of samples at T=0.8 leaves
# ~0.9**4 = 2/3 of its groups all correct, and still a wrong sample in the other third (rewards vary).
# Measured (seed 0): 95% greedy after 675 steps; on the GSM8K train split at T=0.8, 89% of samples and
# 69% of groups of 4 right (MATH: 84%, 63%).
REHEARSAL_TARGET_ACC = 0.95
REHEARSAL_MAX_STEPS = 2000


def rehearsal_prompt(question: str, task: str) -> str:
    """A sum as ``task``'s rehearsal prompt: the task's format cue, then the sum."""
    return REHEARSAL_CUES[task] + question


def rehearsal_answer(answer: str, task: str) -> str:
    """A sum's answer in ``task``'s format (what the task's reward route scores as right)."""
    return f"#### {answer}" if task == "gsm8k" else f"\\boxed{{{answer}}}"


def rehearsal_problem(rng: random.Random, task: str) -> tuple[str, str]:
    """A sum as the rehearsal model sees it: ``task``'s prompt and the right response (without EOS)."""
    q, a = make_problem(rng)
    return rehearsal_prompt(q, task), rehearsal_answer(a, task)


def write_rehearsal_task(out_dir: str | Path, task: str, *, seed: int = 0, only: str | None = None) -> dict[str, Path]:
    """Toy sums as ``task``'s verl parquet: its split stems, its data_source, the prompt behind the task's
    format cue (``REHEARSAL_CUES``), the number as ground truth.
    ``only``: write that split alone (the same rows as when both are written)."""
    stems = list(REHEARSAL_SOURCES[task])
    paths = write_task(out_dir, n_train=2000, n_test=64, seed=seed, names=(stems[1], stems[0]), only=only)
    for stem, path in paths.items():
        df = pd.read_parquet(path)
        df["data_source"] = REHEARSAL_SOURCES[task][stem]
        df["prompt"] = [[{**m, "content": rehearsal_prompt(m["content"], task)} for m in p] for p in df["prompt"]]
        df.to_parquet(path)
    return paths


def make_problem(rng: random.Random, digits: int = 2) -> tuple[str, str]:
    a, b = rng.randrange(10**digits), rng.randrange(10**digits)
    return f"{a}+{b}=", str(a + b)


def write_task(
    out_dir: str | Path,
    *,
    n_train: int = 8000,
    n_test: int = 128,
    seed: int = 0,
    names: tuple[str, str] = ("test", "train"),
    only: str | None = None,
) -> dict[str, Path]:
    """verl-format parquet (prompt as a one-message chat; ground truth in reward_model); ``names`` are
    the file stems of the (held-out, training) splits."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    seen: set[str] = set()
    paths = {}
    for split, n in ((names[0], n_test), (names[1], n_train)):
        rows = []
        while len(rows) < n:
            q, a = make_problem(rng)
            if q in seen:
                continue
            seen.add(q)  # test and train never share a problem
            rows.append(
                {
                    "data_source": DATA_SOURCE,
                    "prompt": [{"role": "user", "content": q}],
                    "ability": "arithmetic",
                    "reward_model": {"style": "rule", "ground_truth": a},
                    "extra_info": {"split": split, "index": len(rows)},
                }
            )
        if only is None or split == only:
            paths[split] = out / f"{split}.parquet"
            pd.DataFrame(rows).to_parquet(paths[split])
    return paths


def build_tokenizer(out_dir: str | Path, vocab: list[str] = VOCAB):
    """A byte-level BPE tokenizer with one token per character and no merges.

    It is a real ``Qwen2Tokenizer``: transformers reloads any tokenizer next to a qwen2 config as
    that class, and verl's Qwen token builder needs "\n" as one token and ``<|im_end|>`` to exist.
    In byte-level form " " is "Ġ" and "\n" is "Ċ".
    """
    from transformers import Qwen2Tokenizer

    byte_level = {" ": "Ġ", "\n": "Ċ"}
    vocab = {byte_level.get(tok, tok): i for i, tok in enumerate(vocab)}
    tok = Qwen2Tokenizer(vocab=vocab, merges=[], unk_token=None, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    tok.add_special_tokens({"additional_special_tokens": ["<|im_end|>"]})
    # verl applies the chat template to every prompt: the toy one is just the user text.
    tok.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    tok.save_pretrained(out_dir)
    return tok


# The toy model's shapes. "cpu": the smoke study's and the rehearsal's (~0.2M parameters). "gpu": the
# acceptance check's own model on a GPU machine with no model cached: the same recipe, wide enough for
# bf16 kernels (head_dim 64, a size every GPU attention backend of vLLM supports) and still warm-started
# in seconds (~3.4M parameters); as many positions as Qwen2.5-Math (4096), so any of the paper recipe's
# prompt and response lengths fit.
TOY_SIZES: dict[str, dict[str, int]] = {
    "cpu": {
        "hidden_size": 64,
        "intermediate_size": 192,
        "num_hidden_layers": 3,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "head_dim": 32,
        "max_position_embeddings": 128,
    },
    "gpu": {
        "hidden_size": 256,
        "intermediate_size": 768,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "head_dim": 64,
        "max_position_embeddings": 4096,
    },
}


def build_model(out_dir: str | Path, *, seed: int = 0, vocab_size: int = len(VOCAB), size: str = "cpu"):
    """A randomly initialised toy Qwen2 of ``size`` (``TOY_SIZES``), on the CPU."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen2Config(
        vocab_size=vocab_size,
        **TOY_SIZES[size],
        tie_word_embeddings=True,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        torch_dtype="float32",
    )
    return Qwen2ForCausalLM(cfg)


def sft_warm_start(
    out_dir: str | Path,
    *,
    steps: int = 300,
    batch: int = 256,
    lr: float = 3e-3,
    target_acc: float = 0.5,
    seed: int = 0,
    log=print,
    rehearsal: bool = False,
    size: str = "cpu",
    device: str = "cpu",
) -> dict:
    """Create tokenizer + model, train on the task to about ``target_acc`` greedy accuracy, save.

    ``rehearsal``: the rehearsal's model (REHEARSAL_VOCAB; each prompt's format cue drawn at random, the
    answer in that task's format; ``REHEARSAL_TARGET_ACC`` is its rule's target).

    Stops early at ``target_acc``: the paper starts RL from a model that already solves part of
    the task, and GRPO needs groups with mixed outcomes to learn anything.

    ``size`` and ``device``: the acceptance check's GPU-sized model, trained on the GPU (``TOY_SIZES``);
    the defaults make the CPU toy model exactly as before. Saved on the CPU in fp32 either way.
    """
    import torch

    # One thread: a 0.2M-parameter model gains nothing from two, and on a loaded machine (CI runs the
    # test suite beside it) two OpenMP threads spin-wait on each other, 10-50x slower per step.
    torch.set_num_threads(1)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    vocab = REHEARSAL_VOCAB if rehearsal else VOCAB
    tok = build_tokenizer(out, vocab)
    model = build_model(out, seed=seed, vocab_size=len(vocab), size=size).to(device)
    fmt_rng = random.Random(seed + 2)
    rng = random.Random(seed + 1)
    eos = tok.eos_token_id
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    tasks = list(REHEARSAL_CUES)

    def problem(r: random.Random, i: int | None = None) -> tuple[str, str]:
        if not rehearsal:
            return make_problem(r)
        return rehearsal_problem(r, tasks[i % 2] if i is not None else fmt_rng.choice(tasks))

    test = [problem(random.Random(10_000 + i), i) for i in range(256)]
    t0 = time.time()
    acc = 0.0
    history = []
    for step in range(1, steps + 1):
        seqs, masks = [], []
        for _ in range(batch):
            q, a = problem(rng)
            qi, ai = tok.encode(q), [*tok.encode(a), eos]
            seqs.append(qi + ai)
            masks.append([0] * len(qi) + [1] * len(ai))
        width = max(map(len, seqs))
        ids = torch.tensor([s + [0] * (width - len(s)) for s in seqs], device=device)
        m = torch.tensor([mm + [0] * (width - len(mm)) for mm in masks], dtype=torch.float32, device=device)
        logits = model(input_ids=ids).logits[:, :-1]
        nll = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1), reduction="none"
        )
        loss = (nll * m[:, 1:].reshape(-1)).sum() / m[:, 1:].sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 25 == 0 or step == steps:
            acc = greedy_accuracy(model, tok, test, max_new=12 if rehearsal else 6, rehearsal=rehearsal)
            history.append({"step": step, "loss": float(loss.detach()), "acc": acc})
            log(f"sft step {step}/{steps} loss {loss.item():.3f} greedy acc {acc:.3f} ({time.time() - t0:.0f}s)")
            if acc >= target_acc:
                break
    model.to("cpu").save_pretrained(out, safe_serialization=True)
    info = {
        "greedy_acc": acc,
        "sft_steps": history[-1]["step"],
        "seconds": time.time() - t0,
        "history": history,
        "numerics": numerics_record(),
    }
    (out / "warmstart.json").write_text(json.dumps(info, indent=1))
    return info


def unpinned_reason() -> str | None:
    """Why this process would not compute a warm start on the pinned numerics, or None. On x86-64 the
    pin decides the kernels (``coolsampler.spec.numerics.check_torch``); elsewhere (ARM) it does nothing, and
    a model trained there is its own CPU family's."""
    import platform

    if platform.machine() not in ("x86_64", "AMD64"):
        return None
    return numerics.check_torch()


def numerics_record() -> dict:
    """The numeric path this process computed on and the CPU family: a model's bytes depend on both
    (coolsampler.spec.numerics)."""
    return {**numerics.torch_state(), "cpu": numerics.cpu_family()}


def greedy_accuracy(model, tok, problems: list[tuple[str, str]], max_new: int = 6, rehearsal: bool = False) -> float:
    import torch

    model.eval()
    correct = 0
    with torch.no_grad():
        qs = [tok.encode(q) for q, _ in problems]
        width = max(map(len, qs))  # left-pad: problems differ in length ("7+12=" vs "512+999=")
        ids = torch.tensor([[0] * (width - len(q)) + q for q in qs], device=model.device)
        attn = (ids != 0).long()
        out = model.generate(
            input_ids=ids,
            attention_mask=attn,
            max_new_tokens=max_new,
            do_sample=False,
            pad_token_id=0,
            eos_token_id=2,
        )
        for (_, a), row in zip(problems, out[:, ids.shape[1] :].tolist(), strict=True):
            text = tok.decode([t for t in row if t not in (0, 2)] if 2 not in row else row[: row.index(2)])
            correct += text.strip() == a if rehearsal else text.replace(" ", "") == a
    model.train()
    return correct / len(problems)


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> float:
    """Exact match of the stripped response to the sum (verl custom-reward signature)."""
    return float(solution_str.replace("</s>", "").strip() == str(ground_truth).strip())
