"""The two-rank shape's sleep stand-in (coolsampler.worker.cpu_sleep): it records what vLLM's worker
was asked and refuses the pushes a real sleeping engine could not take."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from coolsampler.worker import cpu_sleep


@pytest.fixture(autouse=True)
def _fresh_state(monkeypatch):
    monkeypatch.setattr(cpu_sleep, "STATE", {"asleep": set(), "level": None, "sleeps": 0, "pushes": 0, "served": 0})


def test_a_push_is_taken_between_the_weights_wake_and_the_cache_wake():
    cpu_sleep.sleep(1)
    assert cpu_sleep.STATE["level"] == 1 and cpu_sleep.STATE["asleep"] == {"weights", "kv_cache"}
    with pytest.raises(cpu_sleep.SleepViolation, match="asleep=\\['kv_cache', 'weights'\\]"):
        cpu_sleep.before_push()  # weights still offloaded
    cpu_sleep.wake_up(["weights"])
    cpu_sleep.before_push()
    cpu_sleep.wake_up(["kv_cache"])
    assert cpu_sleep.STATE["asleep"] == set() and cpu_sleep.STATE["pushes"] == 1


def test_a_push_into_an_awake_engine_is_refused():
    with pytest.raises(cpu_sleep.SleepViolation, match="asleep=\\[\\]"):
        cpu_sleep.before_push()
    cpu_sleep.sleep(1)
    cpu_sleep.wake_up(None)  # verl's full wake: kv cache and weights
    with pytest.raises(cpu_sleep.SleepViolation):
        cpu_sleep.before_push()


def test_the_worker_records_each_sleep_and_wake_and_logs_what_it_served(capsys):
    calls = []

    class CPUWorker:
        def execute_model(self, scheduler_output):
            calls.append(("execute", len(scheduler_output.scheduled_new_reqs)))

        def sleep(self, level=1):
            calls.append(("sleep", level))

        def wake_up(self, tags=None):
            calls.append(("wake_up", tags))

    module = type("M", (), {"CPUWorker": CPUWorker})
    cpu_sleep._record(module)
    w = CPUWorker()
    w.execute_model(SimpleNamespace(scheduled_new_reqs=[1, 2, 3]))
    w.execute_model(SimpleNamespace(scheduled_new_reqs=[]))
    w.sleep(1)
    w.wake_up(["weights"])
    assert calls == [("execute", 3), ("execute", 0), ("sleep", 1), ("wake_up", ["weights"])]  # vLLM's own still run
    assert cpu_sleep.SLEPT.format(pid=os.getpid(), level=1, served=3) in capsys.readouterr().err
    assert cpu_sleep.STATE["asleep"] == {"kv_cache"} and cpu_sleep.STATE["sleeps"] == 1
