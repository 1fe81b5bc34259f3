"""``coolsampler guard-threshold PATHS [--signal S ...] [--window W]``: a staleness guard's thresholds from
fixed-N runs, by the rule the guard calibration study writes before its runs (config/guard-calibration.yaml).

PATHS are run directories, or a results folder whose ``runs/`` holds them (e.g. results/guard-calibration).
Prints, per N, how many runs degrade (Section 2's onset); N*, the largest N none of whose runs degrade;
and per signal the median of the guard's own reading (its trailing median since the last refresh) at
staleness N*-1 over every cycle of the N* runs, with the readings it is the median of. Exit status 0,
1 when no N* exists (every N has a degraded run), 2 on an error. Light: no verl, vLLM or torch.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from coolsampler.cli import positive_int
from coolsampler.cli.claims import load_path
from coolsampler.results.guard import calibrate
from coolsampler.spec.diagnostics import BY_NAME

SIGNALS = ("ess", "probs_diff")  # the calibration study's: one that sees the tail, and |pi - q|
WINDOW = 5


def run_dirs(paths: list[str]) -> list[Path]:
    """Run directories: each path itself, or every folder holding a metrics.parquet under its runs/."""
    out: list[Path] = []
    for p in map(Path, paths):
        if not p.exists():
            raise FileNotFoundError(f"no such file or directory: {p}")
        found = sorted(m.parent for m in (p / "runs").rglob("metrics.parquet")) if (p / "runs").is_dir() else [p]
        out += found
    if not out:
        raise FileNotFoundError(f"no run directories under {', '.join(paths)}")
    return out


def main(args: argparse.Namespace) -> int:
    data = [load_path(d) for d in run_dirs(args.paths)]
    fixed = [(rd.settings, rd.metrics) for rd in data if rd.metrics is not None and rd.run.refresh == "fixed"]
    if not fixed:
        raise ValueError("no fixed-N run with a metrics table among these paths")
    cal = calibrate(fixed, args.signal or list(SIGNALS), args.window)
    print(cal.text(args.window))
    return 0 if cal.N_star is not None else 1


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("guard-threshold")
    p.add_argument("paths", nargs="+", help="run directories, or a results folder with runs/")
    p.add_argument(
        "--signal",
        action="append",
        choices=sorted(BY_NAME),
        help=f"a guard signal (repeatable; default: {', '.join(SIGNALS)})",
    )
    p.add_argument(
        "--window",
        type=positive_int,
        default=WINDOW,
        help="the guard's trailing-median window, a whole number > 0 (default: %(default)s)",
    )
    p.set_defaults(func=main)
