import pandas as pd

from coolsampler.results.world_screen import chosen_world


# Generated chain worlds (a study's `worlds:`; coolsampler.spec.world holds the knobs, coolsampler.testkit.chain
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
# only if the screen chose that world (screen_gate); otherwise `snakemake` stops after the screen.


def screen_targets():
    return [f"{R}/world_screen.md", f"{R}/world_screen.png"] if SCREEN else []


def screen_probes(wildcards=None):
    return {
        name: f"{R}/screen/{WORLDS_BY_NAME[name].ident}.json" for name in SCREEN.probed
    }


def screen_choice():
    """The ident of the world the screen chose, or None (the checkpoint must have run)."""
    table = pd.read_csv(checkpoints.world_screen.get().output.tsv, sep="\t")
    name = chosen_world(table)
    return WORLDS_BY_NAME[name].ident if name else None


def screened_runs():
    """The study's runs that train in one of its screened worlds."""
    screened = {WORLDS_BY_NAME[n].ident for n in SCREEN.probed} if SCREEN else set()
    return [r for r in STUDY.runs if r.model in screened]


def screen_allows_training():
    """Whether every run in a screened world trains in the one the screen chose."""
    runs = screened_runs()
    return not runs or all(r.model == screen_choice() for r in runs)


def screen_gate(wildcards):
    """A train job's dependence on the screen: a run in a screened world waits for the screen and
    trains only in the world it chose; any other run does not depend on it."""
    if wildcards.root != R or run_of(wildcards).key not in {r.key for r in screened_runs()}:
        return []
    chosen = screen_choice()
    run = run_of(wildcards)
    if run.model != chosen:
        raise WorkflowError(
            f"run {run.key} trains in world {run.model}, which the study's screen did not choose"
            f" (chosen: {chosen or 'none'}; {R}/world_screen.md): set defaults.model/task to the chosen"
            " world, or, where none was chosen, the study stops after its screen"
        )
    return [checkpoints.world_screen.get().output.tsv]


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
        screen=SCREEN,
        study=STUDY.name,
    script:
        "../scripts/world_screen.py"
