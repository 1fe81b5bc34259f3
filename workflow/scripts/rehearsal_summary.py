"""Rule rehearsal: one line per arm (trained, parsed, steps, start-up and wall time), and every figure and
table drawn; fails naming each arm whose run is not whole (coolsampler.train.rehearsal)."""

import sys

from coolsampler.train.rehearsal import summarize

sys.stderr = open(snakemake.log[0], "w")  # noqa: F821
smk = snakemake  # noqa: F821
problems = summarize(smk.params.arms, smk.input.targets, smk.output.summary)
if problems:
    sys.exit("rehearsal failed:\n" + "\n".join(problems))
