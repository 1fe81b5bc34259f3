"""The world of the runs: the model (``models``) and the toy sums in GSM8K's format they train on."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from coolsampler.testkit.acceptance.models import find_model, random_qwen2


def say(msg: str) -> None:
    print(f"[acceptance {time.strftime('%H:%M:%S')}] {msg}", flush=True)


@dataclass
class World:
    model: Path
    kind: str  # "real" | "random" | "toy"
    label: str  # what the summary says about the model
    train: Path
    val: Path


def make_world(platform: str, root: Path, model: Path | None, *, sft_steps: int = 100) -> World:
    """Model and data for the runs (reused when ``root`` holds them from an earlier call)."""
    from coolsampler.testkit import toy

    data = root / "data"
    if not (data / "train.parquet").exists():
        toy.write_rehearsal_task(data, "gsm8k")
    train, val = data / "train.parquet", data / "test.parquet"
    if model is not None:
        kind = "toy" if platform == "cpu" else "real"
        return World(model.resolve(), kind, f"{model} (given)", train, val)
    if platform == "cpu":
        toy_dir = root / "toy-model"
        if not (toy_dir / "model.safetensors").exists():
            import torch

            # one thread, as the platform gives every verl process (OMP_NUM_THREADS=1): on a loaded 2-core
            # machine two spinning OpenMP threads make a tiny model's step many times slower
            torch.set_num_threads(1)
            say(f"cpu platform: warm-starting the rehearsal's toy Qwen2 ({sft_steps} SFT steps at most)")
            toy.sft_warm_start(toy_dir, steps=sft_steps, target_acc=0.3, rehearsal=True, log=say)
        return World(toy_dir, "toy", "toy Qwen2 of the rehearsal (coolsampler.testkit.toy; cpu platform)", train, val)
    hit = find_model()
    if hit is not None:
        return World(hit[0], "real", f"{hit[1]} (offline cache: {hit[0]})", train, val)
    rand = root / "random-qwen2.5-math-1.5b"
    if not (rand / "model.safetensors").exists() and not any(rand.glob("model*.safetensors")):
        say("no Qwen2 model in the offline cache: building a RANDOMLY INITIALISED Qwen2.5-Math-1.5B")
        random_qwen2(rand)
    label = (
        "RANDOM WEIGHTS with Qwen2.5-Math-1.5B's architecture (no Qwen2 model in the offline cache; "
        "rewards are zero, nothing is learnt; mechanics, memory and step time only)"
    )
    return World(rand, "random", label, train, val)
