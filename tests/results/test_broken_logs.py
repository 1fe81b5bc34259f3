"""Broken verl logs: the parser keeps what is sound and says what is not, and nothing downstream
(degradation events, means, Table 4, figures) presents a broken run as a whole one.

Logs are written here in verl's own format: one ``{"step": k, "data": {...}}`` per line, step 0 the
initial validation, with orjson as verl's ``FileLogger`` uses it (orjson writes NaN as ``null``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import pytest

from coolsampler.paper.labels import availability_notes, short_key
from coolsampler.paper.tables import table4_frames
from coolsampler.results.analysis import summarize_run
from coolsampler.results.metrics import MetricsError, parse_jsonl
from coolsampler.spec.metrics_schema import COLUMNS
from coolsampler.spec.runlog import read_jsonl
from coolsampler.spec.study import parse_key

KEY = "toy-qwen2/arith/N4_lr1e-3_tis_Tb1_Tl1_s1_st20_v5"
RUN = parse_key(KEY)
STEPS, VAL_EVERY, N = RUN.steps, RUN.val_every, RUN.N
VAL = "val-core/arith/acc/mean@1"


def step_record(t: int, **overrides: Any) -> dict[str, Any]:
    """One training step's metrics, with the keys verl (patched) logs; validation every VAL_EVERY."""
    data: dict[str, Any] = {
        "training/global_step": t,
        "staleness/sampler_version": N * ((t - 1) // N),
        "staleness/staleness": (t - 1) % N,
        "staleness/refreshed": t % N == 0,
        "rollout_corr/kl": 0.01 * t,
        "actor/entropy": 1.0 - 0.01 * t,
        "response_length/clip_ratio": 0.05,
        "critic/score/mean": 0.3 + 0.01 * t,
        "actor/grad_norm": 0.2,
        "rollout_corr/rollout_is_ratio_fraction_high": 0.01,
        "actor/kl_loss": 0.001 * t,
        "sampler/temperature": 1.0,
    }
    if t % VAL_EVERY == 0:
        data[VAL] = 0.5 + 0.01 * t
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not DROP}


DROP = object()  # an override value that removes the key


def records(steps: int = STEPS, **per_step: dict[str, Any]) -> list[dict[str, Any]]:
    """Step 0 (initial validation) and steps 1..steps; ``per_step={'s7': {...}}`` overrides step 7."""
    out = [{"step": 0, "data": {VAL: 0.5}}]
    for t in range(1, steps + 1):
        out.append({"step": t, "data": step_record(t, **per_step.get(f"s{t}", {}))})
    return out


def write(path: Path, recs: list[dict[str, Any]], *, dumps=orjson.dumps) -> Path:
    """JSONL as verl writes it: orjson by default (NaN -> null); ``json.dumps`` writes NaN literally."""
    with path.open("wb") as f:
        for r in recs:
            line = dumps(r)
            f.write((line.encode() if isinstance(line, str) else line) + b"\n")
    return path


def parse(path: Path):
    return parse_jsonl(path, expected_steps=STEPS, val_every=VAL_EVERY, run=KEY)


def downstream(df: pd.DataFrame, status) -> tuple[dict[str, Any], pd.Series, list[str]]:
    """What the analysis makes of the run: its summary, its Table 4 row and a figure's notes."""
    settings = RUN.settings()
    entry = (settings, df, status)
    summary = summarize_run(df, settings, status)
    table, _display = table4_frames([entry])
    return summary, table.iloc[0], availability_notes([entry])


def assert_flagged(df: pd.DataFrame, status, problem: str) -> None:
    """Incomplete, the reason in the status, and every consumer saying so."""
    assert not status.complete
    assert any(problem in p for p in status.problems), status.problems
    summary, row, notes = downstream(df, status)
    assert summary["complete"] is False and problem in summary["note"], summary["note"]
    assert not bool(row["complete"]) and problem in row["note"]
    assert len(notes) == 1 and problem in notes[0], notes


def test_a_whole_log_is_complete(tmp_path):
    df, status = parse(write(tmp_path / "t.jsonl", records()))
    assert status.complete and status.problems == [] and status.last_step == STEPS
    assert list(df.columns) == list(COLUMNS) and list(df.step) == list(range(STEPS + 1))
    summary, row, notes = downstream(df, status)
    assert summary["complete"] and summary["note"] == "" and bool(row["complete"]) and notes == []


def test_truncated_last_line(tmp_path):
    p = write(tmp_path / "t.jsonl", records())
    raw = p.read_bytes().rstrip(b"\n")
    p.write_bytes(raw[: raw.rindex(b"\n") + 40])  # the job was killed while writing step 20
    df, status = parse(p)
    assert "last line is not a whole JSON record (truncated log?)" in status.problems
    assert "stopped at step 19 of 20" in status.problems
    assert "1 validation point(s) missing (first: step 20)" not in status.problems  # not reached: not "lost"
    assert list(df.step) == list(range(20)) and df.kl.notna().sum() == 19  # steps 1-19 kept whole
    assert_flagged(df, status, "truncated log")


