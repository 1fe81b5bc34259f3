# Helpers shared by the rules: which study a result root belongs to, a run's inputs, the study's
# outputs. The path scheme itself is coolsampler.train.paths; the platform (environment, overrides,
# resources, container use) is coolsampler.train.platform; the rehearsal is coolsampler.train.rehearsal.
import re
import subprocess
import sys
from dataclasses import asdict, dataclass

import pandas as pd

from coolsampler.spec.layout import REHEARSAL_MODEL, run_pattern
from coolsampler.train.paths import Layout, run_paths
from coolsampler.train.platform import Platform, get_platform
from coolsampler.train.rehearsal import (
    TWO_RANK_DIR,
    code_path_label,
    rehearsal_study,
    two_rank_study,
)
from coolsampler.spec.study import Study
from coolsampler.spec import drift
from coolsampler.spec.runlog import trained
from coolsampler.spec.world import study_screen, study_worlds
from coolsampler.results.world_screen import chosen_world
from coolsampler.spec.targets import TARGETS, PanelSpec, panel_filters

LAYOUT = Layout.from_config(config, R)


@dataclass(frozen=True)
class Root:
    """One result root of this DAG: the study (R) or its rehearsal (R/rehearsal)."""

    study: Study
    platform: Platform
    layout: Layout


ROOTS = {R: Root(STUDY, get_platform(PLATFORM), LAYOUT)}
REHEARSAL_ROOT = TWO_RANK_ROOT = None
if PLATFORM != "cpu":
    # The study's rehearsal (coolsampler.train.rehearsal): every arm, a few steps, on the cpu platform;
    # and its two-rank shape: the fewest arms, on the cpu-2rank platform.
    _RL = LAYOUT.rehearsal_layout()
    REHEARSAL_ROOT = _RL.results
    ROOTS[_RL.results] = Root(
        rehearsal_study(STUDY, _RL.results), get_platform("cpu"), _RL
    )
    _TL = LAYOUT.rehearsal_layout(TWO_RANK_DIR)
    TWO_RANK_ROOT = _TL.results
    ROOTS[_TL.results] = Root(
        two_rank_study(STUDY, _TL.results), get_platform("cpu-2rank"), _TL
    )
ROOT_RE = "|".join(re.escape(r) for r in ROOTS)

# The study's generated worlds by the name its runs carry, <name>-<key> (rules world_data, world_model).
WORLDS_BY_NAME = study_worlds(STUDY.raw, STUDY.name)
WORLDS = {w.ident: w for w in WORLDS_BY_NAME.values()}
WORLD_RE = "|".join(re.escape(k) for k in WORLDS) or "(?!)"
# Its world screen (`screen:`), or None (rules world_probe, world_screen).
SCREEN = study_screen(STUDY.raw, STUDY.name)
# Its drift probe (`drift_probe:`: which runs, at which checkpoint), or None; read by the drift_probe rule.
DRIFT = drift.study_drift_probe(STUDY.raw, STUDY.runs, STUDY.name)


# ---- the world screen (rules/world.smk): what trains waits for it ----------------------------


def screen_targets():
    return [f"{R}/world_screen.md", f"{R}/world_screen.png"] if SCREEN else []


def drift_probed():
    """The runs the study's drift probe reads (none without the block)."""
    return DRIFT.probed(STUDY.runs) if DRIFT else []


def drift_probes(wildcards=None):
    """Their drift probes, in the order of drift_probed (rule drift_table)."""
    return [LAYOUT.run_file(r.key, drift.PROBE_FILE) for r in drift_probed()]


def drift_targets():
    """The study's drift table, which reads every drift probe (none without the block)."""
    return [f"{R}/drift_probe.md"] if DRIFT else []


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
    if wildcards.root != R or run_of(wildcards).key not in {
        r.key for r in screened_runs()
    }:
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


def all_targets(wildcards):
    """Everything the study defines; a study whose screen chose none of its worlds stops after the
    screen (rules/world.smk), with its table and figure."""
    if not screen_allows_training():
        return screen_targets()
    return [
        *study_targets(),
        *run_figure_targets("curves.png"),
        *run_figure_targets("diagnostics.png"),
        *claims_targets(),
        *leads_targets(),
        *screen_targets(),
        *drift_targets(),
    ]


def world_of(wildcards):
    return WORLDS[wildcards.world]


def root_of(wildcards):
    return ROOTS[wildcards.root]


def run_of(wildcards):
    """The run for a {root}/{key}; a key the study does not list is an error."""
    root = root_of(wildcards)
    runs = root.study.by_key()
    if wildcards.key not in runs:
        raise WorkflowError(f"run {wildcards.key} is not in study {root.study.name}")
    return runs[wildcards.key]


