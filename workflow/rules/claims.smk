# The paper's claims (config/claims.yaml) computed on the study's runs: R/claims.md|csv and the
# staleness budget R/staleness_budget.md|csv (coolsampler.results.claims computes them,
# coolsampler.paper.claims_report writes them, coolsampler.paper.claims_rule is the rule's glue).
#
# On the gpu platform the report's inputs are the metrics tables that EXIST when the DAG is built, so
# it never starts GPU training: before any training it lists, for each claim, the runs that would
# check it (verdict "not run"; the dry run's message lists them); as runs finish, the set of inputs
# changes and Snakemake rebuilds it. On the cpu platform (the smoke study: minutes) it waits for the
# study's runs instead, and the default target builds it, so `snakemake --report` has its claims.
# A study with none of the paper's runs (the smoke study) is probed: each claim's filter is relaxed
# to its mechanism settings (correction, Tb, Tl, replicate), and the report says so.
from coolsampler.paper.claims_rule import ReportPlan
from coolsampler.results.claims import ClaimError
from coolsampler.spec.inputs import InputError

CLAIMS_FILE = config.get("claims", "config/claims.yaml")
try:
    CLAIMS_PLAN = ReportPlan.of(CLAIMS_FILE, STUDY.name, STUDY.runs, R)
except (ClaimError, InputError) as err:
    raise WorkflowError(f"invalid claims file: {err}") from None


rule claims:
    input:
        unpack(
            lambda wc: CLAIMS_PLAN.inputs(
                CLAIMS_FILE, CLAIMS_CODE, wait=PLATFORM == "cpu" and not ANALYSIS_ONLY
            )
        ),
        # a claim may read a run's drift probe (measures.m_probe): where the report waits for the
        # runs, it waits for their probes too
        probes=lambda wc: (
            drift_probes(wc) if PLATFORM == "cpu" and not ANALYSIS_ONLY else []
        ),
    output:
        md=f"{R}/claims.md",
        csv=f"{R}/claims.csv",
        budget_md=f"{R}/staleness_budget.md",
        budget_csv=f"{R}/staleness_budget.csv",
    log:
        f"{R}/logs/claims/claims.log",
    localrule: True
    params:
        claims=CLAIMS_FILE,
        study=STUDY.name,
        probe=CLAIMS_PLAN.probe,
        run_keys=[r.key for r in STUDY.runs],
        defined=sorted(STUDY.figures),
    message:
        CLAIMS_PLAN.message()
    script:
        "../scripts/claims.py"


# The claims report as HTML for Snakemake's report (category Claims): its tables as tables. Build it
# (`snakemake results/claims.html`) before `snakemake --report` to have the claims in the report.
rule claims_html:
    input:
        md="{root}/{name}.md",
    output:
        html=report(
            "{root}/{name}.html",
            caption="../report/claims.rst",
            category="Claims",
            labels={"report": "{name}"},
        ),
    log:
        "{root}/logs/claims_html/{name}.log",
    wildcard_constraints:
        name="claims|staleness_budget",
    localrule: True
    run:
        from coolsampler.paper.writers import markdown_page

        Path(output.html).write_text(
            markdown_page(Path(input.md).read_text(), title=wildcards.name)
        )


if REHEARSAL_ROOT is not None:

    # The rehearsal's claims: every claim computed on the rehearsal's real logs (the runs are the
    # paper's, shortened), so every computation path runs; the report depends on all of its runs.
    use rule claims as rehearsal_claims with:
        input:
            claims=CLAIMS_FILE,
            metrics=[
                ROOTS[REHEARSAL_ROOT].layout.run_file(r.key, "metrics.parquet")
                for r in ROOTS[REHEARSAL_ROOT].study.runs
            ],
            status=[
                ROOTS[REHEARSAL_ROOT].layout.run_file(r.key, "status.json")
                for r in ROOTS[REHEARSAL_ROOT].study.runs
            ],
            code=CLAIMS_CODE,
        output:
            md=f"{REHEARSAL_ROOT}/claims.md",
            csv=f"{REHEARSAL_ROOT}/claims.csv",
            budget_md=f"{REHEARSAL_ROOT}/staleness_budget.md",
            budget_csv=f"{REHEARSAL_ROOT}/staleness_budget.csv",
        log:
            f"{REHEARSAL_ROOT}/logs/claims/claims.log",
        params:
            claims=CLAIMS_FILE,
            study=ROOTS[REHEARSAL_ROOT].study.name,
            probe=False,
            run_keys=[r.key for r in ROOTS[REHEARSAL_ROOT].study.runs],
            defined=sorted(ROOTS[REHEARSAL_ROOT].study.figures),
        message:
            "claims report of the rehearsal: every claim on its real logs"
