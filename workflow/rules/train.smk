# One job per run: rule train runs patched verl for the run's key; rule parse makes its metrics table.
# Resources: the paper used 4 GPUs per run (gpu profile). On CPU two runs share the 2 cores: each
# spends much of a step waiting on its own processes, so two at once finish ~1.4x sooner than in turn.


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
    threads: 1 if PLATFORM == "cpu" else 32
    resources:
        gpu=0 if PLATFORM == "cpu" else 4,
        runtime=lambda wc: 120 if PLATFORM == "cpu" else 16 * 60,
        mem_mb=8000 if PLATFORM == "cpu" else 256000,
        cpus_per_task=1 if PLATFORM == "cpu" else 32,
    params:
        run=run_of,
        model=lambda wc: model_path(run_of(wc)),
        platform=PLATFORM,
        recipe=STUDY.recipe,
        study=STUDY.name,
        # below the SLURM runtime (960 min): the watchdog, not the scheduler, says why a run stopped
        timeout_min=config.get("timeout_min", 120 if PLATFORM == "cpu" else 15 * 60),
        stall_min=config.get("stall_min", 10 if PLATFORM == "cpu" else 60),
        stall_retries=config.get("stall_retries", 1),
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
