"""Rule drift_probe: where a never-refreshed run's learner has drifted from its sampler, token by token."""

import json
import sys
from pathlib import Path

from coolsampler.spec import numerics

# the probe samples on the pinned CPU code path, as the warm start did: set before anything imports torch
numerics.pin()
from coolsampler.spec.world import world_from_dict  # noqa: E402
from coolsampler.world.drift_probe import load_learner, probe  # noqa: E402

log = open(snakemake.log[0], "w")  # noqa: F821
sys.stderr = log
p = snakemake.params  # noqa: F821
world = world_from_dict(p.name, p.knobs, "world")
model_dir = Path(snakemake.input.model).parent  # noqa: F821
learner = load_learner(p.actor, model_dir)
out = {"step": p.step, **probe(world, model_dir, learner, Tb=p.Tb, prompts=p.prompts)}
Path(snakemake.output[0]).write_text(json.dumps(out, indent=1))  # noqa: F821
print(
    f"step {p.step}, Tb {p.Tb:g}: KL(q||pi) {out['learner']:.4f} nats/token, offset {out['offset']:.4f},"
    f" drift {out['drift']:.4f}: q<0.05 {out['drift_low']:.4f}, q>0.5 {out['drift_high']:.4f}",
    file=log,
)
