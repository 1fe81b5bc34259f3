# The paper's claims (config/claims.yaml) computed on the study's runs: R/claims.md|csv and the
# staleness budget R/staleness_budget.md|csv (coolsampler.claims).
#
# The report's inputs are the metrics tables that EXIST when the DAG is built, so it never trains
# anything: before any training it lists, for each claim, the runs that would check it (verdict
# "not run"); as runs finish, the set of inputs changes and Snakemake rebuilds it. To get the runs
# themselves, build the figures/tables (or `all`) first, then the report.
from coolsampler.claims import ClaimError, load_claims, plan

CLAIMS_FILE = config.get("claims", "config/claims.yaml")
CLAIMS_CODE = [
    f"{workflow.basedir}/workflow/coolsampler/{m}"
    for m in ("claims.py", "analysis.py", "schemas/claims.schema.yaml")
]

try:
    CLAIMS = load_claims(CLAIMS_FILE)
except ClaimError as err:
    raise WorkflowError(f"invalid claims file: {err}") from None
# every run any claim selects, in study order
CLAIM_RUNS = list(
    dict.fromkeys(k for keys in plan(CLAIMS, STUDY.runs).values() for k in keys)
)


def claims_inputs(wildcards):
    have = [k for k in CLAIM_RUNS if Path(f"{R}/runs/{k}/metrics.parquet").exists()]
    return {
        "claims": CLAIMS_FILE,
        "metrics": [f"{R}/runs/{k}/metrics.parquet" for k in have],
        "status": [
            f"{R}/runs/{k}/status.json"
            for k in have
            if Path(f"{R}/runs/{k}/status.json").exists()
        ],
        "code": CLAIMS_CODE,
    }


def claims_message():
    have = [k for k in CLAIM_RUNS if Path(f"{R}/runs/{k}/metrics.parquet").exists()]
    missing = [k for k in CLAIM_RUNS if k not in have]
    lines = [
        f"claims report of study {STUDY.name}: {len(CLAIMS.claims)} claims,"
        f" checked by {len(CLAIM_RUNS)} runs, {len(have)} with metrics now",
    ]
    lines += [f"  no metrics yet: {k}" for k in missing]
    return "\n".join(lines)


rule claims:
    input:
        unpack(claims_inputs),
    output:
        md=report(f"{R}/claims.md", category="Claims", labels={"report": "claims"}),
        csv=report(
            f"{R}/claims.csv", category="Claims", labels={"report": "claims (csv)"}
        ),
        budget_md=f"{R}/staleness_budget.md",
        budget_csv=report(
            f"{R}/staleness_budget.csv",
            category="Claims",
            labels={"report": "staleness budget"},
        ),
    log:
        f"{R}/logs/claims/claims.log",
    localrule: True
    params:
        claims=CLAIMS_FILE,
        study=STUDY.name,
        run_keys=[r.key for r in STUDY.runs],
        defined=sorted(STUDY.figures),
    message:
        claims_message()
    script:
        "../scripts/claims.py"
