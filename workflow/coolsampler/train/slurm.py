"""Training jobs SLURM will not run as asked: said in one line, never waited on in silence.

snakemake-executor-plugin-slurm submits a job and then only asks ``sacct`` for its state: a job that
pends forever is, to it, a job still running. And when sbatch refuses a job (a partition that does
not exist, more memory than any node of the partition has), the plugin reports a failed job with the
whole sbatch call and script, once for every run. So while Snakemake runs with the slurm executor
(``onstart`` in workflow/rules/train.smk), two things ask SLURM itself:

* before anything is submitted, ``check_requests``: each distinct request of the training jobs, as
  the plugin renders it, goes to ``sbatch --test-only``; a refusal (SLURM's words, the request, the
  runs) stops Snakemake in one line. This catches a partition that does not exist and a request no
  node of the partition can hold (``PartitionConfig``, e.g. more CPUs than a node has);
* then a daemon thread (``Watch``) looks at this user's pending jobs of this working directory every
  ``INTERVAL_S``. A job pending for a reason only a change of its request or of the cluster can lift
  (``never_placed``: e.g. ``QOSMaxMemoryPerJob``, a per-job limit of the QOS that ``--test-only``
  does not judge) gets one line -- the job, its run, SLURM's reason, what it asked for and the
  largest node of its partition -- and is cancelled, so the plugin reports it failed and the rest of
  the study goes on (``keep-going``). Reasons a job outgrows by waiting (``Resources``,
  ``Priority``, ``BeginTime``, a drained node, a per-user limit) are left alone.

This module never imports verl, vLLM or torch; it runs SLURM's client commands only.
"""

from __future__ import annotations

import getpass
import os
import re
import shlex
import subprocess
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

INTERVAL_S = 15.0

# Reasons (squeue %r) a pending job cannot outgrow by waiting: the request exceeds what the partition or
# the account allows, or names something that does not exist.
NEVER_REASONS = frozenset(
    {
        "PartitionConfig",  # more CPUs, memory or GPUs than a node of the partition has
        "PartitionTimeLimit",  # a time limit above the partition's MaxTime
        "BadConstraints",
        "InvalidAccount",
        "InvalidQOS",
    }
)
# A per-job limit of a QOS or an association (e.g. QOSMaxGRESPerJob, AssocMaxWallDurationPerJobLimit):
# the job itself is too big; a per-user or per-account limit (...PerUser...) is outgrown by waiting.
_PER_JOB_LIMIT = re.compile(r"^(QOS|Assoc)(Grp)?Max\w*PerJob\w*$")


def never_placed(reason: str) -> bool:
    """Whether a job pending for ``reason`` can never start as requested."""
    return reason in NEVER_REASONS or bool(_PER_JOB_LIMIT.match(reason))


@dataclass(frozen=True)
class Stuck:
    """A pending job that can never start as requested."""

    jobid: str
    reason: str
    job: dict[str, str]  # scontrol show job -o, as key -> value
    largest_node: str  # what the partition's largest node has, in words

    def message(self, runs: dict[str, str] | None = None) -> str:
        """One line; ``runs`` maps the plugin's job comment to the run key it stands for."""
        j = self.job
        comment = j.get("Comment", "")
        what = f" (rule train, run {runs[comment]})" if runs and comment in runs else _rule_of(comment)
        asks = [
            f"{j.get('NumNodes', '?')} node(s)",
            f"{j.get('NumCPUs', '?')} CPUs",
            f"{_mem(j)} memory",
        ]
        gres = j.get("TresPerJob") or j.get("TresPerNode") or ""
        if gres and gres != "(null)":
            asks.append(gres.replace("gres:", "").replace("gres/", ""))
        asks.append(f"time {j.get('TimeLimit', '?')}")
        part = j.get("Partition", "?")
        if self.reason == "PartitionTimeLimit":
            return (
                f"SLURM cannot place job {self.jobid}{what}: its time limit {j.get('TimeLimit', '?')} is above "
                f"partition '{part}''s MaxTime (reason PartitionTimeLimit). Cancelled: set `runtime:` (minutes) "
                "under set-resources: train: in profiles/slurm/config.v8+.yaml (its EDIT line) to the "
                "partition's limit, or --set-resources train:runtime=MINUTES."
            )
        return (
            f"SLURM cannot place job {self.jobid}{what}: pending with reason {self.reason}; it asks for "
            f"{', '.join(asks)} on partition '{part}', whose largest node has {self.largest_node}. "
            "Cancelled: give rule train resources that fit (profiles/slurm: the lines marked EDIT, "
            "or --set-resources train:...)."
        )


