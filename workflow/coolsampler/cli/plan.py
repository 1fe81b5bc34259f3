"""``coolsampler plan``: what a study costs before anything is submitted: runs, GPU-hours, wall time, disk.

Per (model, task) of the study, from the best source there is, each named in the output:

* **step time**: measured on finished runs of this results directory trained on the same platform
  (``run.yaml`` ``platform:``): verl's ``timing_s/step`` + ``timing_s/testing`` per step of
  ``train.jsonl``, plus the start-up (``train.benchmark.tsv`` wall time minus those steps); else the
  paper's (``coolsampler.spec.settings.step_seconds``: Appendix D's hours per 300-step run, on the gpu
  platform only, the same numbers ``settings.checkpoint_interval`` derives checkpoints from); else
  unknown ("-": train one run, then plan again);
* **disk per run**: measured (the largest finished run directory of that model and task), else one
  checkpoint as ``coolsampler.train.memory.checkpoint_bytes`` computes it for the paper's models; at the
  peak a run saving holds a second checkpoint (the previous one is retired only once the new one counts),
  which the total's peak adds for the runs that train at once;
* **GPUs a run holds**: its model's ``gpus_per_run`` (the study's ``models:``, else the size rule), the
  count the training job asks for and ``coolsampler memory`` checks; a paper step time is scaled from
  the paper's four GPUs to that count, in proportion (a model: no GPU run has measured it);
* **GPU-hours**: hours per run x its GPUs, for the runs not done yet and for all;
* **wall time**: the remaining runs, ``parallel`` at a time (from the profile: the gpu-box profile's
  ``gpu`` resource / the most GPUs a run holds, the SLURM profile's ``jobs``, on CPU the smoke study's ``--cores 2``
  / the platform's threads per run), longest-first; queueing time on a cluster is not included.

The runs' platform is their study's on every profile (``coolsampler.train.platform.study_platform``, as
the Snakefile reads it: a cpu study on SLURM is cpu jobs, one CPU and no GPU), under the profile's
``set-resources: train:`` (its time limit and memory, read and checked by ``coolsampler.train.profile``).

Done runs (``run.yaml`` + ``train.jsonl``, as ``coolsampler.cli.status``) are marked and left out of the
remaining cost. The output opens with the cost in one line; the table per model and task and the
memory fit follow, the processes a run starts only with ``--detail``. ``--run KEY`` plans those runs of
the study alone (one arm on one GPU box) and prints the Snakemake command that trains them;
``--overlay FILE``, ``--gpu-memory-gib`` and ``--host-memory-gib`` check the memory on one's own GPUs and host
(``coolsampler memory``). The command is printed whole, to paste as it is: with ``--resources gpu=G`` where
the runs hold fewer GPUs than the gpu-box profile declares (``snakemake_options``).
Exit status 1 when a run's memory does not fit (as ``coolsampler memory``). Light: no verl, vLLM or torch.
"""

from __future__ import annotations

import argparse
import csv
import heapq
import math
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from coolsampler.cli import DEFAULT_STUDY, positive_float, positive_int
from coolsampler.cli.memory import HOST_MEMORY_HELP, OVERLAY_HELP, host_profile
from coolsampler.cli.status import hmm, refresh_lines
from coolsampler.results.run_yaml import run_yaml_document
from coolsampler.spec.inputs import EXIT_INPUT, InputError
from coolsampler.spec.runlog import parse_line, run_records, step_times, trained, utf8_bytes
from coolsampler.spec.settings import PAPER_RECIPE, step_seconds
from coolsampler.spec.shipped import PROFILES as PROFILE_DIR
from coolsampler.spec.shipped import ROOT
from coolsampler.spec.study import Run, Study, StudyError, load_study
from coolsampler.train.overrides import check_extra_overrides, recipe_for
from coolsampler.train.paths import Layout
from coolsampler.train.platform import Platform, study_platform
from coolsampler.train.profile import Profile, job_platform, load_profile
from coolsampler.train.version import REPO

