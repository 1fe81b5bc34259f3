"""``coolsampler overrides RUN_KEY``: the exact Hydra overrides verl gets for a run (or its environment).

Paths are those rule train gives the run (``coolsampler.train.paths``), resolved against the current
directory. No verl, vLLM or torch.
"""

from __future__ import annotations

import argparse

from coolsampler.cli import DEFAULT_STUDY
from coolsampler.train.overrides import env_for, overrides_for
from coolsampler.train.platform import PLATFORMS


def _overrides(args: argparse.Namespace) -> int:
    if args.env:
        for name, value in env_for(args.key, args.study, args.platform).items():
            print(f"{name}={value}")
        return 0
    for line in overrides_for(args.key, args.study, args.platform):
        print(line)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    o = sub.add_parser("overrides")
    o.add_argument("key", help="run key, e.g. qwen2.5-math-1.5b/gsm8k/N192_lr2e-6_tis_Tb0.8_Tl1_s43")
    o.add_argument("--study", default=DEFAULT_STUDY, help="study config")
    o.add_argument("--platform", choices=list(PLATFORMS), help="default: the study's profile")
    o.add_argument("--env", action="store_true", help="print the job's environment instead (NAME=value lines)")
    o.set_defaults(func=_overrides)
