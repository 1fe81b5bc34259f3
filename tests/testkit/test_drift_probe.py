"""The drift probe: KL(q_Tb || pi) per answer token split by the class of the sampled token, and the
learner read from a checkpoint as verl's FSDP2 checkpoint manager writes it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from coolsampler.testkit.drift_probe import CLASSES, load_learner, probe


def _fsdp2_checkpoint(model_dir, actor_dir, scale: float) -> None:
    """The world's model, its weights times ``scale``, saved as verl's FSDP checkpoint manager saves an
    actor under FSDP2 on one rank: ``torch.save(model.state_dict())`` of the fully sharded model (DTensors)."""
    code = textwrap.dedent(
        f"""
        import os, torch, torch.distributed as dist
        from torch.distributed.fsdp import fully_shard
        from transformers import Qwen2ForCausalLM
        # a file store, not a TCP port: nothing another process could hold
        store = "file://" + os.path.join({str(actor_dir.parent)!r}, "store")
        os.makedirs({str(actor_dir.parent)!r}, exist_ok=True)
        dist.init_process_group("gloo", init_method=store, rank=0, world_size=1)
        m = Qwen2ForCausalLM.from_pretrained({str(model_dir)!r}, torch_dtype=torch.float32)
        with torch.no_grad():
            for p in m.parameters():
                p.mul_({scale})
        fully_shard(m)
        os.makedirs({str(actor_dir)!r}, exist_ok=True)
        torch.save(m.state_dict(), os.path.join({str(actor_dir)!r}, "model_world_size_1_rank_0.pt"))
        dist.destroy_process_group()
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300, capture_output=True)


def test_a_learner_equal_to_the_sampler_has_no_drift_at_the_learner_temperature(untrained) -> None:
    world, model_dir = untrained
    from transformers import Qwen2ForCausalLM

    same = Qwen2ForCausalLM.from_pretrained(str(model_dir)).eval()
    out = probe(world, model_dir, same, Tb=1.0, prompts=16)
    assert out["kl"] == pytest.approx(0.0, abs=1e-9) and out["k1"] == pytest.approx(0.0, abs=1e-9)
    assert sum(out[f"{c}_share"] for c in CLASSES) == pytest.approx(1.0)
    assert out["digit_share"] > 0 and out["head_share"] + out["tail_share"] > 0
    # cooled, the same model: only the tempering offset, and the parts add up to it
    cooled = probe(world, model_dir, same, Tb=0.5, prompts=16)
    assert cooled["kl"] > 0
    assert sum(cooled[f"{c}_part"] for c in CLASSES) == pytest.approx(cooled["kl"])


def test_the_learner_is_read_from_an_fsdp2_checkpoint(untrained, tmp_path) -> None:
    world, model_dir = untrained
    import torch
    from transformers import Qwen2ForCausalLM

    actor = tmp_path / "global_step_32" / "actor"
    _fsdp2_checkpoint(model_dir, actor, scale=1.5)
    learner = load_learner(actor, model_dir)
    base = Qwen2ForCausalLM.from_pretrained(str(model_dir))
    for (name, p), (_, q) in zip(learner.named_parameters(), base.named_parameters(), strict=True):
        assert torch.allclose(p, 1.5 * q), name
    drifted = probe(world, model_dir, learner, Tb=1.0, prompts=16)
    assert drifted["kl"] > 0.01
    assert sum(drifted[f"{c}_part"] for c in CLASSES) == pytest.approx(drifted["kl"])


def test_a_checkpoint_that_is_not_the_worlds_model_is_refused(untrained, tmp_path) -> None:
    world, model_dir = untrained
    import torch

    with pytest.raises(FileNotFoundError, match="no model_world_size"):
        load_learner(tmp_path, model_dir)
    torch.save({"not.a.weight": torch.zeros(2)}, tmp_path / "model_world_size_1_rank_0.pt")
    with pytest.raises(ValueError, match="does not fit the world's model"):
        load_learner(tmp_path, model_dir)
    torch.save({}, tmp_path / "model_world_size_2_rank_1.pt")
    with pytest.raises(ValueError, match="of one world size"):
        load_learner(tmp_path, model_dir)