PROFILE_NAME = "config.v8+.yaml"
SLURM_PROFILE = PROFILE_DIR / "slurm" / PROFILE_NAME  # the per-job memory the memory fit checks against

# Where a study runs: one GPU machine, a SLURM cluster, this machine (`--cores 2`). Where, not on what: a
# run's platform is its study's (``coolsampler.train.platform.study_platform``, as the Snakefile reads it).
PROFILES = ("gpu", "slurm", "cpu")
PROFILE_FILE = {"gpu": "gpu-box", "slurm": "slurm"}
CPU_CORES = 2  # the smoke study's `snakemake --cores 2` (README)
GIB = 1024**3


@dataclass
class Measured:
    """What finished runs of one (model, task) on one platform show."""

    runs: int = 0
    step_s: list[float] = field(default_factory=list)  # every step's wall time over those runs
    startup_s: list[float] = field(default_factory=list)
    disk: list[int] = field(default_factory=list)


@dataclass
class Group:
    """The plan for the runs of one (model, task)."""

    model: str
    task: str
    runs: list[Run]
    done: list[str]
    step_s: float | None
    startup_s: float
    source: str
    disk_per_run: int | None
    disk_source: str
    save_extra: int | None = None  # a second checkpoint, held while a save is under way
    gpus: int = 0  # GPUs one run holds (its model's gpus_per_run on a GPU platform; 0 on CPU)

    def hours(self, run: Run) -> float | None:
        if self.step_s is None:
            return None
        return (self.startup_s + run.steps * self.step_s) / 3600


@dataclass
class Plan:
    study: str
    profile: str
    platform: Platform
    parallel: int
    parallel_source: str
    groups: list[Group]
    memory: list[Any] = field(default_factory=list)  # coolsampler.train.memory.Setting per model and task (gpu)
    timeout_min: float | None = None  # the study's own watchdog limit (timeout_min), if it sets one
    host_profile: Path | None = SLURM_PROFILE  # the per-job memory the host is checked against (None: the host's)
    refused: list[InputError] = field(default_factory=list)  # finished runs' files that were not what they claim
    left_out: set[str] = field(default_factory=set)  # the runs those files left out of the measurement


def _dir_bytes(d: Path) -> int:
    return sum(p.stat().st_size for p in d.rglob("*") if p.is_file() and not p.is_symlink())


def _seconds(value: Any, *, zero: bool = False) -> bool:
    """A logged time is a finite number of seconds, > 0 (``zero``: >= 0); not a bool, a NaN or text."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return False
    return value >= 0 if zero else value > 0


def _line_of(log: Path, step: int) -> int | None:
    """The line of ``log`` that holds ``step``'s record, to name it in the refusal; None where it cannot be told."""
    lines = utf8_bytes(log).split(b"\n")
    return next((i for i, raw in enumerate(lines, 1) if (rec := parse_line(raw)) and rec[0] == step), None)


def check_step_times(log: Path, records: dict[int, dict[str, Any]]) -> None:
    """Every step time the log records is a number of seconds > 0 (its validation time >= 0): a negative,
    zero, NaN or text one is an ``InputError`` naming the log and line, never a negative cost."""
    for step in sorted(records):
        data = records[step]
        for name, zero in (("timing_s/step", False), ("timing_s/testing", True)):
            if name in data and not _seconds(data[name], zero=zero):
                raise InputError(
                    log,
                    f"{name} is {data[name]!r} at step {step}; a step's wall time is a number of seconds"
                    f" {'>=' if zero else '>'} 0 (this run's times are left out of the plan)",
                    _line_of(log, step),
                )


