"""The pinned numerics: what they set, and the CPU family a result names."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from coolsampler.spec import numerics

EPYC = {
    "vendor_id": "AuthenticAMD",
    "cpu family": "23",
    "model": "1",
    "model name": "AMD EPYC",
    "flags": "fpu sse sse2 avx avx2 fma",
}
XEON = {
    "vendor_id": "GenuineIntel",
    "cpu family": "6",
    "model": "143",
    "model name": "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz",
    "flags": "avx avx2 avx512f avx512_bf16 avx512_fp16 amx_tile",
}


def test_cpu_family_names_what_kernels_dispatch_on():
    assert numerics.cpu_family(EPYC) == "AMD EPYC (family 23, model 1; avx2)"
    assert numerics.cpu_family(XEON) == "Intel Xeon Platinum 8481C (family 6, model 143; amx_tile)"
    assert numerics.family_slug(numerics.cpu_family(EPYC)) == "amd-epyc-family-23-model-1-avx2"
    assert numerics.cpu_family({"model name": "AMD EPYC 9B14 96-Core Processor", "flags": "avx512f"}) == (
        "AMD EPYC 9B14 (avx512f)"
    )


def test_pin_sets_every_setting_and_says_what_it_replaced():
    env = {"OMP_NUM_THREADS": "4"}
    replaced = numerics.pin(env)
    assert numerics.is_pinned(env) and env["ATEN_CPU_CAPABILITY"] == "avx2"
    assert replaced["OMP_NUM_THREADS"] == "4" and replaced["MKL_CBWR"] is None
    assert numerics.pin(env) == {}


def test_torch_follows_the_pinned_capability():
    """In a fresh interpreter with the pinned environment, torch computes on AVX2 kernels (on an x86-64 CPU
    with AVX2; an AVX-512 CPU would otherwise pick its AVX-512 ones)."""
    pytest.importorskip("torch")
    env = {**os.environ, **numerics.PINNED_ENV}
    code = "from coolsampler.spec import numerics; print(numerics.check_torch())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "None"
    unpinned = {k: v for k, v in os.environ.items() if k not in numerics.PINNED_ENV}
    out = subprocess.run([sys.executable, "-c", code], env=unpinned, capture_output=True, text=True, timeout=120)
    assert "not in this process's environment" in out.stdout
