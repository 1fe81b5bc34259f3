"""verl's weight-push socket on the real import path: ``import verl`` under the cpu platform's environment
patches both of verl's ends (the socket's logic without verl: tests/worker/test_weight_socket.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from coolsampler.train.platform import get_platform
from coolsampler.worker.env import RUN_TOKEN_ENV
from coolsampler.worker.weight_socket import socket_dir


@pytest.mark.slow
def test_verl_s_own_classes_are_patched_through_the_platform_env(tmp_path: Path) -> None:
    """The real import path: ``import verl`` loads the platform's modules, whose hooks patch both of
    verl's ends when verl imports them (the cpu platform: this machine has no GPU)."""
    pytest.importorskip("verl")
    env = {**os.environ, **get_platform("cpu").env(), RUN_TOKEN_ENV: f"test{uuid.uuid4().hex[:8]}"}
    code = (
        "from verl.workers.rollout.vllm_rollout import utils, vllm_rollout\n"
        "from coolsampler.worker.vllm_cpu_ext import CpuReloadWorkerExtension\n"
        "print(vllm_rollout.ServerAdapter.__init__.__qualname__)\n"
        "print(CpuReloadWorkerExtension._get_zmq_handle.__qualname__)\n"
    )
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    finally:
        shutil.rmtree(socket_dir(env[RUN_TOKEN_ENV]), ignore_errors=True)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["patch_sender.<locals>.__init__", "patch_receiver.<locals>._get_zmq_handle"]
