"""The whole check: the world, the arms in order under one time budget, every check, the summary.

The arms: the staleness arm (N=4 with the tap: the gate, the decoupled temperature, what the sampler
holds), a second one at TP=2 where there are two GPUs, the kill-and-resume arm (patch 0004's restore of
the stale sampler), and the timing arms (N=1, N=8, unpatched verl). ``break_gate`` runs the staleness
arm alone with the sampler refreshed at every step (``coolsampler.testkit.faults``): the self-test that
the sampler check fails when the gate is broken."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coolsampler.testkit.acceptance.arms import (
    N_STALE,
    STALENESS_LR,
    TB,
    TL,
    Arm,
    ArmResult,
    acceptance_recipe,
    gpu_count,
    run_arm,
)
from coolsampler.testkit.acceptance.checks import (
    Check,
    kl_cycle_checks,
    learning_checks,
    logprob_checks,
    logprob_errors,
    memory_checks,
    resume_checks,
    sampler_state_checks,
    staleness_checks,
    timing_checks,
)
from coolsampler.testkit.acceptance.pristine import unpatched_verl
from coolsampler.testkit.acceptance.summary import write_summary
from coolsampler.testkit.acceptance.world import make_world, say
from coolsampler.testkit.faults import REFRESH_EVERY_STEP
from coolsampler.train.version import REPO


@dataclass
class Options:
    platform: str = "gpu"
    out: Path = Path("results/acceptance")
    model: Path | None = None
    steps: int = 8
    timing_steps: int = 5
    quick: bool = False  # no unpatched arm
    response_length: int = 256
    budget_s: float = 570.0
    logprob_seqs: int = 32
    sft_steps: int = 400
    patches: Path = REPO / "patches" / "verl"
    resume: bool = True  # the kill-and-resume arm
    break_gate: bool = False  # the staleness arm alone, with the gate deliberately broken


# The kill-and-resume arm: checkpoints every 2 steps, killed at step 4's save (after its files, before its
# tracker), so that the next attempt resumes from step 2, inside the first refresh cycle, where patch 0004
# must give the sampler back version 0; step 5 then samples from the refresh after step 4.
RESUME_SAVE_EVERY, RESUME_KILL_AT, RESUME_STEPS = 2, 4, N_STALE + 1


def arms(opt: Options, gpus: int = 0) -> list[Arm]:
    """The arms of ``opt``'s check, in the order they run."""
    val = 3  # validation at step 3 falls between refreshes (4, 8): the sampler must go back to stale
    if opt.break_gate:
        return [Arm("staleness", N_STALE, opt.steps, val, tap=True, lr=STALENESS_LR, faults=(REFRESH_EVERY_STEP,))]
    out = [Arm("staleness", N_STALE, opt.steps, val, tap=True, lr=STALENESS_LR)]
    if opt.platform == "gpu" and gpus >= 2:  # the sampler sharded over two GPUs (the 7B's TP size)
        out.append(Arm("staleness TP=2", N_STALE, opt.steps, val, tap=True, lr=STALENESS_LR, tp=2))
    if opt.resume:
        out.append(
            Arm(
                "resume",
                N_STALE,
                RESUME_STEPS,
                0,
                tap=True,
                lr=STALENESS_LR,
                save_every=RESUME_SAVE_EVERY,
                kill_at=RESUME_KILL_AT,
            )
        )
    if opt.timing_steps == 0:  # the CPU self-test's choice: it judges no step time anyway
        return out
    out += [Arm("N=1", 1, opt.timing_steps, 0), Arm("N=8", 8, opt.timing_steps, 0)]
    if not opt.quick:
        out.append(Arm("unpatched", 1, opt.timing_steps, 0, upstream=True))
    return out


def bf16_stop(opt: Options, t0: float) -> dict[str, Any] | None:
    """The failed summary of a machine whose GPU has no bf16 (``coolsampler.worker.gpu_check``), before
    any engine is built: vLLM would otherwise fail minutes into its start, deep in its log."""
    from coolsampler.worker.gpu_check import bf16_problem, visible_devices

    problem = bf16_problem(visible_devices())
    if problem is None:
        return None
    return {
        "platform": opt.platform,
        "model": {"kind": "none", "label": "not loaded: " + problem, "path": None},
        "gpus": gpu_count(),
        "recipe": {},
        "broken_gate": opt.break_gate,
        "runs": {},
        "logprob_errors": {},
        "checks": [Check("GPUs have bf16", problem, "fail", "compute capability >= 8.0").__dict__],
        "passed": False,
        "wall_s": round(time.time() - t0, 1),
    }


