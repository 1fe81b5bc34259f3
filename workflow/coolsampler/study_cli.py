"""``coolsampler runs|status|plan``: a study's runs, where each stands, and what the rest will cost.

    coolsampler runs [--study FILE] [--source]
        every run key of the study, one per line (with --source: key, a tab, where the run comes from)
    coolsampler status [--study FILE] [--results DIR]
        every run: done, running (step k/T, last val acc, KL, ETA h:mm), stalled, failed (the log's
        reason) or not started (coolsampler.status); exit 0 all done, 1 some failed/stalled, 3 otherwise
    coolsampler plan [--study FILE] [--profile gpu|slurm|cpu] [--results DIR] [--parallel K] [--runs]
        runs, GPU-hours, wall time and disk before anything is submitted (coolsampler.plan)

Kept apart from ``coolsampler.cli`` (which only registers these parsers). No verl, vLLM or torch.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from coolsampler.study import load_study

DEFAULT_STUDY = "config/config.yaml"


def _runs(args: argparse.Namespace) -> int:
    study = load_study(args.study)
    for r in study.runs:
        print(f"{r.key}\t{r.source}" if args.source else r.key)
    return 0


def _status(args: argparse.Namespace) -> int:
    from coolsampler.status import STALL_FLOOR_S, STALL_STEPS, exit_code, study_states, table

    study = load_study(args.study)
    states = study_states(study, args.results)
    results = Path(args.results or study.results)
    print(f"study {study.name}, results {results}")
    if not results.is_dir():
        print(f"({results} does not exist here: no run has started, or run from the repository root, or --results)")
    print(table(states), end="")
    print(
        f"stalled = no new step for max({STALL_STEPS} x median step time, 2 x longest step,"
        f" {STALL_FLOOR_S / 60:.0f} min), at most the watchdog's stall_min (start-up: 2 x stall_min)"
    )
    return exit_code(states)


def _plan(args: argparse.Namespace) -> int:
    from coolsampler.plan import make_plan, text

    study = load_study(args.study)
    plan = make_plan(study, profile=args.profile, results=args.results, parallel=args.parallel)
    print(text(plan, list_runs=args.runs), end="")
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Register ``runs``, ``status`` and ``plan`` on the ``coolsampler`` command."""
    from coolsampler.plan import PROFILES

    r = sub.add_parser("runs", help="list a study's run keys, one per line")
    r.add_argument("--study", default=DEFAULT_STUDY, help="study config (default: %(default)s)")
    r.add_argument("--source", action="store_true", help="also print where each run comes from (tab-separated)")
    r.set_defaults(func=_runs)
    s = sub.add_parser("status", help="where every run of a study stands (done, running, stalled, failed)")
    s.add_argument("--study", default=DEFAULT_STUDY, help="study config (default: %(default)s)")
    s.add_argument("--results", help="results directory (default: the study's results:)")
    s.set_defaults(func=_status)
    p = sub.add_parser("plan", help="runs, GPU-hours, wall time and disk of a study before submitting it")
    p.add_argument("--study", default=DEFAULT_STUDY, help="study config (default: %(default)s)")
    p.add_argument("--profile", choices=PROFILES, help="where it runs (default: gpu for a gpu study, else cpu)")
    p.add_argument("--results", help="results directory with finished runs (default: the study's results:)")
    p.add_argument("--parallel", type=int, help="runs training at once (default: from the profile)")
    p.add_argument("--runs", action="store_true", help="also list every run, done or to do, with its hours")
    p.set_defaults(func=_plan)


__all__ = ["add_parsers"]
