# Data preparation (issue 7): verl-format parquet + manifest per task and split.
# Needs the Hugging Face Hub (or a filled data_cache), so the rules run on the submitting host.
# Config: data_dir (outputs), data_cache (HF datasets cache), data_revisions ({hf dataset id: commit}).

from coolsampler.paths import Layout

# the study's data_dir (default results/data): coolsampler.paths
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
