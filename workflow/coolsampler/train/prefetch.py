"""Model weights at a pinned revision, downloaded once on the submitting host (rule ``prefetch_model``).

Compute nodes often have no internet: a run whose model has a ``revision`` (a study's ``models:``) loads it
from ``M/hub/<org>/<name>/<revision>/`` (``coolsampler.train.paths.Layout.prefetch_dir``) with the hub switched
off (``HF_HUB_OFFLINE=1``, ``coolsampler.train.overrides``). ``prefetch.json`` beside the files records what was
fetched; rule train depends on it. No verl, vLLM or torch; ``huggingface_hub`` is imported only by the
default downloader, so tests pass a fake one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

# What a run needs of a model repository: config, tokenizer, safetensors weights, remote code. Not the
# duplicate .bin/.pth/.gguf weights many repositories also carry.
ALLOW_PATTERNS = ("*.json", "*.safetensors", "*.txt", "*.model", "*.tiktoken", "*.py", "*.jinja")
MANIFEST = "prefetch.json"

Downloader = Callable[..., Any]


def _snapshot_download(**kwargs: Any) -> str:
    from huggingface_hub import snapshot_download

    return snapshot_download(**kwargs)


def prefetch_model(
    hf_id: str, revision: str, dest: str | Path, *, download: Downloader | None = None
) -> dict[str, Any]:
    """Download ``hf_id`` at ``revision`` into ``dest`` and write ``dest/prefetch.json``; return it.

    Fails (and writes no manifest) when the snapshot has no ``config.json`` or no weights: a run would
    otherwise fail on a compute node, hours later, without the network to say why."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    (download or _snapshot_download)(
        repo_id=hf_id, revision=revision, local_dir=str(dest), allow_patterns=list(ALLOW_PATTERNS)
    )
    files = sorted(p for p in dest.rglob("*") if p.is_file() and p.name != MANIFEST and ".cache" not in p.parts)
    names = [p.relative_to(dest).as_posix() for p in files]
    if "config.json" not in names:
        raise FileNotFoundError(f"{hf_id}@{revision}: no config.json in the snapshot ({dest})")
    if not any(n.endswith(".safetensors") for n in names):
        raise FileNotFoundError(f"{hf_id}@{revision}: no .safetensors weights in the snapshot ({dest})")
    manifest = {
        "hf_id": hf_id,
        "revision": revision,
        "files": {n: p.stat().st_size for n, p in zip(names, files, strict=True)},
        "config_sha256": hashlib.sha256((dest / "config.json").read_bytes()).hexdigest(),
    }
    (dest / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest
