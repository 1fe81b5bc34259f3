"""``coolsampler analyze PATH...``: the paper's per-run numbers for one's own logs, on a laptop, as text.

Takes training logs as verl writes them (its file logger's JSONL, its console output, TensorBoard event
files, an MLflow store, a wandb history exported to CSV), already parsed metrics tables, and directories of
any of these, and prints each run's degradation events, a Table-1-style summary (runs pool into one row only
as seeds of one arm: by their run keys, or ``--group``) and the lead table; ``--guard`` replays the staleness
guard, ``--figure`` draws the curves, ``--format``/``--out`` write the tables. This module parses the flags
and prints: the runs are read in ``coolsampler.results.own_logs`` and rendered in ``coolsampler.paper.own_logs``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from coolsampler.paper.own_logs import (
    FIGURE_FORMATS,
    TABLE_FORMATS,
    TABLE_TITLES,
    analyze_report,
    draw,
    table_text,
    write_tables,
)
from coolsampler.results.own_logs import parse_groups
from coolsampler.spec.guard import GuardSpec, parse_guard_condition


def non_negative(text: str) -> float:
    """A bound on a lag: a number >= 0 (argparse's one-line error otherwise)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: a bound is a finite number of steps >= 0")
    return value


def guard_of(args: argparse.Namespace) -> GuardSpec | None:
    """The ``--guard`` condition with its ``--guard-window`` / ``--guard-min``, or None."""
    if args.guard is None:
        for flag in ("guard_window", "guard_min", "guard_horizon"):
            if getattr(args, flag) is not None:
                raise ValueError(f"--{flag.replace('_', '-')} needs --guard")
        return None
    spec = parse_guard_condition(args.guard)
    window = spec.window if args.guard_window is None else args.guard_window
    return GuardSpec(spec.signal, spec.threshold, window, 1 if args.guard_min is None else args.guard_min)


def _analyze(args: argparse.Namespace) -> int:
    from coolsampler.cli.outputs import Output, check_outputs  # output flags first, before any log is read

    check_outputs(
        (args.figure, Output("--figure", suffixes=FIGURE_FORMATS)), (args.out, Output("--out", directory=True))
    )
    given = {"N": args.N, "Tb": args.Tb, "steps": args.steps, "val_every": args.val_every}
    report = analyze_report(
        args.paths,
        {k: v for k, v in given.items() if v is not None},
        guard=guard_of(args),
        horizon=args.guard_horizon,
        val=args.val,
        groups=parse_groups(args.group),
        lag_bound=args.lag_bound,
    )
    if args.format == "md" or not report.tables:
        sys.stdout.write(report.text)
    else:  # the tables alone, to paste or pipe
        for name, frames in report.tables.items():
            if args.format in ("md", "tex"):
                sys.stdout.write(f"% {TABLE_TITLES[name]}\n" if args.format == "tex" else "")
            sys.stdout.write(table_text(name, frames, args.format).rstrip() + "\n\n")
    if args.out and report.tables:
        written = write_tables(report, Path(args.out))
        print(f"wrote {len(written)} files to {args.out}", file=sys.stderr if args.format != "md" else sys.stdout)
    if args.figure and report.entries:
        print(f"wrote {draw(report.entries, args.figure)}", file=sys.stderr if args.format != "md" else sys.stdout)
    for err in report.errors:
        print(f"coolsampler analyze: {err}", file=sys.stderr)
    return 1 if report.errors else 0


def register(sub: argparse._SubParsersAction) -> None:
    a = sub.add_parser("analyze")
    a.add_argument(
        "paths",
        nargs="+",
        help="verl logs (file-logger JSONL, console output, TensorBoard event files, an MLflow store, a wandb"
        " CSV export), metrics.parquet/.csv, or directories of them (run directories, <project>/<experiment>.jsonl,"
        " run-key trees, a results directory)",
    )
    a.add_argument("--N", type=int, help="refresh interval for every path (default: run.yaml, the run key, the log)")
    a.add_argument("--Tb", type=float, help="sampler temperature for every path (default: as --N)")
    a.add_argument("--steps", type=int, help="the run's length, to tell a whole log from a cut one (default: run.yaml)")
    a.add_argument("--val-every", type=int, help="validation interval (default: run.yaml)")
    a.add_argument(
        "--lag-bound",
        type=non_negative,
        metavar="STEPS",
        help="the configured bound on the lag, for logs whose system logs no lag and saved no configuration"
        " beside them (shown as a bound, never as a measured lag; a config.yaml/run.yaml beside the log wins)",
    )
    a.add_argument(
        "--val",
        metavar="SOURCE[:METRIC]",
        help="the validation series to read, e.g. 'gsm8k' or 'math500:best@4/mean' (default: the first data"
        " source alphabetically, its mean@n at the largest n logged; a log of several series lists them)",
    )
    a.add_argument(
        "--group",
        action="append",
        metavar="LABEL=GLOB",
        help="pool the runs whose name or path matches GLOB as the seeds of one arm LABEL (repeatable; default:"
        " only runs whose run keys differ in the seed alone pool)",
    )
    a.add_argument(
        "--format",
        choices=TABLE_FORMATS,
        default="md",
        help="md (default): the full text; csv, json or tex: the tables alone (Table 1, the events, the leads)",
    )
    a.add_argument("--out", metavar="DIR", help="also write every table in every format into DIR")
    a.add_argument(
        "--guard",
        metavar="SIGNAL>THRESHOLD",
        help="replay the staleness guard over each log, e.g. 'probs_diff>0.1' or 'ess<0.5' (a diagnostic of the"
        " lead table, in its own direction), at the run's N as the longest interval",
    )
    a.add_argument("--guard-window", type=int, help="steps of the guard's trailing median (default: the lead table's)")
    a.add_argument("--guard-min", type=int, help="fewest steps between two guard refreshes (default 1)")
    a.add_argument(
        "--guard-horizon", type=int, help="a firing with no onset this many steps after it is a false alarm (default N)"
    )
    a.add_argument(
        "--figure",
        metavar="FILE",
        help="also draw the runs' validation accuracy and KL as Figure 1 does into FILE (.png, .pdf or .svg)",
    )
    a.set_defaults(func=_analyze)
