"""Snakemake script: the study's lead table (R/diagnostic_leads.md|csv|html): which staleness
diagnostic crosses its threshold first, and its lead over the onset, for every degraded run.

All logic is in coolsampler.paper.diagnostics.study_leads_from_files (kept out of the script so it is tested).
"""

import sys

from coolsampler.paper.diagnostics import study_leads_from_files

smk = globals()["snakemake"]  # injected by the script directive
sys.stderr = open(smk.log[0], "w")
outputs = {"md": smk.output.md, "csv": smk.output.csv, "html": smk.output.html}
study_leads_from_files(smk.input.metrics, smk.params.settings, outputs, smk.params.study)
