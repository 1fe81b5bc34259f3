"""Whether the GPUs a run gets can train it at all, said in one line before any engine is built.

The gpu platform trains and samples in bf16 (verl's FSDP mixed precision, ``rollout.dtype``). A GPU of
compute capability below 8.0 (a V100, a T4) has no bf16: vLLM then fails deep inside its engine's start,
minutes in and hundreds of log lines down, and verl's FSDP falls back to slow emulation. ``verl-check``,
the acceptance check and every training job on the gpu platform ask here first
(``python -m coolsampler.worker.gpu_check`` through the job's container prefix: the GPUs are the image's
to see). Imports torch only when asked about the devices.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

BF16_CAPABILITY = (8, 0)  # Ampere: the first NVIDIA architecture with bf16 tensor cores


def bf16_problem(devices: Iterable[tuple[str, tuple[int, int]]]) -> str | None:
    """One line naming the first GPU without bf16, or None if every one has it (or there are none)."""
    for i, (name, cap) in enumerate(devices):
        if tuple(cap) < BF16_CAPABILITY:
            return (
                f"GPU {i} ({name}, compute capability {cap[0]}.{cap[1]}) has no bf16, which the gpu platform "
                f"trains and samples in: use GPUs of compute capability {BF16_CAPABILITY[0]}.{BF16_CAPABILITY[1]}"
                " or newer (A100, H100, L40S, RTX 30xx and later)"
            )
    return None


def visible_devices() -> list[tuple[str, tuple[int, int]]]:
    """Name and compute capability of every GPU this process sees (none without CUDA)."""
    import torch

    if not torch.cuda.is_available():
        return []
    return [
        (torch.cuda.get_device_name(i), torch.cuda.get_device_capability(i)) for i in range(torch.cuda.device_count())
    ]


def main() -> int:
    problem = bf16_problem(visible_devices())
    if problem:
        print(problem)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