def measure(
    run_dir: Path, platform: str, refused: list[InputError] | None = None
) -> tuple[list[float], float | None, int] | None:
    """Step times, start-up and disk of one finished run trained on ``platform``; None if it was not. A
    step time that is no time at all raises ``InputError`` naming the log and line; a wall time that is
    none leaves the start-up unknown, its ``InputError`` appended to ``refused`` (raised where None)."""
    if not trained(run_dir):
        return None
    # the reader analyze reads it with: a run.yaml that is no mapping is refused, naming the file
    info = run_yaml_document(run_dir / "run.yaml")
    if info.get("platform") != platform:
        return None
    log = run_dir / "train.jsonl"
    records = run_records([log])
    check_step_times(log, records)
    times = step_times(records)
    startup = None
    bench = run_dir / "train.benchmark.tsv"
    if bench.exists() and times:
        rows = list(csv.DictReader(bench.open(), delimiter="\t"))
        if rows and rows[-1].get("s"):
            try:
                wall = float(rows[-1]["s"])
            except ValueError:
                wall = math.nan
            if _seconds(wall, zero=True):
                startup = max(0.0, wall - sum(times))
            else:
                err = InputError(
                    bench,
                    f"s is {rows[-1]['s']!r}; the run's wall time is a number of seconds >= 0"
                    " (this run's start-up is left out of the plan)",
                    len(rows) + 1,  # the header is line 1
                )
                if refused is None:
                    raise err
                refused.append(err)
    return times, startup, _dir_bytes(run_dir)


def _profile_config(profile: str) -> Profile | None:
    """The Snakemake profile file of ``profile``, read and checked (``coolsampler.train.profile``); None
    where there is none."""
    path = PROFILE_DIR / PROFILE_FILE.get(profile, "-") / PROFILE_NAME
    return load_profile(path) if path.exists() else None


def profile_gpus(profile: str) -> int | None:
    """The GPUs the ``profile`` file declares for its machine (the gpu-box profile's ``resources: gpu=``);
    None where it declares none (SLURM places each job on its own GPUs; CPU has none)."""
    if profile != "gpu" or (cfg := _profile_config(profile)) is None:
        return None
    return cfg.gpus


def gpu_resource(profile: str, gpus_per_run: int) -> int | None:
    """The ``gpu`` resource the command gives Snakemake (``--resources gpu=G``) where the profile's own is
    wrong for runs of ``gpus_per_run`` GPUs, else None. The gpu-box profile declares its box's GPUs and
    trains one run at a time on them because a job is not given devices of its own (two runs would share
    the first ones): a run holding fewer GPUs than it declares would train beside another on the same
    devices. So the GPUs a run holds are the box's, for Snakemake, and the printed command says so."""
    declared = profile_gpus(profile)
    if declared is None or not gpus_per_run or gpus_per_run >= declared:
        return None
    return gpus_per_run


