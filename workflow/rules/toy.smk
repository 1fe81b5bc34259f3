# Generated worlds (coolsampler.world.toy): the smoke study's synthetic addition data and tiny warm-started
# Qwen2; the rehearsal's model (the same sums answered in GSM8K's and MATH's formats) and its data in
# each paper task's file layout and data_source. Paths: coolsampler.train.paths.

from coolsampler.world import toy


rule toy_data:
    output:
        train=LAYOUT.task_data("arith", "train"),
        val=LAYOUT.task_data("arith", "test"),
    log:
        f"{DATA}/logs/toy_data.log",
    params:
        seed=0,
    script:
        "../scripts/toy_data.py"


rule toy_model:
    output:
        f"{LAYOUT.model_dir('toy-qwen2')}/model.safetensors",
    log:
        f"{LAYOUT.shared}/models/logs/toy_model.log",
    benchmark:
        f"{LAYOUT.shared}/models/logs/toy_model.benchmark.tsv"
    threads: 1
    params:
        out=lambda wildcards, output: Path(output[0]).parent,
        target_acc=0.5,
        max_steps=1500,
        rehearsal=False,
        numerics=numerics.PINNED_ENV,  # another kernel path is another model: trains again
    script:
        "../scripts/toy_model.py"


rule rehearsal_model:
    output:
        f"{LAYOUT.model_dir(REHEARSAL_MODEL)}/model.safetensors",
    log:
        f"{LAYOUT.shared}/models/logs/rehearsal_model.log",
    benchmark:
        f"{LAYOUT.shared}/models/logs/rehearsal_model.benchmark.tsv"
    threads: 1
    params:
        out=lambda wildcards, output: Path(output[0]).parent,
        # answers in both formats, and right often enough that the saturation controllers act
        # (coolsampler.world.toy.REHEARSAL_TARGET_ACC says why)
        target_acc=toy.REHEARSAL_TARGET_ACC,
        max_steps=toy.REHEARSAL_MAX_STEPS,
        rehearsal=True,
        numerics=numerics.PINNED_ENV,  # another kernel path is another model: trains again
    script:
        "../scripts/toy_model.py"


rule rehearsal_data:
    output:
        f"{DATA}/rehearsal/{{task}}/{{split}}.parquet",
    log:
        f"{DATA}/logs/rehearsal_data/{{task}}/{{split}}.log",
    wildcard_constraints:
        task="gsm8k|math",
    params:
        task=lambda wc: wc.task,
        seed=0,
        cue=lambda wc: toy.REHEARSAL_CUES[wc.task],  # the prompts' format cue (a change rebuilds the data)
    script:
        "../scripts/rehearsal_data.py"
