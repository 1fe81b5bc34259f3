"""The world probe and the state-dependence knob: what the screen reads is measured as its docstring says."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

from coolsampler.spec.world import TAIL_RANK, World
from coolsampler.world import chain
from coolsampler.world.probe import block_errors, probe
from tests.world.conftest import WORLD


def test_blocks_are_judged_by_label_operand_and_running_sum_and_tail_words() -> None:
    w = WORLD  # words "abcdefgh": a tail word is rank >= TAIL_RANK, index TAIL_RANK - 1 on
    tail = w.words()[TAIL_RANK - 1]
    # prompt digits 3, 1, 4: sums 3, 4, 8
    assert block_errors(w, "A3B1C4=", "A3ab3B1aa4C4ba8") == [(False, False)] * 3
    assert block_errors(w, "A3B1C4=", f"A3a{tail}3B1aa5C4ba8") == [(True, False), (False, True), (False, False)]
    assert block_errors(w, "A3B1C4=", "A3ab3B2aa4") == [(False, False), (False, True)]  # a wrong operand
    # parsing stops at a block that does not parse or carries another label
    assert block_errors(w, "A3B1C4=", "A3ab3C1aa4B4ba8") == [(False, False)]
    assert block_errors(w, "A3B1C4=", "xyz") == []
    # a wrong sum carried on: against the true sums every later block is wrong, locally only the first
    carried = "A3ab3B1aa5C4ba9"  # 3, then 5 (true 4), then 5 + 4 = 9 (true 8)
    assert block_errors(w, "A3B1C4=", carried) == [(False, False), (False, True), (False, True)]
    assert block_errors(w, "A3B1C4=", carried, local=True) == [(False, False), (False, True), (False, False)]


def test_a_tail_word_makes_the_next_word_flatter_only_with_tail_zipf() -> None:
    def follow_rates(world: World) -> tuple[float, float]:
        """P(next word is in the tail | previous in the tail) and (| previous in the head), in the data."""
        rng = random.Random(0)
        after = {True: [0, 0], False: [0, 0]}
        words = world.words()
        for _ in range(4000):
            ans = chain.supervised_answer(world, chain.make_prompt(world, rng), rng)
            ranks = [words.index(c) for c in ans if c in words]
            for a, b in zip(ranks, ranks[1:], strict=False):
                after[a >= TAIL_RANK - 1][0] += b >= TAIL_RANK - 1
                after[a >= TAIL_RANK - 1][1] += 1
        return after[True][0] / after[True][1], after[False][0] / after[False][1]

    base = replace(WORLD, zipf=3.0)
    t, h = follow_rates(base)
    assert abs(t - h) < 0.03  # without the knob the previous word does not matter
    t, h = follow_rates(replace(base, tail_zipf=0.0))  # uniform after a tail word: 5 of 8 words are tail
    assert t == pytest.approx(5 / 8, abs=0.05) and h < 0.1


def test_at_the_learner_temperature_the_offset_is_zero_and_the_tail_ratio_one(untrained) -> None:
    world, model_dir = untrained
    same = probe(world, model_dir, prompts=16, Tb=1.0)
    assert same["offset"] == pytest.approx(0.0, abs=1e-9)
    assert same["tail_ratio"] == pytest.approx(1.0, abs=1e-9)
    assert same["prompts"] == 16 and same["answer_tokens"] >= 16
    # a near-uniform untrained model: entropy close to log(vocab) nats a token
    assert 0.8 * math.log(len(world.vocab())) < same["entropy"] <= math.log(len(world.vocab()))


def test_cooling_the_sampler_cuts_the_tail_and_opens_an_offset(untrained) -> None:
    world, model_dir = untrained
    cooled = probe(world, model_dir, prompts=16, Tb=0.5)
    assert cooled["offset"] > 0
    assert cooled["tail_ratio"] is not None and cooled["free_positions"] > 0
    assert set(cooled) >= {"error_link", "error_link_local", "p_wrong_tail", "p_wrong_none"}
