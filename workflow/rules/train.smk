# One job per run: rule train runs patched verl for the run's key; rule parse makes its metrics table.
# Resources: the paper used 4 GPUs per run (gpu profile); the cpu profile needs both cores.


rule train:
    input:
        unpack(train_inputs),
    output:
        jsonl=f"{R}/runs/{{key}}/train.jsonl",
        settings=f"{R}/runs/{{key}}/run.yaml",
    log:
        f"{R}/runs/{{key}}/train.log",
    benchmark:
        f"{R}/runs/{{key}}/train.benchmark.tsv"
    threads: 2 if PLATFORM == "cpu" else 32
    resources:
        gpu=0 if PLATFORM == "cpu" else 4,
        runtime=lambda wc: 120 if PLATFORM == "cpu" else 16 * 60,
        mem_mb=12000 if PLATFORM == "cpu" else 256000,
        cpus_per_task=2 if PLATFORM == "cpu" else 32,
    params:
        run=run_of,
        model=lambda wc: model_path(run_of(wc)),
        platform=PLATFORM,
        recipe=STUDY.recipe,
        study=STUDY.name,
        timeout_min=config.get("timeout_min", 120 if PLATFORM == "cpu" else 24 * 60),
        stall_min=config.get("stall_min", 10 if PLATFORM == "cpu" else 60),
        # issue 6: {engine, image} to run verl in the image, {} to run it directly
        container=container_params(),
    script:
        "../scripts/train.py"


rule parse:
    input:
        jsonl=f"{R}/runs/{{key}}/train.jsonl",
    output:
        metrics=f"{R}/runs/{{key}}/metrics.parquet",
        status=f"{R}/runs/{{key}}/status.json",
    log:
        f"{R}/runs/{{key}}/parse.log",
    localrule: True
    params:
        run=run_of,
    script:
        "../scripts/parse.py"
