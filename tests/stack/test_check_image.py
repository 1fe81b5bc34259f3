"""containers/check_image.py, what install.sh runs in the image, on this machine's CPU stack: it imports
verl and vLLM and runs verl's FSDP input preparation (the image's files themselves: tests/train/test_containers.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_check_image_passes_on_the_cpu_stack() -> None:
    """containers/check_image.py (what install.sh runs in the image) on this machine's stack: every
    import resolves and the tiny Qwen2 with the image's attention gives each sequence its own logits
    through verl's FSDP input preparation."""
    from coolsampler.train.platform import get_platform

    env = {**os.environ, **get_platform("cpu").env(), "PYTHONPATH": str(ROOT / "workflow")}
    res = subprocess.run(
        [sys.executable, str(ROOT / "containers/check_image.py")], env=env, capture_output=True, text=True, timeout=840
    )
    assert res.returncode == 0, res.stdout + res.stderr[-6000:]
    assert res.stdout.count("check_image: ok:") == 3, res.stdout
