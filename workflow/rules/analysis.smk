# Figures and tables: each target depends only on the runs its `figures:` entry selects, and on the
# analysis code (so editing the plotting module reruns the plots, and nothing else). Helpers: common.smk.
# The targets, their panels and options: coolsampler.targets (the one registry).
from coolsampler.targets import target_options

# The reporting modules besides common.smk's ANALYSIS_CODE: editing them reruns figures and tables.
REPORTING_CODE = [
    f"{workflow.basedir}/workflow/coolsampler/{m}.py"
    for m in ("labels", "provenance", "writers", "targets")
]


rule figure:
    input:
        unpack(target_inputs),
        reporting=REPORTING_CODE,
    output:
        pdf=report(
            f"{R}/{{target}}.pdf", category="Figures", labels={"figure": "{target}"}
        ),
        png=f"{R}/{{target}}.png",
    log:
        f"{R}/logs/figure/{{target}}.log",
    wildcard_constraints:
        target="fig[1-8]",
    localrule: True
    params:
        target=lambda wc: wc.target,
        study=STUDY.name,
        panels=target_panels,
        options=lambda wc: target_options(wc.target, STUDY.figures.get(wc.target)),
    script:
        "../scripts/figure.py"


rule table:
    input:
        unpack(target_inputs),
        reporting=REPORTING_CODE,
    output:
        csv=report(
            f"{R}/{{target}}.csv", category="Tables", labels={"table": "{target}"}
        ),
        tex=f"{R}/{{target}}.tex",
        md=f"{R}/{{target}}.md",
    log:
        f"{R}/logs/table/{{target}}.log",
    wildcard_constraints:
        target="table[1-4]",
    localrule: True
    params:
        target=lambda wc: wc.target,
        study=STUDY.name,
        panels=target_panels,
        options=lambda wc: target_options(wc.target, STUDY.figures.get(wc.target)),
    script:
        "../scripts/table.py"
