"""Which model the acceptance runs: a given one, the first Qwen2 in the offline Hugging Face cache, or a
stand-in with the paper model's architecture. Imports torch and transformers only when a model is built."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

# Qwen2.5-Math-1.5B's config.json (Hugging Face, Qwen/Qwen2.5-Math-1.5B): the architecture of the
# fallback model when no real one is cached. Weights random, so rewards are all zero and nothing is
# learnt; shapes, memory and step time are those of the 1.5B model.
QWEN25_MATH_15B: dict[str, Any] = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "vocab_size": 151936,
    "hidden_size": 1536,
    "intermediate_size": 8960,
    "num_hidden_layers": 28,
    "num_attention_heads": 12,
    "num_key_value_heads": 2,
    "max_position_embeddings": 4096,
    "max_window_layers": 21,
    "rope_theta": 10000.0,
    "rms_norm_eps": 1e-6,
    "hidden_act": "silu",
    "initializer_range": 0.02,
    "tie_word_embeddings": True,
    "use_sliding_window": False,
    "sliding_window": 4096,
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151643,
    "torch_dtype": "bfloat16",
}
PAPER_MODEL_REPO = "Qwen/Qwen2.5-Math-1.5B"


def hub_roots() -> list[Path]:
    """Where an offline Hugging Face hub cache may be: HF_HUB_CACHE, HF_HOME/hub, ~/.cache, ./.cache
    (the docker recipe of docs/paper-study.md sets HF_HOME=$PWD/.cache/huggingface)."""
    roots = []
    if os.environ.get("HF_HUB_CACHE"):
        roots.append(Path(os.environ["HF_HUB_CACHE"]))
    if os.environ.get("HF_HOME"):
        roots.append(Path(os.environ["HF_HOME"]) / "hub")
    roots += [Path.home() / ".cache" / "huggingface" / "hub", Path.cwd() / ".cache" / "huggingface" / "hub"]
    out: list[Path] = []
    for r in roots:
        if r not in out:
            out.append(r)
    return out


def _usable(snapshot: Path) -> bool:
    """A snapshot verl and vLLM can load: a qwen2 config, weights and a tokenizer, all present."""
    try:
        cfg = json.loads((snapshot / "config.json").read_text())
    except (OSError, ValueError):
        return False
    if cfg.get("model_type") != "qwen2":
        return False
    weights = any(p.exists() for p in snapshot.glob("*.safetensors"))  # dangling links: not downloaded
    tokenizer = (snapshot / "tokenizer.json").exists() or (snapshot / "vocab.json").exists()
    return weights and tokenizer


def _repo_of(snapshot: Path) -> str:
    name = snapshot.parent.parent.name  # models--Qwen--Qwen2.5-Math-1.5B/snapshots/<rev>
    return name.removeprefix("models--").replace("--", "/")


def find_model(roots: list[Path] | None = None) -> tuple[Path, str] | None:
    """The first usable Qwen2-family snapshot: the paper's Qwen2.5-Math-1.5B, then any "1.5B" Qwen2,
    then the others by name (deterministic). Returns (path, repo id) or None."""
    found: list[tuple[int, str, Path]] = []
    for root in roots if roots is not None else hub_roots():
        for snap in sorted(root.glob("models--*/snapshots/*")):
            if not _usable(snap):
                continue
            repo = _repo_of(snap)
            rank = 0 if repo == PAPER_MODEL_REPO else 1 if "1.5b" in repo.lower() else 2
            found.append((rank, repo, snap))
    if not found:
        return None
    rank, repo, snap = min(found, key=lambda x: (x[0], x[1]))
    return snap, repo


def filler_tokenizer(out: Path, vocab_size: int):
    """A tokenizer for the random model: the rehearsal's characters (so the toy sums encode), padded with
    distinct filler tokens ``<i>`` to the model's vocabulary size, so that any id the sampler draws decodes."""
    from transformers import Qwen2Tokenizer

    from coolsampler.testkit import toy

    chars = toy.REHEARSAL_VOCAB
    byte_level = {" ": "Ġ", "\n": "Ċ"}
    vocab = {byte_level.get(t, t): i for i, t in enumerate(chars)}
    for i in range(len(vocab), vocab_size):
        vocab[f"<{i}>"] = i
    tok = Qwen2Tokenizer(vocab=vocab, merges=[], unk_token=None, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    tok.add_special_tokens({"additional_special_tokens": ["<|im_end|>"]})  # already in the vocabulary
    tok.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    tok.save_pretrained(out)
    return tok


def random_qwen2(out: Path, config: dict[str, Any] = QWEN25_MATH_15B, *, seed: int = 0) -> Path:
    """Save a Qwen2 with ``config``'s architecture and random weights (bf16, as the real one ships), with
    the filler tokenizer. Built on the GPU when there is one (seconds, not minutes)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    out.mkdir(parents=True, exist_ok=True)
    tok = filler_tokenizer(out, config["vocab_size"])
    cfg = Qwen2Config(
        **{k: v for k, v in config.items() if k not in ("architectures", "model_type")},
    )
    cfg.bos_token_id, cfg.eos_token_id, cfg.pad_token_id = tok.bos_token_id, tok.eos_token_id, tok.pad_token_id
    torch.manual_seed(seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.device(device):
        model = Qwen2ForCausalLM(cfg).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    (out / "acceptance-model.json").write_text(json.dumps({"kind": "random", "architecture": "Qwen2.5-Math-1.5B"}))
    return out


def count_parameters(config: dict[str, Any] = QWEN25_MATH_15B) -> int:
    """Parameters of ``config``'s model, counted on the meta device (no memory, no time)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(**{k: v for k, v in config.items() if k not in ("architectures", "model_type")})
    with torch.device("meta"):
        model = Qwen2ForCausalLM(cfg)
    return sum(p.numel() for p in model.parameters())
