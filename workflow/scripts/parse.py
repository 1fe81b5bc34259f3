"""Rule parse: verl JSONL -> metrics.parquet + status.json (coolsampler.results.metrics)."""

import sys

from coolsampler.results.metrics import parse_jsonl, write_metrics
from coolsampler.spec.metrics_schema import REQUIRED

sys.stderr = open(snakemake.log[0], "w")  # noqa: F821
run = snakemake.params.run  # noqa: F821
jsonl = snakemake.input.jsonl  # noqa: F821
# the pipeline's runs must log every REQUIRED metric; under analysis_only any verl log is drawn from
required = ("step",) if snakemake.params.lenient else REQUIRED  # noqa: F821
# clip_frac is measured against the configured max response length, read from the run.yaml the
# training job wrote beside the log (its resolved recipe).
df, status = parse_jsonl(jsonl, expected_steps=run.steps, val_every=run.val_every, run=run.key, required=required)
write_metrics(df, status, snakemake.output.metrics, snakemake.output.status)  # noqa: F821
print(f"{run.key}: {len(df)} rows, complete={status.complete} {status.problems}", file=sys.stderr)
