"""``coolsampler``: the pipeline's command line, for what one wants without running Snakemake.

Each subcommand is one module of this package with a ``register(subparsers)`` hook (it adds its parser
with ``subparsers.add_parser(NAME)`` and its options, and sets ``func``, which runs the command), and one
line of ``SUBCOMMANDS``: its name, its module and its one-line help, which ``coolsampler --help`` lists
without importing any subcommand. Only the module of the command that runs is imported, so a module that
cannot be imported (an optional dependency missing) breaks that command alone, never ``--help`` or
``--version``.

A ``--study``/``--overlay``/``--claims`` value that is a bare name (``--study paper``, ``--overlay one-gpu``)
is the shipped file of that name first (``coolsampler.spec.shipped``), so a ``paper/`` folder where the
command runs does not shadow it; one with a slash or ending in ``.yaml`` is a path, the file where the
command runs, else the shipped file at that path (``--study config/paper.yaml``). So every command works
from any directory, from a checkout or a plain ``pip install``.

Every input file is read through one contract (``coolsampler.spec.inputs``): a file that is not what its
reader expects raises ``InputError``, which ``main`` prints as one line, ``coolsampler <cmd>: <file>[:<line>]:
<problem>``, exit status 2; a command that reads several inputs reports the bad one in its own line and goes
on with the rest. Output flags are checked before anything is read (``coolsampler.cli.outputs``). Light: only
``verl-check`` and ``acceptance`` import verl (when they run), so the rest work on a laptop with the core
install; without the training stack those two say in one line what to install.
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from coolsampler.spec.inputs import EXIT_INPUT, InputError
from coolsampler.spec.layout import SMOKE_STUDY


@dataclass(frozen=True)
class Subcommand:
    """One subcommand: its name on the command line, its module in this package, its one-line help."""

    name: str
    module: str
    help: str


# The subcommands, in the order ``--help`` lists them. A new subcommand is one line here.
SUBCOMMANDS: tuple[Subcommand, ...] = (
    Subcommand("analyze", "analyze", "the paper's per-run numbers for verl logs, tables or run directories: prints"
               " each run's degradation events, a Table-1 summary and the lead table; --figure draws the curves"),
    Subcommand("parse", "parse", "one verl JSONL log: prints its steps, validation points, whether it is complete"
               " and what it lacks; --out writes the metrics table"),
    Subcommand("claims", "claims", "the paper's claims checked on run directories or logs: prints a verdict per"
               " claim, and for what a log cannot measure the verl setting that logs it"),
    Subcommand("runs", "runs", "prints a study's run keys, one per line (--source: where each comes from)"),
    Subcommand("plan", "plan", "what a study (or --run: one run) costs before it is submitted: prints the cost"
               " line first (runs, GPU-hours, wall time, disk, memory fit), then the table; --detail: the processes"),
    Subcommand("status", "status", "where every run of a study stands: prints one line per run (state, step,"
               " validation accuracy, KL, ETA) and the count per state"),
    Subcommand("figures", "figures", "every figure, table, the claims and the report from existing run directories"
               " (never trains); prints Snakemake's progress and the runs that are missing"),
    Subcommand("memory", "memory", "a study's host and GPU memory budget on its machines, modelled: prints a table"
               " per model and task and a fits/DOES NOT FIT line per run; --measure: a verl session's PSS"),
    Subcommand("overrides", "overrides", "prints verl's Hydra overrides for a run key, one per line, as rule train"
               " passes them (--env: its environment)"),
    Subcommand("verl-check", "verl_check", "every run of a study against verl's own config checks (needs the"
               " training stack): prints 'ok KEY' or 'FAIL error' per run"),
    Subcommand("acceptance", "acceptance", "the acceptance check of a machine through the real stack (needs it):"
               " prints a table of checks and writes it to OUT/summary.md and summary.json"),
    Subcommand("guard-threshold", "guard_threshold", "a staleness guard's thresholds from fixed-N run directories,"
               " by the guard calibration's rule: prints N* and each signal's threshold with the readings behind it"),
    Subcommand("fingerprint", "fingerprint", "a study's models and runs, digit for digit, against the committed"
               " reference of each CPU family: prints 'matches' or the first step and metric that differ"),
)  # fmt: skip

# Options naming a study or a claims file: found where the command runs, else among the shipped files.
STUDY_FILE_OPTIONS = ("study", "overlay", "claims")

# The study a command reads when no --study is given, by one rule: a command about what the GPU machines
# run (verl's config for a run, its memory) reads the paper's study; one about what this machine trains,
# plans or holds reads the smoke study, the one `snakemake` runs with no --configfile.
PAPER_STUDY = "config/paper.yaml"
GPU_COMMANDS = frozenset({"overrides", "verl-check", "memory"})
DEFAULT_STUDY = "<the command's default study>"  # what a module passes as --study's default: set by the rule


def default_study(command: str) -> str:
    """The study file ``command`` reads when no --study is given (the rule above)."""
    return PAPER_STUDY if command in GPU_COMMANDS else SMOKE_STUDY


# The training stack's top-level modules: a subcommand that needs one (verl-check, acceptance, memory
# --measure's stand-ins) in a light install (`pip install .`) says what to install, not a traceback.
TRAINING_STACK = frozenset({"verl", "vllm", "torch", "ray", "transformers", "tensordict", "hydra", "omegaconf"})


class _VersionAction(argparse.Action):
    """``--version``, computed only when asked (it hashes the patches; coolsampler.train.version)."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_args: object) -> None:
        from coolsampler.train.version import version_text

        print(version_text())
        parser.exit()


