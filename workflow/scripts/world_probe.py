"""Rule world_probe: what a warm-started chain world offers the paper's mechanism, before any RL step."""

import json
import sys
from pathlib import Path

from coolsampler.spec import numerics

# the probe samples on the pinned CPU code path, as the warm start did: set before anything imports torch
numerics.pin()
from coolsampler.spec.world import world_from_dict  # noqa: E402
from coolsampler.world.probe import probe  # noqa: E402

log = open(snakemake.log[0], "w")  # noqa: F821
sys.stderr = log
world = world_from_dict(snakemake.params.name, snakemake.params.knobs, "world")  # noqa: F821
model_dir = Path(snakemake.input[0]).parent  # noqa: F821
out = probe(world, model_dir, prompts=snakemake.params.prompts, Tb=snakemake.params.Tb)  # noqa: F821
Path(snakemake.output[0]).write_text(json.dumps(out, indent=1))  # noqa: F821
print(
    f"world {world.ident}: entropy {out['entropy']:.3f} nats/token, tail ratio {out['tail_ratio']},"
    f" offset {out['offset']:.4f} nats/token, error link {out['error_link']}",
    file=log,
)
