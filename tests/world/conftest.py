"""A tiny generated chain world and its untrained model, shared by the probes' tests."""

from __future__ import annotations

from dataclasses import replace

import pytest

from coolsampler.spec.world import Shape, World
from coolsampler.world import chain

WORLD = World("chain", chain_length=3, words_per_block=2, vocab_words=8, val_prompts=16, train_prompts=32)


@pytest.fixture(scope="module")
def untrained(tmp_path_factory: pytest.TempPathFactory):
    """A tiny world's randomly initialised Qwen2 and tokenizer, saved as rule world_model saves them."""
    from coolsampler.world.toy import build_tokenizer

    world = replace(WORLD, model=Shape(hidden_size=32, intermediate_size=32, layers=1, heads=1))
    out = tmp_path_factory.mktemp("world")
    build_tokenizer(out, world.vocab())
    chain.build_model(world).save_pretrained(out, safe_serialization=True)
    return world, out
