"""A stack run that stalled and was retried says so: a retried run passes, and without the note a
flaky stall would be invisible in a green suite. Fast: verl is replaced by a stand-in that stalls once."""

from __future__ import annotations

from pathlib import Path

import pytest

import tests.stack as stack
from coolsampler.train.launch import TrainingFailed

KEY = "toy-qwen2/arith/N4_lr1e-3_tis_Tb1_Tl1_s1"


def test_a_stalled_then_retried_run_says_it_was_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls: list[int] = []

    def stalls_once(*args: object, **kwargs: object) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise TrainingFailed("stalled: no progress for 240 s")

    monkeypatch.setattr(stack, "run_verl", stalls_once)
    monkeypatch.setattr(stack, "verl_overrides", lambda *a, **k: [])
    world = stack.World(tmp_path / "model", tmp_path / "train.parquet", tmp_path / "val.parquet")
    with pytest.warns(UserWarning, match="stalled .* retrying once"):
        assert stack.run_stack(KEY, world, tmp_path) == tmp_path / "train.jsonl"
    assert len(calls) == 2
    assert f"{KEY}: attempt 1 stalled" in capsys.readouterr().err


def test_a_run_that_never_stalls_says_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stack, "run_verl", lambda *a, **k: None)
    monkeypatch.setattr(stack, "verl_overrides", lambda *a, **k: [])
    world = stack.World(tmp_path / "model", tmp_path / "train.parquet", tmp_path / "val.parquet")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        stack.run_stack(KEY, world, tmp_path)