def run_acceptance(opt: Options, log: Callable[[str], None] = say) -> dict[str, Any]:
    """Run the check of ``opt``; returns the summary (also written to ``opt.out``)."""
    t0 = time.time()
    opt.out.mkdir(parents=True, exist_ok=True)
    stop = bf16_stop(opt, t0)
    if stop is not None:
        log(stop["checks"][0]["value"])
        write_summary(stop, opt.out)
        return stop
    if opt.break_gate:
        log(f"the gate is deliberately broken ({REFRESH_EVERY_STEP}): the sampler check must FAIL")
    gpus = gpu_count() if opt.platform == "gpu" else 0
    if opt.platform == "gpu" and gpus == 0:
        log("WARNING: platform gpu but nvidia-smi sees no GPU")
    world = make_world(opt.platform, opt.out / "world", opt.model, sft_steps=opt.sft_steps)
    log(f"model: {world.label}")
    recipe = acceptance_recipe(opt.platform, opt.response_length)
    plan = arms(opt, gpus)
    upstream_tree = None
    if any(a.upstream for a in plan):
        upstream_tree = unpatched_verl(opt.out / "unpatched-verl", opt.patches)
        log(f"unpatched verl 0.9.1: {upstream_tree} (patches reverse-applied to the installed tree)")
    results: dict[str, ArmResult] = {}
    for arm in plan:
        left = opt.budget_s - (time.time() - t0) - (45 if arm.tap else 10)  # keep time for the log-prob check
        if left < 60:
            log(f"{arm.name}: not run, {left:.0f}s of the budget left")
            results[arm.name] = ArmResult(arm, error="not run: time budget spent")
            continue
        log(f"{arm.name}: N={arm.N}, {arm.steps} steps" + (" (unpatched verl)" if arm.upstream else ""))
        results[arm.name] = run_arm(
            arm,
            world,
            opt.out / "runs" / arm.name.replace("=", ""),
            platform=opt.platform,
            recipe=recipe,
            gpus=gpus,
            timeout_s=left,
            upstream_tree=upstream_tree,
        )
        r = results[arm.name]
        log(f"{arm.name}: {'done' if not r.error else 'FAILED'} in {r.wall_s:.0f}s")
    checks: list[Check] = []
    for name, r in results.items():
        if r.error:
            checks.append(Check(f"run {name}", r.error, "fail"))
    st = results["staleness"]
    checks += staleness_checks(st)
    for r in results.values():
        if r.arm.tap:  # before the checks it conditions
            checks += learning_checks(r)
    tap = st.dir / "tap" if st.dir else None
    if tap is not None and (tap / "step_1.pt").exists():
        log("recomputing step 1's log-probs with transformers")
        err = logprob_errors(tap, world.model, tb=TB, tl=TL, max_seqs=opt.logprob_seqs)
        checks += logprob_checks(err, opt.platform)
    else:
        err = {}
        checks.append(Check("decoupled log-probs", "no tap record of step 1", "fail"))
    for r in results.values():
        if r.arm.tap:
            log(f"{r.arm.name}: recomputing every step's sampler log-probs from its snapshot")
            rows, states = sampler_state_checks(r, world, opt.platform, opt.logprob_seqs)
            checks += rows + kl_cycle_checks(r, states)
            if r.arm.kill_at is not None:
                checks += resume_checks(r, st)
            elif r.arm.name != "staleness":
                checks += staleness_checks(r)
    timed = {k: v for k, v in results.items() if not v.arm.tap}
    checks += timing_checks(timed, opt.platform)
    checks += memory_checks(results, opt.platform)
    if opt.timing_steps == 0:
        # a machine is accepted only with its step times measured; the CPU stack judges none of them
        checks.append(Check("step time", "not measured (no timing runs)", "fail" if opt.platform == "gpu" else "info"))
    elif opt.quick:
        checks.append(Check("step time vs unpatched verl", "skipped (--quick)", "info"))
    summary = {
        "platform": opt.platform,
        "model": {"kind": world.kind, "label": world.label, "path": str(world.model)},
        "gpus": gpus,
        "recipe": recipe,
        "broken_gate": opt.break_gate,
        "runs": {
            k: {
                "N": r.arm.N,
                "steps": r.arm.steps,
                "wall_s": round(r.wall_s, 1),
                "startup_s": None if r.startup_s is None else round(r.startup_s, 1),
                "host_peak_mb": round(r.host_mb),
                "gpu_peak_mb": r.gpu_mb,
                "error": r.error,
                "dir": str(r.dir),
            }
            for k, r in results.items()
        },
        "logprob_errors": err,
        "checks": [c.__dict__ for c in checks],
        "passed": all(c.status != "fail" for c in checks),
        "wall_s": round(time.time() - t0, 1),
    }
    write_summary(summary, opt.out)
    return summary
