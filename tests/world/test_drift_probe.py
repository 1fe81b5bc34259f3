"""The drift probe: KL(q_Tb || pi) per answer token split term by term by the class of the candidate token
and by the bin of q, less the tempering offset; known answers on hand-made distributions, then the
learner read from a checkpoint as verl's FSDP2 checkpoint manager writes it."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap

import pytest

from coolsampler.spec.drift import BIN_NAMES, PROBES
from coolsampler.world.drift_probe import CLASSES, decompose, load_learner, probe, right_digits


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


def _t(rows):
    import torch

    return torch.tensor(rows, dtype=torch.float64)


def _classes(*names):
    import torch

    return torch.tensor([[CLASSES.index(n) for n in names]])


def test_the_drift_is_credited_to_the_candidate_that_carries_it_even_never_sampled() -> None:
    """One position, three candidates: the learner moved mass off the tail word (q = 0.01), which is never
    sampled (the head word always is). The drift is sum_a q(a) log(p0(a)/pi(a)) term by term."""
    import torch

    q = _t([[0.90, 0.09, 0.01]])
    pi = _t([[0.90, 0.099, 0.001]])
    out = decompose(q.log(), pi.log(), q.log(), _classes("head", "wrong_digit", "tail"), torch.tensor([0]))
    tail, digit = 0.01 * math.log(0.01 / 0.001), 0.09 * math.log(0.09 / 0.099)
    assert out["offset"] == pytest.approx(0.0, abs=1e-15)  # Tb = 1: q is the initial model
    assert out["drift_tail"] == pytest.approx(tail) and out["drift_wrong_digit"] == pytest.approx(digit)
    assert out["drift_head"] == pytest.approx(0.0, abs=1e-15)  # the sampled token carries none of it
    assert out["drift"] == pytest.approx(tail + digit)
    assert out["drift_low"] == pytest.approx(tail) and out["drift_mid"] == pytest.approx(digit)
    assert out["drift_high"] == pytest.approx(0.0, abs=1e-15)
    assert out["drift_frac_low"] == pytest.approx(tail / (tail + digit))
    assert out["sampled_head"] == 1.0 and out["capped_head"] == 0.0 and out["capped_tail"] is None


def test_a_cooled_sampler_against_its_own_initial_model_has_an_offset_and_no_drift() -> None:
    import torch

    z = _t([[2.0, 1.0, -1.0, -3.0], [0.5, 0.4, 0.0, -2.0]])
    lq, lp0 = torch.log_softmax(z / 0.8, -1), torch.log_softmax(z, -1)
    cls = torch.tensor([[0, 1, 2, 3], [4, 0, 1, 2]])
    out = decompose(lq, lp0, lp0, cls, torch.tensor([0, 1]))
    offset = float((lq.exp() * (lq - lp0)).sum()) / 2
    assert out["offset"] == pytest.approx(offset) and offset > 0
    assert out["learner"] == pytest.approx(offset)
    for name in (*CLASSES, *BIN_NAMES):
        assert out[f"drift_{name}"] == pytest.approx(0.0, abs=1e-15)
    assert out["drift_frac_low"] is None  # no drift: no share of it


def test_the_parts_of_each_split_add_up_to_the_total_and_the_bins_follow_q() -> None:
    import torch

    gen = torch.Generator().manual_seed(0)
    z, w = (
        torch.randn(50, 12, generator=gen, dtype=torch.float64),
        torch.randn(50, 12, generator=gen, dtype=torch.float64),
    )
    lq, lp0, lp = torch.log_softmax(z / 0.7, -1), torch.log_softmax(z, -1), torch.log_softmax(z + 0.5 * w, -1)
    cls = torch.randint(0, len(CLASSES), (50, 12), generator=gen)
    out = decompose(lq, lp, lp0, cls, torch.randint(0, 12, (50,), generator=gen))
    for what in PROBES:
        assert sum(out[f"{what}_{c}"] for c in CLASSES) == pytest.approx(out[what])
        assert sum(out[f"{what}_{b}"] for b in BIN_NAMES) == pytest.approx(out[what])
    assert out["drift"] == pytest.approx(out["learner"] - out["offset"])
    # q exactly at a bound sits in the middle bin: 0.05 <= q <= 0.5
    q = _t([[0.5, 0.05, 0.45]])
    pi = _t([[0.25, 0.5, 0.25]])
    edge = decompose(q.log(), pi.log(), pi.log(), _classes("head", "head", "head"), torch.tensor([0]))
    assert edge["learner_mid"] == pytest.approx(edge["learner"]) and edge["learner_low"] == 0.0


def test_a_sampled_weight_above_the_cap_is_counted_capped_by_its_class() -> None:
    import torch

    q = _t([[0.6, 0.3, 0.1], [0.6, 0.3, 0.1]])
    pi = _t([[0.3, 0.3, 0.4], [0.6, 0.3, 0.1]])  # pi/q = 4 on the tail word of position 0
    out = decompose(q.log(), pi.log(), q.log(), torch.tensor([[0, 2, 1], [0, 2, 1]]), torch.tensor([2, 0]))
    assert out["capped"] == 0.5 and out["capped_tail"] == 1.0 and out["capped_head"] == 0.0
    assert out["capped0"] == 0.0 and out["sampled_tail"] == 0.5


def test_the_right_digit_follows_the_answers_own_prefix() -> None:
    from coolsampler.spec.world import World

    world = World("chain", chain_length=3, words_per_block=2, vocab_words=8)
    right = right_digits(world, "A3B1C4=", "A3ab3B1cd4C4ef8\0")
    assert right == [None, "3", None, None, "3", None, "1", None, None, "4", None, "4", None, None, "8", None]
    # a wrong sum written in block A: block B's right sum is that sum plus its operand (a right step)
    assert right_digits(world, "A3B1C4=", "A3ab5B1cd6")[9] == "6"


def test_a_learner_equal_to_the_sampler_has_no_drift(untrained) -> None:
    world, model_dir = untrained
    from transformers import Qwen2ForCausalLM

    same = Qwen2ForCausalLM.from_pretrained(str(model_dir)).eval()
    out = probe(world, model_dir, same, Tb=1.0, prompts=16)
    assert out["learner"] == pytest.approx(0.0, abs=1e-9) and out["k1"] == pytest.approx(0.0, abs=1e-9)
    assert sum(out[f"sampled_{c}"] for c in CLASSES) == pytest.approx(1.0)
    # cooled, the same model: only the tempering offset, no drift, and the parts add up to it
    cooled = probe(world, model_dir, same, Tb=0.5, prompts=16)
    assert cooled["offset"] > 0 and cooled["drift"] == pytest.approx(0.0, abs=1e-9)
    assert sum(cooled[f"offset_{c}"] for c in CLASSES) == pytest.approx(cooled["offset"])


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
    assert drifted["drift"] > 0.01 and drifted["drift"] == pytest.approx(drifted["learner"])
    assert sum(drifted[f"drift_{c}"] for c in CLASSES) == pytest.approx(drifted["drift"])
    assert sum(drifted[f"drift_{b}"] for b in BIN_NAMES) == pytest.approx(drifted["drift"])


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
