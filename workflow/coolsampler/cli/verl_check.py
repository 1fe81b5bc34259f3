"""``coolsampler verl-check [--study FILE] [--platform gpu|cpu]``: every run of a study against verl's own
config checks (``coolsampler.train.verl_config``), one line per run; exit 1 if any fails.

It composes each run's overrides exactly as rule train does and lets verl's Hydra config and its
validation reject them, with no GPU, model or data. verl is imported when the check runs, not before.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import sys
import warnings

from coolsampler.cli import DEFAULT_STUDY
from coolsampler.train.platform import PLATFORMS


def _verl_check(args: argparse.Namespace) -> int:
    from coolsampler.train.verl_config import check_study  # imports verl
    from coolsampler.worker.gpu_check import bf16_problem, visible_devices

    problem = bf16_problem(visible_devices())  # a login node sees none; a GPU node its own
    if problem:
        print(f"FAIL  {problem}")
        return 1

    out, counts = sys.stdout, {"ok": 0, "FAIL": 0}
    # verl prints and logs as it checks ("[validate_config] All configuration checks passed", the
    # replay buffer's INFO line, warnings): keep one line per run on stdout
    logging.disable(logging.WARNING)
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        for key, err in check_study(args.study, args.platform):
            status = "ok" if err is None else "FAIL"
            counts[status] += 1
            print(f"{status:<5} {key}" if err is None else f"{status:<5} {err}", file=out, flush=True)
    logging.disable(logging.NOTSET)
    total = counts["ok"] + counts["FAIL"]
    print(f"{counts['ok']}/{total} runs of {args.study} pass verl's config checks", file=out)
    return 1 if counts["FAIL"] else 0


def register(sub: argparse._SubParsersAction) -> None:
    v = sub.add_parser("verl-check")
    v.add_argument("--study", default=DEFAULT_STUDY, help="study config")
    v.add_argument("--platform", choices=list(PLATFORMS), help="default: the study's profile")
    v.set_defaults(func=_verl_check)