def claims_targets():
    """The claims pages of the report (rule claims_html), by default for a study of the cpu platform,
    whose claims wait for its runs (workflow/rules/claims.smk); a gpu study's are built on request.
    """
    if PLATFORM != "cpu" and not ANALYSIS_ONLY:
        return []
    return [f"{R}/{name}.html" for name in ("claims", "staleness_budget")]


# the target wildcard of rules figure and table: the registry's names of each kind
FIGURE_RE = "|".join(
    re.escape(t) for t, spec in TARGETS.items() if spec.kind == "figure"
)
TABLE_RE = "|".join(re.escape(t) for t, spec in TARGETS.items() if spec.kind == "table")


def study_targets(root=R):
    """Every figure and table a root's study defines."""
    x = ROOTS[root]
    out = []
    for target in x.study.figures:
        out += [
            x.layout.target(target, ext.lstrip("."))
            for ext in TARGETS[target].suffixes
            if ext != ".html"
        ]
    return out


# ---- patched verl wheel (rule verl_wheel) --------------------------------------------------
# Editing a patch changes the wheel's name (its local version holds the patch hash), and with it every
# training job that depends on the wheel.
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
VERL_WHEEL = f"{LAYOUT.build}/verl-{VERL_LOCAL_VERSION}-py3-none-any.whl"


# ---- training image (rule image) ------------------------------------------------------------
# The training image (containers/Dockerfile or containers/coolsampler.def), built from the
# patched wheel and the package, and its digest in results/build/image.digest. Config:
#     container: {engine: docker|apptainer|none, image: <docker tag | .sif path>}
# A platform that uses the container (gpu) with an engine trains every run in the image (rule train)
# and records this digest in its run.yaml; the cpu platform (smoke study, rehearsal) never uses it. A
# local rule: building needs the network and, for Apptainer, usually a login node that allows it.
from coolsampler.train.container import ContainerError, ContainerSpec, image_sources
from coolsampler.train.rerun import digest_of, file_digests, write_digests

try:
    CONTAINER = ContainerSpec.from_config(config)
except ContainerError as err:
    raise WorkflowError(f"invalid study config: {err}") from None
IMAGE_DIGEST = f"{LAYOUT.build}/image.digest"
# What the image is built from, derived (coolsampler.train.container.image_sources): the definition for
# the engine, install.sh, check_image.py, the lock, pyproject.toml, and every package file that the
# code verl runs (coolsampler.worker.*, coolsampler.worker.rewards) reaches through its imports. Only the
# training side: editing the analysis code must not rebuild the image and with it retrain every run.
_IMAGE_FILES = image_sources(
    workflow.basedir, CONTAINER.engine if CONTAINER.enabled else None
)
IMAGE_SOURCES = [str(Path(workflow.basedir, f)) for f in _IMAGE_FILES]
# Their content, in the name of a file rule image depends on (content-addressed, coolsampler.train.rerun).
IMAGE_INPUT_DIGESTS = {
    "verl": VERL_LOCAL_VERSION,
    **file_digests(workflow.basedir, _IMAGE_FILES),
}
IMAGE_INPUTS = f"{LAYOUT.build}/image-inputs.{digest_of(IMAGE_INPUT_DIGESTS)}.json"


def in_container(platform):
    return CONTAINER.enabled and platform.uses_container


def container_params(wildcards):
    """What train_job needs to build the container prefix ({} = run verl directly)."""
    return CONTAINER.as_dict() if in_container(root_of(wildcards).platform) else {}


# ---- when a run trains again (coolsampler.train.rerun) ---------------------------------------------
# By content, never by file times or .snakemake metadata, so that results survive a clone, a copy
# and a branch switch: a run's settings are its key; the wheel's name carries the patch hash; the
# training key (training-side code, the study's recipe, the platform) is recorded in run.yaml and a
# run recording another one gets the inputs key-changed-<key>.json (written now) and
# set-aside-<key>.json (made by the supersede rule). Every other input of training is ancient(),
# present is enough. Snakemake's script-mtime trigger is off for the same reason (profiles/default).
from coolsampler.train.rerun import (
    KEY_RE,
    KeyRecord,
    code_files,
    key_inputs,
    key_markers,
    supersede_job,
    training_key,
)

# the training-side code: what the image is built from, for every engine (coolsampler.train.container), so
# that moving a study between Docker and Apptainer changes no key
TRAIN_CODE = file_digests(workflow.basedir, code_files(workflow.basedir))
TRAINING_KEYS = {
    r: training_key(
        verl=VERL_LOCAL_VERSION,
        recipe=x.study.recipe,
        platform=x.platform.name,
        code=TRAIN_CODE,
        numerics=x.platform.numerics(),
    )
    for r, x in ROOTS.items()
}

