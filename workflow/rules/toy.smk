# The smoke study's world (coolsampler.toy): synthetic addition data and a tiny warm-started Qwen2.


rule toy_data:
    output:
        train=f"{S}/data/arith/train.parquet",
        val=f"{S}/data/arith/test.parquet",
    log:
        f"{S}/data/logs/toy_data.log",
    params:
        seed=0,
    script:
        "../scripts/toy_data.py"


rule toy_model:
    output:
        f"{S}/models/toy-qwen2/model.safetensors",
    log:
        f"{S}/models/logs/toy_model.log",
    benchmark:
        f"{S}/models/logs/toy_model.benchmark.tsv"
    threads: 2
    params:
        out=lambda wildcards, output: Path(output[0]).parent,
        target_acc=0.5,
        max_steps=1500,
    script:
        "../scripts/toy_model.py"
