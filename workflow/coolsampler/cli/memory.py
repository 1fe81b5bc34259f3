"""``coolsampler memory [--profile FILE]``: the paper runs' memory budget (``coolsampler.train.memory``) as
a Markdown table against the SLURM profile's per-job memory, then the assumptions it rests on.

Light: arithmetic on the models' shapes, no verl, vLLM or torch.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from coolsampler.train.memory import assumptions, markdown_table
from coolsampler.train.version import REPO

DEFAULT_PROFILE = REPO / "profiles" / "slurm" / "config.v8+.yaml"


def _memory(args: argparse.Namespace) -> int:
    print(markdown_table(Path(args.profile)))
    print(assumptions())
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    m = sub.add_parser("memory", help="the paper runs' host and GPU memory budget (Markdown)")
    m.add_argument("--profile", default=str(DEFAULT_PROFILE), help="SLURM profile to check against")
    m.set_defaults(func=_memory)
