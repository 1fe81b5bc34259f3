"""``coolsampler fingerprint [--study FILE] [--steps K] [--write]``: is this machine's study the reference's?

Computes the fingerprint of a study's deterministic artefacts where they are on disk (the warm-started
models' sha256; per run, a digest of its metrics table over its first K steps: ``coolsampler.results.fingerprint``)
and compares it with every committed reference of that study (``config/fingerprints/<study>/``), this
machine's CPU family first. One line per artefact and reference: "matches the reference of <CPU family>" or
"differs from step K, in <metrics>". ``--write`` makes this machine's fingerprint its family's reference.

Every run line says how much it compared ("compared 65 steps x 14 columns"); a reference that covers no
step, a ``--steps`` below 1 and a ``--references`` folder that does not exist are refused, never a pass. A
run whose files cannot be read, and a reference that is not one, are each named in one line on stderr
(``coolsampler fingerprint: <file>[:<key>]: <problem>``) and the others are still compared.

Exit status: 0 when this CPU family's reference matches (or none is committed: then the other families'
verdicts are printed for information), 1 when it differs, 2 on an error or when an input was refused (then
``--write`` writes nothing: a reference without that run would pass it later). Light: no verl, vLLM or torch.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from coolsampler.cli import DEFAULT_STUDY, positive_int
from coolsampler.results import fingerprint as fpr
from coolsampler.results.loaders import load_metrics
from coolsampler.spec import numerics, shipped
from coolsampler.spec.inputs import EXIT_INPUT, InputError
from coolsampler.spec.layout import FINGERPRINTS
from coolsampler.spec.provenance import git_commit
from coolsampler.spec.study import Study
from coolsampler.spec.world import study_worlds
from coolsampler.spec.yaml_file import load_yaml
from coolsampler.train.overrides import training_study
from coolsampler.train.paths import Layout
from coolsampler.train.version import REPO


def reference_dir(study: Study) -> Path:
    """Where the study's committed references live (one file per CPU family): shipped with the package, so
    that a plain ``pip install`` compares against them too (``coolsampler.spec.shipped``)."""
    return shipped.ROOT / FINGERPRINTS / study.name


def _unreadable(e: OSError, path: str | Path) -> InputError:
    return InputError(e.filename or path, f"cannot be read ({e.strerror or e})")


def _run_fingerprint(layout: Layout, key: str, steps: int | None) -> tuple[dict[str, Any] | None, str | None]:
    """One run's fingerprint and its training key (None, None: not built here). Raises ``InputError`` for
    a metrics table or ``run.yaml`` that is not one, or a table with no step to fingerprint."""
    metrics = layout.run_file(key, "metrics.parquet")
    try:
        df = load_metrics(metrics)
        if df is None:
            return None, None
        fp = fpr.run_fingerprint(df, steps)
        if not fp["steps"]:
            within = "" if steps is None else f" in 0..{steps}"
            raise InputError(metrics, f"no step{within} logged: nothing to fingerprint")
        record = Path(layout.run_file(key, "run.yaml"))
        if not record.exists():
            return fp, None
        info = load_yaml(record, mapping=True, what="run record")
    except OSError as e:
        raise _unreadable(e, metrics) from None
    training_key = info.get("training_key") or {}
    if not isinstance(training_key, dict):
        raise InputError(record, "not valid; allowed: a mapping (key: ..., inputs: ...)", "training_key")
    return fp, str(training_key.get("key"))


def study_fingerprint(
    study: Study, steps: int | None = None, refused: dict[str, InputError] | None = None
) -> dict[str, Any]:
    """This machine's fingerprint of ``study``: the models and runs that exist under its results. A model
    or run whose files cannot be read is left out, its ``InputError`` put in ``refused`` under its artefact
    name ("run KEY", as ``compare`` names it; raised where ``refused`` is None)."""
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
        artefact = f"model {run.model}"
        try:
            if weights and weights.endswith(".safetensors") and Path(weights).exists() and run.model not in models:
                models[run.model] = fpr.file_sha256(weights)
        except OSError as e:
            if refused is None:
                raise _unreadable(e, weights) from None
            refused.setdefault(artefact, _unreadable(e, weights))
        try:
            fp, key = _run_fingerprint(layout, run.key, steps)
        except InputError as e:
            if refused is None:
                raise
            refused[f"run {run.key}"] = e
            continue
        if fp is None:
            continue
        runs[run.key] = fp
        if key is not None:
            keys.add(key)
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


def _references(args: argparse.Namespace, study: Study) -> Path:
    """The references' folder: ``--references`` must name one that exists (a typo compared with nothing
    would pass), except with ``--write``, which makes it; the study's default may not exist yet."""
    if not args.references:
        return reference_dir(study)
    refdir = Path(args.references)
    if refdir.exists() and not refdir.is_dir():
        raise InputError(refdir, "not a folder; --references names the folder of the references (*.json)")
    if not refdir.exists() and not args.write:
        raise InputError(refdir, "no such folder of references (--references); --write makes one")
    return refdir


