"""The chain world's generator and reward (coolsampler.world.chain): answers, data, error link, model shape."""

from __future__ import annotations

import random
import re

import pandas as pd
import pytest

from coolsampler.spec.world import LABELS, ErrorLink, World
from coolsampler.world import chain

WORLD = World("chain", chain_length=5, words_per_block=3, vocab_words=32, zipf=1.6, train_prompts=300, val_prompts=64)


def test_a_right_answer_scores_one_and_each_wrong_digit_counts() -> None:
    truth = chain.answer_digits("31415")
    assert truth == "3314481954"  # operand, running sum mod 10, per block
    right = "A3abc3B1aab4C4dac8D1aba9E5cab4"
    assert chain.compute_score("chain", right, truth) == {"score": 1.0, "acc": 1.0, "digit_error": 0.0}
    one_wrong = right.replace("C4dac8", "C4dac7")
    assert chain.compute_score("chain", one_wrong, truth) == {"score": 0.0, "acc": 0.0, "digit_error": 0.1}
    cut = right[:12]  # two blocks and a label: six digits missing
    assert chain.compute_score("chain", cut, truth)["digit_error"] == pytest.approx(0.6)
    assert chain.compute_score("chain", right + "7", truth)["score"] == 0.0  # an extra digit is wrong too
    assert chain.compute_score("chain", right + "</s>", truth)["score"] == 1.0


def test_supervised_answers_have_the_block_shape_and_copy_their_operands() -> None:
    rng = random.Random(0)
    words = re.escape(WORLD.words())
    for _ in range(200):
        prompt = chain.make_prompt(WORLD, rng)
        assert re.fullmatch(r"(?:[A-E]\d){5}=", prompt) and prompt[0::2][:5] == LABELS[:5]
        answer = chain.supervised_answer(WORLD, prompt, rng)
        blocks = re.findall(rf"([A-I])(\d)([{words}]{{3}})(\d)", answer)
        assert "".join(b[0] + b[1] + b[2] + b[3] for b in blocks) == answer
        assert [b[0] for b in blocks] == list(LABELS[:5])
        assert "".join(b[1] for b in blocks) == chain.prompt_digits(prompt)


def test_rare_words_predict_wrong_sums_as_the_error_link_says() -> None:
    world = World("chain", error=ErrorLink(base=0.02, slope=0.58, power=1.5))
    rng = random.Random(1)
    words = world.words()
    by_rarity: dict[str, list[int]] = {"common": [], "rare": []}
    for _ in range(4000):
        prompt = chain.make_prompt(world, rng)
        sums = chain.running_sums(chain.prompt_digits(prompt))
        answer = chain.supervised_answer(world, prompt, rng)
        for (ws, digit), truth in zip(re.findall(r"[A-I]\d(\D+)(\d)", answer), sums, strict=True):
            r = sum(words.index(w) for w in ws) / len(ws) / (world.vocab_words - 1)
            if r < 0.05:
                by_rarity["common"].append(digit != truth)
            elif r > 0.5:
                by_rarity["rare"].append(digit != truth)
    common = sum(by_rarity["common"]) / len(by_rarity["common"])
    rare = sum(by_rarity["rare"]) / len(by_rarity["rare"])
    assert common < 0.05  # 0.02 + 0.58 * r^1.5 with r < 0.05: at most 0.026
    assert rare > 0.23  # r > 0.5: at least 0.225
    # the free words follow the Zipf law: the commonest word is drawn about p(1) of the time
    counts = pd.Series(list("".join(re.findall(r"[A-I]\d(\D+)\d", answer)))).value_counts(normalize=True)
    assert counts.index[0] == words[0]


def test_word_entropy_is_the_zipf_laws() -> None:
    assert chain.word_entropy(World("w", vocab_words=32, zipf=1.0)) == pytest.approx(2.88, abs=0.01)
    assert chain.word_entropy(World("w", vocab_words=32, zipf=1.6)) == pytest.approx(2.00, abs=0.01)


def test_splits_are_disjoint_deterministic_and_validation_does_not_move_with_training_size() -> None:
    a, b = chain.split_prompts(WORLD), chain.split_prompts(WORLD)
    assert a == b
    assert not set(a["val"]) & set(a["train"])
    assert len(a["val"]) == 64 and len(set(a["train"])) == 300
    bigger = World(**{**WORLD.__dict__, "train_prompts": 600})
    assert chain.split_prompts(bigger)["val"] == a["val"]
    with pytest.raises(ValueError, match="too few distinct prompts"):
        chain.split_prompts(World("w", chain_length=2, val_prompts=40, train_prompts=20))


def test_data_is_verl_parquet_with_the_answers_digits_as_ground_truth(tmp_path) -> None:
    paths = chain.write_data(WORLD, tmp_path)
    val = pd.read_parquet(paths["val"])
    assert len(val) == 64 and set(val["data_source"]) == {"chain"}
    row = val.iloc[0]
    prompt = row["prompt"][0]["content"]
    assert row["reward_model"]["ground_truth"] == chain.answer_digits(chain.prompt_digits(prompt))
    assert list(val["extra_info"].map(lambda e: e["index"])) == list(range(64))


def test_a_sampled_copy_follows_the_greedy_rows_with_its_own_source_and_temperature(tmp_path) -> None:
    from dataclasses import replace

    val = pd.read_parquet(chain.write_data(replace(WORLD, sampled_val=16), tmp_path)["val"])
    assert len(val) == 64 + 16
    assert list(val["data_source"]) == ["chain"] * 64 + ["chain-sampled"] * 16
    assert list(val["sampler_temperature"]) == [0.0] * 64 + [1.0] * 16
    prompts = val["prompt"].map(lambda m: m[0]["content"])
    assert list(prompts[64:]) == list(prompts[:16])  # the same prompts, scored a second time
    train = pd.read_parquet(tmp_path / "train.parquet")
    assert "sampler_temperature" not in train  # training rows sample at the run's own Tb


def test_the_model_has_the_worlds_shape_and_parameter_count() -> None:
    model = chain.build_model(WORLD)
    assert sum(p.numel() for p in model.parameters()) == WORLD.parameters
    assert model.config.vocab_size == len(WORLD.vocab())
    assert model.config.head_dim * model.config.num_attention_heads == WORLD.model.hidden_size
