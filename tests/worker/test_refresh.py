"""The refresh gate's glue in verl's trainer (coolsampler.worker.refresh), without verl: the config it is
built from, the signal it reads from verl's reduced metrics, what it logs, and the checkpoint round trip,
including a kill between a firing and its push."""

from __future__ import annotations

import json
import math

import pytest

from coolsampler.spec.guard import make_gate
from coolsampler.spec.metrics_schema import COLUMNS
from coolsampler.worker import refresh, trainer_keys

GUARD = {"signal": "probs_diff", "threshold": 0.1, "window": 1, "min": 1}
# probs_diff per step as verl logs it (training/rollout_probs_diff_mean): past 0.1 at steps 3 and 6
SIGNAL = {1: 0.01, 2: 0.05, 3: 0.2, 4: 0.02, 5: 0.09, 6: 0.3, 7: 0.01, 8: 0.02}


def gate_of(trainer: dict):
    """The gate patch 0001 builds from verl's ``trainer`` section (through the one reader of its keys)."""
    return refresh.gate_from_keys(
        trainer_keys.read({"trainer": trainer}, trainer="sync", implements=trainer_keys.NAMES)
    )


def metrics(step: int) -> dict[str, float]:
    return {"training/rollout_probs_diff_mean": SIGNAL[step], "rollout_corr/kl": 0.5}


def run(gate, steps, start: int = 1) -> list[tuple[int, bool, str | None]]:
    out = []
    for t in range(start, steps + 1):
        d = refresh.decide(gate, t, metrics(t))
        out.append((t, d.refresh, d.reason))
    return out


def test_a_guard_free_gate_refreshes_after_every_nth_step_as_the_patch_did():
    for n in (1, 2, 3, 5):
        gate = gate_of({"refresh_interval": n})
        assert [t for t, r, _ in run(gate, 8) if r] == [t for t in range(1, 9) if t % n == 0]
    # an absent or null guard/schedule in verl's config is the plain gate
    gate = gate_of({"refresh_interval": 4, "refresh_guard": None, "refresh_schedule": None})
    assert gate.guard is None and gate.schedule is None and gate.N == 4


def test_the_guard_reads_the_steps_signal_from_the_reduced_metrics():
    gate = gate_of({"refresh_interval": 4, "refresh_guard": GUARD})
    # fires at 3 and 6 (signal); 4 steps after 6 would be 10: past the run
    assert [(t, why) for t, r, why in run(gate, 8) if r] == [(3, "signal"), (6, "signal")]
    # the same from the logged values, replayed offline (what analyze --guard does)
    replay = make_gate(4, GUARD)
    assert [replay.decide(t, SIGNAL[t]).refresh for t in range(1, 9)] == [t in (3, 6) for t in range(1, 9)]


def test_under_mu_grpo_the_guard_reads_the_losss_kl():
    gate = gate_of({"refresh_interval": 8, "refresh_guard": {"signal": "kl", "threshold": 0.1}})
    assert not refresh.decide(gate, 1, {"actor/rollout_corr/kl": 0.05}).refresh
    d = refresh.decide(gate, 2, {"actor/rollout_corr/kl": 0.2})
    assert (d.refresh, d.reason, d.reading) == (True, "signal", 0.2)


def test_a_schedule_refreshes_at_its_steps():
    gate = gate_of({"refresh_interval": 5, "refresh_schedule": [2, 7]})
    assert [t for t, r, _ in run(gate, 8) if r] == [2, 7]


def test_every_step_logs_the_gates_metrics_under_the_schemas_keys():
    gate = gate_of({"refresh_interval": 4, "refresh_guard": {**GUARD, "window": 3}})
    sources = {s for _, _, keys in COLUMNS.values() for s in keys}
    version, logged = 0, []
    for t in range(1, 9):
        d = refresh.decide(gate, t, metrics(t))
        m = refresh.step_metrics(gate, d, version)
        assert set(m) <= sources, set(m) - sources
        logged.append(m)
        version = t if d.refresh else version
    # the median of 3 since the refresh: 4 refreshes on the interval, 6 on the signal (median(0.09, 0.3))
    assert [m["staleness/refreshes"] for m in logged] == [0, 0, 0, 1, 1, 2, 2, 2]
    assert [m["guard/fired"] for m in logged] == [0, 0, 0, 0, 0, 1, 0, 0]
    assert "guard/value" not in logged[0]  # a window of 3 needs 2 values
    assert logged[1]["guard/value"] == pytest.approx(0.03)
    assert [m["staleness/staleness"] for m in logged] == [0, 1, 2, 3, 0, 1, 0, 1]
    plain = refresh.step_metrics(make_gate(2), make_gate(2).decide(1), 0)
    assert not any(k.startswith("guard/") for k in plain)


