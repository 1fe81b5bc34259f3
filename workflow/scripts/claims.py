"""Snakemake script: the claims report (R/claims.md|csv, R/staleness_budget.md|csv).

All logic is in coolsampler.paper.claims_rule.run_snakemake (kept out of the script so it is tested).
"""

from coolsampler.paper.claims_rule import run_snakemake

run_snakemake(globals()["snakemake"])  # snakemake: injected by the script directive
