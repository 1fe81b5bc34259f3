"""Which model the acceptance runs, when one is cached: the first Qwen2 in the offline Hugging Face cache
(the paper's own first). Without one the check makes its own (``world``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

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
    return list(dict.fromkeys(roots))


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


def find_model(roots: list[Path] | None = None) -> tuple[Path, str] | None:
    """The first usable Qwen2-family snapshot: the paper's Qwen2.5-Math-1.5B, then any "1.5B" Qwen2,
    then the others by name (deterministic). Returns (path, repo id) or None."""
    found: list[tuple[int, str, Path]] = []
    for root in roots if roots is not None else hub_roots():
        for snap in sorted(root.glob("models--*/snapshots/*")):
            if not _usable(snap):
                continue
            # models--Qwen--Qwen2.5-Math-1.5B/snapshots/<rev>
            repo = snap.parent.parent.name.removeprefix("models--").replace("--", "/")
            rank = 0 if repo == PAPER_MODEL_REPO else 1 if "1.5b" in repo.lower() else 2
            found.append((rank, repo, snap))
    if not found:
        return None
    rank, repo, snap = min(found, key=lambda x: (x[0], x[1]))
    return snap, repo
