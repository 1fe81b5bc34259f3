"""Rule toy_data: the smoke study's synthetic addition task as verl-format parquet."""

import sys
from pathlib import Path

from coolsampler.world import toy

sys.stderr = open(snakemake.log[0], "w")  # noqa: F821
paths = toy.write_task(Path(snakemake.output.train).parent, seed=snakemake.params.seed)  # noqa: F821
print(f"wrote {paths}", file=sys.stderr)