def _rule_of(comment: str) -> str:
    """`` (rule train, wildcards ...)`` from the plugin's job comment ``rule_<rule>_wildcards_<...>``."""
    m = re.match(r"rule_(\w+?)_wildcards_(.*)$", comment)
    return f" (rule {m.group(1)}, wildcards {m.group(2)})" if m else ""


def _mem(job: dict[str, str]) -> str:
    for field in ("MinMemoryNode", "MinMemoryCPU"):
        if job.get(field):
            return job[field] + (" per CPU" if field == "MinMemoryCPU" else "")
    return "?"


def parse_record(line: str) -> dict[str, str]:
    """One line of ``scontrol -o show ...``: ``Key=Value`` pairs separated by spaces (a value may hold
    spaces only where SLURM puts a known free-text field last, which is not read here)."""
    out: dict[str, str] = {}
    for item in line.split():
        k, sep, v = item.partition("=")
        if sep:
            out[k] = v
    return out


Runner = Callable[[list[str]], str]


def _run(argv: list[str]) -> str:
    res = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    return res.stdout if res.returncode == 0 else ""


def largest_node(partition: str, run: Runner = _run) -> str:
    """The largest node of ``partition`` by memory, in words (``sinfo``): what the job must fit in."""
    best: tuple[int, str] | None = None
    for line in run(["sinfo", "-h", "-N", "-p", partition, "-o", "%N|%c|%m|%G"]).splitlines():
        parts = line.strip().split("|")
        if len(parts) != 4:
            continue
        name, cpus, mem, gres = parts
        try:
            m = int(mem.rstrip("+"))
        except ValueError:
            continue
        gpus = "no GPUs" if gres in ("(null)", "") else gres
        words = f"{cpus} CPUs, {m}M memory, {gpus} ({name})"
        if best is None or m > best[0]:
            best = (m, words)
    return best[1] if best else "no nodes"


def stuck_jobs(workdir: str | Path, user: str | None = None, run: Runner = _run) -> list[Stuck]:
    """This user's pending jobs whose working directory is ``workdir`` and that can never start."""
    user = user or getpass.getuser()
    want = os.path.realpath(workdir)
    out = []
    for line in run(["squeue", "-h", "-u", user, "-t", "PD", "-o", "%i|%r|%Z"]).splitlines():
        jobid, _, rest = line.strip().partition("|")
        reason, _, wd = rest.partition("|")
        if not jobid or not never_placed(reason) or os.path.realpath(wd) != want:
            continue
        job = parse_record(run(["scontrol", "-o", "show", "job", jobid]).strip())
        out.append(Stuck(jobid, reason, job, largest_node(job.get("Partition", ""), run)))
    return out


class Watch:
    """The daemon thread that reports and cancels stuck jobs (``stuck_jobs``) until Snakemake exits."""

    def __init__(
        self,
        workdir: str | Path,
        say: Callable[[str], None],
        *,
        interval_s: float = INTERVAL_S,
        run: Runner = _run,
        cancel: Callable[[str], None] | None = None,
        runs: dict[str, str] | None = None,
    ) -> None:
        self.workdir, self.say, self.interval_s, self.run = workdir, say, interval_s, run
        self.runs = runs or {}
        self.cancel = cancel or (lambda jobid: subprocess.run(["scancel", jobid], capture_output=True, timeout=60))
        self.reported: set[str] = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="coolsampler-slurm-watch", daemon=True)

    def check(self) -> list[Stuck]:
        """One look: report and cancel every stuck job not reported before; returns them."""
        new = [s for s in stuck_jobs(self.workdir, run=self.run) if s.jobid not in self.reported]
        for s in new:
            self.reported.add(s.jobid)
            self.say(s.message(self.runs))
            self.cancel(s.jobid)
        return new

    def _loop(self) -> None:
        while not self.stop.wait(self.interval_s):
            try:
                self.check()
            except Exception as e:  # never take Snakemake down; say why the watch stopped
                self.say(f"coolsampler: the watch for jobs SLURM cannot place stopped: {e}")
                return

    def start(self) -> Watch:
        self.thread.start()
        return self


class SlurmSetupError(RuntimeError):
    """SLURM refuses what the training jobs ask for (one line: which runs, the request, SLURM's words)."""


# sbatch options that name the job, its log and its directory, not what it asks of the cluster
_NAMING = ("--job-name", "--output", "--comment", "-D")  # each followed by its value
_NAMING_FLAGS = ("--parsable", "--export=ALL")


