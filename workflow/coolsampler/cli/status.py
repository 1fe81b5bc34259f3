"""``coolsampler status``: where every run of a study stands, read from its run directory as it is written.

What a run directory holds (``coolsampler.train.paths``, the Snakefile header; ``coolsampler.train.launch`` and
``coolsampler.train.job`` write it):

* while training: ``attempts/NN.jsonl`` (verl's file logger, one file per attempt, one line per step),
  ``train.log`` (the job's log: an ``attempt N: ...`` line at the start of each attempt, one
  ``[coolsampler] <key>: step k/T ...`` line per step, ``FAILED: ...`` on failure), ``verl.log`` (verl's
  console, one ``$ <command>`` line per attempt), ``checkpoints/``;
* once training finished: ``train.jsonl`` (the attempts joined) and ``run.yaml`` (written last: a killed
  or failed job leaves neither, Snakemake deletes them), then ``metrics.parquet`` + ``status.json``
  (rule parse).

States, decided in this order:

* **done**: ``run.yaml`` and ``train.jsonl`` exist (the detail says whether the log is whole, per
  ``status.json``, or not parsed yet);
* **failed**: the log says so: a ``[coolsampler] <key>: failed: <reason>`` line after the last attempt
  started, or, once no step came for longer than the stall threshold, the last Python error line of the
  current attempt (the reason shown), or the watchdog's py-spy dumps of a stalled run;
* **stalled**: no new step for longer than the stall threshold (below), and no error in the log;
* **running**: an attempt has started and is within the threshold (step k/T, last validation accuracy,
  KL, ETA);
* **not started**: nothing in the run directory;
* **bad input**: a file of the run directory that cannot be read or is not what it should be (a
  ``status.json`` that is not the object rule parse writes, a log that is not UTF-8, a directory where a
  file belongs): its row says which and why, one line on stderr names it
  (``coolsampler status: <file>[:<key>]: <problem>``), and the other runs are still shown.

Stall threshold: ``max(STALL_STEPS x the median step time, 2 x the longest step, STALL_FLOOR_S)``, capped
at the watchdog's own limit (``stall_min`` of the study, else of its platform), since past that the
watchdog kills the job. A step's time is verl's ``timing_s/step`` plus ``timing_s/testing`` (validation
runs outside verl's step timer). Before an attempt's first step the limit is the watchdog's start-up
limit (2 x ``stall_min``), and the age is that of ``train.log``. The time since the last step is the age
of the current attempt's log file, which verl writes once per step.

Exit status: 2 when any run's files were refused (bad input), else 0 when every run is done, 1 when any
run failed or stalled, 3 otherwise (runs still running or not started). Light: no verl, vLLM or torch.
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coolsampler.cli import DEFAULT_STUDY
from coolsampler.results.loaders import load_status
from coolsampler.results.metrics import column_value
from coolsampler.spec.inputs import EXIT_INPUT, InputError
from coolsampler.spec.runlog import attempt_logs, run_records, step_times, train_steps, trained
from coolsampler.spec.study import Run, Study
from coolsampler.train.overrides import training_study
from coolsampler.train.paths import Layout
from coolsampler.train.platform import get_platform

STALL_STEPS = 10  # a validation or a checkpoint save takes a few steps' time: ten is not yet a stall
STALL_FLOOR_S = 120.0  # below this, a slow file system or a busy host is not yet a stall

STATES = ("done", "running", "stalled", "failed", "not started")
BAD_INPUT = "bad input"  # a run whose files were refused: counted only where there is one

# A Python exception line ("RuntimeError: ...", "ray.exceptions.RayTaskError(...): ..."), as verl, Ray
# and the training job print them; warnings ("UserWarning: ...") do not match.
_ERROR_RE = re.compile(r"(?:^|[\s:])((?:[A-Za-z_][\w.]*)?(?:Error|Exception)(?:\([^)]*\))?): (.*)$")
_ANSI_RE = re.compile(r"\x1b\[[0-9;]*m")


@dataclass
class RunState:
    """One run's state and what was read to decide it."""

    key: str
    state: str
    total: int
    step: int | None = None
    val_acc: float | None = None
    val_step: int | None = None
    kl: float | None = None
    eta_s: float | None = None
    idle_s: float | None = None  # seconds since the last step (or, in start-up, since train.log changed)
    limit_s: float | None = None  # the stall threshold applied
    detail: str = ""
    attempts: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    error: InputError | None = None  # state BAD_INPUT: the file refused, and why


