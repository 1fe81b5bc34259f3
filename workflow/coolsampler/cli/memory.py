"""``coolsampler memory [--study FILE] [--profile FILE]``: the memory budget of every model and task of a
study (default: the paper's) on the gpu platform (``coolsampler.train.memory``), as a Markdown table
against the study's declared machines (GPU memory per model, host memory per node) and the SLURM
profile's per-job memory, or one's own GPUs (``--gpu-memory-gib``) and host (``--host-memory-gib``);
one line per run saying whether it fits, and where not, the setting that makes it fit; the processes
one run starts with what each kind holds; then the assumptions it rests on.
Exit status 1 if some run does not fit.

``coolsampler memory --measure SID [--out FILE]``: samples the process session ``SID`` of a running
verl run (``run_verl`` starts verl with ``start_new_session``, so SID is the verl driver's pid; ``auto``
picks the one session whose leader runs ``verl.trainer.main_ppo``) every ``--interval`` seconds until
it ends, and writes each process kind's largest PSS (``coolsampler.train.processes``) as JSON: the
table ``host_budget`` multiplies by the process counts. Unknown kinds are kept under their command line.

Light: arithmetic on the models' shapes and reads of /proc, no verl, vLLM or torch.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from coolsampler.cli import DEFAULT_STUDY, positive_float
from coolsampler.cli.outputs import Output, check_outputs
from coolsampler.spec.inputs import EXIT_INPUT
from coolsampler.spec.shipped import find_config
from coolsampler.spec.study import load_study
from coolsampler.train import processes
from coolsampler.train.launch import proc_table, session_members
from coolsampler.train.memory import (
    ARCH,
    assumptions,
    fit,
    fit_lines,
    markdown_table,
    on_gpus,
    on_host,
    process_table,
    study_settings,
)
from coolsampler.train.overrides import check_extra_overrides
from coolsampler.train.profile import job_platform, load_profile

DEFAULT_PROFILE = "profiles/slurm/config.v8+.yaml"  # shipped files (coolsampler.spec.shipped)
OVERLAY_HELP = (
    "a file merged over the study as snakemake merges a second --configfile (repeatable), e.g."
    " config/hardware/80gb.yaml: your own GPUs and what makes the runs fit them; a shipped one also by"
    " its name (one-gpu, 80gb)"
)


HOST_MEMORY_HELP = (
    "check the host memory against your own machine of this size (GiB: `free -g`'s total) instead of the"
    " SLURM profile's per-job memory (with --profile: the smaller of the two)"
)


def host_profile(profile: Path | None, host_memory_gib: float | None) -> Path | None:
    """The SLURM profile whose per-job memory the host check uses: the one given, else the shipped one,
    unless the host's own memory is given alone (a GPU box: no scheduler between the run and its host)."""
    if profile is not None:
        return Path(profile)
    return None if host_memory_gib is not None else find_config(DEFAULT_PROFILE)


def _find_session() -> int:
    """The session whose leader runs verl's trainer (directly or under coolsampler.worker.prefork)."""
    sessions = processes.read_procs(p.pid for p in proc_table() if p.pid == p.session)
    leaders = [p.pid for p in sessions if "verl.trainer.main_ppo" in p.cmdline]
    if len(leaders) != 1:
        raise SystemExit(f"coolsampler memory --measure auto: {len(leaders)} verl sessions running; name one")
    return leaders[0]


# Linux's largest pid on 64-bit machines (PID_MAX_LIMIT), where /proc/sys/kernel/pid_max cannot be read
PID_MAX_LIMIT = 4 * 1024 * 1024


def pid_max() -> int:
    """One more than the largest process id this machine hands out (a session id is its leader's pid)."""
    try:
        return int(Path("/proc/sys/kernel/pid_max").read_text())
    except (OSError, ValueError):
        return PID_MAX_LIMIT


def session_id(value: str) -> str | int:
    """An argparse type for ``--measure``: ``auto``, or a process id (a whole number > 0)."""
    if value == "auto":
        return value
    try:
        sid = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a session id; give verl's pid, or auto") from None
    if sid <= 0:
        raise argparse.ArgumentTypeError(f"{value!r}: a session id is a process id, > 0; give verl's pid, or auto")
    return sid


