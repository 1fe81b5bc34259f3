"""The patched sync trainer under a staleness guard (patches 0001 and 0004 asking coolsampler.worker.refresh),
without the stack: the fake replicas of test_gate_flow record every push. The guard's decision is made in
``step`` (here: the fake fit calls ``_decide_refresh`` with the step's metrics where verl's ``step``
returns), the push follows in ``on_step_end``, and a resume restores the gate's checkpointed state."""

from __future__ import annotations

import pytest
from verl.trainer.ppo.v1 import trainer_sync

from coolsampler.worker import refresh
from tests.train.test_gate_flow import pushes, trainer

GUARD = {"signal": "probs_diff", "threshold": 0.1, "window": 1, "min": 1}
SIGNAL = {1: 0.01, 2: 0.2, 3: 0.01, 4: 0.02, 5: 0.03, 6: 0.3, 7: 0.01, 8: 0.02}  # fires at 2 and 6


@pytest.fixture(autouse=True)
def _ray_get_is_identity(monkeypatch):
    monkeypatch.setattr(trainer_sync.ray, "get", lambda x: x)


def guarded(resume_at: int = 0, steps: int = 8, guard: dict = GUARD):
    return trainer(4, steps=steps, test_freq=0, resume_at=resume_at, guard=guard)


def fit(t, kill_after_save: int | None = None, save_to=None) -> list[dict]:
    """trainer_base.fit's calls, with verl's ``step`` (which the patch ends with the decision) and the
    checkpoint of every step (the gate's file), killed after the save of ``kill_after_save``."""
    cm = t.checkpoint_manager
    cm.sleep_replicas()
    t.on_init_end()
    logged = []
    for step in range(t.global_steps + 1, t.total_training_steps + 1):
        t.global_steps = step
        cm.events.append(("step", step))
        t.on_step_begin()
        t.on_sample_end()
        t._decide_refresh({"training/rollout_probs_diff_mean": SIGNAL[step]})  # the end of PPOTrainerSync.step
        if save_to is not None:
            refresh.save(t._refresh_gate, save_to / f"global_step_{step}")  # what _save_checkpoint writes first
        if step == kill_after_save:
            return logged
        t.on_step_end()
        logged.append(dict(t._pending_sync_metrics))
    return logged


def test_the_sampler_is_refreshed_where_the_guard_fires_and_after_n_steps():
    t = guarded()
    logged = fit(t)
    assert [m["staleness/refreshed"] for m in logged] == [0, 1, 0, 0, 0, 1, 0, 0]
    assert [m["guard/fired"] for m in logged] == [0, 1, 0, 0, 0, 1, 0, 0]
    assert [m["staleness/sampler_version"] for m in logged] == [0, 0, 2, 2, 2, 2, 6, 6]
    assert [m["staleness/refreshes"] for m in logged] == [0, 1, 1, 1, 1, 2, 2, 2]
    assert [p[1:] for p in pushes(t.checkpoint_manager.events) if p[1] == "save"] == [
        ("save", 0),
        ("save", 2),
        ("save", 6),
    ]


def test_the_interval_still_bounds_the_guard():
    t = guarded(steps=8, guard={**GUARD, "threshold": 0.5})  # never fires: refreshes every N = 4
    logged = fit(t)
    assert [m["staleness/refreshed"] for m in logged] == [0, 0, 0, 1, 0, 0, 0, 1]
    assert not any(m["guard/fired"] for m in logged)


@pytest.mark.parametrize("kill_at", [2, 3, 6])
def test_a_kill_between_the_decision_and_the_push_resumes_to_the_same_push(tmp_path, kill_at):
    whole = fit(guarded())
    first = guarded()
    fit(first, kill_after_save=kill_at, save_to=tmp_path)
    assert ("push", "save", kill_at) not in first.checkpoint_manager.events  # killed before the push
    resumed = guarded(resume_at=kill_at)
    # what PPOTrainerSync._load_checkpoint does
    refresh.restore(resumed._refresh_gate, kill_at, tmp_path / f"global_step_{kill_at}")
    after = fit(resumed)
    first_push = pushes(resumed.checkpoint_manager.events)[0]
    fired_at_kill = whole[kill_at - 1]["staleness/refreshed"] == 1
    # the resumed run pushes step kill_at's fresh weights where it fired, else the stale sampler's snapshot
    assert first_push[1:] == (("save", kill_at) if fired_at_kill else ("load", kill_at))
    assert after == whole[kill_at:]