def hmm(seconds: float | None) -> str:
    """Seconds as h:mm (to the nearest minute), the way a person reads an ETA or an age."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    minutes = round(max(0.0, seconds) / 60)
    return f"{minutes // 60}:{minutes % 60:02d}"


def watchdog_stall_s(study: Study) -> float:
    """The watchdog's stall limit for the study's runs: its ``stall_min``, else its platform's (as rule
    train passes it)."""
    platform = get_platform(study.raw.get("profile", "cpu"))
    return 60.0 * float(study.raw.get("stall_min", platform.stall_min))


def stall_threshold(times: list[float], watchdog_s: float) -> float:
    """Seconds without a new step after which a run counts as stalled (module docstring)."""
    if not times:
        return watchdog_s
    derived = max(STALL_STEPS * statistics.median(times), 2 * max(times), STALL_FLOOR_S)
    return min(derived, watchdog_s)


def _last(records: dict[int, dict[str, Any]], column: str) -> tuple[int | None, float | None]:
    for step in sorted(records, reverse=True):
        val = column_value(records[step], column)
        if isinstance(val, (int, float)) and not isinstance(val, bool) and math.isfinite(val):
            return step, float(val)
    return None, None


_ATTEMPT_RE = re.compile(r"^attempt \d+: ")


def _log_of_current_attempt(log: Path) -> tuple[int, list[str]]:
    """How many attempts the log shows started and the lines since the last one. An attempt starts at
    an ``attempt N: ...`` line of the job's log (coolsampler.train.launch) or a ``$ <command>`` line (verl.log,
    and job logs of earlier versions, which held verl's output too)."""
    if not log.exists():
        return 0, []
    lines = [_ANSI_RE.sub("", x) for x in log.read_text(errors="replace").splitlines()]
    starts = [i for i, x in enumerate(lines) if x.startswith("$ ") or _ATTEMPT_RE.match(x)]
    return len(starts), lines[starts[-1] + 1 :] if starts else lines


def _failure_markers(key: str) -> tuple[str, ...]:
    """How a job's log says that an attempt failed: coolsampler.train.launch's ``FAILED: <reason>``, the train
    job's ``[coolsampler] KEY: failed: ...``, or Snakemake's ``train KEY failed: ...``."""
    return ("FAILED: ", f"[coolsampler] {key}: failed: ", f"train {key} failed: ")


def failure_reason(key: str, lines: list[str]) -> str | None:
    """Why the current attempt failed, from its log lines, or None if they show no failure.

    In order: the training job's own verdict (``[coolsampler] KEY: failed: ...``, or Snakemake's
    ``train KEY failed: ...`` when stderr goes to the log), the watchdog's py-spy dump of a stalled run,
    the last Python error line.
    """
    for line in reversed(lines):
        for marker in _failure_markers(key):
            if marker in line:
                return line.split(marker, 1)[1].strip()
    if any("(stalled run) ---" in x for x in lines):
        return "stalled: stopped by the watchdog (py-spy dumps in verl.log)"
    for line in reversed(lines):
        m = _ERROR_RE.search(line.strip())
        if m:
            return f"{m.group(1)}: {m.group(2)}".strip()[:200]
    return None


def run_state(run: Run, run_dir: Path, *, watchdog_s: float, now: float | None = None) -> RunState:
    """The state of ``run`` from what its directory holds now (module docstring)."""
    now = time.time() if now is None else now
    d = Path(run_dir)
    st = RunState(run.key, "not started", run.steps)
    attempts = attempt_logs(d)
    st.attempts = len(attempts)
    done, log = trained(d), d / "train.log"
    if not done and not attempts and not log.exists():
        return st
    # the attempts joined as train.jsonl will be: a resumed attempt's steps replace the killed one's
    records = run_records([d / "train.jsonl"] if done else attempts)
    steps = train_steps(records)
    st.step = steps[-1] if steps else 0
    st.val_step, st.val_acc = _last(records, "val_acc")
    _, st.kl = _last(records, "kl")
    if done:
        st.state = "done"
        status = load_status(d / "status.json")
        if status is not None:
            st.detail = "" if status.complete else "log incomplete: " + "; ".join(status.problems)
        else:
            st.detail = "not parsed yet (rule parse)"
        return st
    started, current = _log_of_current_attempt(log)
    st.attempts = max(st.attempts, started)
    # The current attempt: the last one the log shows started. Its file exists once verl's logger is up;
    # until its first training step it is in start-up.
    cur_file = attempts[-1] if attempts and len(attempts) >= started else None
    cur_records = run_records([cur_file]) if cur_file else {}
    if train_steps(cur_records):
        times = step_times(cur_records) or step_times(records)
        st.limit_s = stall_threshold(times, watchdog_s)
        st.idle_s = now - cur_file.stat().st_mtime
        if times:
            st.eta_s = statistics.fmean(times) * max(0, run.steps - st.step)
        phase = ""
    else:
        st.limit_s = 2 * watchdog_s  # the watchdog's start-up limit
        ages = [now - p.stat().st_mtime for p in (log, cur_file) if p is not None and p.exists()]
        st.idle_s = min(ages) if ages else None
        phase = "starting" + (f" (attempt {started})" if started > 1 else "")
    # verl's own output (verl.log, since the job's log was made quiet) holds its tracebacks
    _, verl_current = _log_of_current_attempt(d / "verl.log")
    reason = failure_reason(run.key, current) or failure_reason(run.key, verl_current)
    explicit = any(m in x for x in current for m in _failure_markers(run.key))
    idle = st.idle_s is not None and st.limit_s is not None and st.idle_s > st.limit_s
    if explicit or (idle and reason):
        st.state, st.detail = "failed", reason or ""
        st.eta_s = None
    elif idle:
        st.state = "stalled"
        st.detail = f"no new step for {hmm(st.idle_s)} (limit {hmm(st.limit_s)})" + (f"; {phase}" if phase else "")
        st.eta_s = None
    else:
        st.state, st.detail = "running", phase
    if started > 1 and st.state != "failed":
        st.detail = (st.detail + "; " if st.detail else "") + f"attempt {started}"
    return st


