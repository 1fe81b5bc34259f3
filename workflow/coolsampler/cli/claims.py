"""``coolsampler claims PATH...``: the paper's claims checked on one's own logs.

PATH: run directories (with ``metrics.parquet`` + ``status.json``, or ``train.jsonl``), metrics tables
or verl JSONL logs. Each run's settings come from ``run.yaml`` beside the log (``settings.key``), else
from the path itself (``.../<model>/<task>/<settings>/``, a run key). A run of a study's own model or
task (a generated world, a ``models:`` block) parses only with that study: ``--study FILE``, or else the
checkout's ``config/*.yaml`` whose ``name:`` is the study its ``run.yaml`` names. Claims are then evaluated exactly
as the Snakemake report does, with the given runs as the study: a claim whose runs are not among them
is "not run".

``--probe`` is for runs that are not the paper's (the smoke study's toy model, another task): every
claim's filter is relaxed to the settings that describe the mechanism (correction, sampler and learner
temperature, replicate), dropping model, task, N, lr, seed and run length, so each quantity is computed
on the stand-in runs that match. Verdicts of a probe compare toy numbers with the paper's and are
expected to differ; the probe shows that every computation runs on real logs.

Light: no verl, vLLM or torch.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from coolsampler.cli.figures import study_files
from coolsampler.results.claims import (
    ClaimError,
    Claims,
    RunData,
    counts,
    evaluate,
    fmt,
    load_claims,
    paper_text,
    relax,
    staleness_budget,
    summary_text,
    write_report,
)
from coolsampler.spec.study import Run, Study, load_study, parse_key
from coolsampler.train.version import REPO

# The paper's claims, found from this package's checkout wherever the command runs.
DEFAULT_CLAIMS = REPO / "config" / "claims.yaml"
UNLOGGED = "not in these logs"  # the reason results.claims gives a claim its runs' columns cannot measure


def study_named(name: str) -> Study | None:
    """The checkout's study called ``name`` (the one ``config/*.yaml`` whose ``name:`` it is), or None. Its
    own models and tasks are what a run key of that study needs to parse."""
    found = study_files({name})
    return load_study(found[0]) if len(found) == 1 else None


def parse_run_key(key: str, study: Study | None = None, study_name: str | None = None) -> Run:
    """``key`` as a Run: with ``study`` if given; else with the built-in models and tasks, falling back to
    the checkout's study ``study_name`` (from run.yaml) for a study's own model or task."""
    if study is not None:
        return parse_key(key, study)
    try:
        return parse_key(key)
    except ValueError as e:
        named = study_named(study_name) if study_name else None
        if named is None:
            where = f"no single config/*.yaml here is study {study_name!r}" if study_name else "no study named"
            raise ValueError(f"{e} ({where}: give the run's study file with --study FILE)") from None
        try:
            return parse_key(key, named)
        except ValueError as e2:
            raise ValueError(
                f"{e2} (read with study {study_name!r} of this checkout; a run of an older world or model"
                " needs the study file it was trained from: --study FILE)"
            ) from None


def run_of(path: Path, key: str | None = None, study: Study | None = None) -> Run:
    """The run a log belongs to: ``key`` if given, else run.yaml's key, else the path's last three parts."""
    if key:
        return parse_run_key(key, study)
    d = path if path.is_dir() else path.parent
    run_yaml = d / "run.yaml"
    if run_yaml.exists():
        loaded = yaml.safe_load(run_yaml.read_text()) or {}
        key = (loaded.get("settings") or loaded).get("key")
        if key:
            return parse_run_key(key, study, loaded.get("study"))
    parts = d.resolve().parts
    try:
        return parse_key("/".join(parts[-3:]), study)
    except ValueError as e:
        raise ValueError(
            f"{path}: no run.yaml and the path is not .../<model>/<task>/<settings>: {e};"
            " name the run with --key <model>/<task>/<settings> (`coolsampler runs` lists the paper's)"
        ) from None


def load_path(path: str | Path, key: str | None = None, study: Study | None = None) -> RunData:
    """A run's data from a run directory, a metrics table or a JSONL log (any verl log: the columns it
    never logged stay NaN, and the claims that read them say so)."""
    from coolsampler.results.claims import load_run_data

    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no such file or directory: {path}")
    if p.is_file() and p.stat().st_size == 0:
        raise ValueError(f"empty file: {path}")
    run = run_of(p, key, study)
    d = p if p.is_dir() else p.parent
    if p.is_dir():
        p = d / "metrics.parquet" if (d / "metrics.parquet").exists() else d / "train.jsonl"
    if p.suffix in (".parquet", ".csv"):
        return load_run_data(run, p, d / "status.json")
    if not p.exists():
        raise FileNotFoundError(f"{path}: no metrics.parquet or train.jsonl")
    from coolsampler.results.metrics import parse_jsonl

    df, status = parse_jsonl(p, expected_steps=run.steps, val_every=run.val_every, required=("step",))
    return RunData(run, df, status)


def claims_text(
    claims: Claims,
    paths: Sequence[str],
    probe: bool = False,
    show_all: bool = False,
    errors: list[str] | None = None,
    key: str | None = None,
    study: Study | None = None,
) -> tuple[str, Any]:
    """Evaluate the claims on the runs at ``paths``; the printable summary and the results. A path that
    cannot be read is reported in the text and appended to ``errors`` (the CLI then exits 1).
    ``key``: the run key of the (one) path, for a log outside a run directory; ``study``: the study the
    runs belong to, for its own models and tasks. Claims that the logs' columns cannot measure are listed
    with the verl setting that would log what they lack."""
    data: dict[str, RunData] = {}
    lines = []
    for p in paths:
        try:
            rd = load_path(p, key, study)
        except Exception as e:  # one bad path must not hide the others
            lines.append(f"{p}: cannot read: {type(e).__name__}: {e}")
            if errors is not None:
                errors.append(f"{p}: {e}")
            continue
        data[rd.run.key] = rd
    runs = [rd.run for rd in data.values()]
    use = relax(claims) if probe else claims
    results = evaluate(use, runs, data)
    lines.append(f"{len(runs)} runs; " + ("probe (filters relaxed to the mechanism settings); " if probe else ""))
    lines[-1] += summary_text(results).strip()
    n = counts(results)
    unmeasured = [r for r in results if r.verdict == "not run" and r.reason.startswith(UNLOGGED)]
    for r in results:
        if r.verdict == "not run" and not show_all and not r.reason.startswith(UNLOGGED):
            continue
        c = r.claim
        ours = fmt(r.value) if r.verdict != "not run" else "–"
        lines.append(
            f"  {r.verdict:<10} {c['id']:<32} paper {paper_text(c)}  ours {ours}"
            + (f"  ({r.reason})" if r.reason else "")
        )
    if n["not run"] > len(unmeasured) and not show_all:
        lines.append(
            f"  ({n['not run'] - len(unmeasured)} claims not run: their runs are not among these logs;"
            " --all lists them)"
        )
    return "\n".join(lines) + "\n", (results, staleness_budget(runs, data))


def register(subparsers: argparse._SubParsersAction) -> None:
    c = subparsers.add_parser(
        "claims",
        help="the paper's claims checked on run directories or logs; prints a verdict per claim (paper value,"
        " ours) and, for claims a log cannot measure, the verl setting that would log what is missing",
    )
    c.add_argument("paths", nargs="+", help="run directories, metrics.parquet or train.jsonl files")
    c.add_argument(
        "--claims", default=str(DEFAULT_CLAIMS), help="claims file (default: the checkout's config/claims.yaml)"
    )
    c.add_argument("--key", help="the run key of a single log outside a run directory, e.g. from `coolsampler runs`")
    c.add_argument(
        "--study",
        help="the study file the runs were trained from, for its own models and tasks (default: the checkout's"
        " config/*.yaml of the study that run.yaml names)",
    )
    c.add_argument("--probe", action="store_true", help="relax filters to the mechanism settings (toy runs)")
    c.add_argument("--all", action="store_true", help="list the claims that are not run too")
    c.add_argument("--out", help="write claims.md, claims.csv and staleness_budget.md|csv into this directory")
    c.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    try:
        claims = load_claims(args.claims)
    except ClaimError as e:
        print(f"coolsampler claims: {e}", file=sys.stderr)
        return 2
    errors: list[str] = []
    if args.key and len(args.paths) > 1:
        print("coolsampler claims: --key names the run of one path; give one path", file=sys.stderr)
        return 2
    study = None
    if args.study:
        try:
            study = load_study(args.study)
        except (OSError, ValueError) as e:
            print(f"coolsampler claims: --study {args.study}: {e}", file=sys.stderr)
            return 2
    text, (results, budget) = claims_text(claims, args.paths, args.probe, args.all, errors, args.key, study)
    sys.stdout.write(text)
    for err in errors:
        print(f"coolsampler claims: {err}", file=sys.stderr)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        write_report(
            results,
            budget,
            "own logs" + (" (probe)" if args.probe else ""),
            out / "claims.md",
            out / "claims.csv",
            out / "staleness_budget.md",
            out / "staleness_budget.csv",
        )
        print(f"wrote {out / 'claims.md'}")
    return 1 if errors else 0


__all__ = ["register", "claims_text", "load_path", "main", "parse_run_key", "relax", "run_of", "study_named"]