def test_the_state_round_trips_through_the_checkpoint(tmp_path):
    config = {"refresh_interval": 4, "refresh_guard": {**GUARD, "window": 3}}
    gate = gate_of(config)
    run(gate, 5)
    folder = tmp_path / "global_step_5"
    path = refresh.save(gate, folder)
    assert json.loads(open(path).read()) == gate.state_dict()
    back = refresh.restore(gate_of(config), 5, folder)
    assert back.state_dict() == gate.state_dict()
    # another guard is refused, and a file of another step
    with pytest.raises(ValueError, match="parameters changed"):
        refresh.restore(gate_of({"refresh_interval": 5, "refresh_guard": GUARD}), 5, folder)
    with pytest.raises(ValueError, match="holds step 5"):
        refresh.restore(gate_of(config), 6, folder)


@pytest.mark.parametrize("kill_at", [3, 4, 6])
def test_a_kill_between_a_firing_and_its_push_resumes_to_the_same_decisions(tmp_path, kill_at):
    """The trainer decides step k before saving its checkpoint; killed before the push, the resumed run
    reads step k's decision back (the sampler gets step k's weights) and goes on as if never stopped."""
    config = {"refresh_interval": 4, "refresh_guard": GUARD}
    whole = gate_of(config)
    uninterrupted = run(whole, 8)
    first = gate_of(config)
    run(first, kill_at)
    refresh.save(first, tmp_path / f"global_step_{kill_at}")
    # ... killed here: the push of step kill_at never happened
    resumed = refresh.restore(gate_of(config), kill_at, tmp_path / f"global_step_{kill_at}")
    version = refresh.resume_version(resumed, kill_at)
    fired = dict((t, r) for t, r, _ in uninterrupted)
    assert version == max([0] + [t for t in range(1, kill_at + 1) if fired[t]])
    assert refresh.decide(resumed, kill_at, {}).refresh == fired[kill_at]  # answered from the state
    assert run(resumed, 8, start=kill_at + 1) == uninterrupted[kill_at:]


def test_a_checkpoint_without_the_gate_file_is_refused_never_replayed(tmp_path):
    """The gate's state is part of a complete checkpoint: no resume guesses it from step mod N."""
    for gate in (make_gate(3), make_gate(4, GUARD)):
        with pytest.raises(FileNotFoundError, match="resuming at step 7 needs the refresh gate's state"):
            refresh.restore(gate, 7, tmp_path)
    assert refresh.resume_version(make_gate(4), 0) == 0
    with pytest.raises(ValueError, match="has decided step 0, not the checkpoint.s 7"):  # its state never read
        refresh.resume_version(make_gate(4), 7)


def test_a_missing_or_non_finite_signal_is_no_reading():
    gate = make_gate(3, GUARD)
    assert refresh.decide(gate, 1, {}).reading is None
    assert refresh.decide(gate, 2, {"training/rollout_probs_diff_mean": math.nan}).reading is None
    assert refresh.decide(gate, 3, {}).reason == "interval"


def test_a_checkpoint_is_inside_a_cycle_where_the_gates_state_says_so(tmp_path):
    """Which checkpoints must hold the stale sampler's snapshot (coolsampler.worker.checkpoint_files):
    a guard's, where its sampler is older than the step, never step mod N; without a state (a trainer without
    the gate wrote it, on fresh weights) none; with an unreadable one, every one."""
    from coolsampler.worker.checkpoint_files import stale_at

    gate = make_gate(4, GUARD)
    for t in range(1, 5):
        gate.decide(t, SIGNAL[t])  # fires at 3; 4 is inside the new cycle
        refresh.save(gate, tmp_path / f"global_step_{t}")
    assert [stale_at(tmp_path / f"global_step_{t}", t) for t in range(1, 5)] == [True, True, False, True]
    assert [stale_at(tmp_path / "none", t) for t in (3, 4)] == [False, False]
    (tmp_path / "global_step_4" / refresh.GATE_FILE).write_text("{")
    assert stale_at(tmp_path / "global_step_4", 4)


def test_an_inactive_gate_resumes_from_a_checkpoint_without_its_state(tmp_path):
    """A checkpoint of upstream verl (or of a trainer without the gate) has no refresh_gate.json: at
    interval 1 nothing stale is needed, so the resume goes on fresh weights, as verl's own would; an
    active gate (N > 1, a schedule or a guard) cannot know its sampler and refuses."""
    folder = tmp_path / "global_step_7"
    gate = refresh.restore(make_gate(1), 7, folder)
    assert refresh.resume_version(gate, 7) == 7 and gate.refreshes == 7
    assert refresh.decide(gate, 8, {}).refresh and gate.sampler_version == 8
    for active in (make_gate(4), make_gate(1, schedule=[3, 9]), make_gate(1, GUARD)):
        with pytest.raises(FileNotFoundError, match="needs the refresh gate's state"):
            refresh.restore(active, 7, folder)


def test_the_logged_staleness_is_the_one_definition():
    """staleness/staleness is spec.guard.staleness: t - 1 - sampler_version (0 on fresh weights)."""
    from coolsampler.spec.guard import staleness

    gate = make_gate(3)
    versions = []
    for t in range(1, 7):
        version = gate.sampler_version
        logged = refresh.step_metrics(gate, refresh.decide(gate, t, {}), version)
        versions.append(logged["staleness/staleness"])
        assert logged["staleness/staleness"] == staleness(t, version)
    assert versions == [0, 1, 2, 0, 1, 2]
