"""Rule world_model: a chain world's tokenizer and Qwen2, warm-started to its greedy-accuracy target."""

import sys

from coolsampler.spec import numerics

# the warm start computes on the pinned CPU code path: in the environment before anything imports torch
numerics.pin()
from coolsampler.spec.world import world_from_dict  # noqa: E402
from coolsampler.world import chain, toy  # noqa: E402

log = open(snakemake.log[0], "w")  # noqa: F821
sys.stderr = log


def say(msg: str) -> None:
    print(msg, file=log, flush=True)


# the model's bytes depend on the numeric path: refuse another one (torch imported too early, no AVX2)
if (why := toy.unpinned_reason()) is not None:
    raise SystemExit(f"warm start: {why}")


world = world_from_dict(snakemake.params.name, snakemake.params.knobs, "world")  # noqa: F821
info = chain.warm_start(world, snakemake.params.out, log=say)  # noqa: F821
say(
    f"world {world.ident}: {info['parameters']} parameters; greedy accuracy {info['greedy_acc']:.3f}"
    f" (digit error {info['greedy_digit_error']:.3f}), sampled at T=1 {info['sampled_acc']:.3f} after"
    f" {info['steps']} steps, {info['seconds']:.0f} s; free words {info['word_entropy_nats']:.2f} nats"
)
