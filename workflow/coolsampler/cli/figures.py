"""``coolsampler figures RESULTS_DIR``: every figure, table, each run's curves and staleness diagnostics, the
claims, the lead table and the report from existing runs.

Why a command: results travel (a copied ``results/``, a colleague's run directories), and drawing
them must never start training, whatever their file times or Snakemake metadata say. It runs this
checkout's Snakefile with ``--config analysis_only=true`` (rule ``train`` is then not defined): runs
without ``train.jsonl`` + ``run.yaml`` are listed and drawn as missing. The study is ``--study``,
else the ``config/*.yaml`` whose ``name`` the run directories' ``run.yaml`` record.

Light: it imports neither verl, vLLM nor torch, and neither do the rules it runs.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
from pathlib import Path

import yaml

from coolsampler.spec.inputs import InputError
from coolsampler.spec.layout import RUN_GLOB, RUNS, key_of_file
from coolsampler.spec.shipped import CONFIG
from coolsampler.spec.study import StudyError
from coolsampler.spec.yaml_file import load_yaml
from coolsampler.train.version import REPO  # this package's checkout: its Snakefile draws

# What the light install (``pip install .``) runs: every command but these, which say what they need.
NEEDS_WORKFLOW = "figures"
NEEDS_TRAINING_STACK = ("verl-check", "acceptance")


def workflow_missing(repo: Path | None = None) -> str | None:
    """Why this install cannot draw (None when it can): the figures are the Snakefile's rules, run by
    Snakemake, so ``figures`` needs a checkout of the repository (its Snakefile beside this package) and
    the workflow install; the light install has neither, and would fail with Snakemake's
    "No module named snakemake", then "Snakefile not found"."""
    repo = REPO if repo is None else repo
    lack = []
    if not (repo / "Snakefile").is_file():
        lack.append(f"a checkout of the repository (no Snakefile at {repo})")
    try:
        snakemake = importlib.util.find_spec("snakemake")
    except (ImportError, ValueError):  # a broken or blocked installation: not one that can run the rules
        snakemake = None
    if snakemake is None:
        lack.append("Snakemake (not installed here)")
    if not lack:
        return None
    return (
        f"needs {' and '.join(lack)}: in a clone of the repository, run `bash workflow/tools/setup_env.sh`"
        " (or `pip install -e '.[workflow]'`) and run this command there; the light install (`pip install .`)"
        f" runs every command but {', '.join((NEEDS_WORKFLOW, *NEEDS_TRAINING_STACK))}"
    )


def recorded_studies(results: Path) -> set[str]:
    """The study names the run directories under ``results/runs`` record in their run.yaml."""
    names = set()
    for path in results.glob(f"{RUN_GLOB}/run.yaml"):
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError:
            continue
        if isinstance(data, dict) and data.get("study"):
            names.add(str(data["study"]))
    return names


def study_files(names: set[str], config: Path = CONFIG) -> list[Path]:
    """The study files of ``config`` (default: the shipped studies, ``coolsampler.spec.shipped``) whose
    ``name:`` is one of ``names`` (what run.yaml records)."""
    found = []
    for path in sorted(config.glob("*.yaml")):
        try:
            data = load_yaml(path) or {}
        except InputError:  # not a study this can name: the others are still searched
            continue
        if isinstance(data, dict) and "runs" in data and data.get("name") in names:
            found.append(path)
    return found


def find_study(results: Path, config: Path = CONFIG) -> Path:
    """The study file of ``config`` (default: the shipped studies) that the runs under ``results`` belong to."""
    names = recorded_studies(results)
    if not names:
        raise StudyError(f"{results}: no run.yaml under runs/<model>/<task>/<settings>/; name the study with --study")
    found = study_files(names, config)
    if len(found) != 1:
        which = ", ".join(p.name for p in found) or "none"
        raise StudyError(
            f"{results}: runs of study {', '.join(sorted(names))}; shipped study files with that name: {which};"
            " name one with --study"
        )
    return found[0]


def snakemake_args(results: Path, study: Path, *, cores: int, dry_run: bool) -> list[str]:
    """The Snakemake invocation that draws ``results`` under ``study`` without training."""
    args = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(REPO)]
    args += [f"--configfile={study.resolve()}", "--config", "analysis_only=true", f"results={results.resolve()}"]
    return [*args, "--cores", str(cores), *(["-n"] if dry_run else [])]


def unlogged(results: Path) -> dict[str, set[str]]:
    """Run key -> the metrics columns its ``train.jsonl`` never logged, for every run under ``results``
    that has one (any verl log, read as ``coolsampler parse`` reads it)."""
    from coolsampler.results.metrics import MetricsError, parse_jsonl
    from coolsampler.spec.metrics_schema import absent_columns

    out = {}
    for log in sorted(results.glob(f"{RUN_GLOB}/train.jsonl")):
        try:
            df, _ = parse_jsonl(log, required=("step",))
        except (MetricsError, OSError):
            continue  # rule parse reports it
        out[key_of_file(log)] = set(absent_columns(df))
    return out


def missing_lines(results: Path, targets: list[str]) -> list[str]:
    """Per figure or table of ``targets``: the columns it draws that none of the runs logged, and the verl
    setting that logs each (``Target.reads``, ``metrics_schema.PROVIDED_BY``). Empty when nothing lacks."""
    from coolsampler.spec.metrics_schema import missing_text
    from coolsampler.spec.targets import TARGETS

    absent = list(unlogged(results).values())
    if not absent:
        return []
    out = []
    for name in targets:
        lack = [c for c in TARGETS[name].reads if all(c in a for a in absent)] if name in TARGETS else []
        if lack:
            out.append(
                f"{name}: drawn without {', '.join(lack)} (not in any run's log); " + "; ".join(missing_text(lack))
            )
    return out


def figures(
    results: str | Path, study: str | Path | None = None, *, cores: int = 1, dry_run: bool = False, report: bool = True
) -> int:
    """Draw ``all`` (every figure and table of the study, each run's curves.png and diagnostics.png, the
    lead table) and ``claims.md``, then the HTML report. First says, per figure and table, what the runs'
    logs lack (``missing_lines``)."""
    results = Path(results)
    if not (results / RUNS).is_dir():
        raise FileNotFoundError(f"{results}: no runs/ directory (a study's results: runs/<model>/<task>/<settings>/)")
    study_path = Path(study) if study else find_study(results)
    wanted = list(load_yaml(study_path, mapping=True, what="study file").get("figures") or {})
    for line in missing_lines(results, wanted):
        print(f"coolsampler figures: {line}", flush=True)
    base = snakemake_args(results, study_path, cores=cores, dry_run=dry_run)
    out = results.resolve()
    rc = subprocess.run([*base, "all", str(out / "claims.md")], check=False).returncode
    if rc or dry_run or not report:
        return rc
    return subprocess.run([*base, "--report", str(out / "report.html")], check=False).returncode


def _figures(args: argparse.Namespace) -> int:
    if (problem := workflow_missing()) is not None:
        print(f"coolsampler figures: {problem}", file=sys.stderr)
        return 2
    return figures(args.results, args.study, cores=args.cores, dry_run=args.dry_run, report=not args.no_report)


def register(sub: argparse._SubParsersAction) -> None:
    f = sub.add_parser("figures")
    f.add_argument("results", help="a study's results directory (holding runs/), e.g. results/smoke")
    f.add_argument("--study", help="the study config (default: the config/*.yaml named in the runs' run.yaml)")
    f.add_argument(
        "--cores", type=int, default=1, help="Snakemake's --cores: figures drawn at once (default: %(default)s)"
    )
    f.add_argument("-n", "--dry-run", action="store_true", help="list what would be drawn")
    f.add_argument("--no-report", action="store_true", help="skip the HTML report")
    f.set_defaults(func=_figures)
