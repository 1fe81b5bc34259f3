"""Run verl for one run: environment, outer timeout, stall watchdog, progress, clean stop.

The CPU stack can hang silently (a failed weight sync inside vLLM never reaches the trainer), and a
cluster job can hang the same way. So every training process runs here under two guards: a wall-clock
timeout and a watchdog that fails the job when verl's step counter (its JSONL log) stops advancing.
verl runs in its own session; on any failure the whole process group — verl's driver, Ray, vLLM — is
killed by group id, never by process name. This module never imports verl.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coolsampler.spec.metrics_schema import pick
from coolsampler.spec.runlog import as_step, assemble, attempt_logs, parse_line, read_jsonl, train_steps
from coolsampler.train.checkpoints import clear, resume_point
from coolsampler.train.platform import PREFORK_ENV
from coolsampler.worker import prefork
from coolsampler.worker.env import RUN_TOKEN_ENV
from coolsampler.worker.weight_socket import private_dir, socket_dir


class TrainingFailed(RuntimeError):
    """verl failed, hung or ran out of time; the message says which. ``progress`` is where it was
    (and its ``pgid``, so a caller or a test can check that nothing of the group survived)."""

    def __init__(self, message: str, progress: Progress | None = None) -> None:
        super().__init__(message)
        self.progress = progress


@dataclass
class Progress:
    step: int = 0
    started: float = 0.0
    first_step_at: float | None = None
    last_advance: float = 0.0
    pgid: int | None = None  # verl's process group (= its session): what the clean stop kills


class JsonlTail:
    """Reads verl's JSONL as it grows (only the new complete lines each time): the highest step, and
    the merged record of each step (validation metrics arrive in the same step's record)."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.step = path, 0, 0
        self.records: dict[int, dict[str, Any]] = {}

    def update(self) -> int:
        if not self.path.exists():
            return self.step
        with self.path.open("rb") as f:
            f.seek(self.offset)
            chunk = f.read()
        end = chunk.rfind(b"\n") + 1  # a half-written last line is read next time
        self.offset += end
        for line in chunk[:end].splitlines():
            if (rec := parse_line(line)) is None or (step := as_step(rec[0])) is None:
                continue
            data = rec[1]
            self.records.setdefault(step, {}).update(data)
            if "training/global_step" in data:
                self.step = max(self.step, step)
        return self.step


def clock(seconds: float) -> str:
    """``h:mm`` (a run's ETA and elapsed time read at a glance; minutes are what a user plans by)."""
    m = int(round(seconds / 60))
    return f"{m // 60}:{m % 60:02d}"


def progress_line(step: int, total: int, data: dict[str, Any], elapsed: float, eta: float | None) -> str:
    """``step 12/64  reward 0.52  val 0.48  kl 1.2e-03  entropy 0.41  (0:03 elapsed, ETA 0:04)``: the
    numbers a researcher watches (the metrics table's columns, read through its schema)."""
    parts = [f"step {step}/{total}"]
    for label, column, fmt in (
        ("reward", "reward", "{:.3f}"),
        ("val", "val_acc", "{:.3f}"),
        ("kl", "kl", "{:.2e}"),
        ("entropy", "entropy", "{:.3f}"),
    ):
        v = pick(data, column)
        if isinstance(v, (int, float)) and v == v:
            parts.append(f"{label} {fmt.format(v)}")
    when = f"{clock(elapsed)} elapsed" + (f", ETA {clock(eta)}" if eta is not None else "")
    return "  ".join(parts) + f"  ({when})"


def logged_step(attempts: Iterable[Path]) -> int:
    """The highest step the earlier attempts' logs reached: what a new attempt may resume from
    (``coolsampler.train.checkpoints.resume_point`` picks the newest complete checkpoint it covers)."""
    return max((s for a in attempts for s in train_steps(read_jsonl(a)[0])), default=0)


# Test-kit modules (coolsampler.testkit.tap, .faults) that tests of the real stack add to every verl
# process of every run a command trains, e.g. the rehearsal's (``COOLSAMPLER_INSTRUMENT=coolsampler.testkit.tap
# snakemake ... rehearsal``); the tap then writes into each run's own ``tap/``. Never set in production:
# the test kit is not in the image.
INSTRUMENT_ENV = "COOLSAMPLER_INSTRUMENT"
TAP_MODULE = "coolsampler.testkit.tap"


def _instrument(env: dict[str, str], run_dir: Path) -> None:
    modules = [m for m in env.get(INSTRUMENT_ENV, "").split(",") if m]
    if not modules:
        return
    env["VERL_USE_EXTERNAL_MODULES"] = ",".join([*filter(None, [env.get("VERL_USE_EXTERNAL_MODULES")]), *modules])
    if TAP_MODULE in modules and not env.get("COOLSAMPLER_TAP_DIR"):
        (run_dir / "tap").mkdir(parents=True, exist_ok=True)
        env["COOLSAMPLER_TAP_DIR"] = str(run_dir / "tap")


def verl_command(overrides: list[str], env: dict[str, str], python: list[str] | None = None) -> list[str]:
    """The command that trains: ``python -m verl.trainer.main_ppo OVERRIDES``, or, where the platform
    sets PREFORK_ENV (cpu, outside a container), the same under ``coolsampler.worker.prefork``, which
    forks verl's processes from one that has already imported torch, transformers and vLLM."""
    python = python or [sys.executable]
    if env.get(PREFORK_ENV) == "1" and python == [sys.executable]:
        server = [*python, "-m", "coolsampler.worker.prefork"]
        return [*server, "verl.trainer.main_ppo", *overrides, prefork.ray_override()]
    return [*python, "-m", "verl.trainer.main_ppo", *overrides]


def ray_env(token: str) -> dict[str, str]:
    """Ray's temporary directory for one attempt: the attempt's private directory (created here, 0700,
    removed when the attempt ends), beside its weight-push socket.

    Why not Ray's default ``/tmp/ray``: every job on a node shares it. verl's ``ray.init()`` (no
    address) reads ``/tmp/ray/ray_current_cluster`` and *joins* the Ray that a ``ray start`` left
    there (someone else's, on a shared node) instead of starting its own; a ``/tmp/ray`` made by
    another user cannot be written at all; and Ray never removes its sessions. In its own directory
    each attempt starts its own Ray, whose ports Ray picks free, and leaves nothing behind. A
    ``RAY_ADDRESS`` inherited from the submitting shell (``sbatch --export=ALL``) would do the same as
    the file, so run_verl drops it. A Docker run does not get this variable (its ``/tmp`` is the
    container's own); Apptainer's shares the host's ``/tmp`` and inherits it."""
    return {"RAY_TMPDIR": str(private_dir(token))}


def run_verl(
    overrides: list[str],
    *,
    jsonl: Path,
    log: Path,
    total_steps: int,
    env: dict[str, str] | None = None,
    timeout_s: float = 3600,
    stall_s: float = 600,
    startup_s: float | None = None,
    poll_s: float = 2.0,
    on_progress: Callable[[str], None] | None = None,
    prefix: list[str] | None = None,
    cmd: list[str] | None = None,
) -> Progress:
    """Run ``python -m verl.trainer.main_ppo`` and wait, under the timeout and the stall watchdog.

    ``startup_s`` (default: ``stall_s``) bounds the time to the first logged step. Raises
    TrainingFailed with the reason and the tail of the log; the process group is gone by then.

    ``prefix`` (container runs): argv put before the verl command, e.g. ``apptainer exec
    --nv <sif>`` from ``coolsampler.train.container.training_prefix``; verl then runs under the image's
    ``python3``, not this interpreter, which exists only on the host.

    ``cmd`` replaces the whole verl command (``overrides`` and ``prefix`` are then unused); it exists
    so the watchdog's own tests can run a fake trainer in seconds instead of verl in minutes.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    # Quiet logs: verl's own output (Ray, vLLM, Hydra: thousands of lines) goes to its own file;
    # ``log`` (the job's log) keeps the command's outcome, one progress line per step and, on failure,
    # the reason and the last lines of verl's output.
    verl_log = log.with_name("verl.log")
    earlier = attempt_logs(jsonl.parent)  # verl truncates its log on starting: one file per attempt
    logged_before = logged_step(earlier)
    current = jsonl.parent / "attempts" / f"{len(earlier) + 1:02d}.jsonl"
    current.parent.mkdir(parents=True, exist_ok=True)
    token = uuid.uuid4().hex[:12]  # this attempt's own weight-push socket (weight_socket) and Ray
    full_env = {
        **os.environ,
        **(env or {}),
        "VERL_FILE_LOGGER_PATH": str(current),
        "PYTHONUNBUFFERED": "1",
        RUN_TOKEN_ENV: token,
        **ray_env(token),
    }
    full_env.pop("RAY_ADDRESS", None)  # see ray_env: verl's ray.init() must start this attempt's own Ray
    _instrument(full_env, jsonl.parent)
    # in a container the image's interpreter runs verl
    python = [*prefix, "python3"] if prefix else [sys.executable]
    start = resume_point(overrides, logged_before)
    cleared = clear(start)
    overrides = [*overrides, *start.overrides]
    cmd = list(cmd) if cmd else verl_command(overrides, full_env, python)
    say = on_progress or (lambda s: None)
    # Progress is that of this attempt: a resumed (or restarted) attempt logs from its checkpoint on.
    prog = Progress(step=0, started=time.time())
    prog.last_advance = prog.started
    resumed_from = None
    tail = JsonlTail(current)
    before_dumps: int | None = None
    with log.open("a") as joblog:
        joblog.write(f"attempt {len(earlier) + 1}: verl's output goes to {verl_log.name}\n")
        if earlier:
            joblog.write(f"attempt {len(earlier) + 1}: {start.reason}\n")
        joblog.writelines(f"attempt {len(earlier) + 1}: {line}\n" for line in cleared)
    with verl_log.open("ab") as logf:
        logf.write(("$ " + " ".join(cmd) + "\n").encode())
        logf.flush()
        proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=full_env, start_new_session=True)
        prog.pgid = proc.pid  # start_new_session: the leader's pid is the group (and session) id
        reason = None
        try:
            while True:
                rc = proc.poll()
                step = tail.update()
                now = time.time()
                if step > prog.step:
                    if prog.first_step_at is None:
                        prog.first_step_at, resumed_from = now, step - 1
                    prog.step, prog.last_advance = step, now
                    done = step - resumed_from
                    rate = (now - prog.first_step_at) / max(1, done - 1) if done > 1 else None
                    eta = rate * (total_steps - step) if rate else None
                    say(progress_line(step, total_steps, tail.records.get(step, {}), now - prog.started, eta))
                if rc is not None:
                    if rc != 0:
                        reason = f"verl exited with code {rc}"
                    elif max(prog.step, logged_before) < total_steps:
                        # an attempt stopped after its last step was logged (a preemption while the job
                        # finished) leaves nothing to train: verl resumes from the final checkpoint and exits
                        reason = f"verl exited at step {prog.step} of {total_steps}"
                    break
                limit = (startup_s or stall_s) if prog.first_step_at is None else stall_s
                if now - prog.started > timeout_s:
                    reason = f"timeout: {timeout_s:.0f}s exceeded at step {prog.step}/{total_steps}"
                elif now - prog.last_advance > limit:
                    reason = f"stalled: no new step for {limit:.0f}s (last step {prog.step}/{total_steps})"
                if reason:
                    if reason.startswith("stalled"):
                        logf.flush()
                        before_dumps = verl_log.stat().st_size  # the tail shown is verl's, not py-spy's
                        _dump_stacks(prog.pgid, logf)
                    break
                time.sleep(poll_s)
        finally:
            _kill_group(proc)
            _remove_socket_dir(full_env[RUN_TOKEN_ENV])
    if reason:
        with verl_log.open("rb") as f:
            data = f.read() if before_dumps is None else f.read(before_dumps)
        last = data.decode(errors="replace").splitlines()[-25:]
        if reason.startswith("stalled"):
            last = [f"(py-spy dumps of the stalled processes: {verl_log})", *last]
        msg = reason + "\n--- last lines of " + str(verl_log) + " ---\n" + "\n".join(last)
        with log.open("a") as joblog:
            joblog.write(f"FAILED: {msg}\n")
        raise TrainingFailed(msg, prog)
    assemble([*earlier, *([current] if current.exists() else [])], jsonl)  # verl may log nothing (see above)
    return prog


@dataclass(frozen=True)
class ProcInfo:
    pid: int
    comm: str
    state: str
    ppid: int
    pgrp: int
    session: int


def proc_table() -> list[ProcInfo]:
    """Every process of this Linux machine, from /proc (empty elsewhere). Processes are selected by
    id (group, session, parent) in this project, never by name."""
    out = []
    try:
        entries = list(Path("/proc").iterdir())
    except OSError:
        return out
    for d in entries:
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp session ...; comm may hold spaces, so split after the ')'
        fields = stat[stat.rindex(")") + 2 :].split()
        if len(fields) > 3:
            comm = stat[stat.index("(") + 1 : stat.rindex(")")]
            out.append(ProcInfo(int(d.name), comm, fields[0], int(fields[1]), int(fields[2]), int(fields[3])))
    return out


def session_members(sid: int) -> list[int]:
    """Live (non-zombie) processes of session ``sid``.

    Why not the process group alone: Ray's workers (the TaskRunner, TransferQueue and storage
    actors, vLLM servers) each call setpgid and leave verl's process group, but they stay in the
    session that ``start_new_session`` opened, whose id is verl's pid. Selected by id, never by name.
    """
    return [p.pid for p in proc_table() if p.session == sid and p.state not in ("Z", "X")]


def _signal_all(pgid: int, sig: int) -> bool:
    """Send ``sig`` to verl's process group and to every process of its session; False if none is left."""
    hit = False
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)
        hit = True
    for pid in session_members(pgid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
            hit = True
    return hit


def _dump_stacks(sid: int, logf) -> None:
    """Before killing a stalled run, write where each of its Python processes is stuck (py-spy, if
    installed): a silent hang becomes a diagnosable one."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        return
    for pid in session_members(sid)[:24]:
        try:
            out = subprocess.run([spy, "dump", "--pid", str(pid)], capture_output=True, timeout=20).stdout
        except (subprocess.TimeoutExpired, OSError):
            continue
        logf.write(f"--- py-spy dump of {pid} (stalled run) ---\n".encode() + out)
    logf.flush()


def _remove_socket_dir(token: str) -> None:
    """Remove this attempt's private directory (``coolsampler.worker.weight_socket``), best effort, once
    its processes are gone: its weight-push sockets and its Ray session (``ray_env``), nothing else.
    Only that directory: a symlink under its name is left alone (rmtree refuses to follow one), and
    a container with its own /tmp (docker) leaves only the empty directory here."""
    shutil.rmtree(socket_dir(token), ignore_errors=True)


def _kill_group(proc: subprocess.Popen) -> None:
    """Stop verl and everything it started (Ray, vLLM engines): SIGTERM the group and its session,
    wait for them to go, then SIGKILL whatever is left."""
    pgid = proc.pid  # started with start_new_session: the group and session id is the leader's pid
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        if not _signal_all(pgid, sig):
            break
        deadline = time.time() + wait
        while time.time() < deadline and (proc.poll() is None or session_members(pgid)):
            time.sleep(0.2)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
