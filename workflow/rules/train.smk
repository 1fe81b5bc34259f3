# One job per run: rule train runs patched verl for the run's key; rule parse makes its metrics table.
# {root} is the study's results (R) or its rehearsal's (R/rehearsal): common.smk ROOTS. Resources and
# the watchdog's limits come from the root's platform (coolsampler.train.platform): the paper used 4 GPUs
# per run; on CPU two runs share the 2 cores (each waits on its own processes much of a step).


# Training: every input is ancient() and content-addressed (common.smk, coolsampler.train.rerun): a run trains
# again only when its patches, training-side code, recipe or platform change, never because of file
# times or missing .snakemake metadata. Under analysis_only=true rule train does not exist.
if not ANALYSIS_ONLY:

    rule train:
        input:
            unpack(train_inputs),
        output:
            jsonl=run_pattern("train.jsonl"),
            settings=run_pattern("run.yaml"),
        log:
            run_pattern("train.log"),
        benchmark:
            run_pattern("train.benchmark.tsv")
        threads: platform_attr("threads")
        resources:
            gpu=run_gpus,
            runtime=run_runtime,
            mem_mb=platform_attr("mem_mb"),
            cpus_per_task=platform_attr("threads"),
        params:
            run=run_of,
            paths=train_paths,
            platform=lambda wc: root_of(wc).platform.name,
            recipe=lambda wc: root_of(wc).study.recipe,
            study=lambda wc: root_of(wc).study.name,
            # below the SLURM runtime: the watchdog, not the scheduler, says why a run stopped
            timeout_min=train_limit("timeout_min"),
            stall_min=train_limit("stall_min"),
            stall_retries=config.get("stall_retries", 1),
            # {engine, image} to run verl in the image, {} to run it directly
            container=container_params,
            # what decides whether it trains again, recorded in run.yaml (coolsampler.train.rerun)
            training_key=training_key_of,
        script:
            "../scripts/train.py"


# On SLURM (profiles/slurm): a train job SLURM can never place (e.g. more memory than any node of its
# partition) is reported with SLURM's reason and cancelled instead of waited on (coolsampler.train.slurm).
from coolsampler.train.slurm import SlurmSetupError, watch_pending


onstart:
    try:
        watch_pending(workflow, logger.error)
    except SlurmSetupError as err:
        raise WorkflowError(str(err)) from None


# A run whose run.yaml records another training key: its checkpoints and per-attempt logs (what a
# restarted job resumes from) are set aside under superseded/<old key>/, so it trains from step 0.
rule supersede:
    output:
        key_markers(run_pattern(), "{tkey}")["set_aside"],
    log:
        "{root}/logs/supersede/{key}/{tkey}.log",
    wildcard_constraints:
        tkey=KEY_RE,
    localrule: True
    params:
        record=lambda wc: dict(TRAINING_KEYS[wc.root]),
    run:
        supersede_job(output[0], wildcards.tkey, params.record, log[0])


rule parse:
    input:
        jsonl=run_pattern("train.jsonl"),
        settings=run_pattern("run.yaml"),  # the configured max response length (clip fraction)
        # its code, compared by content where metadata exists (the script-mtime trigger is off)
        code=PARSE_CODE,
    output:
        metrics=run_pattern("metrics.parquet"),
        status=run_pattern("status.json"),
    log:
        run_pattern("parse.log"),
    localrule: True
    params:
        run=run_of,
        # the pipeline's own runs must log every required metric; drawing others' runs (analysis_only,
        # coolsampler figures) reads any verl log, its missing columns NaN and named by the command
        lenient=ANALYSIS_ONLY,
    script:
        "../scripts/parse.py"
