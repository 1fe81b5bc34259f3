"""Rule world_model: a chain world's tokenizer and Qwen2, warm-started to its greedy-accuracy target."""

import sys

from coolsampler.spec.world import world_from_dict
from coolsampler.testkit import chain

log = open(snakemake.log[0], "w")  # noqa: F821
sys.stderr = log


def say(msg: str) -> None:
    print(msg, file=log, flush=True)


world = world_from_dict(snakemake.params.name, snakemake.params.knobs, "world")  # noqa: F821
info = chain.warm_start(world, snakemake.params.out, log=say)  # noqa: F821
say(
    f"world {world.ident}: {info['parameters']} parameters; greedy accuracy {info['greedy_acc']:.3f}"
    f" (digit error {info['greedy_digit_error']:.3f}), sampled at T=1 {info['sampled_acc']:.3f} after"
    f" {info['steps']} steps, {info['seconds']:.0f} s; free words {info['word_entropy_nats']:.2f} nats"
)