# ANALYSIS_ONLY (Snakefile, --config analysis_only=true): draw every figure, table and report from
# the run directories that exist. The train rule is not defined, so no training job can be planned;
# the runs without train.jsonl and run.yaml are listed here and drawn as missing.


if ANALYSIS_ONLY:
    for _r, _x in ROOTS.items():
        _missing = [
            r.key for r in _x.study.runs if not trained(_x.layout.run_dir(r.key))
        ]
        if _missing:
            print(
                f"analysis_only: {len(_missing)} of {len(_x.study.runs)} runs of study "
                f"{_x.study.name} have no train.jsonl + run.yaml under {_x.layout.runs} (not trained, "
                "drawn as missing):\n  " + "\n  ".join(_missing),
                file=sys.stderr,
            )


# ---- training (rules train, parse) ----------------------------------------------------------
def train_inputs(wildcards):
    root, run = root_of(wildcards), run_of(wildcards)
    inputs = {
        "wheel": ancient(VERL_WHEEL),
        **{k: ancient(v) for k, v in root.layout.data_files(run.task_info).items()},
    }
    if in_container(root.platform):
        inputs["image"] = ancient(IMAGE_DIGEST)
    weights = root.layout.model_weights(run.model_info)
    if weights:
        inputs["model"] = ancient(weights)
    markers, changed = key_inputs(
        root.layout.run_dir(run.key), TRAINING_KEYS[wildcards.root]["key"]
    )
    for name, path in markers.items():
        inputs[name] = path if changed else ancient(path)
    gate = screen_gate(
        wildcards
    )  # a run in a screened world trains only in the one chosen (rules/world.smk)
    if gate:
        inputs["screen"] = gate
    return inputs


def training_key_of(wildcards):
    """The root's training key, for run.yaml (KeyRecord: not recorded as a Snakemake param)."""
    return KeyRecord(TRAINING_KEYS[wildcards.root])


def train_paths(wildcards):
    """The absolute paths verl gets (coolsampler.train.paths.run_paths)."""
    return run_paths(root_of(wildcards).layout, run_of(wildcards))


def run_gpus(wildcards):
    """GPUs one run holds: its model's (derived from its size or set in the study) on a GPU platform."""
    gpus = root_of(wildcards).platform.gpus_per_run
    return run_of(wildcards).model_info.gpus_per_run if gpus else 0


def platform_attr(name):
    """A resource of the root's platform, as a Snakemake callable (coolsampler.train.platform)."""
    return lambda wildcards: getattr(root_of(wildcards).platform, name)


def run_runtime(wildcards):
    """The job's time limit: the study's runtime_min, else the platform's (a profile's set-resources wins)."""
    return config.get("runtime_min") or root_of(wildcards).platform.runtime_min


def train_limit(name):
    """The watchdog's limits: the study config's timeout_min/stall_min, else the platform's under the job's
    own time limit (a profile may lower it to its partition's: Platform.with_runtime keeps the watchdog
    below it)."""
    return lambda wildcards, resources: config.get(
        name,
        getattr(
            root_of(wildcards).platform.with_runtime(
                getattr(resources, "runtime", None)
            ),
            name,
        ),
    )


# ---- the code each analysis job runs (rules parse, figure, table, run_curves, claims) ----------
# Derived from the imports of the job's rule script (coolsampler.train.code.script_code), plus for a
# figure or table the module its registry entry names: editing a module reruns exactly the jobs whose
# script reaches it (a label change redraws the figures), and nothing else.
from coolsampler.train.code import script_code


def _code(script, roots=()):
    # this checkout's package files, not those of whichever copy Python imported
    return [
        str(f)
        for f in script_code(
            f"{workflow.basedir}/workflow/scripts/{script}",
            roots,
            package_dir=f"{workflow.basedir}/workflow/coolsampler",
        )
    ]


PARSE_CODE = _code("parse.py")
RUN_CURVES_CODE = _code("run_curves.py")
RUN_DIAGNOSTICS_CODE = _code("run_diagnostics.py")
LEADS_CODE = _code("diagnostic_leads.py")
DRIFT_TABLE_CODE = _code("drift_table.py")
CLAIMS_CODE = _code("claims.py") + [
    f"{workflow.basedir}/workflow/coolsampler/spec/schemas/claims.schema.yaml"
]
TARGET_CODE = {
    name: _code(f"{t.kind}.py", [t.fn.partition(":")[0]]) for name, t in TARGETS.items()
}


def target_runs(wildcards):
    """Panel -> runs of the study that the target shows (selected by settings)."""
    study = root_of(wildcards).study
    if wildcards.target not in study.figures:
        raise WorkflowError(
            f"study {study.name} defines no {wildcards.target} (add it under figures:)"
        )
    return {
        panel: study.select(filt)
        for panel, filt in panel_filters(study.figures[wildcards.target]).items()
    }


