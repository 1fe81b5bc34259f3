"""Rule toy_model: tokenizer + tiny Qwen2, supervised warm start to about half accuracy."""

import sys

from coolsampler.spec import numerics

# the warm start computes on the pinned CPU code path: in the environment before anything imports torch
numerics.pin()
from coolsampler.world import toy  # noqa: E402

log = open(snakemake.log[0], "w")  # noqa: F821
sys.stderr = log


def say(msg: str) -> None:
    print(msg, file=log, flush=True)


# the model's bytes depend on the numeric path: refuse another one (torch imported too early, no AVX2)
if (why := toy.unpinned_reason()) is not None:
    raise SystemExit(f"warm start: {why}")


info = toy.sft_warm_start(
    snakemake.params.out,  # noqa: F821
    steps=snakemake.params.max_steps,  # noqa: F821
    target_acc=snakemake.params.target_acc,  # noqa: F821
    log=say,
    rehearsal=snakemake.params.rehearsal,  # noqa: F821
)
say(f"warm start: greedy accuracy {info['greedy_acc']:.3f} after {info['sft_steps']} steps, {info['seconds']:.0f}s")
