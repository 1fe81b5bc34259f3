"""``coolsampler runs [--study FILE] [--source]``: every run key of a study, one per line.

With ``--source``: the key, a tab, and where in the paper the run comes from. No verl, vLLM or torch.
"""

from __future__ import annotations

import argparse

from coolsampler.cli import DEFAULT_STUDY
from coolsampler.train.overrides import training_study


def _runs(args: argparse.Namespace) -> int:
    study = training_study(args.study)
    for r in study.runs:
        print(f"{r.key}\t{r.source}" if args.source else r.key)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser("runs")
    r.add_argument("--study", default=DEFAULT_STUDY, help="study config")
    r.add_argument("--source", action="store_true", help="also print where each run comes from (tab-separated)")
    r.set_defaults(func=_runs)