def study_states(study: Study, results: str | Path | None = None, *, now: float | None = None) -> list[RunState]:
    """The state of every run of ``study``, its run directories under ``results`` (default: the study's)."""
    layout = Layout.from_config(study.raw, results if results is not None else study.results)
    limit = watchdog_stall_s(study)
    return [_checked_state(r, Path(layout.run_dir(r.key)), watchdog_s=limit, now=now) for r in study.runs]


def _checked_state(run: Run, run_dir: Path, *, watchdog_s: float, now: float | None) -> RunState:
    """``run_state``, or a BAD_INPUT row naming the file that could not be read: one run's bad file must
    not end the table of the others."""
    try:
        if run_dir.exists() and not run_dir.is_dir():
            raise InputError(run_dir, "a file where the run's directory should be")
        return run_state(run, run_dir, watchdog_s=watchdog_s, now=now)
    except InputError as e:
        error = e
    except OSError as e:  # a directory or file this user may not read
        error = InputError(e.filename or run_dir, f"cannot be read ({e.strerror or e})")
    return RunState(run.key, BAD_INPUT, run.steps, detail=str(error), error=error)


def table(states: list[RunState]) -> str:
    """A compact, aligned table: one line per run, then a count per state."""
    head = ("run", "state", "step", "val acc", "KL", "ETA", "detail")
    rows = [head]
    for s in states:
        step = "-" if s.step is None else f"{s.step}/{s.total}"
        val = "-" if s.val_acc is None else f"{s.val_acc:.3f}@{s.val_step}"
        eta = hmm(s.eta_s) if s.state == "running" else "-"
        kl = "-" if s.kl is None else f"{s.kl:.3g}"
        rows.append((s.key, s.state, step, val, kl, eta, s.detail))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head) - 1)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1] for r in rows]
    counts = {k: sum(1 for s in states if s.state == k) for k in STATES}
    if bad := sum(1 for s in states if s.state == BAD_INPUT):
        counts[BAD_INPUT] = bad
    lines.append(f"{len(states)} runs: " + ", ".join(f"{n} {k}" for k, n in counts.items()))
    return "\n".join(x.rstrip() for x in lines) + "\n"


def refresh_lines(runs: list[Run], *, costed: bool = False) -> list[str]:
    """Lines naming the runs whose sampler is not refreshed every N steps (a staleness guard or a fixed
    schedule, ``coolsampler.spec.guard``). ``costed``: also say how ``coolsampler plan`` costs them."""
    other = [r for r in runs if r.guard is not None or r.schedule is not None]
    if not other:
        return []
    head = f"{len(other)} run(s) refreshed by a guard or a schedule"
    if costed:
        head += (
            "; each is costed as a run refreshed every N steps, its longest interval (a step's time is measured"
            " or the paper's; every refresh the guard adds costs one more weight push on top)"
        )
    return [head + ":", *(f"  {r.key}: {r.refresh_text}" for r in other)]


def exit_code(states: list[RunState]) -> int:
    """2 some run's files refused, 0 every run done, 1 some run failed or stalled, 3 otherwise (module
    docstring)."""
    if any(s.state == BAD_INPUT for s in states):
        return EXIT_INPUT
    if any(s.state in ("failed", "stalled") for s in states):
        return 1
    return 0 if all(s.state == "done" for s in states) else 3


def _status(args: argparse.Namespace) -> int:
    study = training_study(args.study)
    if args.results and Path(args.results).exists() and not Path(args.results).is_dir():
        raise InputError(args.results, "a file; --results names the folder that holds runs/")
    states = study_states(study, args.results)
    results = Path(args.results or study.results)
    print(f"study {study.name}, results {results}")
    if not results.is_dir():
        print(f"({results} does not exist here: no run has started, or run from the repository root, or --results)")
    print(table(states), end="")
    for st in states:  # each refused file in one line: its row above says the same
        if st.error is not None:
            print(st.error.line("status"), file=sys.stderr)
    for line in refresh_lines(study.runs):
        print(line)
    print(
        f"stalled = no new step for max({STALL_STEPS} x median step time, 2 x longest step,"
        f" {STALL_FLOOR_S / 60:.0f} min), at most the watchdog's stall_min (start-up: 2 x stall_min)"
    )
    return exit_code(states)


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("status")
    s.add_argument("--study", default=DEFAULT_STUDY, help="study config")
    s.add_argument("--results", help="results directory (default: the study's results:)")
    s.set_defaults(func=_status)
