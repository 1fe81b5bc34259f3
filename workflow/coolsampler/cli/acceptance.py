"""``coolsampler acceptance [--platform gpu|cpu] --out DIR``: the acceptance check of a machine.

The 1.5B recipe for a few steps through the real patched stack (``coolsampler.testkit.acceptance``);
a summary table (check, value, limit, pass/fail) printed and written to OUT/summary.md and
OUT/summary.json; exit 1 when a check fails. A GPU without bf16 stops it at once, in one line.

    coolsampler acceptance [--platform gpu] [--model PATH] --out DIR
    coolsampler acceptance --platform cpu --steps 6 --timing-steps 0 --out DIR   # the CPU stack

On a GPU machine run it inside the project image (or any environment with the patched verl wheel), from
a checkout of this repository (the test kit is not in the image). ``--budget-s`` bounds the whole check.

Imports the test kit (and through it verl's helpers) only when the check runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def _acceptance(args: argparse.Namespace) -> int:
    from coolsampler.cli.outputs import Output, check_outputs

    check_outputs((args.out, Output("--out", directory=True)))  # before the stack is imported and runs train
    from coolsampler.testkit.acceptance import Options, run_acceptance, summary_markdown  # imports verl's helpers

    opt = Options(
        platform=args.platform,
        out=args.out,
        model=args.model,
        steps=args.steps,
        timing_steps=(4 if args.quick and args.platform == "cpu" else 5)
        if args.timing_steps is None
        else args.timing_steps,
        quick=args.quick,
        response_length=args.response_length,
        budget_s=args.budget_s or (570.0 if args.platform == "gpu" else 3600.0),
        logprob_seqs=args.logprob_seqs,
        sft_steps=args.sft_steps,
        break_gate=args.break_gate,
    )
    summary = run_acceptance(opt)
    print()
    print(summary_markdown(summary))
    print(f"written: {opt.out / 'summary.md'}, {opt.out / 'summary.json'}")
    return 0 if summary["passed"] else 1


def register(sub: argparse._SubParsersAction) -> None:
    ap = sub.add_parser("acceptance")
    ap.add_argument(
        "--platform", choices=("gpu", "cpu"), default="gpu", help="the stack checked: gpu (default) or the CPU stack"
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=Path("results/acceptance"),
        help="directory for summary.md, summary.json and the runs' logs (default: %(default)s)",
    )
    ap.add_argument(
        "--model",
        type=Path,
        help="a local Qwen2-family model (default: the offline HF cache, else a toy model warm-started here)",
    )
    ap.add_argument("--steps", type=int, default=8, help="steps of the N=4 staleness run (default 8: two cycles)")
    ap.add_argument(
        "--timing-steps",
        type=int,
        help="steps of each timing run (default 5; cpu --quick: 4; 0: no timing runs, which fails on gpu)",
    )
    ap.add_argument("--quick", action="store_true", help="skip the unpatched-verl timing run")
    ap.add_argument("--response-length", type=int, default=256, help="gpu: max response tokens (task: 512)")
    ap.add_argument("--budget-s", type=float, help="wall-clock budget of the whole check (gpu 570, cpu 3600)")
    ap.add_argument("--logprob-seqs", type=int, default=32, help="step-1 sequences recomputed with transformers")
    ap.add_argument(
        "--sft-steps",
        type=int,
        default=400,
        help="cpu: SFT steps of the toy model at most (it stops at 30%% greedy accuracy)",
    )
    # The check's self-test (tests/stack/test_acceptance.py): the staleness arm alone, with the sampler
    # refreshed at every step; the sampler check must fail. Hidden: no machine is accepted with it.
    ap.add_argument("--break-gate", action="store_true", help=argparse.SUPPRESS)
    ap.set_defaults(func=_acceptance)
