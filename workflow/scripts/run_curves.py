"""Snakemake script: one run's curves.png (accuracy and reward, KL, entropy; its status in the title).

All logic is in coolsampler.paper.report.run_curves_from_files (kept out of the script so it is tested).
"""

import sys

from coolsampler.paper.report import run_curves_from_files

smk = globals()["snakemake"]  # injected by the script directive
sys.stderr = open(smk.log[0], "w")
run_curves_from_files(smk.input.metrics, smk.input.status, smk.input.settings, smk.output[0], smk.params.study)
