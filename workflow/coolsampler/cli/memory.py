"""``coolsampler memory [--profile FILE]``: the paper runs' memory budget (``coolsampler.train.memory``) as
a Markdown table against the SLURM profile's per-job memory, the processes one run starts with the
host memory each kind holds, then the assumptions it rests on.

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

from coolsampler.train import processes
from coolsampler.train.launch import proc_table
from coolsampler.train.memory import assumptions, markdown_table, process_table
from coolsampler.train.version import REPO

DEFAULT_PROFILE = REPO / "profiles" / "slurm" / "config.v8+.yaml"


def _find_session() -> int:
    """The session whose leader runs verl's trainer (directly or under coolsampler.worker.prefork)."""
    leaders = []
    for p in proc_table():
        if p.pid != p.session:
            continue
        try:
            cmd = Path(f"/proc/{p.pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "verl.trainer.main_ppo" in cmd:
            leaders.append(p.pid)
    if len(leaders) != 1:
        raise SystemExit(f"coolsampler memory --measure auto: {len(leaders)} verl sessions running; name one")
    return leaders[0]


def _measure(args: argparse.Namespace) -> int:
    sid = _find_session() if args.measure == "auto" else int(args.measure)

    def members() -> list[int]:
        return [p.pid for p in proc_table() if p.session == sid and p.state not in ("Z", "X")]

    def alive() -> bool:
        return Path(f"/proc/{sid}").exists()

    kinds = processes.measure(
        members,
        interval_s=args.interval,
        until=lambda: not alive(),
        say=lambda s: print(s, file=sys.stderr, flush=True),
    )
    doc = processes.table_document(kinds, how=args.how, interval_s=args.interval)
    text = json.dumps(doc, indent=2) + "\n"
    if args.out:
        Path(args.out).write_text(text)
    print(text, end="")
    return 0


def _memory(args: argparse.Namespace) -> int:
    if args.measure:
        return _measure(args)
    print(markdown_table(Path(args.profile)))
    print(process_table())
    print(assumptions())
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    m = sub.add_parser("memory", help="the paper runs' host and GPU memory budget (Markdown); --measure a run")
    m.add_argument("--profile", default=str(DEFAULT_PROFILE), help="SLURM profile to check against")
    m.add_argument(
        "--measure",
        metavar="SID",
        help="sample the process session SID (verl's pid; 'auto': the one running) until it ends",
    )
    m.add_argument("--interval", type=float, default=2.0, help="seconds between samples (--measure)")
    m.add_argument("--out", help="write the measured table here (--measure), e.g. train/pss_cpu.json")
    m.add_argument("--how", default="", help="how the measured run was started, stored with the table")
    m.set_defaults(func=_memory)
