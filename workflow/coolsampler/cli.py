"""``coolsampler``: the pipeline's command line, for what one wants without running Snakemake.

    coolsampler overrides RUN_KEY [--study config/paper.yaml] [--platform gpu|cpu] [--env]
        the exact Hydra overrides verl gets for a run, one per line (paths as rule train sets them);
        with --env, the environment of its verl process instead (NAME=value lines)
    coolsampler parse PATH [--out metrics.parquet|metrics.csv] [--steps N] [--val-every K]
        one verl JSONL log -> a summary, or the metrics table rule parse writes
    coolsampler analyze PATH... [--N N] [--Tb T] [--steps S]
        the paper's per-run numbers (degradation events, Table-1 summary) for logs or tables
    coolsampler runs|status|plan [--study FILE] ...
        a study's run keys, where each run stands, what the study costs (coolsampler.study_cli)
    coolsampler --version
    coolsampler figures RESULTS_DIR [--study FILE] [--cores N] [-n]
        every figure, table, claims.md and report.html from existing run directories; never trains

Light: none of these imports verl, vLLM or torch, so they run on a laptop with the core install.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from coolsampler.overrides import verl_overrides
from coolsampler.paths import Layout, run_paths
from coolsampler.platform import PLATFORMS, get_platform
from coolsampler.study import Run, Study, StudyError, load_study


def _run_of(key: str, study_path: str | Path) -> tuple[Study, Run]:
    study = load_study(study_path)
    runs = study.by_key()
    if key not in runs:
        near = [k for k in runs if k.split("/")[:2] == key.split("/")[:2]][:5]
        hint = f"; runs of that model/task: {', '.join(near)}" if near else ""
        raise StudyError(f"run {key} is not in study {study.name} ({study_path}){hint}")
    return study, runs[key]


def overrides_for(key: str, study_path: str | Path, platform: str | None = None) -> list[str]:
    """verl's overrides for the run ``key`` of the study at ``study_path`` (its profile by default), with
    the paths rule train gives it (coolsampler.paths), resolved against the current directory."""
    study, run = _run_of(key, study_path)
    plat = platform or study.raw.get("profile", "cpu")
    return verl_overrides(
        run,
        run_paths(Layout.from_config(study.raw, study.results), run),
        platform=plat,
        study_recipe=study.recipe,
        experiment=f"coolsampler-{study.name}",
    )


def env_for(key: str, study_path: str | Path, platform: str | None = None) -> dict[str, str]:
    """The environment of the run's verl process on ``platform`` (coolsampler.platform)."""
    study, _run = _run_of(key, study_path)
    return get_platform(platform or study.raw.get("profile", "cpu")).env()


def _overrides(args: argparse.Namespace) -> int:
    if args.env:
        for name, value in env_for(args.key, args.study, args.platform).items():
            print(f"{name}={value}")
        return 0
    for line in overrides_for(args.key, args.study, args.platform):
        print(line)
    return 0


OUT_FORMATS = {".parquet": "parquet", ".csv": "csv"}  # parse --out: the format is the file's suffix


