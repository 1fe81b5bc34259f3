"""The run key's grammar is one table (``KEY_PIECES``): ``Run.key`` writes it, ``parse_key`` and the
Snakemake wildcard read it. Every correction and replicate the settings define is therefore a key both
readers accept, with no alternation typed a second time."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from coolsampler.spec.settings import CORRECTIONS, REPLICATES
from coolsampler.spec.study import KEY_WILDCARD_RE, Run, parse_key
from coolsampler.spec.temperature import Temperature
from coolsampler.testkit.acceptance.arms import Arm, acceptance_run

BASE = Run(
    model="toy-qwen2", task="arith", N=16, lr=1e-4, correction="tis", Tb=Temperature.from_config(0.8), Tl=1.0,
    seed=1, steps=64, val_every=8,
)  # fmt: skip


@pytest.mark.parametrize("correction", CORRECTIONS)
@pytest.mark.parametrize("replicate", [None, *REPLICATES])
def test_every_correction_and_replicate_round_trips(correction: str, replicate: str | None) -> None:
    run = replace(BASE, correction=correction, replicate=replicate, steps=BASE.steps + 1)
    assert re.fullmatch(KEY_WILDCARD_RE, run.key), run.key
    assert parse_key(run.key) == run
    assert parse_key(run.key).key == run.key


def test_a_correction_the_settings_do_not_define_is_no_key() -> None:
    key = replace(BASE, correction="ppo").key
    assert re.fullmatch(KEY_WILDCARD_RE, key) is None
    with pytest.raises(ValueError, match="does not parse"):
        parse_key(key)


def test_acceptance_runs_are_runs_with_parseable_keys() -> None:
    run = acceptance_run(Arm("staleness", 4, 8, 3, lr=1e-4))
    assert run.key == "qwen2.5-math-1.5b/gsm8k/N4_lr1e-4_tis_Tb0.8_Tl1_s1_st8_v3"
    assert parse_key(run.key) == run


def test_key_settings_reads_a_key_of_any_model_and_task() -> None:
    """A user's own run named by the key grammar: read whatever its model and task, the length and
    validation interval where the key or a known task says them."""
    from coolsampler.spec.study import key_settings, parse_key

    own = key_settings("qwen3-4b/gsm8k/N32_lr1e-6_tis_Tb0.8_Tl1_s1")
    shipped = parse_key("qwen2.5-math-1.5b/gsm8k/N32_lr1e-6_tis_Tb0.8_Tl1_s1").settings()
    same = ("N", "lr", "correction", "Tb", "Tb_kind", "Tl", "seed", "steps", "val_every")
    assert {k: own[k] for k in same} == {k: shipped[k] for k in same}
    other = key_settings("llama-3-8b/aime24/N8_lr2e-6_none_Tb1_Tl1_s3_st200_v5")
    assert (other["N"], other["steps"], other["val_every"], other["seed"]) == (8, 200, 5, 3)
    assert "steps" not in key_settings("llama-3-8b/aime24/N8_lr2e-6_none_Tb1_Tl1_s3")  # unknown task, no _st
    with pytest.raises(ValueError, match="settings part 'N8_lr2e-6_nope_Tb1_Tl1_s3' does not parse"):
        key_settings("llama-3-8b/aime24/N8_lr2e-6_nope_Tb1_Tl1_s3")
