# Helpers shared by the rules: run lookup by key, inputs of a run, outputs of the study.
from coolsampler.settings import MODELS, TASKS
from coolsampler.study import parse_key


def run_of(wildcards):
    """The study's run for a {key} wildcard; a key the study does not list is an error."""
    runs = STUDY.by_key()
    if wildcards.key not in runs:
        raise WorkflowError(f"run {wildcards.key} is not in study {STUDY.name}")
    return runs[wildcards.key]


def run_dir(run):
    return f"{R}/runs/{run.key}"


def model_input(run):
    """Local model directory (generated toy model) or nothing (a hub id, fetched by verl)."""
    if MODELS[run.model].source == "generated":
        return f"{S}/models/{run.model}/model.safetensors"
    return []


def model_path(run):
    src = MODELS[run.model].source
    return f"{S}/models/{run.model}" if src == "generated" else src


def data_files(run):
    task = TASKS[run.task]
    return {
        "train": f"{S}/data/{run.task}/{task.train}.parquet",
        "val": f"{S}/data/{run.task}/{task.val}.parquet",
    }


def study_targets():
    """Every figure and table the study defines."""
    out = []
    for target in STUDY.figures:
        if target.startswith("fig"):
            out += [f"{R}/{target}.pdf", f"{R}/{target}.png"]
        else:
            out += [f"{R}/{target}.csv", f"{R}/{target}.tex", f"{R}/{target}.md"]
    return out