def default_parallel(profile: str, platform: Platform, gpus_per_run: int | None = None) -> tuple[int, str]:
    """How many runs train at once on ``profile``, from the profile file (module docstring) and the
    ``gpu_resource`` the command sets; ``gpus_per_run``: the most GPUs one of the runs holds (default: the
    platform's)."""
    if profile == "cpu":
        return max(1, CPU_CORES // max(1, platform.threads)), f"--cores {CPU_CORES}, {platform.threads} thread(s) a run"
    gpus_per_run = gpus_per_run or platform.gpus_per_run
    cfg = _profile_config(profile)
    if cfg is None:
        return 1, f"no {PROFILE_NAME} found: one at a time"
    if profile == "slurm":
        jobs = cfg.jobs or 1
        return jobs, f"profiles/slurm jobs: {cfg.jobs_text if cfg.jobs else 1}"
    gpus = profile_gpus(profile)
    if gpus is None or not gpus_per_run:
        return 1, "one at a time"
    if (capped := gpu_resource(profile, gpus_per_run)) is not None:
        return 1, f"--resources gpu={capped}: profiles/gpu-box declares {gpus}, a job has no devices of its own"
    return max(1, gpus // gpus_per_run), f"profiles/gpu-box gpu={gpus}, {gpus_per_run} a run"


def profile_runtime(profile: str) -> int | None:
    """The training time limit a profile sets in minutes (``set-resources: train: runtime:``, the SLURM
    profile's EDIT line; ``12h`` is 720, as Snakemake reads it), which the watchdog's timeout follows
    (``Platform.with_runtime``); None: the platform's."""
    cfg = _profile_config(profile)
    return cfg.runtime_min if cfg is not None else None


def make_plan(
    study: Study,
    *,
    profile: str | None = None,
    results: str | Path | None = None,
    parallel: int | None = None,
    keys: Sequence[str] = (),
    gpu_memory_gib: float | None = None,
    host_memory_gib: float | None = None,
) -> Plan:
    """The plan of ``study`` on ``profile`` (default: gpu for a gpu study, else cpu), its results read
    from ``results`` (default: the study's); ``keys``: only these runs of it; ``gpu_memory_gib``: the
    memory checked on GPUs of that size (``coolsampler.train.memory.on_gpus``); ``host_memory_gib``: on a
    host of that size, instead of a SLURM job's memory (``coolsampler.cli.memory.host_profile``)."""
    if keys:
        study = only_runs(study, keys)
    profile = profile or ("cpu" if study_platform(study.raw).name == "cpu" else "gpu")
    if profile not in PROFILES:
        raise ValueError(f"profile {profile!r}: allowed {', '.join(PROFILES)}")
    # the study's platform, as rule train's jobs get it on this profile: the profile's set-resources (time
    # limit, memory) over the study's runtime_min over the platform's
    platform = job_platform(study.raw, _profile_config(profile))
    layout = Layout.from_config(study.raw, results if results is not None else study.results)
    by_group: dict[tuple[str, str], list[Run]] = {}
    for r in study.runs:
        by_group.setdefault((r.model, r.task), []).append(r)
    groups = []
    refused: list[InputError] = []
    left_out: set[str] = set()
    for (model, task), runs in by_group.items():
        m = Measured()
        done = []
        for r in runs:
            d = Path(layout.run_dir(r.key))
            if trained(d):
                done.append(r.key)
            try:
                got = measure(d, platform.name, refused)
            except InputError as err:  # one bad run's files: named, left out; the others still measure
                refused.append(err)
                left_out.add(r.key)
                got = None
            if got:
                m.runs += 1
                m.step_s += got[0]
                if got[1] is not None:
                    m.startup_s.append(got[1])
                m.disk.append(got[2])
        keep = recipe_for(runs[0], study.recipe)["keep_checkpoints"]
        groups.append(_group(model, task, runs, done, m, platform, keep))
    most = max((g.gpus for g in groups), default=0)
    par, why = (parallel, "--parallel") if parallel else default_parallel(profile, platform, most)
    memory = []
    if platform.name == "gpu":  # memory.py models the gpu platform's run on the study's machines
        from coolsampler.train.memory import on_gpus, on_host, study_settings

        platform = on_host(platform, host_memory_gib)
        memory = on_gpus(study_settings(study, platform), gpu_memory_gib)
    host = host_profile(None, host_memory_gib)
    if host is not None:
        load_profile(host)  # the per-job memory the fit reads: a bad one refused now, before anything is printed
    timeout = study.raw.get("timeout_min")
    return Plan(study.name, profile, platform, par, why, groups, memory, timeout, host, refused, left_out)


def only_runs(study: Study, keys: Sequence[str]) -> Study:
    """``study`` with only the runs ``keys`` (in the given order); a key it does not list is a StudyError
    naming runs of that model and task."""
    by_key = study.by_key()
    for key in keys:
        if key not in by_key:
            near = [k for k in by_key if k.split("/")[:2] == key.split("/")[:2]][:3]
            hint = (
                f"; runs of that model/task: {', '.join(near)}"
                if near
                else f"; `coolsampler runs --study {study.name}` lists them"
            )
            raise StudyError(f"run {key} is not in study {study.name}{hint}")
    return replace(study, runs=[by_key[k] for k in dict.fromkeys(keys)])


def one_line(plan: Plan) -> str:
    """The cost in one line, to stand beside the command that incurs it: runs, GPU-hours, wall time,
    disk and whether each run's memory fits the GPUs checked."""
    s = summary(plan)
    gpus = plan.platform.gpus_per_run
    counts = "/".join(str(n) for n in sorted({g.gpus for g in plan.groups}))
    cost = (
        "cost unknown (no step time: train one run, then plan again)"
        if len(s["unknown"]) == s["runs"]
        else f"{_h(s['gpu_hours_todo'] if gpus else s['hours_todo'])} {'GPU-hours' if gpus else 'hours'}, "
        f"{hmm(s['wall_todo'] * 3600)} wall (h:mm)"
    )
    disk = "disk unknown" if s["disk_unknown"] == s["runs"] else f"{_gib(s['disk'])} disk"
    if s["disk_unknown"] < s["runs"] and s["disk_peak"] > s["disk"]:
        disk += f" ({_gib(s['disk_peak'])} during a save)"
    parts = [f"{s['runs'] - s['done']} run(s) to train" + (f" on {counts} GPU(s) each" if gpus else ""), cost, disk]
    if plan.memory:
        sizes = "/".join(sorted({f"{m.gpu_bytes / GIB:g}" for m in plan.memory}))
        mem_gpus = "/".join(str(n) for n in sorted({m.gpus for m in plan.memory}))
        parts.append(
            f"memory fits {mem_gpus} x {sizes} GiB GPUs (modelled)"
            if memory_fits(plan)
            else f"memory DOES NOT FIT {mem_gpus} x {sizes} GiB GPUs (modelled; see below)"
        )
    return "plan: " + ", ".join(parts)


def memory_fits(plan: Plan) -> bool:
    """Every run's memory fits its GPUs and host by the memory model (True where none is modelled)."""
    from coolsampler.train.memory import fit

    return all(fit(m, plan.host_profile, plan.platform).fits for m in plan.memory)


def command(plan: Plan, study_files: Sequence[str], targets: Sequence[str]) -> str:
    """The Snakemake command that makes ``targets`` of the plan's study on its profile (from the checkout,
    where Snakemake finds the Snakefile and the profiles), whole: with every option the plan's runs need
    beyond the profile (``snakemake_options``), so that it is pasted as printed."""
    where = f"--profile profiles/{PROFILE_FILE[plan.profile]}" if plan.profile in PROFILE_FILE else "--cores 2"
    if not (REPO / "Snakefile").is_file():
        cd = "(from a checkout of the repository) "
    else:
        cd = "" if Path.cwd().resolve() == REPO.resolve() else f"cd {REPO} && "
    files = [_shown(f) for f in study_files]
    # --resources takes every word up to the next option: after the targets, before --configfile
    options = " ".join(snakemake_options(plan))
    return f"{cd}snakemake {where} {' '.join(targets)} {options + ' ' if options else ''}--configfile {' '.join(files)}"


def snakemake_options(plan: Plan) -> list[str]:
    """The options the plan's runs need beyond the profile's, on the command line: ``--resources gpu=G``
    where the runs hold fewer GPUs than the profile's box (``gpu_resource``). The one place they are
    derived: ``command`` prints them, and the documented recipe is checked against them."""
    capped = gpu_resource(plan.profile, max((g.gpus for g in plan.groups), default=0))
    return [] if capped is None else ["--resources", f"gpu={capped}"]


def _shown(path: str) -> str:
    """A study file as the command (run from the checkout) needs it: a shipped or checkout file by its path
    from the repository root, any other by its absolute path."""
    p = Path(path).resolve()
    for base in (ROOT.resolve(), REPO.resolve()):
        if p.is_relative_to(base):
            return str(p.relative_to(base))
    return str(p)


def _group(
    model: str, task: str, runs: list[Run], done: list[str], m: Measured, platform: Platform, keep: int = 1
) -> Group:
    gpus = runs[0].model_info.gpus_per_run if platform.gpus_per_run else 0  # what the training job asks for
    step, startup, source = None, 0.0, "-"
    if m.step_s:
        step = statistics.fmean(m.step_s)
        startup = statistics.median(m.startup_s) if m.startup_s else 0.0
        source = f"measured ({m.runs} run{'s' if m.runs > 1 else ''})"
    elif platform.name == "gpu" and (paper := step_seconds(model, task)) is not None:
        # the paper's step time is on its GPUs a run; on fewer or more, in proportion (a model)
        step, source = paper * PAPER_RECIPE["gpus_per_run"] / gpus, "paper (App. D)"
        if gpus != PAPER_RECIPE["gpus_per_run"]:
            source += f" x {PAPER_RECIPE['gpus_per_run']}/{gpus} GPUs, modelled"
    disk, disk_source = None, "-"
    if m.disk:
        disk, disk_source = max(m.disk), "measured"
    from coolsampler.train.memory import ARCH, checkpoint_bytes

    extra = checkpoint_bytes(model) if model in ARCH and platform.name == "gpu" else None
    if disk is None and extra is not None:  # memory.py models the gpu platform's run (its GPUs, its dtypes)
        disk = keep * extra
        disk_source = "one checkpoint (memory.py)" if keep == 1 else f"{keep} checkpoints kept (memory.py)"
    return Group(model, task, runs, done, step, startup, source, disk, disk_source, extra, gpus)


def wall_hours(hours: list[float], parallel: int) -> float:
    """Wall time of ``hours``-long runs, ``parallel`` at a time, longest first (greedy list schedule)."""
    slots = [0.0] * max(1, min(parallel, len(hours)))  # never more slots than runs: --parallel may be huge
    for h in sorted(hours, reverse=True):
        heapq.heapreplace(slots, slots[0] + h)
    return max(slots) if hours else 0.0


def _host_memory(plan: Plan, detail: bool = False) -> list[str]:
    """On the gpu platform, for the models memory.py knows: whether each model and task's run fits the
    study's machines (GPU per phase, host at the save peak; else the setting that makes it fit), and the
    processes a run starts, each kind x its measured PSS, so a reader sees what a job's ``mem_mb`` and
    GPUs have to hold before submitting it."""
    if not plan.memory:
        return []
    from coolsampler.train.memory import fit_lines, process_table

    out = [
        "memory of one run on the study's machines, modelled (memory.py; `coolsampler memory` itemises it):",
        *fit_lines(plan.memory, plan.host_profile, plan.platform),
    ]
    if detail:
        out += ["the processes it starts:", process_table(plan.memory).rstrip("\n")]
    return out


def _gib(b: float | None) -> str:
    if b is None:
        return "-"
    if b < GIB:
        return f"{b / 1024**2:.1f} MiB"
    return f"{b / GIB:.1f} GiB" if b < 1024 * GIB else f"{b / GIB / 1024:.2f} TiB"


def _h(x: float | None) -> str:
    return "-" if x is None else (f"{x:.1f}" if x >= 10 else f"{x:.2f}")


def _save_peak(plan: Plan) -> int:
    """Disk the runs training at once add during their saves: a second checkpoint each, the largest first."""
    todo = sorted(
        (g.save_extra for g in plan.groups for r in g.runs if g.save_extra and r.key not in g.done), reverse=True
    )
    return sum(todo[: plan.parallel])


def summary(plan: Plan) -> dict[str, Any]:
    """Totals of the plan: runs, done, hours and GPU-hours (remaining and all), wall time, disk."""
    all_h, todo_h, unknown, disk, disk_unknown, over = [], [], [], 0, 0, []
    gpu_all, gpu_todo = 0.0, 0.0
    for g in plan.groups:
        for r in g.runs:
            if g.disk_per_run is None:
                disk_unknown += 1
            else:
                disk += g.disk_per_run
            h = g.hours(r)
            if h is None:
                unknown.append(r.key)
                continue
            all_h.append(h)
            gpu_all += h * g.gpus
            if r.key not in g.done:
                todo_h.append(h)
                gpu_todo += h * g.gpus
            if h * 60 > (plan.timeout_min or plan.platform.timeout_min):
                over.append(r.key)
    return {
        "runs": sum(len(g.runs) for g in plan.groups),
        "done": sum(len(g.done) for g in plan.groups),
        "hours_all": sum(all_h),
        "hours_todo": sum(todo_h),
        "gpu_hours_all": gpu_all,
        "gpu_hours_todo": gpu_todo,
        "wall_todo": wall_hours(todo_h, plan.parallel),
        "unknown": unknown,
        "disk": disk,
        "disk_peak": disk + _save_peak(plan),
        "disk_unknown": disk_unknown,
        "over_timeout": over,
    }


def text(plan: Plan, *, list_runs: bool = False, detail: bool = False) -> str:
    """The plan as a table per (model, task) and totals; ``detail``: with the processes a run starts."""
    gpus = plan.platform.gpus_per_run
    counts = "/".join(str(n) for n in sorted({g.gpus for g in plan.groups}))
    cost = "GPU-h left/all" if gpus else "hours left/all"
    head = ("model", "task", "runs", "done", "steps", "s/step", "step time from", "h/run", cost, "disk/run")
    rows = [head]
    for g in plan.groups:
        hours = [g.hours(r) for r in g.runs]
        left = [g.hours(r) for r in g.runs if r.key not in g.done]
        mult = g.gpus or 1
        steps = sorted({r.steps for r in g.runs})
        per_run = "-" if hours[0] is None else "/".join(sorted({_h(h) for h in hours if h is not None}))
        rows.append(
            (
                g.model,
                g.task,
                str(len(g.runs)),
                str(len(g.done)),
                "/".join(map(str, steps)),
                "-" if g.step_s is None else f"{g.step_s:.3g}",
                g.source,
                per_run,
                "-" if hours[0] is None else f"{_h(sum(left) * mult)}/{_h(sum(hours) * mult)}",  # type: ignore[arg-type]
                f"{_gib(g.disk_per_run)}" + ("" if g.disk_source in ("-", "measured") else " (est.)"),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    out = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    s = summary(plan)
    out.append("")
    out.append(
        f"study {plan.study} on profile {plan.profile} (platform {plan.platform.name}, "
        f"{counts} GPU(s) a run): {s['runs']} runs, {s['done']} done, {s['runs'] - s['done']} to train"
    )
    part = " (runs with a step time only)" if s["unknown"] else ""
    if len(s["unknown"]) < s["runs"]:
        gpu_h = f"; GPU-hours ({counts} a run): {_h(s['gpu_hours_todo'])} to go, {_h(s['gpu_hours_all'])} in all"
        out.append(
            f"run-hours: {_h(s['hours_todo'])} to go, {_h(s['hours_all'])} for the whole study{part}"
            + (gpu_h if gpus else "")
        )
        out.append(
            f"wall time of the runs to go: {hmm(s['wall_todo'] * 3600)} (h:mm), {plan.parallel} at a time"
            f" ({plan.parallel_source}; queueing not included){part}"
        )
    if s["disk_unknown"] < s["runs"]:
        out.append(
            f"disk: {_gib(s['disk'])} kept by the runs' directories (one checkpoint each)"
            + (
                f", {_gib(s['disk_peak'])} at the peak (a save holds the previous checkpoint until the new one"
                f" counts, {plan.parallel} run(s) at a time)"
                if s["disk_peak"] > s["disk"]
                else ""
            )
            + (f"; {s['disk_unknown']} run(s) unknown" if s["disk_unknown"] else "")
        )
    else:
        out.append("disk: unknown (no finished run here, and memory.py models only the paper's models on gpu)")
    out += _host_memory(plan, detail)
    out += refresh_lines([r for g in plan.groups for r in g.runs], costed=True)
    if s["unknown"]:
        out.append(
            f"no step time for {len(s['unknown'])} run(s) on platform {plan.platform.name}: neither a finished"
            " run here nor a paper time; train one, then plan again"
        )
    if plan.timeout_min is not None and plan.timeout_min >= plan.platform.runtime_min:
        out.append(
            f"WARNING: the study's timeout_min {plan.timeout_min:g} is not below the job's time limit"
            f" ({plan.platform.runtime_min} min): the scheduler, not the watchdog, would stop a run, without"
            " the watchdog's reason; set runtime_min above it, or timeout_min below it"
        )
    if s["over_timeout"]:
        out.append(
            f"WARNING: {len(s['over_timeout'])} run(s) exceed the watchdog's timeout "
            f"({(plan.timeout_min or plan.platform.timeout_min) / 60:.0f} h): {', '.join(s['over_timeout'][:3])}"
        )
    if list_runs:
        out.append("")
        for g in plan.groups:
            for r in g.runs:
                mark = "done" if r.key in g.done else "todo"
                refresh = "" if r.guard is None and r.schedule is None else f"  ({r.refresh_text})"
                bad = "  (its files refused, left out of the step time: see below)" if r.key in plan.left_out else ""
                out.append(f"{mark}  {r.key}  {_h(g.hours(r))} h{refresh}{bad}")
    return "\n".join(out) + "\n"


def _plan(args: argparse.Namespace) -> int:
    study = load_study(args.study, overlays=args.overlay or (), check_overrides=check_extra_overrides)
    keys = args.run or ()
    plan = make_plan(
        study,
        profile=args.profile,
        results=args.results,
        parallel=args.parallel,
        keys=keys,
        gpu_memory_gib=args.gpu_memory_gib,
        host_memory_gib=args.host_memory_gib,
    )
    # the cost first, with the command that incurs it; then what it rests on
    print(one_line(plan))
    if keys:
        layout = Layout.from_config(study.raw, args.results if args.results is not None else study.results)
        targets = [f"{layout.run_dir(k)}/metrics.parquet" for k in keys]
        print(f"command: {command(plan, [args.study, *(args.overlay or ())], targets)}")
    print()
    print(text(plan, list_runs=args.runs or bool(keys), detail=args.detail), end="")
    for err in plan.refused:  # after the plan, one line each, on stderr: the plan stands without them
        print(err.line("plan"), file=sys.stderr)
    if plan.refused:
        return EXIT_INPUT
    return 0 if memory_fits(plan) else 1


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan")
    p.add_argument("--study", default=DEFAULT_STUDY, help="study config")
    p.add_argument(
        "--run", action="append", metavar="KEY", help="plan only this run of the study (repeatable; `coolsampler runs`)"
    )
    p.add_argument("--overlay", action="append", metavar="FILE", help=OVERLAY_HELP)
    p.add_argument(
        "--gpu-memory-gib",
        type=positive_float,
        help="check the memory on GPUs of this size (GiB) instead of the study's",
    )
    p.add_argument("--host-memory-gib", type=positive_float, help=HOST_MEMORY_HELP)
    p.add_argument("--profile", choices=PROFILES, help="where it runs (default: gpu for a gpu study, else cpu)")
    p.add_argument("--results", help="results directory with finished runs (default: the study's results:)")
    p.add_argument("--parallel", type=positive_int, help="runs training at once (default: from the profile)")
    p.add_argument("--runs", action="store_true", help="also list every run, done or to do, with its hours")
    p.add_argument("--detail", action="store_true", help="also print the processes a run starts and their memory")
    p.set_defaults(func=_plan)
