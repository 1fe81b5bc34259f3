"""Rule drift_table: a study's drift probes as one table, a row per run and a mean per sampler temperature."""

import json
import sys
from pathlib import Path

from coolsampler.results.drift_probe import drift_markdown, drift_table

sys.stderr = open(snakemake.log[0], "w")  # noqa: F821
runs = snakemake.params.runs  # noqa: F821
probes = [json.loads(Path(p).read_text()) for p in snakemake.input.probes]  # noqa: F821
table = drift_table(list(zip(runs, probes, strict=True)))
table.to_csv(snakemake.output.tsv, sep="\t", index=False)  # noqa: F821
Path(snakemake.output.md).write_text(drift_markdown(table))  # noqa: F821
print(f"drift table: {len(table)} runs", file=sys.stderr)
