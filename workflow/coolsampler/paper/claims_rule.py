"""Rule ``claims`` (``workflow/rules/claims.smk``): what it needs at DAG time and the body of its script.

Owns ``ReportPlan`` (the claims, the runs they select, probe or not, and the rule's inputs: the
metrics tables that exist, so building the report never trains anything) and ``run_snakemake`` (the
body of ``workflow/scripts/claims.py``: evaluate the claims on the runs with metrics and write the
report, logging through the one log wrapper of the analysis jobs, ``coolsampler.results.smklog``).
Why apart from the report: this is the Snakemake glue, tested without Snakemake; the report
(``coolsampler.paper.claims_report``) is what it writes, and the CLI writes it too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coolsampler.paper.claims_report import summary_text, write_report
from coolsampler.results.claims import (
    Claims,
    evaluate,
    load_claims,
    load_run_data,
    plan,
    relax,
    staleness_budget,
)
from coolsampler.results.smklog import snakemake_log
from coolsampler.spec.layout import Layout, key_of_file
from coolsampler.spec.study import Run, parse_key, study_from_dict


def run_snakemake(smk: Any) -> None:
    """Body of ``workflow/scripts/claims.py``: the report on the study's runs that have metrics now.

    params: claims (file), study (name), run_keys (every run of the study), defined (the
    study's figure/table targets). input.metrics: the metrics tables that exist (the rule's inputs).
    """
    with snakemake_log(smk.log[0], "claims report") as logger:
        claims = load_claims(smk.params.claims)
        if smk.params.probe:  # no run of the study is the paper's: stand-in runs (claims.smk)
            claims = relax(claims)
        # the study's own runs as it lists them: a key with a schedule (_sch) or extra overrides (_x)
        # names only a hash, which only the study can read back (the rehearsal's keys parse alone)
        listed = study_from_dict(dict(smk.config), origin=smk.params.study).by_key()
        runs = [listed[k] if k in listed else parse_key(k) for k in smk.params.run_keys]
        # .../runs/<model>/<task>/<settings>/metrics.parquet: the run key is in the path
        have = {key_of_file(p): Path(p) for p in smk.input.metrics}
        data = {
            r.key: load_run_data(r, have[r.key], have[r.key].with_name("status.json")) for r in runs if r.key in have
        }
        results = evaluate(claims, runs, data)
        budget = staleness_budget(runs, data)
        write_report(
            results,
            budget,
            smk.params.study + (" (probe: filters relaxed to the mechanism settings)" if smk.params.probe else ""),
            smk.output.md,
            smk.output.csv,
            smk.output.budget_md,
            smk.output.budget_csv,
            set(smk.params.defined),
        )
        logger.info("%s runs with metrics; %s", len(data), summary_text(results).strip())


@dataclass
class ReportPlan:
    """What rule ``claims`` needs at DAG time: the claims, the runs they select, probe or not.

    The rule's inputs are the metrics tables that EXIST (``inputs``), so building the report never
    trains anything; ``message`` is the dry listing: every run that would check a claim.
    """

    claims: Claims
    study: str
    results: str
    runs: list[str]
    probe: bool

    @classmethod
    def of(cls, claims_file: str | Path, study_name: str, study_runs: Sequence[Run], results: str) -> ReportPlan:
        claims = load_claims(claims_file)
        keys = list(dict.fromkeys(k for ks in plan(claims, study_runs).values() for k in ks))
        # A study with none of the paper's runs (the smoke study) is probed: relaxed filters. Reported
        # claims do not decide it: they may select every run (the diagnostics' leads: `runs: {}`).
        asserted = Claims(claims.filters, [c for c in claims.claims if not c.get("reported")])
        probe = not any(plan(asserted, study_runs).values())
        if probe:
            keys = list(dict.fromkeys(k for ks in plan(relax(claims), study_runs).values() for k in ks))
        return cls(claims, study_name, results, keys, probe)

    def existing(self) -> list[str]:
        layout = Layout(self.results)
        return [k for k in self.runs if Path(layout.run_file(k, "metrics.parquet")).exists()]

    def inputs(self, claims_file: str, code: Sequence[str], *, wait: bool = False) -> dict[str, Any]:
        """The rule's inputs: the metrics that exist now, or with ``wait`` every run's (a study cheap to
        train, on the cpu platform, gets its report after its runs instead of before them)."""
        have = list(self.runs) if wait else self.existing()
        layout = Layout(self.results)
        status = [Path(layout.run_file(k, "status.json")) for k in have]
        return {
            "claims": claims_file,
            "metrics": [layout.run_file(k, "metrics.parquet") for k in have],
            "status": [str(p) for p in status if wait or p.exists()],
            "code": list(code),
        }

    def message(self) -> str:
        have = set(self.existing())
        head = (
            f"claims report of study {self.study}"
            + (" (probe: no run is the paper's)" if self.probe else "")
            + f": {len(self.claims.claims)} claims, checked by {len(self.runs)} runs, {len(have)} with metrics now"
        )
        return "\n".join([head] + [f"  no metrics yet: {k}" for k in self.runs if k not in have])
