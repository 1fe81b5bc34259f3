"""A run's own verl log (``coolsampler.spec.runlog``): its attempts joined at the resume point, the same
way for the training job's ``train.jsonl`` and for the records ``coolsampler status`` reads mid-run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coolsampler.spec.inputs import InputError
from coolsampler.spec.runlog import assemble, attempt_logs, read_jsonl, run_records, step_times, train_steps, trained

VAL = "val-core/arith/acc/mean@1"


def line(step: int, *, val: float | None = None, train: bool = True) -> str:
    data: dict = {"training/global_step": step, "timing_s/step": float(step)} if train and step else {}
    if val is not None:
        data[VAL] = val
    return json.dumps({"step": step, "data": data}) + "\n"


def two_attempts(run: Path) -> list[Path]:
    """The first attempt trained to step 12 (validating every 4) and was killed mid-write; the second
    resumed from the checkpoint of step 8, validated there and is at step 10."""
    first = [line(0, val=0.1, train=False)] + [line(t, val=t / 100 if t % 4 == 0 else None) for t in range(1, 13)]
    second = [line(8, val=0.5, train=False), line(9), line(10)]
    (run / "attempts").mkdir(parents=True)
    (run / "attempts" / "01.jsonl").write_text("".join(first) + '{"step": 13, "da')
    (run / "attempts" / "02.jsonl").write_text("".join(second))
    return attempt_logs(run)


def test_attempts_are_joined_cut_at_the_resume_point(tmp_path: Path) -> None:
    attempts = two_attempts(tmp_path)
    assert [p.name for p in attempts] == ["01.jsonl", "02.jsonl"]
    records = run_records(attempts)
    assert train_steps(records) == list(range(1, 11))  # the first attempt's 11 and 12 were trained again
    assert records[8]["timing_s/step"] == 8.0 and records[8][VAL] == 0.5  # its training, the resume's validation
    assert max(s for s, d in records.items() if VAL in d) == 8
    assert step_times(records) == [float(t) for t in range(1, 11)]
    # train.jsonl holds the same join, each line as verl wrote it; the half-written line is dropped
    assemble(attempts, tmp_path / "train.jsonl")
    kept = attempts[0].read_text().splitlines()[:9] + attempts[1].read_text().splitlines()
    assert (tmp_path / "train.jsonl").read_text() == "".join(x + "\n" for x in kept)
    assert read_jsonl(tmp_path / "train.jsonl") == (records, [])


def test_a_run_is_trained_once_both_of_rule_trains_outputs_exist(tmp_path: Path) -> None:
    assert not trained(tmp_path)
    (tmp_path / "train.jsonl").write_text(line(1))
    assert not trained(tmp_path)  # run.yaml is written last: a killed job leaves the log alone
    (tmp_path / "run.yaml").write_text("settings: {}\n")
    assert trained(tmp_path)


def test_an_attempt_log_that_is_not_utf8_is_refused_not_joined(tmp_path: Path) -> None:
    attempts = two_attempts(tmp_path)
    attempts[1].write_bytes(line(9).encode("utf-16"))
    with pytest.raises(InputError, match="02.jsonl: not UTF-8"):
        run_records(attempts)
    with pytest.raises(InputError, match="not UTF-8"):
        assemble(attempts, tmp_path / "train.jsonl")