def request_args(job, settings) -> list[str]:
    """The sbatch options the executor plugin gives ``job``, rendered by the plugin itself
    (``get_submit_command``, ``set_gres_string``), less the job's name, log, comment and directory:
    partition (its ``slurm_partition`` resource, else the plugin's pick from the profile's
    partitions.yaml), account, time, memory, nodes, tasks, CPUs, GPUs and ``slurm_extra``."""
    from snakemake_executor_plugin_slurm.partitions import get_best_partition, read_partition_file
    from snakemake_executor_plugin_slurm.submit_string import get_submit_command
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    partition = job.resources.get("slurm_partition")
    config = getattr(settings, "partition_config", None)
    if not partition and config:
        partition = get_best_partition(read_partition_file(Path(config)), job, _Quiet())
    account = re.split(r"[,\s]+", str(job.resources.get("slurm_account") or "").strip())[0]
    params = {
        "run_uuid": "check",
        "slurm_logfile": "/dev/null",
        "comment_str": "check",
        "account": f" -A {shlex.quote(account)}" if account else "",
        "partition": f" -p {shlex.quote(str(partition))}" if partition else "",
        "workdir": "",
    }
    argv = shlex.split(get_submit_command(job, params, settings=settings) + set_gres_string(job))[1:]
    out, args = [], iter(argv)
    for arg in args:
        if arg in _NAMING:
            next(args, None)  # its value
        elif arg not in _NAMING_FLAGS:
            out.append(arg)
    return out


def refusal(args: list[str], run: Callable[[list[str]], subprocess.CompletedProcess] | None = None) -> str | None:
    """What SLURM says against a job with these sbatch options (``sbatch --test-only``: nothing is
    queued), or None when it would take it."""
    run = run or (lambda argv: subprocess.run(argv, capture_output=True, text=True, timeout=60))
    res = run(["sbatch", "--test-only", *args, "--wrap", "true"])
    if res.returncode == 0:
        return None
    said = [re.sub(r"^sbatch: (error: )?", "", line).strip() for line in (res.stderr + res.stdout).splitlines()]
    return "; ".join(line for line in said if line) or f"sbatch --test-only exited with {res.returncode}"


def check_requests(
    jobs: Iterable, settings, run: Callable[[list[str]], subprocess.CompletedProcess] | None = None
) -> None:
    """Before anything is submitted: SLURM would take every distinct request of the training jobs.

    Asked of SLURM itself (``sbatch --test-only``), so it judges what it would judge on submission: a
    partition that does not exist, more CPUs, memory or GPUs than any node of the partition has, a
    time above its limit. Without this, sbatch's refusal reaches the user as a failed job with the
    whole sbatch call and script, once per run, and a request it accepts but can never place pends in
    silence. Raises ``SlurmSetupError`` naming the runs, the request and SLURM's words."""
    by_request: dict[tuple[str, ...], list[str]] = {}
    for job in jobs:
        if job.rule.name == "train":
            key = str(getattr(job.wildcards, "key", job.wildcards))
            by_request.setdefault(tuple(request_args(job, settings)), []).append(key)
    for args, keys in by_request.items():
        said = refusal(list(args), run)
        if said:
            more = f" and {len(keys) - 1} more" if len(keys) > 1 else ""
            time = " (the time limit: its runtime EDIT line)" if "time limit" in said.lower() else ""
            raise SlurmSetupError(
                f"SLURM refuses rule train's request for run {keys[0]}{more} ({' '.join(args)}): {said}. "
                "Nothing was submitted: give rule train resources that fit (profiles/slurm: the lines "
                f"marked EDIT{time}, or --set-resources train:...)."
            )


class _Quiet:
    """A logger for the plugin's partition pick that says nothing (the plugin says it again on submit)."""

    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *a, **k: None


def watch_pending(workflow, say: Callable[[str], None]) -> Watch | None:
    """When this Snakemake submits to SLURM (the ``slurm`` executor): check what its training jobs ask
    for (``check_requests``, raising ``SlurmSetupError``), then start a ``Watch``."""
    plugin = getattr(workflow, "executor_plugin", None)
    if getattr(plugin, "name", None) != "slurm":
        return None
    check_requests(workflow.dag.needrun_jobs(), workflow.executor_settings)
    from snakemake_executor_plugin_slurm.utils import get_job_wildcards

    runs = {
        f"rule_train_wildcards_{get_job_wildcards(job)}": str(job.wildcards.key)
        for job in workflow.dag.needrun_jobs()
        if job.rule.name == "train"
    }
    return Watch(Path.cwd(), say, runs=runs).start()
