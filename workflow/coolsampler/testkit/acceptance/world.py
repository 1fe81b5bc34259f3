"""The world of the runs: the model (``models``) and the toy sums in GSM8K's format they train on.

Without a model given or cached, the check makes its own: the toy world's recipe (``coolsampler.world.toy``,
warm-started on the sums by supervised steps until it solves part of them), so that rewards vary, the
learner moves and sampler versions differ. A randomly initialised model would score zero on every
sample: zero advantages, zero gradients, every sampler version the same, and a sampler check with
nothing to tell apart. On the ``cpu`` platform the model is the rehearsal's toy size; on the ``gpu``
platform a wider one (``toy.TOY_SIZES["gpu"]``), trained on the GPU in seconds."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from coolsampler.testkit.acceptance.models import find_model


def say(msg: str) -> None:
    print(f"[acceptance {time.strftime('%H:%M:%S')}] {msg}", flush=True)


@dataclass
class World:
    model: Path
    kind: str  # "real" | "toy"
    label: str  # what the summary says about the model
    train: Path
    val: Path


# The GPU-sized toy model's warm start: the greedy accuracy the CPU toy model is warm-started to here (at
# Tb, right and wrong samples then share most groups, and GRPO learns only from groups whose rewards
# differ), within a step cap a GPU runs in well under a minute (a step of a 3.4M-parameter model on 256
# short sums: milliseconds; the tokenising in Python dominates). Measured on the CPU only, beside other
# jobs (~1.6 s a step): at lr 1e-3 the loss falls from 0.67 to 0.46 and greedy accuracy reaches 2 % in
# 150 steps, about as the CPU toy model does at 3e-3 in 100. Not yet run on a GPU.
GPU_TOY_TARGET_ACC, GPU_TOY_MAX_STEPS, GPU_TOY_LR = 0.3, 1500, 1e-3


def make_world(platform: str, root: Path, model: Path | None, *, sft_steps: int = 400) -> World:
    """Model and data for the runs (reused when ``root`` holds them from an earlier call)."""
    from coolsampler.world import toy

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
        return World(toy_dir, "toy", "toy Qwen2 of the rehearsal (coolsampler.world.toy; cpu platform)", train, val)
    hit = find_model()
    if hit is not None:
        return World(hit[0], "real", f"{hit[1]} (offline cache: {hit[0]})", train, val)
    toy_dir = root / "toy-model-gpu"
    if not (toy_dir / "model.safetensors").exists():
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
        say(f"no Qwen2 model in the offline cache: warm-starting a GPU-sized toy Qwen2 on {device}")
        toy.sft_warm_start(
            toy_dir,
            steps=GPU_TOY_MAX_STEPS,
            lr=GPU_TOY_LR,
            target_acc=GPU_TOY_TARGET_ACC,
            rehearsal=True,
            size="gpu",
            device=device,
            log=say,
        )
    label = (
        "toy Qwen2 at GPU size, warm-started here (no Qwen2 model in the offline cache; "
        "the gate's mechanics, not the 1.5B's memory or step time: give --model for those)"
    )
    return World(toy_dir, "toy", label, train, val)
