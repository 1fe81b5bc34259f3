# Figures and tables: each target depends only on the runs its `figures:` entry selects, and on the
# analysis code (so editing the plotting module reruns the plots, and nothing else). Helpers: common.smk.
# The targets, their panels and options: coolsampler.targets (the one registry).
from coolsampler.targets import target_options


rule figure:
    input:
        unpack(target_inputs),
    output:
        pdf=report(
            "{root}/{target}.pdf", category="Figures", labels={"figure": "{target}"}
        ),
        png="{root}/{target}.png",
    log:
        "{root}/logs/figure/{target}.log",
    wildcard_constraints:
        target="fig[1-8]",
    localrule: True
    params:
        target=lambda wc: wc.target,
        study=lambda wc: root_of(wc).study.name,
        panels=target_panels,
        options=lambda wc: target_options(wc.target, STUDY.figures.get(wc.target)),
    script:
        "../scripts/figure.py"


rule table:
    input:
        unpack(target_inputs),
    output:
        csv=report(
            "{root}/{target}.csv", category="Tables", labels={"table": "{target}"}
        ),
        tex="{root}/{target}.tex",
        md="{root}/{target}.md",
    log:
        "{root}/logs/table/{target}.log",
    wildcard_constraints:
        target="table[1-4]",
    localrule: True
    params:
        target=lambda wc: wc.target,
        study=lambda wc: root_of(wc).study.name,
        panels=target_panels,
        options=lambda wc: target_options(wc.target, STUDY.figures.get(wc.target)),
    script:
        "../scripts/table.py"


# The study's rehearsal: every arm trained for a few steps on the CPU stack, parsed, and every figure and
# table drawn from those logs (coolsampler.rehearsal). Fails naming the arm that did not train, parse or draw.
rule rehearsal:
    input:
        unpack(rehearsal_inputs),
    output:
        summary=f"{R}/rehearsal/rehearsal.md",
    log:
        f"{R}/rehearsal/logs/rehearsal.log",
    localrule: True
    params:
        arms=rehearsal_arms,
    script:
        "../scripts/rehearsal_summary.py"
