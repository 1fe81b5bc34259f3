"""``coolsampler parse PATH``: one verl log -> a summary, or the metrics table rule parse writes.

Reads every log ``coolsampler analyze`` reads (``coolsampler.results.readers``: verl's file-logger JSONL,
flat JSON records, console output, a wandb CSV export, ...), so a log one command takes the other does too.

The run's length and validation interval come from the flags, else from ``run.yaml`` beside the log
(or the run key in its path), so a log of unknown length is never called complete. No verl, vLLM or torch.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from coolsampler.results.metrics import parse_records
from coolsampler.results.own_logs import known_settings
from coolsampler.results.readers import read_records
from coolsampler.spec.inputs import InputError
from coolsampler.spec.metrics_schema import absent_columns, missing_text

OUT_FORMATS = {".parquet": "parquet", ".csv": "csv"}  # parse --out: the format is the file's suffix


def _parse(args: argparse.Namespace) -> int:
    from coolsampler.cli.outputs import Output, check_outputs  # the output flag first, before the log is read

    check_outputs((args.out, Output("--out", suffixes=tuple(OUT_FORMATS))))
    fmt = OUT_FORMATS.get(Path(args.out).suffix.lower()) if args.out else None  # check_outputs vouched for it
    path = Path(args.path)
    if not path.is_file():
        raise InputError(path, "no such file" if not path.exists() else "not a file; name the log itself")
    if path.stat().st_size == 0:
        raise InputError(path, "empty file")
    # the run's length and validation interval: given, else run.yaml beside the log (or its run key)
    known, _how, _dropped = known_settings(path, None)
    steps = args.steps or known.get("steps")
    val_every = args.val_every or known.get("val_every")
    # any verl log: what it never logged stays NaN and is named below (rule parse requires the pipeline's)
    by_step, problems, _fmt = read_records(path)
    df, status = parse_records(
        by_step, problems, log=path, expected_steps=steps, val_every=val_every, required=("step",)
    )
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
    absent = absent_columns(df)
    if absent:
        print("not in the log (column: the verl setting that logs it):")
        print("\n".join(f"  {line}" for line in missing_text(absent)))
    if args.out:
        print(f"wrote {args.out} ({fmt})")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("parse")
    p.add_argument(
        "path", help="a verl log (verl's file logger JSONL, its console output, a wandb CSV), e.g. a run's train.jsonl"
    )
    p.add_argument("--out", help="write the metrics table here: .parquet or .csv (by the suffix)")
    p.add_argument("--steps", type=int, help="expected steps (default: run.yaml beside the log)")
    p.add_argument("--val-every", type=int, help="validation interval (default: run.yaml beside the log)")
    p.set_defaults(func=_parse)
