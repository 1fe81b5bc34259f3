# Figures and tables: each target depends only on the runs its `figures:` entry selects, and on the
# analysis code (so editing the plotting module reruns the plots, and nothing else). Helpers: common.smk.
# The targets, their panels and options: coolsampler.spec.targets (the one registry).
from coolsampler.paper.report import (
    run_labels,
    selection_texts,
    settings_text,
    target_caption,
)
from coolsampler.spec.targets import TARGETS, target_options


rule figure:
    input:
        unpack(target_inputs),
    output:
        pdf="{root}/{target}.pdf",
        png=report(
            "{root}/{target}.png",
            caption="../report/figure.rst",
            category="Figures",
            labels={"figure": "{target}"},
        ),
    log:
        "{root}/logs/figure/{target}.log",
    wildcard_constraints:
        target=FIGURE_RE,
    localrule: True
    params:
        target=lambda wc: wc.target,
        study=lambda wc: root_of(wc).study.name,
        panels=target_panels,
        options=lambda wc: target_options(wc.target, STUDY.figures.get(wc.target)),
        selection=target_selection,
        selection_text=lambda wc: selection_texts(
            root_of(wc).study.figures.get(wc.target)
        ),
        title=lambda wc: TARGETS[wc.target].title,
        draws=lambda wc: target_caption(wc.target),
    script:
        "../scripts/figure.py"


rule table:
    input:
        unpack(target_inputs),
    output:
        csv="{root}/{target}.csv",
        tex="{root}/{target}.tex",
        md="{root}/{target}.md",
        html=report(
            "{root}/{target}.html",
            caption="../report/table.rst",
            category="Tables",
            labels={"table": "{target}"},
        ),
    log:
        "{root}/logs/table/{target}.log",
    wildcard_constraints:
        target=TABLE_RE,
    localrule: True
    params:
        target=lambda wc: wc.target,
        study=lambda wc: root_of(wc).study.name,
        panels=target_panels,
        options=lambda wc: target_options(wc.target, STUDY.figures.get(wc.target)),
        selection_text=lambda wc: selection_texts(
            root_of(wc).study.figures.get(wc.target)
        ),
        title=lambda wc: TARGETS[wc.target].title,
        caption=lambda wc: target_caption(wc.target),
    script:
        "../scripts/table.py"


# One small figure per run for the report (category Runs): accuracy and reward, KL, entropy, the
# status in the title; the labels (run, status, platform, image, commit) are read when the report is
# made, from the run's status.json and run.yaml (coolsampler.paper.report).
rule run_curves:
    input:
        metrics=run_pattern("metrics.parquet"),
        status=run_pattern("status.json"),
        settings=run_pattern("run.yaml"),
        code=RUN_CURVES_CODE,
    output:
        report(
            run_pattern("curves.png"),
            caption="../report/run.rst",
            category="Runs",
            subcategory=lambda wc: wc.key.rsplit("/", 1)[0],
            labels=lambda wc, input: run_labels(
                input.status, input.settings, "curves"
            ),
        ),
    log:
        run_pattern("curves.log"),
    localrule: True
    params:
        study=lambda wc: root_of(wc).study.name,
        settings=lambda wc: settings_text(run_of(wc).settings()),
    script:
        "../scripts/run_curves.py"


# One run's staleness diagnostics for the report (category Runs, beside its curves): every diagnostic
# verl logs against the validation accuracy, the onset and each one's first crossing
# (coolsampler.paper.diagnostics; the numbers: coolsampler.results.diagnostics).
rule run_diagnostics:
    input:
        metrics=run_pattern("metrics.parquet"),
        status=run_pattern("status.json"),
        settings=run_pattern("run.yaml"),
        code=RUN_DIAGNOSTICS_CODE,
    output:
        report(
            run_pattern("diagnostics.png"),
            caption="../report/run_diagnostics.rst",
            category="Runs",
            subcategory=lambda wc: wc.key.rsplit("/", 1)[0],
            labels=lambda wc, input: run_labels(
                input.status, input.settings, "diagnostics"
            ),
        ),
    log:
        run_pattern("diagnostics.log"),
    localrule: True
    params:
        study=lambda wc: root_of(wc).study.name,
        settings=lambda wc: settings_text(run_of(wc).settings()),
    script:
        "../scripts/run_diagnostics.py"


# Which staleness diagnostic warns first: for every degraded run of the study, each diagnostic's first
# crossing of its threshold and its lead over the onset, over a range of thresholds (category Diagnostics).
rule diagnostic_leads:
    input:
        unpack(leads_inputs),
    output:
        md=f"{R}/diagnostic_leads.md",
        csv=f"{R}/diagnostic_leads.csv",
        html=report(
            f"{R}/diagnostic_leads.html",
            caption="../report/leads.rst",
            category="Diagnostics",
            labels={"table": "diagnostic leads"},
        ),
    log:
        f"{R}/logs/diagnostic_leads/diagnostic_leads.log",
    localrule: True
    params:
        study=STUDY.name,
        settings={r.key: r.settings() for r in STUDY.runs},
    script:
        "../scripts/diagnostic_leads.py"


# The study's rehearsal: every arm trained for a few steps on the CPU stack, parsed, and every figure and
# table drawn from those logs (coolsampler.train.rehearsal). Fails naming the arm that did not train, parse or draw.
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
