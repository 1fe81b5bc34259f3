"""Rule train: one run through patched verl (coolsampler.train.job.train does the work)."""

from coolsampler.train.job import train_from_snakemake

train_from_snakemake(snakemake)  # noqa: F821
