"""The acceptance's runs (arms): their run keys, verl overrides, and one run through
``coolsampler.train.launch.run_verl`` (timeout, stall watchdog, session kill) under the memory monitor.

An arm may carry faults of ``coolsampler.testkit.faults`` (the deliberately broken gate), or be killed
once at a checkpoint's save and resumed by the job's own machinery (``coolsampler.train.checkpoints``
through ``run_verl``), as a preempted paper run is."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coolsampler.spec.study import Run
from coolsampler.spec.temperature import Temperature
from coolsampler.testkit.acceptance.monitor import PeakMonitor
from coolsampler.testkit.acceptance.world import World, say
from coolsampler.testkit.faults import FAULT_ENV, KILL_BEFORE_TRACKER
from coolsampler.train.checkpoints import find_checkpoints
from coolsampler.train.launch import TrainingFailed, run_verl
from coolsampler.train.overrides import RunPaths, verl_overrides
from coolsampler.train.platform import get_platform
from coolsampler.train.rehearsal import REHEARSAL_RECIPE
from coolsampler.worker.trainer_keys import for_upstream

N_STALE = 4  # the staleness run's refresh interval
# The staleness arm's learning rate: 50 times the paper's, so that each step of a refresh cycle moves the
# learner (and the next snapshot) clearly further than rounding moves a log-prob (bf16 on GPU): the drift
# check needs the learner's distance from its sampler to grow step by step, and the sampler-state check
# two versions it can tell apart. At 10x (2e-5) the CPU rehearsal model's drift over a cycle stayed at
# 1e-9-1e-8, within the noise of which prompts a step drew. Eight steps at it change nothing else the
# checks read: they are about what is held where, not about learning well.
STALENESS_LR = 1e-4
TB, TL = 0.8, 1.0  # sampler and learner temperature of every run here
WARMUP_STEPS = 2  # steps 1-2 include compilation and cache warm-up: not timed


@dataclass
class Arm:
    name: str
    N: int
    steps: int
    val_every: int  # 0: no validation (timing arms)
    tap: bool = False
    upstream: bool = False  # unpatched verl on PYTHONPATH
    lr: float = 2e-6
    tp: int = 1  # the sampler's tensor-parallel size (gpu platform)
    faults: tuple[str, ...] = ()  # coolsampler.testkit.faults in every verl process of the arm
    save_every: int = 0  # checkpoint interval (0: none)
    kill_at: int | None = None  # the first attempt is killed at this step's save, the second resumes


@dataclass
class ArmResult:
    arm: Arm
    records: dict[int, dict] = field(default_factory=dict)
    wall_s: float = 0.0
    startup_s: float | None = None
    host_mb: float = 0.0
    gpu_mb: float | None = None
    gpu_total_mb: float | None = None
    error: str | None = None
    dir: Path | None = None
    resumed: str | None = None  # the job log's line saying where the resumed attempt started


def records(jsonl: Path) -> dict[int, dict]:
    """verl's JSONL as {step: metrics} (a step's records merged)."""
    by_step: dict[int, dict] = {}
    for line in jsonl.read_text().splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        by_step.setdefault(int(rec["step"]), {}).update(rec.get("data", {}))
    return by_step


ACCEPTANCE_MODEL, ACCEPTANCE_TASK = "qwen2.5-math-1.5b", "gsm8k"  # the paper's, as its runs load them


def acceptance_run(arm: Arm) -> Run:
    """The run an arm trains, built as a ``Run`` so that its key is ``Run.key``'s, never spelt here."""
    return Run(
        model=ACCEPTANCE_MODEL,
        task=ACCEPTANCE_TASK,
        N=arm.N,
        lr=arm.lr,
        correction="tis",
        Tb=Temperature.from_config(TB),
        Tl=TL,
        seed=1,
        steps=arm.steps,
        val_every=arm.val_every,
    )


def acceptance_recipe(platform: str, response_length: int) -> dict[str, Any]:
    """The study recipe of every run here. GPU: the paper's (16 prompts x 8 samples, lr, KL, TIS) with
    shorter responses to fit ten minutes; CPU: the rehearsal's batch and lengths. Both: a small greedy
    validation set and no checkpoints (saving a 1.5B model and optimiser takes longer than a step)."""
    base = dict(REHEARSAL_RECIPE) if platform == "cpu" else {"max_response_length": response_length}
    return {**base, "val_samples": 16, "save_every": 0}


def set_override(overrides: list[str], key: str, value: str) -> list[str]:
    """Replace ``key``'s override (with or without a leading +) or add it."""
    out = [o for o in overrides if o.split("=", 1)[0].lstrip("+") != key.lstrip("+")]
    return [*out, f"{key}={value}"]


def gpu_count() -> int:
    if shutil.which("nvidia-smi") is None:
        return 0
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def arm_overrides(arm: Arm, world: World, out: Path, platform: str, recipe: dict[str, Any], gpus: int) -> list[str]:
    run = acceptance_run(arm)
    paths = RunPaths(model=str(world.model), train=str(world.train), val=str(world.val), out_dir=str(out))
    recipe = {**recipe, "save_every": arm.save_every}
    o = verl_overrides(run, paths, platform=platform, study_recipe=recipe, experiment="coolsampler-acceptance")
    if platform == "gpu":
        # the paper's runs hold 4 GPUs (tensor parallel 1 for 1.5B); this machine may have fewer
        n = max(1, min(gpus, 4))
        o = set_override(o, "trainer.n_gpus_per_node", str(n - n % arm.tp))
        o = set_override(o, "actor_rollout_ref.rollout.tensor_model_parallel_size", str(arm.tp))
    if arm.upstream:  # upstream verl does not declare the patches' keys (at N=1, Tb=Tl=1: its behaviour)
        o = for_upstream(o)
    if arm.val_every == 0:
        o = set_override(o, "trainer.val_before_train", "false")
    return o


