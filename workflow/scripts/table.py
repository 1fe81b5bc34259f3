"""Snakemake script: write one table target (CSV + TeX + Markdown) from parsed run metrics.

params: target, study, options, panels = {panel: [{"settings", "metrics", "status"}]}; log: one file.
All logic is in coolsampler.paper.render.run_snakemake_target (kept out of the script so it is tested).
"""

from coolsampler.paper.render import run_snakemake_target

run_snakemake_target(globals()["snakemake"], "table")  # snakemake: injected by the script directive
