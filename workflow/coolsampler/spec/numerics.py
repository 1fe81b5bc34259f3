"""The CPU stack's numeric code paths, pinned, and the CPU family a result was measured on.

Why: a CPU run's digits depend on which kernels compute it, and those are chosen per machine. The same
commit and seed gave two different smoke-study warm starts (and Table 1 rows) on an AMD EPYC with
AVX-512 and an Intel Xeon with AVX-512 FP16; on the AMD machine the warm start's weights changed with
ATen's kernel choice alone (``ATEN_CPU_CAPABILITY=avx2``: sha256 4b5cadd8… -> 292afa69…), and an AMD
EPYC without AVX-512 (family 23) trains 292afa69… with or without that setting. So every place the
project computes on a CPU runs the one code path every x86-64 machine of the last decade has, AVX2:

* ATen (torch's own kernels: softmax, layer norms, element-wise ops, reductions) dispatches on the CPU's
  best instruction set; ``ATEN_CPU_CAPABILITY`` caps it. Read once, at torch's first kernel call.
  Inductor's generated C++ (vLLM compiles its sampler even in eager mode) reads the same variable to
  choose its vector ISA.
* MKL (torch's BLAS: every fp32 matmul) picks a code path per CPU; ``MKL_CBWR=AVX2,STRICT`` fixes it
  (conditional numerical reproducibility). On AMD CPUs MKL already takes its generic path; on Intel
  CPUs this is the lever.
* oneDNN (torch's mkldnn ops, and vLLM-CPU's own linear layers, ``onednn_mm``) dispatches on the CPU;
  ``ONEDNN_MAX_CPU_ISA=AVX2`` caps it.
* Threads: a reduction split over threads adds in another order. One thread everywhere on CPU.
* vLLM-CPU loads one of three builds of its kernel library by the CPU's flags (``_C`` with AVX512-BF16,
  ``_C_AVX512``, ``_C_AVX2``), not by any environment variable: ``coolsampler.worker.cpu_kernels``
  makes it load ``_C_AVX2`` wherever ``PINNED_ENV`` is in force.

The pinned environment is part of a run's training key and of a warm start's rule parameters: a change
here trains again. It must be in the environment *before* torch is imported (Snakemake's rules inherit
it from the Snakefile, which calls ``pin()`` at parse time; verl's processes get it from the cpu
platform's environment, ``coolsampler.train.platform``).

What cannot be pinned this way (ARM's kernels, a BLAS other than MKL) is named in the docs
(``docs/reproducibility.md``). Stdlib only: no torch here (``torch_state`` imports it when asked).
"""

from __future__ import annotations

import os
import platform
import re
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

# The instruction set every CPU path is capped at (ATen's name; MKL and oneDNN spell it AVX2).
PINNED_ISA = "avx2"
PINNED_ENV: dict[str, str] = {
    "ATEN_CPU_CAPABILITY": PINNED_ISA,
    "MKL_CBWR": "AVX2,STRICT",
    "ONEDNN_MAX_CPU_ISA": PINNED_ISA.upper(),
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}
# vLLM-CPU's kernel library built for PINNED_ISA (coolsampler.worker.cpu_kernels loads it)
VLLM_PINNED_KERNELS = "vllm._C_AVX2"
# What torch reports (torch.backends.cpu.get_cpu_capability) when ATEN_CPU_CAPABILITY is in force
ATEN_REPORTS = {"avx2": "AVX2"}


def pin(environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Put ``PINNED_ENV`` into ``environ`` (default ``os.environ``), replacing what was there; returns the
    values it replaced (None where unset) so that a caller can say what changed."""
    env = os.environ if environ is None else environ
    before = {k: env.get(k) for k in PINNED_ENV}
    env.update(PINNED_ENV)
    return {k: v for k, v in before.items() if v != PINNED_ENV[k]}


def is_pinned(environ: MutableMapping[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    return all(env.get(k) == v for k, v in PINNED_ENV.items())


def _cpuinfo(path: str = "/proc/cpuinfo") -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo (Linux); empty elsewhere."""
    try:
        text = Path(path).read_text()
    except OSError:
        return {}
    fields: dict[str, str] = {}
    for line in text.split("\n\n", 1)[0].splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            fields.setdefault(k.strip(), v.strip())
    return fields


# The flags that decide which kernels the libraries above pick when nothing is pinned, best first.
ISA_FLAGS = ("amx_tile", "avx512_fp16", "avx512_bf16", "avx512f", "avx2")


def cpu_family(cpuinfo: dict[str, str] | None = None) -> str:
    """The CPU family a result was measured on, as a short readable name, e.g.
    ``AMD EPYC (family 23, model 1; avx2)`` or ``Intel Xeon Platinum 8481C (family 6, model 143; amx_tile)``.

    The family and model numbers and the best instruction set among ``ISA_FLAGS`` are what kernels
    dispatch on; the model name alone is not (a virtual machine may report a bare "AMD EPYC")."""
    info = _cpuinfo() if cpuinfo is None else cpuinfo
    if not info:
        return f"{platform.machine() or 'unknown'} (no /proc/cpuinfo)"
    name = re.sub(r"\s+", " ", info.get("model name", info.get("Model", "unknown CPU")))
    name = re.sub(r"\s*\d+-Core Processor$|\s*CPU @.*$|\(R\)|\(TM\)", "", name).strip()
    flags = set(info.get("flags", info.get("Features", "")).split())
    best = next((f for f in ISA_FLAGS if f in flags), "no avx2")
    fam, model = info.get("cpu family"), info.get("model")
    where = f"family {fam}, model {model}; " if fam and model else ""
    return f"{name} ({where}{best})"


def family_slug(family: str) -> str:
    """A file-name form of ``cpu_family``'s name: ``amd-epyc-family-23-model-1-avx2``."""
    return re.sub(r"[^a-z0-9]+", "-", family.lower()).strip("-")


def torch_state() -> dict[str, Any]:
    """What torch in this process really runs: its CPU capability and thread count, and whether the
    pinned environment is in force. Imports torch."""
    import torch

    return {
        "aten_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
        "pinned": is_pinned(),
    }


def check_torch() -> str | None:
    """None if torch in this process computes on the pinned path; else a one-line reason (it was
    imported before ``pin()``, or the machine has less than AVX2: then nothing can pin it to it)."""
    state = torch_state()
    want = ATEN_REPORTS[PINNED_ISA]
    if not state["pinned"]:
        unset = [k for k, v in PINNED_ENV.items() if os.environ.get(k) != v]
        return f"the pinned numerics are not in this process's environment ({', '.join(unset)})"
    if state["aten_capability"] != want:
        return (
            f"torch runs its {state['aten_capability']} kernels, not {want}: it was imported before"
            " coolsampler.spec.numerics.pin(), or this CPU lacks AVX2"
        )
    return None


__all__ = [
    "ISA_FLAGS",
    "PINNED_ENV",
    "PINNED_ISA",
    "VLLM_PINNED_KERNELS",
    "check_torch",
    "cpu_family",
    "family_slug",
    "is_pinned",
    "pin",
    "torch_state",
]
