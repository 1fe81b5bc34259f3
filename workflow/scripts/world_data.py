"""Rule world_data: a chain world's training and validation prompts as verl-format parquet."""

import sys
from pathlib import Path

from coolsampler.spec.world import world_from_dict
from coolsampler.world import chain

sys.stderr = open(snakemake.log[0], "w")  # noqa: F821
world = world_from_dict(snakemake.params.name, snakemake.params.knobs, "world")  # noqa: F821
paths = chain.write_data(world, Path(snakemake.output.train).parent)  # noqa: F821
print(f"world {world.ident}: wrote {', '.join(map(str, paths.values()))}", file=sys.stderr)
