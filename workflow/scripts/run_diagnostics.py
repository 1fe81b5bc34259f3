"""Snakemake script: one run's diagnostics.png (every staleness diagnostic verl logs against its
validation accuracy, the onset and each diagnostic's first crossing).

All logic is in coolsampler.paper.diagnostics.run_diagnostics_from_files (kept out of the script so it is tested).
"""

import sys

from coolsampler.paper.diagnostics import run_diagnostics_from_files

smk = globals()["snakemake"]  # injected by the script directive
sys.stderr = open(smk.log[0], "w")
run_diagnostics_from_files(smk.input.metrics, smk.input.status, smk.input.settings, smk.output[0], smk.params.study)
