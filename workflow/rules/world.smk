# Generated chain worlds (a study's `worlds:`; coolsampler.spec.world holds the knobs, coolsampler.world.chain
# makes them): D/<name>-<key>/{train,val}.parquet and S/models/<name>-<key>/, the key over the knobs and the
# generator's code, so a changed knob builds a new world beside the old one.


rule world_data:
    output:
        train=LAYOUT.task_data("{world}", "train"),
        val=LAYOUT.task_data("{world}", "val"),
    log:
        f"{DATA}/logs/world_data/{{world}}.log",
    wildcard_constraints:
        world=WORLD_RE,
    params:
        knobs=lambda wc: world_of(wc).knobs(),
        name=lambda wc: world_of(wc).name,
    script:
        "../scripts/world_data.py"


rule world_model:
    output:
        f"{LAYOUT.model_dir('{world}')}/model.safetensors",
    log:
        f"{LAYOUT.shared}/models/logs/world_model/{{world}}.log",
    benchmark:
        f"{LAYOUT.shared}/models/logs/world_model/{{world}}.benchmark.tsv"
    wildcard_constraints:
        world=WORLD_RE,
    threads: 1
    params:
        knobs=lambda wc: world_of(wc).knobs(),
        name=lambda wc: world_of(wc).name,
        out=lambda wildcards, output: Path(output[0]).parent,
        numerics=numerics.PINNED_ENV,  # another kernel path is another model: trains again
    script:
        "../scripts/world_model.py"


# The study's world screen (SCREEN, `screen:`; coolsampler.spec.world.Screen): each candidate's warm-started
# model probed with no RL step (R/screen/<world>-<key>.json), then judged by the study's bounds
# (R/world_screen.md|tsv|png). A checkpoint: a study whose runs train in a screened world trains them
# only if the screen chose that world (screen_gate, rules/common.smk); otherwise `snakemake` stops after
# the screen.


rule world_probe:
    input:
        f"{LAYOUT.model_dir('{world}')}/model.safetensors",
    output:
        f"{R}/screen/{{world}}.json",
    log:
        f"{R}/logs/world_probe/{{world}}.log",
    wildcard_constraints:
        world=WORLD_RE,
    threads: 1
    params:
        knobs=lambda wc: world_of(wc).knobs(),
        name=lambda wc: world_of(wc).name,
        Tb=SCREEN.Tb if SCREEN else 0.8,
        prompts=SCREEN.prompts if SCREEN else 512,
        numerics=numerics.PINNED_ENV,
    script:
        "../scripts/world_probe.py"


checkpoint world_screen:
    input:
        unpack(screen_probes),
    output:
        md=f"{R}/world_screen.md",
        tsv=f"{R}/world_screen.tsv",
        png=f"{R}/world_screen.png",
        pdf=f"{R}/world_screen.pdf",
    log:
        f"{R}/logs/world_screen.log",
    params:
        # a plain mapping, not the Screen: Snakemake compares only representable params, so changed
        # bounds rerun the screen
        screen=asdict(SCREEN) if SCREEN else None,
        study=STUDY.name,
    script:
        "../scripts/world_screen.py"


# A study's drift probe (DRIFT, `drift_probe:`; coolsampler.spec.drift): for each run whose sampler is
# still its initial model at the probed step, KL(q_Tb || pi) per answer token between that model at the
# run's Tb and the learner of the run's checkpoint of that step, less the tempering offset, each term
# credited to its candidate token's class and bin of q (R/runs/<key>/drift_probe.json). Read after the
# run: its recipe keeps that checkpoint.


rule drift_probe:
    input:
        metrics=run_pattern("metrics.parquet"),
        model=lambda wc: f"{LAYOUT.model_dir(run_of(wc).model)}/model.safetensors",
    output:
        run_pattern("drift_probe.json"),
    log:
        run_pattern("drift_probe.log"),
    threads: 1
    params:
        knobs=lambda wc: WORLDS[run_of(wc).model].knobs(),
        name=lambda wc: WORLDS[run_of(wc).model].name,
        Tb=lambda wc: run_of(wc).Tb.initial,
        step=DRIFT.step if DRIFT else 0,
        prompts=DRIFT.prompts if DRIFT else 0,
        actor=lambda wc, input: str(
            drift.actor_dir(Path(input.metrics).parent, DRIFT.step)
        ),
        numerics=numerics.PINNED_ENV,
    script:
        "../scripts/drift_probe.py"


# The study's drift probes as one table (coolsampler.results.drift_probe): per run, the KL, the offset
# and the drift by candidate class and by bin of q, the capped weights by sampled class, then the mean of
# each sampler temperature (R/drift_probe.md|tsv).


rule drift_table:
    input:
        probes=drift_probes,
        code=DRIFT_TABLE_CODE,
    output:
        md=f"{R}/drift_probe.md",
        tsv=f"{R}/drift_probe.tsv",
    log:
        f"{R}/logs/drift_table.log",
    params:
        runs=lambda wc: [{"key": r.key, "seed": r.seed} for r in drift_probed()],
    script:
        "../scripts/drift_table.py"