def target_inputs(wildcards):
    layout = root_of(wildcards).layout
    keys = sorted({r.key for runs in target_runs(wildcards).values() for r in runs})
    # analysis_only: the runs that exist; the others are drawn as missing (target_panels)
    if ANALYSIS_ONLY:
        keys = [k for k in keys if trained(layout.run_dir(k))]
    out = {
        "metrics": [layout.run_file(k, "metrics.parquet") for k in keys],
        "status": [layout.run_file(k, "status.json") for k in keys],
        "code": TARGET_CODE[wildcards.target],
    }
    # a study's world screen is drawn beside its Figure 1 (rule world_screen)
    if SCREEN and wildcards.target == "fig1" and wildcards.root == R:
        out["screen"] = f"{R}/world_screen.tsv"
    return out


def target_panels(wildcards):
    layout = root_of(wildcards).layout
    return PanelSpec(
        {
            panel: [
                {
                    "settings": r.settings(),
                    "metrics": layout.run_file(r.key, "metrics.parquet"),
                    "status": layout.run_file(r.key, "status.json"),
                }
                for r in runs
            ]
            for panel, runs in target_runs(wildcards).items()
        }
    )


# ---- the report (rule run_curves, captions in workflow/report) ----------------------------------
def run_figure_targets(name):
    """Every run's figure ``name`` for the report's Runs category (curves.png, diagnostics.png)."""
    keys = [r.key for r in STUDY.runs]
    # analysis_only: a run that is not there has nothing to draw (it is listed as missing)
    if ANALYSIS_ONLY:
        keys = [k for k in keys if trained(LAYOUT.run_dir(k))]
    return [LAYOUT.run_file(k, name) for k in keys]


def leads_targets():
    """The study's lead table for the report (rule diagnostic_leads), by default for a study of the
    cpu platform or one drawn from existing runs, as the claims (claims_targets)."""
    if PLATFORM != "cpu" and not ANALYSIS_ONLY:
        return []
    return [f"{R}/diagnostic_leads.html"]


def leads_inputs(wildcards):
    """The metrics tables the lead table reads: on the cpu platform every run's (the study is cheap to
    train, so it waits for them); drawing from existing runs, those of the trained runs; otherwise the
    tables that exist now, so that building it never starts a GPU run (as rule claims).
    """
    keys = [r.key for r in STUDY.runs]
    if ANALYSIS_ONLY:
        keys = [k for k in keys if trained(LAYOUT.run_dir(k))]
    elif PLATFORM != "cpu":
        keys = [k for k in keys if Path(LAYOUT.run_file(k, "metrics.parquet")).exists()]
    return {
        "metrics": [LAYOUT.run_file(k, "metrics.parquet") for k in keys],
        "code": LEADS_CODE,
    }


def target_selection(wc):
    """Panel -> the study's settings filter (printed under the figure)."""
    return panel_filters(root_of(wc).study.figures.get(wc.target, {}))


# ---- the rehearsal (rule rehearsal) ---------------------------------------------------------
def rehearsal_inputs(wildcards):
    if REHEARSAL_ROOT is None:
        raise WorkflowError(
            f"study {STUDY.name} runs on the {PLATFORM} platform: it is its own rehearsal (no `rehearsal` target)"
        )
    x, two = ROOTS[REHEARSAL_ROOT], ROOTS[TWO_RANK_ROOT]
    return {
        "status": [
            y.layout.run_file(r.key, "status.json")
            for y in (x, two)
            for r in y.study.runs
        ],
        "targets": study_targets(REHEARSAL_ROOT),
        "claims": f"{REHEARSAL_ROOT}/claims.md",
    }


def rehearsal_arms(wildcards):
    return [
        {
            "key": r.key,
            "arm": code_path_label(r),
            "dir": x.layout.run_dir(r.key),
            "shape": x.platform.name,
        }
        for x in (ROOTS[REHEARSAL_ROOT], ROOTS[TWO_RANK_ROOT])
        for r in x.study.runs
    ]


# ---- prefetch (rule prefetch, data.smk) -----------------------------------------------------
def prefetch_inputs(wildcards):
    """Every pinned model's manifest (rule prefetch_model) and every hub task's parquet of the study."""
    models = {LAYOUT.model_weights(r.model_info) for r in STUDY.runs}
    tasks = [
        LAYOUT.data_files(STUDY.tasks[t])[s]
        for t in HUB_TASKS
        for s in ("train", "val")
    ]
    return sorted(m for m in models if m and m.endswith("prefetch.json")) + tasks
