#!/usr/bin/env python3
"""A stand-in for the SLURM commands snakemake-executor-plugin-slurm calls (tests only).

sbatch records each submission -- its argv, the job script (stdin or --wrap) and the environment
variables the test cares about -- as one JSON file under $FAKE_SLURM_DIR and answers with a job id.
sacct/squeue report every recorded job as RUNNING (so Snakemake waits and the test decides when to
stop it); scontrol/sinfo/sacctmgr/sshare answer what the plugin asks at start-up; scancel records
the cancelled ids. Standard library only.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

STORE = Path(os.environ.get("FAKE_SLURM_DIR", "/tmp/fake_slurm"))
ACCOUNT = "coolsampler_test"


def jobs() -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(STORE.glob("job-*.json"))]


def sbatch(args: list[str]) -> int:
    STORE.mkdir(parents=True, exist_ok=True)
    script = ""
    wrap = [a for a in args if a.startswith("--wrap=")]
    if wrap:
        script = wrap[0][len("--wrap=") :]
    elif args and args[-1] == "/dev/stdin":
        script = sys.stdin.read()
    name = args[args.index("--job-name") + 1] if "--job-name" in args else ""
    # Snakemake submits jobs concurrently: claim the next free id atomically (a hard link fails if the
    # name exists), fully written before it appears, as a real scheduler never hands two jobs one id
    tmp = STORE / f".job-{os.getpid()}.tmp"
    jobid = 1000 + len(list(STORE.glob("job-*.json")))
    while True:
        tmp.write_text(json.dumps({"jobid": jobid, "name": name, "args": args, "script": script}, indent=1))
        try:
            os.link(tmp, STORE / f"job-{jobid}.json")
            break
        except FileExistsError:
            jobid += 1
    tmp.unlink()
    print(jobid)
    return 0


def status(args: list[str]) -> int:
    if "-o" in args and "Account%256" in args:  # the account guess
        print(ACCOUNT)
        return 0
    for j in jobs():
        print(f"{j['jobid']}|RUNNING")
    return 0


def scontrol(args: list[str]) -> int:
    if args[:2] == ["show", "config"]:
        print("MaxArraySize            = 1001\nMinJobAge               = 300 sec")
    elif args[:2] == ["show", "partition"]:
        print("PartitionName=gpu\n   State=UP\nPartitionName=cpu\n   State=UP")
    return 0


def main() -> int:
    cmd, args = Path(sys.argv[1]).name, sys.argv[2:]
    if cmd == "sbatch":
        return sbatch(args)
    if cmd in ("sacct", "squeue"):
        return status(args)
    if cmd == "scontrol":
        return scontrol(args)
    if cmd == "sinfo":
        print("PARTITION\ngpu\ncpu*")
        return 0
    if cmd in ("sacctmgr", "sshare"):
        print(ACCOUNT)
        return 0
    if cmd == "scancel":
        STORE.mkdir(parents=True, exist_ok=True)
        with (STORE / "scancel.log").open("a") as f:
            f.write(" ".join(args) + "\n")
        return 0
    print(f"fake_slurm: unknown command {cmd}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
