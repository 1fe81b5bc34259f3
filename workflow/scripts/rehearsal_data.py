"""Rule rehearsal_data: toy sums in one paper task's files and data_source (coolsampler.world.toy)."""

import sys
from pathlib import Path

from coolsampler.world import toy

sys.stderr = open(snakemake.log[0], "w")  # noqa: F821
smk = snakemake  # noqa: F821
paths = toy.write_rehearsal_task(
    Path(smk.output[0]).parent, smk.params.task, seed=smk.params.seed, only=smk.wildcards.split
)
print(f"wrote {paths}", file=sys.stderr)
