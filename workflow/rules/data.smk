# Data preparation: verl-format parquet + manifest per task and split.
# Needs the Hugging Face Hub (or a filled data_cache), so the rules run on the submitting host.
# Config: data_dir (outputs), data_cache (HF datasets cache), data_revisions ({hf dataset id: commit}).

from coolsampler.train.paths import Layout

# the study's data_dir (default results/data): coolsampler.train.paths
DATA = Layout.from_config(config, "results").data
DATA_CACHE = config.get("data_cache", ".cache/datasets")
DATA_REVISIONS = config.get("data_revisions", {})


rule prepare_gsm8k:
    output:
        parquet=f"{DATA}/gsm8k/{{split}}.parquet",
        manifest=f"{DATA}/gsm8k/{{split}}.manifest.json",
    log:
        f"{DATA}/logs/prepare_gsm8k/{{split}}.log",
    wildcard_constraints:
        split="train|test",
    localrule: True
    params:
        task="gsm8k",
        cache=DATA_CACHE,
        revisions=DATA_REVISIONS,
    script:
        "../scripts/prepare_data.py"


rule prepare_math:
    output:
        parquet=f"{DATA}/math/{{split}}.parquet",
        manifest=f"{DATA}/math/{{split}}.manifest.json",
    log:
        f"{DATA}/logs/prepare_math/{{split}}.log",
    wildcard_constraints:
        split="train_l3-5|math500",
    localrule: True
    params:
        task="math",
        cache=DATA_CACHE,
        revisions=DATA_REVISIONS,
    script:
        "../scripts/prepare_data.py"


rule prepare_data:
    input:
        expand(f"{DATA}/gsm8k/{{split}}.parquet", split=["train", "test"]),
        expand(f"{DATA}/math/{{split}}.parquet", split=["train_l3-5", "math500"]),
    localrule: True


# A study's own tasks from the Hub (tasks: {name: {hub: {dataset, revision, train, val}}}): each split
# written as verl-format parquet, like the paper's data, on the submitting host.
# (STUDY is the Snakefile's; this file also works alone, for the paper's data)
_STUDY = globals().get("STUDY")
HUB_TASKS = {
    n: dict(t.hub) for n, t in (_STUDY.tasks if _STUDY else {}).items() if t.hub
}
MODELS_DIR = Layout.from_config(config, "results").models


rule prepare_hub_task:
    output:
        parquet=f"{DATA}/{{task}}/{{split}}.parquet",
        manifest=f"{DATA}/{{task}}/{{split}}.manifest.json",
    log:
        f"{DATA}/logs/prepare_hub_task/{{task}}/{{split}}.log",
    wildcard_constraints:
        task="|".join(HUB_TASKS) or "(?!)",
        split="train|val",
    localrule: True
    params:
        hub=lambda wc: HUB_TASKS[wc.task],
        cache=DATA_CACHE,
    script:
        "../scripts/prepare_hub_task.py"


# Model weights at a pinned revision (a study's models: {name: {hf_id, revision}}), downloaded on the
# submitting host into the models dir (coolsampler.train.prefetch), so that compute nodes need no network:
# runs load them from there with HF_HUB_OFFLINE=1. `snakemake prefetch` fetches every model and hub task
# of the study; rule train depends on each run's own.
rule prefetch_model:
    output:
        f"{MODELS_DIR}/hub/{{org}}/{{name}}/{{revision}}/prefetch.json",
    log:
        f"{MODELS_DIR}/logs/prefetch/{{org}}/{{name}}/{{revision}}.log",
    wildcard_constraints:
        org=r"[A-Za-z0-9][A-Za-z0-9._-]*",
        name=r"[A-Za-z0-9][A-Za-z0-9._-]*",
        revision=r"[A-Za-z0-9._-]+",
    localrule: True
    params:
        hf_id=lambda wc: f"{wc.org}/{wc.name}",
        revision=lambda wc: wc.revision,
    script:
        "../scripts/prefetch_model.py"


rule prefetch:
    input:
        lambda wc: prefetch_inputs(wc),  # common.smk (this file also works alone, without it)
    localrule: True