def test_garbage_line_in_the_middle(tmp_path):
    p = write(tmp_path / "t.jsonl", records())
    lines = p.read_bytes().split(b"\n")
    lines[5] = b'{"step": 5, "data": {"actor/entr'
    p.write_bytes(b"\n".join(lines))
    df, status = parse(p)
    assert "line 6 is not a JSON record (a stray line), skipped" in status.problems
    assert "1 step(s) missing from the log (first: 5)" in status.problems
    assert_flagged(df, status, "line 6")


@pytest.mark.parametrize(
    ("writer", "value"),
    [(orjson.dumps, math.nan), (json.dumps, math.nan), (json.dumps, math.inf)],
    ids=["orjson-null", "json-NaN", "json-Infinity"],
)
def test_nan_metrics_are_kept_and_flagged(tmp_path, writer, value):
    """orjson (verl) writes NaN as null; Python's json writes NaN/Infinity: all three are flagged."""
    recs = records(s7={"rollout_corr/kl": value}, s9={"actor/grad_norm": value})
    p = write(tmp_path / "t.jsonl", recs, dumps=writer)
    if writer is orjson.dumps:
        assert b'"rollout_corr/kl":null' in p.read_bytes()
    df, status = parse(p)
    assert any(p.startswith("1 step(s) with NaN/inf kl") and "step 7" in p for p in status.problems)
    assert any(p.startswith("1 step(s) with NaN/inf grad_norm") and "step 9" in p for p in status.problems)
    kl7 = df.set_index("step").kl[7]
    assert math.isnan(kl7) if math.isnan(value) else kl7 == value
    assert df.set_index("step").kl[8] == pytest.approx(0.08)  # neighbours untouched
    assert_flagged(df, status, "NaN/inf kl")


def test_a_metric_null_at_every_step_is_flagged_not_called_missing(tmp_path):
    """A run that diverged at step 1 logs kl as null throughout: that is a broken run, not a log
    without the metric, so it is parsed (and flagged) rather than refused."""
    recs = records(**{f"s{t}": {"rollout_corr/kl": None} for t in range(1, STEPS + 1)})
    df, status = parse(write(tmp_path / "t.jsonl", recs))
    assert df.kl.isna().all()
    assert_flagged(df, status, f"{STEPS} step(s) with NaN/inf kl")


def test_missing_validation_points(tmp_path):
    recs = records(s10={VAL: DROP}, s15={VAL: None})  # not run at 10; run but NaN at 15
    df, status = parse(write(tmp_path / "t.jsonl", recs))
    assert "2 validation point(s) missing (first: step 10)" in status.problems
    assert any("NaN/inf val_acc" in p and "step 15" in p for p in status.problems)
    summary, _, _ = downstream(df, status)
    assert summary["n_val"] == 3  # steps 0, 5, 20: the lost points are not guessed
    assert_flagged(df, status, "validation point(s) missing")


def test_a_run_that_died_midway(tmp_path):
    """The numbers cover the logged steps and say so: 'final' is the last point logged, not step 20."""
    df, status = parse(write(tmp_path / "t.jsonl", records(steps=12)))
    assert status.last_step == 12 and status.expected_steps == STEPS
    assert status.problems == ["stopped at step 12 of 20"]
    summary, row, notes = downstream(df, status)
    assert summary["final"] == pytest.approx(0.6) and summary["last_step"] == 12
    assert "numbers cover the logged steps only" in summary["note"]
    assert notes == [f"{short_key(RUN.settings())}: unfinished at step 12/20 (stopped at step 12 of 20)"]
    assert_flagged(df, status, "stopped at step 12 of 20")


def test_a_run_that_died_before_its_first_step(tmp_path):
    df, status = parse(write(tmp_path / "t.jsonl", records(steps=0)))
    assert list(df.step) == [0]
    assert "no training step logged (the run died before step 1)" in status.problems
    assert_flagged(df, status, "died before step 1")


def test_degradation_in_a_truncated_run_is_reported_with_its_note(tmp_path):
    """An onset found in a run that stopped early is still an onset, but never a silent one."""
    # validation 0.55 .. 0.70 up to step 20, 0.8 at 25 and 30, then 0.6: an onset at 35
    recs = records(steps=40, **{f"s{t}": {VAL: 0.8} for t in (25, 30)}, s35={VAL: 0.6}, s40={VAL: 0.6})
    p = write(tmp_path / "t.jsonl", recs[:38])  # steps 0..37: killed after step 37
    df, status = parse_jsonl(p, expected_steps=40, val_every=VAL_EVERY, run=KEY)
    settings = RUN.settings()
    summary = summarize_run(df, settings, status)
    assert summary["onset"] == 35 and summary["complete"] is False
    assert "stopped at step 37 of 40" in summary["note"]


