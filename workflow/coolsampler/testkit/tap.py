"""Test instrument: per training step, record what the sampler held and what the learner computed.

Enabled only when ``COOLSAMPLER_TAP_DIR`` is set (the real-stack tests set it, or
``coolsampler.train.launch`` for every run when ``COOLSAMPLER_INSTRUMENT`` names this module); loaded
like the CPU platform through ``VERL_USE_EXTERNAL_MODULES``. After verl's old-log-prob pass of step t it
writes ``step_<t>.pt`` with the batch's prompts, responses, the sampler's recorded log-probs
(``rollout_log_probs``), the learner's ``old_log_probs``, ``response_mask``, the sampler temperature and
the gate's ``sampler_version``; ``snapshot_v<version>.pt`` once per sampler version, with the staleness
gate's host snapshot as the actor ranks hold it between them (every rank's share, joined: what the
sampler should hold; absent at N = 1); and, unless ``COOLSAMPLER_TAP_SAMPLER=0``, ``sampler_<t>.pt``
with the weights the vLLM engine held when it drew that batch (asked of the engine itself through
``CpuReloadWorkerExtension.dump_sampler_state``; a second replica's in ``sampler_<t>_replica1.pt``) and
``snapshot_<t>.pt`` with each rank's share as it holds it (each tensor's storage address and a copy).
The tests then recompute logits with transformers on exactly those weights
(``coolsampler.testkit.sampler_check``). Changes nothing verl computes.

``COOLSAMPLER_TAP_SAMPLER=0`` is the GPU setting: there the engine runs verl's own worker extension,
which cannot dump its weights, and the sampler's weights are checked through its log-probs instead.

Runs inside verl's processes when a test names it; imports torch there, nothing of the analysis.
"""

from __future__ import annotations

import os


def install() -> None:
    out = os.environ.get("COOLSAMPLER_TAP_DIR")
    if not out:
        return
    import ray
    import torch
    import transfer_queue as tq
    from verl.trainer.ppo.v1 import trainer_base

    orig = trainer_base.PPOTrainer._compute_old_log_prob
    if getattr(orig, "_coolsampler_tap", False):
        return

    def _compute_old_log_prob(self, batch, metrics):
        out_batch = orig(self, batch, metrics)
        step = int(self.global_steps)
        fields = ["prompts", "responses", "rollout_log_probs", "old_log_probs", "response_mask"]
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=fields)
        record = {}
        for name in fields:
            value = data[name]
            record[name] = [t.detach().clone() for t in value.unbind(0)] if hasattr(value, "unbind") else value
        record["temperature"] = float(self.config.actor_rollout_ref.rollout.temperature)
        version = getattr(self, "sampler_version", None)
        record["sampler_version"] = None if version is None else int(version)
        torch.save(record, os.path.join(out, f"step_{step}.pt"))
        shares = ray.get([w.__ray_call__.remote(sampler_snapshot) for w in self.actor_rollout_wg.workers])
        joined = {n: t for share in shares if share is not None for n, (_, t) in share.items()}
        versioned = os.path.join(out, f"snapshot_v{version}.pt")
        if joined and version is not None and not os.path.exists(versioned):
            torch.save(joined, versioned)
        if os.environ.get("COOLSAMPLER_TAP_SAMPLER", "1") == "0":
            return out_batch
        for i, replica in enumerate(self.checkpoint_manager.replicas):  # replica i > 0: its own file
            name = f"sampler_{step}.pt" if i == 0 else f"sampler_{step}_replica{i}.pt"
            for server in replica.servers:
                ray.get(server.collective_rpc.remote("dump_sampler_state", args=(os.path.join(out, name),)))
        if any(s is not None for s in shares):
            torch.save(shares, os.path.join(out, f"snapshot_{step}.pt"))
        return out_batch

    _compute_old_log_prob._coolsampler_tap = True
    trainer_base.PPOTrainer._compute_old_log_prob = _compute_old_log_prob


def sampler_snapshot(actor) -> dict | None:
    """Inside an actor worker (run there by Ray's ``__ray_call__``): its share of the staleness gate's
    snapshot, as ``{name: (storage address, copy of the values)}``; None where the worker holds none."""
    for worker in (actor, *getattr(actor, "worker_dict", {}).values()):
        snapshot = getattr(worker, "_sampler_snapshot", None)  # coolsampler.worker.snapshot.SamplerSnapshot
        if snapshot is not None and not snapshot.empty:
            return {name: (t.untyped_storage().data_ptr(), t.clone()) for name, t in snapshot.tensors.items()}
    return None


install()
