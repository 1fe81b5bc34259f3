"""``coolsampler fingerprint [--study FILE] [--steps K] [--write]``: is this machine's study the reference's?

Computes the fingerprint of a study's deterministic artefacts where they are on disk (the warm-started
models' sha256; per run, a digest of its metrics table over its first K steps: ``coolsampler.results.fingerprint``)
and compares it with every committed reference of that study (``config/fingerprints/<study>/``), this
machine's CPU family first. One line per artefact and reference: "matches the reference of <CPU family>" or
"differs from step K, in <metrics>". ``--write`` makes this machine's fingerprint its family's reference.

Exit status: 0 when this CPU family's reference matches (or none is committed: then the other families'
verdicts are printed for information), 1 when it differs, 2 on an error. Light: no verl, vLLM or torch.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import yaml

from coolsampler.cli import DEFAULT_STUDY
from coolsampler.results import fingerprint as fpr
from coolsampler.results.loaders import load_metrics
from coolsampler.spec import numerics, shipped
from coolsampler.spec.layout import FINGERPRINTS
from coolsampler.spec.provenance import git_commit
from coolsampler.spec.study import Study
from coolsampler.spec.world import study_worlds
from coolsampler.train.overrides import training_study
from coolsampler.train.paths import Layout
from coolsampler.train.version import REPO


def reference_dir(study: Study) -> Path:
    """Where the study's committed references live (one file per CPU family): shipped with the package, so
    that a plain ``pip install`` compares against them too (``coolsampler.spec.shipped``)."""
    return shipped.ROOT / FINGERPRINTS / study.name


def study_fingerprint(study: Study, steps: int | None = None) -> dict[str, Any]:
    """This machine's fingerprint of ``study``: the models and runs that exist under its results."""
    layout = Layout.from_config(study.raw, study.results)
    worlds = {w.ident for w in study_worlds(study.raw, study.name).values()}  # generated models of their own
    models: dict[str, str] = {}
    runs: dict[str, Any] = {}
    keys: set[str] = set()
    for run in study.runs:
        if run.model in worlds:
            weights = f"{layout.model_dir(run.model)}/model.safetensors"
        else:
            weights = layout.model_weights(run.model)
        if weights and weights.endswith(".safetensors") and Path(weights).exists() and run.model not in models:
            models[run.model] = fpr.file_sha256(weights)
        df = load_metrics(layout.run_file(run.key, "metrics.parquet"))
        if df is None:
            continue
        runs[run.key] = fpr.run_fingerprint(df, steps)
        record = Path(layout.run_file(run.key, "run.yaml"))
        if record.exists():
            keys.add(str((yaml.safe_load(record.read_text()).get("training_key") or {}).get("key")))
    return {
        "format": fpr.FORMAT,
        "study": study.name,
        "cpu": numerics.cpu_family(),
        "numerics": dict(numerics.PINNED_ENV),
        "commit": git_commit(),
        "training_keys": sorted(keys),
        "steps": steps,
        "models": models,
        "runs": runs,
    }


def _fingerprint(args: argparse.Namespace) -> int:
    study = training_study(args.study)
    current = study_fingerprint(study, args.steps)
    if not current["models"] and not current["runs"]:
        raise FileNotFoundError(f"nothing of study {study.name} is built under {study.results} yet")
    family = current["cpu"]
    refdir = Path(args.references) if args.references else reference_dir(study)
    here = refdir / f"{numerics.family_slug(family)}.json"
    if args.write:
        written = fpr.write(current, here).resolve()  # in a checkout the shipped folder links to config/
        shown = written.relative_to(REPO) if written.is_relative_to(REPO) else written
        print(f"wrote {shown}: the reference of {family}")
        return 0
    refs = sorted(refdir.glob("*.json"), key=lambda p: (p != here, p.name))
    print(f"study {study.name} on {family}: {len(current['models'])} model(s), {len(current['runs'])} run(s)")
    if not refs:
        print(f"no reference committed for study {study.name} ({refdir}); --write makes one")
        return 0
    status = 0
    for path in refs:
        ref = fpr.read(path)
        own = path == here
        print(f"\nagainst {ref['cpu']}{' (this CPU family)' if own else ''}, commit {ref.get('commit')}:")
        for diff in fpr.compare(current, ref):
            print(f"  {diff.line(ref['cpu'])}")
            if own and not diff.same:
                status = 1
    if not here.exists():
        print(f"\nno reference of this CPU family ({family}) yet; --write makes one")
    return status


def register(sub: argparse._SubParsersAction) -> None:
    f = sub.add_parser("fingerprint")
    f.add_argument("--study", default=DEFAULT_STUDY, help="study config")
    f.add_argument("--steps", type=int, default=None, help="fingerprint each run's first K steps (default: all)")
    f.add_argument(
        "--write", action="store_true", help="write this machine's fingerprint as its CPU family's reference"
    )
    f.add_argument(
        "--references",
        default=None,
        help=f"the references' folder (default: {FINGERPRINTS}/<study name>/ of this checkout)",
    )
    f.set_defaults(func=_fingerprint)
