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


# ---- patched verl wheel (rule verl_wheel) --------------------------------------------------
# Editing a patch changes the wheel's name (its local version holds the patch hash), and with it every
# training job that depends on the wheel.
import subprocess
import sys

VERL_LOCAL_VERSION = subprocess.run(
    [
        sys.executable,
        f"{workflow.basedir}/workflow/scripts/build_verl.py",
        "--print-version",
    ],
    check=True,
    capture_output=True,
    text=True,
).stdout.strip()
VERL_WHEEL = f"{S}/build/verl-{VERL_LOCAL_VERSION}-py3-none-any.whl"


# ---- training image (rule image) ------------------------------------------------------------
# Issue 6: the training image (containers/Dockerfile or containers/coolsampler.def), built from the
# patched wheel and the package, and its digest in results/build/image.digest. Config:
#     container: {engine: docker|apptainer|none, image: <docker tag | .sif path>}
# Under the gpu platform with an engine, every training job runs in the image (rule train) and
# records this digest in its run.yaml; the cpu platform (smoke study) never uses it. A local rule:
# building needs the network and, for Apptainer, usually a login node that allows it.
from coolsampler.container import ContainerError, ContainerSpec, image_sources

try:
    CONTAINER = ContainerSpec.from_config(config)
except ContainerError as err:
    raise WorkflowError(f"invalid study config: {err}") from None
IMAGE_DIGEST = f"{S}/build/image.digest"
# What the image is built from, derived (coolsampler.container.image_sources): the definition for
# the engine, install.sh, check_image.py, the lock, pyproject.toml, and every package file that the
# code verl runs (coolsampler.worker.*, coolsampler.rewards) reaches through its imports. Only the
# training side: editing the analysis code must not rebuild the image and with it retrain every run.
IMAGE_SOURCES = [
    str(Path(workflow.basedir, f))
    for f in image_sources(
        workflow.basedir, CONTAINER.engine if CONTAINER.enabled else None
    )
]


def container_inputs():
    """The image digest a training job depends on: gpu platform with an engine only."""
    return {"image": IMAGE_DIGEST} if CONTAINER.enabled and PLATFORM == "gpu" else {}


def container_params():
    """What train_job needs to build the container prefix ({} = run verl directly)."""
    return CONTAINER.as_dict() if CONTAINER.enabled and PLATFORM == "gpu" else {}


# ---- training (rules train, parse) ----------------------------------------------------------
def train_inputs(wildcards):
    run = run_of(wildcards)
    # issue 6: + the image digest when training runs in the container (build.smk: container_inputs)
    inputs = {"wheel": VERL_WHEEL, **data_files(run), **container_inputs()}
    model = model_input(run)
    if model:
        inputs["model"] = model
    return inputs


# ---- figures and tables (rules figure, table) ----------------------------------------------
# Figures and tables: each target depends only on the runs its `figures:` entry selects, and on the
# analysis code (so editing the plotting module reruns the plots, and nothing else).
ANALYSIS_CODE = [
    f"{workflow.basedir}/workflow/coolsampler/{m}.py"
    for m in ("analysis", "plotting", "figures", "tables", "metrics_schema")
]


def target_runs(target):
    """Panel -> runs of the study that the target shows (selected by settings)."""
    if target not in STUDY.figures:
        raise WorkflowError(
            f"study {STUDY.name} defines no {target} (add it under figures:)"
        )
    return {panel: STUDY.select(filt) for panel, filt in STUDY.figures[target].items()}


def target_inputs(wildcards):
    keys = sorted(
        {r.key for runs in target_runs(wildcards.target).values() for r in runs}
    )
    return {
        "metrics": [f"{R}/runs/{k}/metrics.parquet" for k in keys],
        "status": [f"{R}/runs/{k}/status.json" for k in keys],
        "code": ANALYSIS_CODE,
    }


def target_panels(wildcards):
    return {
        panel: [
            {
                "settings": r.settings(),
                "metrics": f"{R}/runs/{r.key}/metrics.parquet",
                "status": f"{R}/runs/{r.key}/status.json",
            }
            for r in runs
        ]
        for panel, runs in target_runs(wildcards.target).items()
    }