def _fingerprint(args: argparse.Namespace) -> int:
    study = training_study(args.study)
    refdir = _references(args, study)
    refused: dict[str, InputError] = {}
    current = study_fingerprint(study, args.steps, refused)
    for err in refused.values():  # each bad input in its own line; the others are still compared
        print(err.line("fingerprint"), file=sys.stderr)
    if not current["models"] and not current["runs"]:
        if refused:
            return EXIT_INPUT
        raise FileNotFoundError(f"nothing of study {study.name} is built under {study.results} yet")
    family = current["cpu"]
    here = refdir / f"{numerics.family_slug(family)}.json"
    if args.write:
        if refused:
            print(f"nothing written: {len(refused)} input(s) refused (above); a reference without them would pass them")
            return EXIT_INPUT
        try:
            written = fpr.write(current, here).resolve()  # in a checkout the shipped folder links to config/
        except OSError as e:  # a folder that cannot be made there (a file on its path), or a read-only one
            raise InputError(here, f"cannot be written ({e.strerror or e})") from None
        shown = written.relative_to(REPO) if written.is_relative_to(REPO) else written
        print(f"wrote {shown}: the reference of {family}")
        return 0
    refs = sorted(refdir.glob("*.json"), key=lambda p: (p != here, p.name))
    print(f"study {study.name} on {family}: {len(current['models'])} model(s), {len(current['runs'])} run(s)")
    if not refs:
        print(f"no reference committed for study {study.name} ({refdir}); --write makes one")
        return EXIT_INPUT if refused else 0
    status = 0
    bad_references = 0
    for path in refs:
        own = path == here
        try:
            ref = fpr.read(path)
        except InputError as err:  # one bad reference: named, the others still compared
            print(err.line("fingerprint"), file=sys.stderr)
            bad_references += 1
            continue
        cpu = ref.get("cpu") or path.stem
        print(f"\nagainst {cpu}{' (this CPU family)' if own else ''}, commit {ref.get('commit')}:")
        for diff in fpr.compare(current, ref):
            if diff.artefact in refused:  # its files were refused: not compared, never "not trained here"
                print(f"  {diff.artefact}: not compared ({refused[diff.artefact]})")
                continue
            print(f"  {diff.line(cpu)}")
            if own and not diff.same:
                status = 1
    if not here.exists():
        print(f"\nno reference of this CPU family ({family}) yet; --write makes one")
    return EXIT_INPUT if refused or bad_references else status


def register(sub: argparse._SubParsersAction) -> None:
    f = sub.add_parser("fingerprint")
    f.add_argument("--study", default=DEFAULT_STUDY, help="study config")
    f.add_argument(
        "--steps", type=positive_int, default=None, help="fingerprint each run's steps 0..K, K >= 1 (default: all)"
    )
    f.add_argument(
        "--write", action="store_true", help="write this machine's fingerprint as its CPU family's reference"
    )
    f.add_argument(
        "--references",
        default=None,
        help=f"the references' folder (default: {FINGERPRINTS}/<study name>/ of this checkout)",
    )
    f.set_defaults(func=_fingerprint)
