# Figures and tables: each target depends only on the runs its `figures:` entry selects, and on the
# analysis code (so editing the plotting module reruns the plots, and nothing else).
ANALYSIS_CODE = [
    f"{workflow.basedir}/workflow/coolsampler/{m}.py"
    for m in ("analysis", "plotting", "figures", "tables", "metrics_schema")
]


def target_runs(target):
    """Panel -> runs of the study that the target shows (selected by settings)."""
    if target not in STUDY.figures:
        raise WorkflowError(f"study {STUDY.name} defines no {target} (add it under figures:)")
    return {panel: STUDY.select(filt) for panel, filt in STUDY.figures[target].items()}


def target_inputs(wildcards):
    keys = sorted({r.key for runs in target_runs(wildcards.target).values() for r in runs})
    return {
        "metrics": [f"{R}/runs/{k}/metrics.parquet" for k in keys],
        "status": [f"{R}/runs/{k}/status.json" for k in keys],
        "code": ANALYSIS_CODE,
    }


def target_panels(wildcards):
    return {
        panel: [
            {
                "settings": r.settings(),
                "metrics": f"{R}/runs/{r.key}/metrics.parquet",
                "status": f"{R}/runs/{r.key}/status.json",
            }
            for r in runs
        ]
        for panel, runs in target_runs(wildcards.target).items()
    }


rule figure:
    input:
        unpack(target_inputs),
    output:
        pdf=report(f"{R}/{{target}}.pdf", category="Figures", labels={"figure": "{target}"}),
        png=f"{R}/{{target}}.png",
    log:
        f"{R}/logs/figure/{{target}}.log",
    wildcard_constraints:
        target="fig[1-8]",
    params:
        target=lambda wc: wc.target,
        study=STUDY.name,
        panels=target_panels,
    localrule: True
    script:
        "../scripts/figure.py"


rule table:
    input:
        unpack(target_inputs),
    output:
        csv=report(f"{R}/{{target}}.csv", category="Tables", labels={"table": "{target}"}),
        tex=f"{R}/{{target}}.tex",
        md=f"{R}/{{target}}.md",
    log:
        f"{R}/logs/table/{{target}}.log",
    wildcard_constraints:
        target="table[1-4]",
    params:
        target=lambda wc: wc.target,
        study=STUDY.name,
        panels=target_panels,
    localrule: True
    script:
        "../scripts/table.py"
