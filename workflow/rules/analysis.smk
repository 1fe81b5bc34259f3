# Figures and tables: each target depends only on the runs its `figures:` entry selects, and on the
# analysis code (so editing the plotting module reruns the plots, and nothing else). Helpers: common.smk.


rule figure:
    input:
        unpack(target_inputs),
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
    script:
        "../scripts/figure.py"


rule table:
    input:
        unpack(target_inputs),
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
    script:
        "../scripts/table.py"