def test_duplicated_steps_keep_the_last_record(tmp_path):
    """A resumed run re-logs the steps after its checkpoint (10): the second attempt's records win,
    whole (the first attempt's keys are not merged in), and the run is flagged."""
    first = records(steps=13, s11={"sampler/temperature": 0.5})
    second = [{"step": t, "data": step_record(t, **{"rollout_corr/kl": 1.0 + t})} for t in range(11, STEPS + 1)]
    p = write(tmp_path / "t.jsonl", first + second)
    by_step, problems = read_jsonl(p)
    assert by_step[11]["sampler/temperature"] == 1.0  # not the first attempt's 0.5
    df, status = parse(p)
    assert list(df.step) == list(range(STEPS + 1))
    assert df.set_index("step").kl[12] == pytest.approx(13.0)
    assert df.set_index("step").kl[10] == pytest.approx(0.1)
    assert (
        "3 step(s) logged more than once (resumed run?), kept the last record of each (first: step 11)"
        in status.problems
    )
    assert_flagged(df, status, "logged more than once")


def test_the_validation_a_resumed_run_makes_at_its_checkpoint_is_merged_not_flagged(tmp_path):
    """What ``coolsampler.spec.runlog.assemble`` writes for a run resumed from the checkpoint of step 10:
    the first attempt up to step 10, the second attempt's validation at step 10 (a record without
    training/global_step), then steps 11-20. Step 10 keeps its training metrics; nothing was
    trained twice, so the run is whole."""
    first = records(steps=10)
    resume_val = {"step": 10, "data": {VAL: 0.61}}
    second = [{"step": t, "data": step_record(t)} for t in range(11, STEPS + 1)]
    df, status = parse(write(tmp_path / "t.jsonl", first + [resume_val] + second))
    assert status.complete, status.problems
    at10 = df.set_index("step").loc[10]
    assert at10.kl == pytest.approx(0.1) and at10.val_acc == pytest.approx(0.61)


def test_a_metric_missing_from_some_steps(tmp_path):
    recs = records(s5={"actor/grad_norm": DROP}, s6={"actor/grad_norm": DROP})
    df, status = parse(write(tmp_path / "t.jsonl", recs))
    assert "2 step(s) without grad_norm (first at step 5)" in status.problems
    assert_flagged(df, status, "without grad_norm")


@pytest.mark.parametrize(
    ("source", "column"), [("actor/entropy", "entropy"), ("rollout_corr/kl", "kl"), ("actor/kl_loss", "kl_to_init")]
)
def test_a_required_metric_missing_entirely_is_an_error(tmp_path, source, column):
    recs = records(**{f"s{t}": {source: DROP} for t in range(1, STEPS + 1)})
    with pytest.raises(MetricsError) as ei:
        parse(write(tmp_path / "t.jsonl", recs))
    msg = str(ei.value)
    assert msg.startswith(KEY + ": ") and repr(column) in msg and source in msg, msg


def test_the_mu_grpo_kl_source_counts_as_the_kl(tmp_path):
    """mu-GRPO runs log the mismatch under actor/rollout_corr/kl: not a missing metric."""
    recs = records(**{f"s{t}": {"rollout_corr/kl": DROP, "actor/rollout_corr/kl": 0.5} for t in range(1, 21)})
    df, status = parse(write(tmp_path / "t.jsonl", recs))
    assert status.complete and (df.kl[1:] == 0.5).all()


def test_an_empty_log_is_an_error(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_bytes(b"")
    with pytest.raises(MetricsError, match="no records"):
        parse(p)


def test_a_sampled_validation_copy_is_parsed_apart_and_never_taken_for_the_greedy_score(tmp_path: Path) -> None:
    """A world's validation set logs two data sources: greedy rows (``arith``) and their sampled copy
    (``arith-sampled``). Sorted, the copy's key may come first in a record; val_acc must still be greedy."""
    sampled = {"val-core/arith-sampled/acc/mean@1": 0.1, "val-aux/arith-sampled/digit_error/mean@1": 0.4}
    recs = records(**{f"s{t}": {**sampled, "val-aux/arith/digit_error/mean@1": 0.05} for t in (5, 10, 15, 20)})
    recs[0]["data"] = {"val-core/arith-sampled/acc/mean@1": 0.1, VAL: 0.5}
    df, status = parse(write(tmp_path / "train.jsonl", recs))
    assert status.complete, status.problems  # sparse by design, as val_acc is
    val = df.set_index("step")
    assert val.loc[10, "val_acc"] == pytest.approx(0.6) and val.loc[10, "val_acc_sampled"] == 0.1
    assert val.loc[0, "val_acc"] == 0.5 and val.loc[0, "val_acc_sampled"] == 0.1
    assert val.loc[20, "val_digit_error"] == 0.05  # the greedy rows' digit error, not the copy's
    assert val["val_acc_sampled"].notna().sum() == 5 and val["val_digit_error"].notna().sum() == 4
