"""``coolsampler``: the pipeline's command line, for what one wants without running Snakemake.

    coolsampler overrides RUN_KEY [--study config/paper.yaml] [--platform gpu|cpu] [--env]
        the exact Hydra overrides verl gets for a run, one per line (paths as rule train sets them);
        with --env, the environment of its verl process instead (NAME=value lines)
    coolsampler parse PATH [--out metrics.parquet|metrics.csv] [--steps N] [--val-every K]
        one verl JSONL log -> a summary, or the metrics table rule parse writes
    coolsampler analyze PATH... [--N N] [--Tb T] [--steps S]
        the paper's per-run numbers (degradation events, Table-1 summary, lead table) for logs or
        tables; any verl log: what it lacks is named with the verl setting that logs it
    coolsampler claims PATH... [--key RUN_KEY] [--probe] [--out DIR]
        the paper's claims checked on run directories or logs
    coolsampler runs|status|plan [--study FILE] ...
        a study's run keys, where each run stands, what the study costs; plan --run KEY: one run's
        cost beside the snakemake command that trains it
    coolsampler verl-check [--study FILE] [--platform gpu|cpu]
        every run of a study against verl's own config checks (imports verl; no GPU, model or data)
    coolsampler memory [--gpu-memory-gib X] [--overlay FILE] [--measure SID|auto --out FILE]
        the paper runs' host and GPU memory budget and their processes, as Markdown tables, on the
        study's GPUs or yours (--gpu-memory-gib, or an override file); --measure:
        each process kind's PSS in a running verl session (the table the budget multiplies)
    coolsampler acceptance [--platform gpu|cpu] --out DIR
        the acceptance check of a machine: the 1.5B recipe for a few steps through the real stack
    coolsampler --version
    coolsampler figures RESULTS_DIR [--study FILE] [--cores N] [-n]
        every figure, table, claims.md and report.html from existing run directories; never trains

Each subcommand is one module of this package with a ``register(subparsers)`` hook, listed in
``SUBCOMMANDS`` in the order ``--help`` shows them. A ``--study``/``--overlay`` file not found where the
command runs is this checkout's file of that name, so every command works from any directory. Light:
only ``verl-check`` and ``acceptance`` import verl (when they run), so the rest work on a laptop with the
core install; without the training stack those two say in one line what to install.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path

from coolsampler.spec.metrics_schema import INSTALL_TRAINING_STACK
from coolsampler.spec.study import StudyError
from coolsampler.train.version import REPO

# one module of coolsampler.cli per subcommand (the module's name, with - for _ on the command line)
SUBCOMMANDS = (
    "overrides",
    "parse",
    "analyze",
    "claims",
    "runs",
    "status",
    "plan",
    "figures",
    "verl_check",
    "memory",
    "acceptance",
)


class _VersionAction(argparse.Action):
    """``--version``, computed only when asked (it hashes the patches; coolsampler.train.version)."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_args: object) -> None:
        from coolsampler.train.version import version_text

        print(version_text())
        parser.exit()


STUDY_FILE_OPTIONS = ("study", "overlay")


def study_file(value: str) -> str:
    """A study (or override) file as given where it exists, else this checkout's file of that name: the
    defaults and the documented ``--study config/paper.yaml`` work from any directory."""
    if Path(value).exists() or Path(value).is_absolute():
        return value
    in_checkout = REPO / value
    return str(in_checkout) if in_checkout.exists() else value


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="coolsampler", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--version", action=_VersionAction, help="print the package's and the patched verl's version")
    sub = ap.add_subparsers(dest="command", required=True)
    for name in SUBCOMMANDS:
        importlib.import_module(f"coolsampler.cli.{name}").register(sub)
    # each subcommand's --help opens with its one-line help (what it prints), not only its options
    for choice in sub._choices_actions:
        parser = sub.choices[choice.dest]
        parser.description = parser.description or choice.help
        for action in parser._actions:  # study files: found from any directory
            if action.dest in STUDY_FILE_OPTIONS and action.type is None:
                action.type = study_file
    return ap


# The training stack's top-level modules: a subcommand that needs one (verl-check, acceptance, memory
# --measure's stand-ins) in a light install (`pip install -e .`) says what to install, not a traceback.
TRAINING_STACK = frozenset({"verl", "vllm", "torch", "ray", "transformers", "tensordict", "hydra", "omegaconf"})


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (StudyError, ValueError, FileNotFoundError) as e:
        print(f"coolsampler {args.command}: {e}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] not in TRAINING_STACK:
            raise
        print(
            f"coolsampler {args.command}: needs the training stack (no module {e.name!r} here);"
            f" install it with {INSTALL_TRAINING_STACK}",
            file=sys.stderr,
        )
        return 2


if __name__ == "__main__":
    sys.exit(main())