class _Registrar:
    """What a module's ``register`` is handed: ``add_parser`` of the subparsers, with the help line and the
    description taken from the module's ``SUBCOMMANDS`` entry (the one place they are written)."""

    def __init__(self, sub: argparse._SubParsersAction, entry: Subcommand) -> None:
        self._sub, self._entry = sub, entry

    def add_parser(self, name: str, **kw: Any) -> argparse.ArgumentParser:
        if name != self._entry.name:
            raise ValueError(
                f"module coolsampler.cli.{self._entry.module} registers {name!r}, listed as {self._entry.name!r}"
            )
        kw["help"] = self._entry.help
        kw.setdefault("description", self._entry.help)
        return self._sub.add_parser(name, **kw)


# What --study, --overlay and --claims say of how their value is found (the one rule: spec.shipped.find_config).
NAME_RULE = (
    "a bare name ({example}) is the shipped file of that name, before anything so named here; a value with a"
    " slash or ending in .yaml is a path"
)
NAME_EXAMPLE = {"study": "paper", "overlay": "one-gpu", "claims": "claims"}


def positive_int(value: str) -> int:
    """An argparse type: a whole number > 0 (``--parallel``: a count of runs at once)."""
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number; give one > 0") from None
    if n <= 0:
        raise argparse.ArgumentTypeError(f"{value!r}: give a whole number > 0")
    return n


def positive_float(value: str) -> float:
    """An argparse type: a finite number > 0 (a memory size, an interval): NaN, inf, zero and negatives
    are refused here, in one line, instead of deep in the arithmetic they would poison."""
    try:
        x = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number; give one > 0") from None
    if not math.isfinite(x) or x <= 0:
        raise argparse.ArgumentTypeError(f"{value!r}: give a finite number > 0")
    return x


def study_file(value: str) -> str:
    """A study, override or claims file as given where it exists, else the shipped file of that name or
    path (``paper``, ``config/paper.yaml``, ``config/hardware/80gb.yaml``): the defaults and the documented
    ``--study config/paper.yaml`` work from any directory and from a non-editable install."""
    from coolsampler.spec.shipped import find_config

    return str(find_config(value))


def overlay_file(value: str) -> str:
    """An overlay as given where it exists, else the shipped one of that name or path (``one-gpu``,
    ``config/hardware/one-gpu.yaml``); an unknown one is refused naming the shipped overlays."""
    from coolsampler.spec.shipped import find_overlay

    return str(find_overlay(value))


def command_of(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` names: its first word that is not an option (the top level's options take
    no value), or None."""
    return next((a for a in argv if not a.startswith("-")), None)


def build_parser(only: str | None = None, *, lazy: bool = False) -> argparse.ArgumentParser:
    """The parser of every subcommand; ``lazy``: only the subcommand ``only`` is imported and given its
    options (none is, where ``only`` names none), each other one is a bare entry with its help line."""
    ap = argparse.ArgumentParser(
        prog="coolsampler",
        description="The pipeline's command line, for what one wants without running Snakemake;"
        " `coolsampler COMMAND --help` gives a command's options.",
    )
    ap.add_argument("--version", action=_VersionAction, help="print the package's and the patched verl's version")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands")
    for entry in SUBCOMMANDS:
        if lazy and entry.name != only:
            sub.add_parser(entry.name, help=entry.help, add_help=False)
            continue
        module = importlib.import_module(f"coolsampler.cli.{entry.module}")
        module.register(_Registrar(sub, entry))  # adds its parser and sets func
        for action in sub.choices[entry.name]._actions:  # study and claims files: found from any directory
            if action.dest in STUDY_FILE_OPTIONS and action.type is None:
                action.type = overlay_file if action.dest == "overlay" else study_file
                action.help = f"{action.help or action.dest}; {NAME_RULE.format(example=NAME_EXAMPLE[action.dest])}"
            if action.dest == "study" and action.default == DEFAULT_STUDY:  # the one rule, and its help says it
                action.default = default_study(entry.name)
                action.help = f"{action.help} (default: {action.default})"
    return ap


def _closed_pipe() -> int:
    """stdout's reader went away (``coolsampler runs | head``): stop quietly, as a shell tool does."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())  # Python's flush at exit must not raise again
    return 128 + 13  # killed by SIGPIPE, as the shell reports it


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = command_of(argv)
    try:
        args = build_parser(command, lazy=True).parse_args(argv)
        return args.func(args)
    except BrokenPipeError:
        return _closed_pipe()
    except InputError as e:  # the one input contract: the file, where in it, what was expected
        print(e.line(str(command)), file=sys.stderr)
        return EXIT_INPUT
    except (ValueError, FileNotFoundError) as e:  # a bad study (StudyError is a ValueError), a missing file
        print(f"coolsampler {command}: {' '.join(str(e).split())}", file=sys.stderr)
        return EXIT_INPUT
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] not in TRAINING_STACK:
            raise
        from coolsampler.spec.metrics_schema import INSTALL_TRAINING_STACK

        print(
            f"coolsampler {command}: needs the training stack (no module {e.name!r} here);"
            f" install it with {INSTALL_TRAINING_STACK}",
            file=sys.stderr,
        )
        return 2


if __name__ == "__main__":
    sys.exit(main())
