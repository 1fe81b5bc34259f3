"""Rule prepare_hub_task: one split of a study task from a Hub dataset in verl's format
(coolsampler.train.data.prepare_hub_split). Snakemake prepends a preamble: no ``from __future__`` import here.
"""

import contextlib
from pathlib import Path

from coolsampler.train.data import prepare_hub_split

smk = snakemake  # noqa: F821
Path(smk.log[0]).parent.mkdir(parents=True, exist_ok=True)
with open(smk.log[0], "w") as log, contextlib.redirect_stderr(log), contextlib.redirect_stdout(log):
    manifest = prepare_hub_split(dict(smk.params.hub), smk.wildcards.split, smk.output.parquet, smk.params.cache)
    print(f"{manifest['source']}: {manifest['count']} rows")
