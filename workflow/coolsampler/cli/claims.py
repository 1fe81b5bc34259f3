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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from coolsampler.cli.figures import study_files
from coolsampler.cli.outputs import Output, check_outputs
from coolsampler.paper.claims_report import counts, ours_text, paper_text, summary_text, write_report
from coolsampler.results.claims import (
    UNJUDGED,
    ClaimError,
    Claims,
    RunData,
    evaluate,
    load_claims,
    relax,
    staleness_budget,
)
from coolsampler.spec.inputs import InputError
from coolsampler.spec.layout import key_of
from coolsampler.spec.study import Run, Study, load_study, parse_key
from coolsampler.spec.yaml_file import load_yaml

# The paper's claims: a shipped file (coolsampler.spec.shipped), found wherever the command runs.
DEFAULT_CLAIMS = "config/claims.yaml"
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
    if run_yaml.exists():  # the YAML reader of the input contract: a list, a tag, bad YAML are one line
        loaded = load_yaml(run_yaml, mapping=True, what="run.yaml")
        settings = loaded.get("settings") or loaded
        if not isinstance(settings, Mapping):
            raise InputError(run_yaml, f"{settings!r:.40}; expected a mapping of the run's settings", "settings")
        key, name = settings.get("key"), loaded.get("study")
        if key is not None and not isinstance(key, str):
            raise InputError(run_yaml, f"{key!r:.40} is not a run key; allowed: <model>/<task>/<settings>", "key")
        if key:
            return parse_run_key(key, study, name if isinstance(name, str) else None)
    try:
        return parse_key(key_of(d.resolve()), study)
    except ValueError:
        raise ValueError(
            "which run is it? No run.yaml beside it, and its directory is not <model>/<task>/<settings>;"
            " name the run with --key <model>/<task>/<settings> (`coolsampler runs --study paper` lists the paper's)"
        ) from None


def load_path(path: str | Path, key: str | None = None, study: Study | None = None) -> RunData:
    """A run's data from a run directory, a metrics table or a JSONL log (any verl log: the columns it
    never logged stay NaN, and the claims that read them say so)."""
    from coolsampler.results.claims import load_run_data

    p = Path(path)
    if not p.exists():
        raise InputError(path, "no such file or directory")
    if p.is_file() and p.stat().st_size == 0:
        raise InputError(path, "empty file: no run's log or table in it")
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


def unlogged_by_setting(results: Sequence[Any]) -> dict[str, list[str]]:
    """The verl setting that would log what each claim lacks (its reason names the columns and the
    settings: ``results.claims``) -> the ids of those claims, each setting once."""
    from coolsampler.spec.metrics_schema import PROVIDED_BY

    settings = list(dict.fromkeys(v.split(", computed from")[0] for v in PROVIDED_BY.values()))
    out: dict[str, list[str]] = {}
    for r in results:
        for setting in [v for v in settings if v in r.reason] or [r.reason]:
            out.setdefault(setting, []).append(r.claim["id"])
    return out


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
            if errors is not None:  # the caller says it (the CLI: on stderr, once)
                errors.append(str(e) if isinstance(e, InputError) else f"{p}: {e}")  # an InputError names its file
            else:
                lines.append(f"{p}: cannot read: {type(e).__name__}: {e}")
            continue
        data[rd.run.key] = rd
    runs = [rd.run for rd in data.values()]
    use = relax(claims) if probe else claims
    results = evaluate(use, runs, data)
    n = counts(results)
    # what was judged first; then the claims these logs cannot measure, one line per missing setting;
    # then how many concern other runs, and the counts
    unmeasured = [r for r in results if r.verdict == "not run" and r.reason.startswith(UNLOGGED)]
    # a claim whose runs are here but that cannot be judged on them (reduce one over two runs): its own line
    unjudged = [r for r in results if r.verdict == "not run" and r.reason.startswith(UNJUDGED)]
    shown = [r for r in results if show_all or r.verdict != "not run" or r.reason.startswith(UNJUDGED)]
    lines.append(
        f"{len(runs)} run(s) read; "
        + ("probe (filters relaxed to the mechanism settings); " if probe else "")
        + f"{len(results) - n['not run']} of the {len(results)} claims judged on them:"
    )
    for r in shown:
        c = r.claim
        ours = ours_text(r) if r.verdict != "not run" else "–"
        lines.append(
            f"  {r.verdict:<10} {c['id']:<32} paper {paper_text(c)}  ours {ours}"
            + (f"  ({r.reason})" if r.reason else "")
        )
    if unmeasured and not show_all:
        for setting, ids in unlogged_by_setting(unmeasured).items():
            named = ", ".join(ids[:4]) + (f" and {len(ids) - 4} more" if len(ids) > 4 else "")
            lines.append(f"  {len(ids)} claim(s) not judged, columns {UNLOGGED} ({named}); to log them: {setting}")
    if n["not run"] > len(unmeasured) + len(unjudged) and not show_all:
        lines.append(
            f"  ({n['not run'] - len(unmeasured) - len(unjudged)} claims not run: their runs are not among these logs;"
            " --all lists them)"
        )
    lines.append("counts: " + summary_text(results).strip())
    return "\n".join(lines) + "\n", (results, staleness_budget(runs, data))


def register(subparsers: argparse._SubParsersAction) -> None:
    c = subparsers.add_parser("claims")
    c.add_argument("paths", nargs="+", help="run directories, metrics.parquet or train.jsonl files")
    c.add_argument(
        "--claims", default=DEFAULT_CLAIMS, help="claims file, or a shipped one's name (default: %(default)s)"
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
    check_outputs((args.out, Output("--out", directory=True)))  # before the claims file or any run is read
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
        except InputError:  # names the file and line itself: the dispatcher's one line
            raise
        except (OSError, ValueError) as e:
            print(f"coolsampler claims: --study {args.study}: {e}", file=sys.stderr)
            return 2
    text, (results, budget) = claims_text(claims, args.paths, args.probe, args.all, errors, args.key, study)
    for err in errors:
        print(f"coolsampler claims: {err}", file=sys.stderr)
    if len(errors) == len(args.paths):  # nothing was read: no verdicts to print, only why
        return 1
    sys.stdout.write(text)
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