TAP_FILE = re.compile(r"(?:step|sampler|snapshot)_v?(\d+)(?:_replica\d+)?\.pt")


def forget_tap_after(tap: Path, step: int) -> list[str]:
    """Remove the tap's records of every step after ``step`` and of every sampler version after it: what a
    killed attempt recorded beyond the checkpoint its successor resumes from. The successor trains those
    steps again on fresh samples, and the tap keeps the first snapshot of each version it sees, so a
    killed attempt's version would otherwise stand in for the successor's."""
    gone = []
    for f in sorted(tap.glob("*.pt")):
        m = TAP_FILE.fullmatch(f.name)
        if m and int(m[1]) > step:
            f.unlink()
            gone.append(f.name)
    return gone


def _killed_attempt(
    arm: Arm, overrides: list[str], out: Path, env: dict[str, str], timeout_s: float, stall: float
) -> str | None:
    """The resume arm's first attempt, killed with its whole session at step ``arm.kill_at``'s save once
    every file is written and before the tracker (a preemption at the worst moment of a save). Returns
    what went wrong, or None when it was killed there."""
    faults = [*arm.faults, f"{KILL_BEFORE_TRACKER}{arm.kill_at}"]
    try:
        run_verl(
            overrides,
            jsonl=out / "train.jsonl",
            log=out / "train.log",
            total_steps=arm.steps,
            env={**env, FAULT_ENV: ",".join(faults)},
            timeout_s=timeout_s,
            stall_s=stall,
            startup_s=min(timeout_s, 2 * stall),
            on_progress=lambda s: say(f"{arm.name} (to be killed at step {arm.kill_at}'s save): {s}"),
        )
    except TrainingFailed as e:
        why = str(e).splitlines()[0]
        return None if "exited with code" in why else f"the attempt to be killed failed otherwise: {why}"
    return f"not killed: the attempt finished without reaching step {arm.kill_at}'s save"


def run_arm(
    arm: Arm,
    world: World,
    out: Path,
    *,
    platform: str,
    recipe: dict[str, Any],
    gpus: int,
    timeout_s: float,
    upstream_tree: Path | None = None,
) -> ArmResult:
    """Train ``arm`` (with ``kill_at``: killed once, then resumed) under the memory monitor."""
    out.mkdir(parents=True, exist_ok=True)
    res = ArmResult(arm, dir=out)
    env = get_platform(platform).env()
    # offline by definition (the model is a local directory): no hub look-up may wait on a network
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "disabled"})
    if arm.tap:
        (out / "tap").mkdir(exist_ok=True)
        env["COOLSAMPLER_TAP_DIR"] = str(out / "tap")
        env["COOLSAMPLER_TAP_SAMPLER"] = "0"  # the engine's weights are seen through its log-probs instead
        env["VERL_USE_EXTERNAL_MODULES"] += ",coolsampler.testkit.tap"
    if arm.faults or arm.kill_at is not None:
        env["VERL_USE_EXTERNAL_MODULES"] += ",coolsampler.testkit.faults"
        env[FAULT_ENV] = ",".join(arm.faults)
    if arm.upstream:
        assert upstream_tree is not None
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(upstream_tree), os.environ.get("PYTHONPATH")]))
    stall = 300.0 if platform == "cpu" else 180.0
    overrides = arm_overrides(arm, world, out, platform, recipe, gpus)
    mon = PeakMonitor()
    mon.start()
    t0 = time.time()
    try:
        if arm.kill_at is not None:
            res.error = _killed_attempt(arm, overrides, out, env, timeout_s, stall)
            complete = find_checkpoints(out / "checkpoints").complete
            if res.error is None and arm.tap and complete:
                gone = forget_tap_after(out / "tap", complete[-1])
                say(f"{arm.name}: killed; resuming from step {complete[-1]} (tap records dropped: {len(gone)})")
        # One retry, as rule train does, of an attempt that stalled or died before its first step (on a
        # shared machine: a start-up slower than the limit, a port another job took); not of a timeout.
        for attempt in (1, 2) if res.error is None else ():
            left = timeout_s - (time.time() - t0)
            try:
                prog = run_verl(
                    overrides,
                    jsonl=out / "train.jsonl",
                    log=out / "train.log",
                    total_steps=arm.steps,
                    env=env,
                    timeout_s=left,
                    stall_s=stall,
                    startup_s=min(left, 2 * stall),
                    on_progress=lambda s: say(f"{arm.name}: {s}"),
                )
                res.startup_s = None if prog.first_step_at is None else prog.first_step_at - t0
                res.error = None
                break
            except TrainingFailed as e:
                res.error = str(e).splitlines()[0]
                say(f"{arm.name}: attempt {attempt} FAILED: {res.error} (log: {out / 'train.log'})")
                early = e.progress is not None and e.progress.step == 0 and not res.error.startswith("timeout")
                retry = early or res.error.startswith("stalled")
                if attempt == 2 or not retry or timeout_s - (time.time() - t0) < 120:
                    break
    finally:
        mon.stop()
    res.wall_s = time.time() - t0
    res.host_mb, res.gpu_mb, res.gpu_total_mb = mon.host_mb, mon.gpu_mb, mon.gpu_total_mb
    jsonl = out / "train.jsonl"
    if jsonl.exists():
        res.records = records(jsonl)
    log = out / "train.log"
    if arm.kill_at is not None and log.exists():
        res.resumed = next((ln for ln in log.read_text().splitlines() if ": resuming from " in ln), None)
    return res
