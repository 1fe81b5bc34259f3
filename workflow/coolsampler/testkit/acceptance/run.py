"""The whole check: the world, the arms in order under one time budget, every check, the summary."""

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
    logprob_checks,
    logprob_errors,
    memory_checks,
    sampler_state_checks,
    staleness_checks,
    timing_checks,
)
from coolsampler.testkit.acceptance.pristine import unpatched_verl
from coolsampler.testkit.acceptance.summary import write_summary
from coolsampler.testkit.acceptance.world import make_world, say
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
    sft_steps: int = 100
    patches: Path = REPO / "patches" / "verl"


def arms(opt: Options, gpus: int = 0) -> list[Arm]:
    val = 3  # validation at step 3 falls between refreshes (4, 8): the sampler must go back to stale
    out = [Arm("staleness", N_STALE, opt.steps, val, tap=True, lr=STALENESS_LR)]
    if opt.platform == "gpu" and gpus >= 2:  # the sampler sharded over two GPUs (the 7B's TP size)
        out.append(Arm("staleness TP=2", N_STALE, opt.steps, val, tap=True, lr=STALENESS_LR, tp=2))
    out += [Arm("N=1", 1, opt.timing_steps, 0), Arm("N=8", 8, opt.timing_steps, 0)]
    if not opt.quick:
        out.append(Arm("unpatched", 1, opt.timing_steps, 0, upstream=True))
    return out


def run_acceptance(opt: Options, log: Callable[[str], None] = say) -> dict[str, Any]:
    t0 = time.time()
    opt.out.mkdir(parents=True, exist_ok=True)
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
            checks += rows + kl_cycle_checks(r, world, states)
            if r.arm.name != "staleness":
                checks += staleness_checks(r)
    timed = {k: v for k, v in results.items() if not v.arm.tap}
    checks += timing_checks(timed, opt.platform)
    checks += memory_checks(results, opt.platform)
    if opt.quick:
        checks.append(Check("step time vs unpatched verl", "skipped (--quick)", "info"))
    summary = {
        "platform": opt.platform,
        "model": {"kind": world.kind, "label": world.label, "path": str(world.model)},
        "gpus": gpus,
        "recipe": recipe,
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