def _measure(args: argparse.Namespace) -> int:
    """Sample the session and write its table; a session id no process can have, or a session with no
    process left, is refused in one line (exit 2), never written as an empty table."""
    sid = _find_session() if args.measure == "auto" else int(args.measure)
    if sid >= (top := pid_max()):
        why = f"no process can have that id here (pids run from 1 to {top - 1}, /proc/sys/kernel/pid_max)"
    elif not session_members(sid):
        why = f"no process of session {sid} is running, nothing to measure"
    else:
        why = ""
    if why:
        print(f"coolsampler memory: --measure {sid}: {why}; give the pid of a running verl, or auto", file=sys.stderr)
        return EXIT_INPUT
    kinds = processes.measure(
        lambda: session_members(sid),
        interval_s=args.interval,
        until=lambda: not Path(f"/proc/{sid}").exists(),
        say=lambda s: print(s, file=sys.stderr, flush=True),
    )
    if not kinds:  # the session ended before its first sample: an empty table would read as a measurement
        print(
            f"coolsampler memory: --measure {sid}: the session ended before a sample; nothing was measured",
            file=sys.stderr,
        )
        return 1
    doc = processes.table_document(kinds, how=args.how, interval_s=args.interval)
    text = json.dumps(doc, indent=2) + "\n"
    if args.out:
        Path(args.out).write_text(text)
    print(text, end="")
    return 0


def _memory(args: argparse.Namespace) -> int:
    check_outputs((args.out, Output("--out")))  # before a session is sampled for minutes
    if args.measure:
        return _measure(args)
    # a bad study or overlay: InputError or StudyError, one line from the dispatcher (coolsampler.cli.main)
    study = load_study(args.study, overlays=args.overlay or (), check_overrides=check_extra_overrides)
    profile = host_profile(args.profile, args.host_memory_gib)
    # the platform the study's jobs get under the profile (its set-resources, checked), as plan reads it
    platform = on_host(job_platform(study.raw, load_profile(profile) if profile else None), args.host_memory_gib)
    if platform.name != "gpu" and any(r.model in ARCH for r in study.runs):
        print(
            f"coolsampler memory: study {study.name} trains on the {platform.name} platform (its profile:);"
            " memory.py models the gpu platform's runs only"
        )
        return 0
    settings = on_gpus(study_settings(study, platform), args.gpu_memory_gib)
    if not settings:
        print(f"coolsampler memory: study {study.name} has no run of a model memory.py knows the shape of")
        return 0
    print(markdown_table(settings, profile, platform))
    print("\n".join(f"- {line}" for line in fit_lines(settings, profile, platform)) + "\n")  # a list in Markdown
    print(process_table(settings))
    print(assumptions())
    return 0 if all(fit(s, profile, platform).fits for s in settings) else 1


def register(sub: argparse._SubParsersAction) -> None:
    m = sub.add_parser("memory")
    m.add_argument("--study", default=DEFAULT_STUDY, help="the study whose runs and machines to check")
    m.add_argument("--overlay", action="append", metavar="FILE", help=OVERLAY_HELP)
    m.add_argument(
        "--gpu-memory-gib",
        type=positive_float,
        help="check on your own GPUs of this size (nvidia-smi memory.total / 1024, e.g. 79.6 for an 80 GB"
        " card) instead of the study's declared ones",
    )
    m.add_argument("--host-memory-gib", type=positive_float, help=HOST_MEMORY_HELP)
    m.add_argument(
        "--profile",
        type=find_config,
        help=f"SLURM profile whose per-job memory to check against (default: {DEFAULT_PROFILE}, unless"
        " --host-memory-gib is given alone)",
    )
    m.add_argument(
        "--measure",
        metavar="SID",
        type=session_id,
        help="sample the process session SID (verl's pid; 'auto': the one running) until it ends",
    )
    m.add_argument("--interval", type=positive_float, default=2.0, help="seconds between samples (--measure)")
    m.add_argument("--out", help="write the measured table here (--measure), e.g. train/pss_cpu.json")
    m.add_argument("--how", default="", help="how the measured run was started, stored with the table")
    m.set_defaults(func=_memory)
