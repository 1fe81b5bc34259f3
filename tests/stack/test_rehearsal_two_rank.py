"""The paper study's rehearsal, its two-rank shape: the fewest arms again with two learner ranks, two
sampler replicas and sleep/wake on, each refreshing inside the run. The controller's arm and the guard's
arm are each preempted (SIGKILL of everything) once their checkpoint of step 3 is whole, and resumed
there, inside a refresh cycle, so both ranks must restore the stale sampler (and the guard its firing).
The one-process arms: tests/stack/test_rehearsal.py."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from coolsampler.spec.guard import make_gate, signal_value
from coolsampler.testkit.sampler_check import check_sampler_state
from coolsampler.train.launch import INSTRUMENT_ENV, TAP_MODULE
from coolsampler.train.paths import Layout
from coolsampler.train.rehearsal import TWO_RANK_N, summarize
from tests.stack import copy_repo, preempt, records
from tests.stack.rehearsal import (
    GATED,
    GUARDED,
    KILLED,
    PUSHED_RE,
    SLEPT_RE,
    SMK,
    TWO_RANK,
    _controller_replay,
    _last_attempt,
    _logged,
    arms,
    snakemake,
)


def _preempt_at_step_3(work: Path, run_dir: Path, env: dict[str, str], within_s: float, what: str) -> None:
    """Train the run alone until its checkpoint of step 3 is whole and logged, then kill everything."""
    tracker = run_dir / "checkpoints" / "latest_checkpointed_iteration.txt"
    proc = subprocess.Popen(
        [*SMK, str(run_dir.relative_to(work) / "metrics.parquet")],
        cwd=work,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env=env,
    )
    try:
        deadline = time.time() + within_s
        while not (tracker.exists() and tracker.read_text().strip() == "3" and _logged(run_dir, 3)):
            assert proc.poll() is None, f"{what} ended before its checkpoint of step 3"
            assert time.time() < deadline, f"no checkpoint of step 3 of {what} within {within_s:.0f} s"
            time.sleep(1)
    finally:
        preempt(proc)
    subprocess.run([*SMK, "--unlock"], cwd=work, check=True, capture_output=True)


@pytest.mark.slow
@pytest.mark.timeout(5400)
def test_rehearsal_two_rank_shape(tmp_path):
    """Each two-rank arm trains whole across its preemption; the gate refreshes at 2, 4, 6 on both ranks,
    both checkpoint their shards and sampler shares, both replicas sleep and serve; what the sampler held
    at every step is the snapshot of its last refresh (seen through the log-probs it recorded)."""
    work = copy_repo(tmp_path / "repo")
    # every run taps what its sampler drew and held (coolsampler.testkit.tap, into <run>/tap/)
    env = {**os.environ, INSTRUMENT_ENV: TAP_MODULE}
    out = work / "results/rehearsal/two-rank"
    _preempt_at_step_3(work, out / "runs" / KILLED.key, env, 1500, "the two-rank controller arm")
    assert not (out / "runs" / KILLED.key / "train.jsonl").exists()
    # the guard arm, preempted once its firing at step 3 is checkpointed and logged: the resume must read
    # the firing back from the gate's state (3 mod N = 3 would restore the initial sampler)
    _preempt_at_step_3(work, out / "runs" / GUARDED.key, env, 900, "the guard arm")

    res = snakemake(work, [f"results/rehearsal/two-rank/runs/{r.key}/status.json" for r in TWO_RANK.runs], env)
    assert res.returncode == 0, res.stderr[-6000:]
    assert summarize(arms(TWO_RANK, out, "cpu-2rank"), [], tmp_path / "rehearsal.md") == []
    summary = (tmp_path / "rehearsal.md").read_text()
    assert "| NO |" not in summary

    # the shape's controller (the KL-gated saturation controller) acts as its rule says, across the resume
    for r in TWO_RANK.runs:
        if r.Tb.kind != "fixed":
            logged, replayed = _controller_replay(out / "runs" / r.key, r)
            assert logged == pytest.approx(replayed, abs=1e-9), (r.key, logged, replayed)
            assert logged[0] == pytest.approx(r.Tb.initial), r.key
    for r in GATED:
        d = out / "runs" / r.key
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
        d = out / "runs" / r.key
        rec = records(d / "train.jsonl")
        temps = {t: float(rec[t]["sampler/temperature"]) for t in rec if "sampler/temperature" in rec[t]}
        states = check_sampler_state(d / "tap", model, temps)
        assert [x.step for x in states] == list(range(1, r.steps + 1)), r.key
        assert [x.version for x in states] == [TWO_RANK_N * ((t - 1) // TWO_RANK_N) for t in range(1, r.steps + 1)]
        assert all(x.max_err < 1e-4 for x in states), (r.key, states)  # fp32 on both sides
        assert all(x.mean_err < 0.5 * x.other_mean_err for x in states), (r.key, states)
    # the preempted arm resumed from its checkpoint of step 3, where both ranks restored the stale sampler
    d = out / "runs" / KILLED.key
    assert len(list((d / "attempts").glob("*.jsonl"))) == 2
    resumed = _last_attempt((d / "verl.log").read_text(errors="replace"))
    for rank in (0, 1):
        assert re.search(
            rf"staleness gate: rank {rank} restored the stale sampler from \S*global_step_3/actor/", resumed
        )
    _check_guard_arm(out / "runs" / GUARDED.key, model, summary)


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
