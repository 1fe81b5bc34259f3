"""coolsampler: the pipeline behind "Cool the Sampler, Not the Learner".

    snakemake --cores 2                                         # the smoke study (config/config.yaml)
    snakemake --cores 1 --configfile=config/paper.yaml results/fig1.pdf   # one paper figure
    snakemake --profile profiles/slurm --configfile=config/paper.yaml results/fig1.pdf

Result-path scheme (coolsampler.spec.layout owns it, and the rules take their run paths from its
run_pattern; R = the study's `results:`, the paper's `results`, the smoke study's `results/smoke`;
S = `results`, shared by every study; D = `data_dir`, default S/data):

    S/build/verl-0.9.1+coolsampler.<patch-hash>-py3-none-any.whl     patched verl (rule verl_wheel)
    S/build/image.digest, image-inputs.<hash>.json                     the image's id, its sources' content (rules image,
                                                                       image_inputs; with a container engine)
    D/<task>/<split>.parquet (+ .manifest.json)                        prepared data (rules prepare_*, toy_data)
    D/rehearsal/<task>/<split>.parquet                                 the rehearsal's toy data (rule rehearsal_data)
    S/models/toy-qwen2[-rehearsal]/                                    generated models (rules toy_model, rehearsal_model)
    D/<world>-<key>/{train,val}.parquet, S/models/<world>-<key>/       a study's generated chain world (`worlds:`;
                                                                       rules world_data, world_model)
    R/screen/<world>-<key>.json, R/world_screen.md|tsv                 its world screen (`screen:`): each candidate
                                                                       probed before any RL step, and the first that
                                                                       meets the bounds (rules world_probe, world_screen)
    R/drift_probe.md|tsv                                               its drift probes as one table (`drift_probe:`;
                                                                       rule drift_table, from each run's drift_probe.json)
    M/hub/<org>/<name>/<revision>/ (+ prefetch.json)                   a study's pinned hub models (rule prefetch_model;
                                                                       M = `models_dir`, default S/models)
    R/runs/<model>/<task>/<settings>/                                  one training run; <model>/<task>/<settings>
                                                                       is its run key (coolsampler.spec.study), e.g.
                                                                       qwen2.5-math-1.5b/gsm8k/N192_lr2e-6_tis_Tb0.8_Tl1_s43
        run.yaml            every setting, the effective recipe, commit, package versions, training key,
                            verl's overrides and environment (rule train; coolsampler.spec.provenance.run_record)
        train.jsonl         verl's `file` logger, one line per step (rule train)
        train.log           the job's log: progress lines (step k/T, ETA), on failure the reason
        verl.log            verl's own output (Ray, vLLM, Hydra)
        attempts/NN.jsonl   verl's log of each attempt of the job, assembled into train.jsonl at the end
        train.benchmark.tsv wall time and memory of the job
        checkpoints/        verl's newest checkpoint (+ the stale sampler's snapshot): what a resume starts from
        metrics.parquet     one row per step, schema coolsampler.spec.metrics_schema (rule parse)
        status.json         whether the log is whole, and what is missing
        parse.log, curves.log, diagnostics.log
                            the logs of rules parse, run_curves and run_diagnostics
        drift_probe.json, drift_probe.log
                            a study's drift probe of the run (`drift_probe:`; rule drift_probe): KL(q || pi)
                            between its initial model and a kept checkpoint's learner, less the tempering
                            offset, by candidate class and bin of q
        key-changed-<k>.json, set-aside-<k>.json, superseded/<old k>/
                            a run whose training key changed to <k>, and its set-aside checkpoints
                            (coolsampler.train.rerun; rule supersede)
    R/fig<1-8>.pdf|.png                                                figures (rule figure)
    R/table<1-4>.csv|.tex|.md|.html                                    tables (rule table)
    R/runs/<key>/curves.png                                            one run at a glance, for the report (rule run_curves)
    R/runs/<key>/diagnostics.png                                       its staleness diagnostics (rule run_diagnostics)
    R/diagnostic_leads.md|csv|html                                     which diagnostic warns first (rule diagnostic_leads)
    R/logs/<rule>/...                                                  logs of the analysis rules
    R/rehearsal/...                                                    the study's rehearsal (rule rehearsal): the
                                                                       same scheme below it, and rehearsal.md
    R/rehearsal/two-rank/runs/<key>/                                   its two-rank shape (platform cpu-2rank): the
                                                                       fewest arms with N scaled to 2

A figure or table depends only on the runs its `figures:` entry in the study selects.

Software environment: no rule declares `conda:` or `container:` (the one `snakemake --lint`
recommendation left). Every rule runs in the environment made by workflow/tools/setup_env.sh
(CPU) or in the project image built by rule `image` (GPU profiles), which the training jobs enter
themselves (coolsampler.train.container). A per-rule conda env cannot hold the patched verl, which only
comes from our wheel build, and `--sdm apptainer` would need the image before the DAG builds it.
"""

from pathlib import Path

from coolsampler.spec import numerics
from coolsampler.spec.inputs import InputError
from coolsampler.spec.study import KEY_WILDCARD_RE, StudyError, study_from_dict
from coolsampler.spec.yaml_file import load_yaml
from coolsampler.train.overrides import check_extra_overrides
from coolsampler.train.platform import study_platform
from coolsampler.spec.layout import SMOKE_STUDY

# The study: --configfile names one; with none, the smoke study. Validated before any job exists.
# (--config key=value alone keeps the smoke study and overrides its keys)
# Snakemake has read each --configfile already, keeping the last of a duplicated key (a second runs:
# block drops the first); each is read again through the one safe reader, which refuses that.
try:
    for _configfile in workflow.configfiles:
        load_yaml(_configfile, mapping=True, what="study file")
    if "name" not in config and "runs" not in config:
        for k, v in load_yaml(SMOKE_STUDY, mapping=True, what="study file").items():
            config.setdefault(k, v)
except InputError as err:
    raise WorkflowError(f"invalid study config: {err}") from None
# analysis_only=true, a switch of this invocation and not of the study: draw from the runs that exist,
# never train (workflow/rules/common.smk; `coolsampler figures RESULTS_DIR` sets it)
ANALYSIS_ONLY = str(config.pop("analysis_only", False)).lower() in ("true", "1", "yes")
try:
    STUDY = study_from_dict(
        config,
        origin=config.get("name", "study"),
        check_overrides=check_extra_overrides,
    )
except StudyError as err:
    raise WorkflowError(f"invalid study config: {err}") from None
R = str(STUDY.results)
PLATFORM = study_platform(config).name


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"


wildcard_constraints:
    root=ROOT_RE,
    key=KEY_WILDCARD_RE,
    target=f"{FIGURE_RE}|{TABLE_RE}",


include: "workflow/rules/build.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/toy.smk"
include: "workflow/rules/world.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/analysis.smk"
include: "workflow/rules/claims.smk"


rule all:
    default_target: True
    input:
        all_targets,