def _parse(args: argparse.Namespace) -> int:
    from coolsampler.analyze_cli import known_settings
    from coolsampler.metrics import parse_jsonl

    fmt = None
    if args.out:
        fmt = OUT_FORMATS.get(Path(args.out).suffix.lower())
        if fmt is None:
            raise ValueError(f"--out {args.out}: unknown format; name a {' or '.join(OUT_FORMATS)} file")
    path = Path(args.path)
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    if path.stat().st_size == 0:
        raise ValueError(f"empty file: {path}")
    # the run's length and validation interval: given, else run.yaml beside the log (or its run key)
    known, _how = known_settings(path, None)
    steps = args.steps or known.get("steps")
    val_every = args.val_every or known.get("val_every")
    df, status = parse_jsonl(path, expected_steps=steps, val_every=val_every)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        if fmt == "csv":
            df.to_csv(args.out, index=False)
        else:
            df.to_parquet(args.out, index=False)
    train = df[df.step > 0]
    val = df.dropna(subset=["val_acc"]) if "val_acc" in df else df.iloc[0:0]
    of = f"of {status.expected_steps}" if steps else "of ? (the run's length is unknown)"
    print(f"{args.path}: {len(train)} training steps (last {status.last_step} {of})")
    if len(val):
        best = val.loc[val.val_acc.idxmax()]
        last = val.iloc[-1]
        print(
            f"validation: {len(val)} points, last {last.val_acc:.3f} at step {int(last.step)}, "
            f"best {best.val_acc:.3f} at step {int(best.step)}"
        )
    else:
        print("validation: no points")
    if not status.complete:
        print("NOT complete: " + "; ".join(status.problems))
    elif steps:
        print("complete")
    else:
        print("whole as far as the log shows; completeness unknown: give --steps (or keep run.yaml beside the log)")
    if args.out:
        print(f"wrote {args.out} ({fmt})")
    return 0


def _analyze(args: argparse.Namespace) -> int:
    from coolsampler.analyze_cli import analyze_report

    given = {"N": args.N, "Tb": args.Tb, "steps": args.steps, "val_every": args.val_every}
    report = analyze_report(args.paths, {k: v for k, v in given.items() if v is not None})
    sys.stdout.write(report.text)
    for err in report.errors:
        print(f"coolsampler analyze: {err}", file=sys.stderr)
    return 1 if report.errors else 0


class _VersionAction(argparse.Action):
    """``--version``, computed only when asked (it hashes the patches; coolsampler.version)."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_args: object) -> None:
        from coolsampler.version import version_text

        print(version_text())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="coolsampler", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="command", required=True)
    o = sub.add_parser("overrides", help="print verl's Hydra overrides for a run key")
    o.add_argument("key", help="run key, e.g. qwen2.5-math-1.5b/gsm8k/N192_lr2e-6_tis_Tb0.8_Tl1_s43")
    o.add_argument("--study", default="config/paper.yaml", help="study config (default: %(default)s)")
    o.add_argument("--platform", choices=list(PLATFORMS), help="default: the study's profile")
    o.add_argument("--env", action="store_true", help="print the job's environment instead (NAME=value lines)")
    o.set_defaults(func=_overrides)
    p = sub.add_parser("parse", help="parse one verl JSONL log")
    p.add_argument("path")
    p.add_argument("--out", help="write the metrics table here: .parquet or .csv (by the suffix)")
    p.add_argument("--steps", type=int, help="expected steps (default: run.yaml beside the log)")
    p.add_argument("--val-every", type=int, help="validation interval (default: run.yaml beside the log)")
    p.set_defaults(func=_parse)
    a = sub.add_parser("analyze", help="degradation events and a Table-1 summary of logs or tables")
    a.add_argument("paths", nargs="+")
    a.add_argument("--N", type=int, help="refresh interval for every path (default: run.yaml, the run key, the log)")
    a.add_argument("--Tb", type=float, help="sampler temperature for every path (default: as --N)")
    a.add_argument("--steps", type=int, help="the run's length, to tell a whole log from a cut one (default: run.yaml)")
    a.add_argument("--val-every", type=int, help="validation interval (default: run.yaml)")
    a.set_defaults(func=_analyze)
    from coolsampler.claims_cli import add_parser as add_claims_parser  # claims PATH... (issue 12)

    add_claims_parser(sub)
    from coolsampler.study_cli import add_parsers as add_study_parsers  # runs, status, plan (issue 13)

    add_study_parsers(sub)
    ap.add_argument("--version", action=_VersionAction, help="print the package's and the patched verl's version")
    from coolsampler.figures_cli import add_parser as add_figures_parser  # figures RESULTS_DIR (issue 13)

    add_figures_parser(sub)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (StudyError, ValueError, FileNotFoundError) as e:
        print(f"coolsampler {args.command}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
