"""The staleness guard replayed over logged fixed-N runs (coolsampler.results.guard and ``coolsampler
analyze --guard``): firing steps worked out by hand on synthetic paper-shaped logs, a log whose signal
never crosses, a log without the signal, and a user's plain verl JSONL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import pytest

from coolsampler.cli import main
from coolsampler.results.diagnostics import onset_of
from coolsampler.results.guard import logged_schedule, replay_guard, replay_text
from coolsampler.spec.guard import GuardSpec
from coolsampler.spec.metrics_schema import COLUMNS
from coolsampler.testkit.synthetic import make_metrics

SPEC = GuardSpec("probs_diff", 0.1, 3, 1)
HIGH = (30, 31, 60, 61, 110, 111)  # steps where probs_diff is 0.5; 0.01 elsewhere


def _log(high: tuple[int, ...] = HIGH, collapse_at: int | None = 80) -> pd.DataFrame:
    """A 120-step run refreshed every 40 steps that degrades at step 80, its probs_diff set by hand."""
    m = make_metrics(N=40, steps=120, val_every=10, collapse_at=collapse_at, correction="none")
    m["probs_diff_mean"] = [0.5 if s in high else 0.01 for s in m["step"]]
    return m


def test_firings_by_hand() -> None:
    """Window 3 (2 values needed), min 1, N 40, since each refresh:

    step 30: median(0.01, 0.01, 0.5) = 0.01; step 31: median(0.01, 0.5, 0.5) = 0.5 -> fire.
    step 61 likewise (median of 59..61 since the refresh at 31) -> fire. 62..101 stay low: 40 steps after
    61 the interval fires at 101. Then 110, 111 -> fire at 111.
    """
    m = _log()
    assert onset_of(m) == 80
    r = replay_guard(m, SPEC, 40)
    assert r.signal_steps == [31, 61, 111] and r.interval_steps == [101]
    assert r.schedule == [31, 61, 101, 111]
    assert r.lead == 80 - 31
    # horizon N = 40: 31 + 40 < 80, no onset follows it in time -> a false alarm; 61 warns; 111 is late
    assert (r.warned, r.late, r.false_alarms) == ([61], [111], [31])
    assert r.mean_interval == pytest.approx((31 + 30 + 40 + 10) / 4)
    wide = replay_guard(m, SPEC, 40, horizon=60)
    assert (wide.warned, wide.late, wide.false_alarms) == ([31, 61], [111], [])
    text = replay_text(r)
    assert "fires (signal) at 31, 61, 111; interval refreshes at 101" in text
    assert "onset 80: lead +49; 1 warned, 1 late, 1 false alarm(s) (horizon 40 steps); mean interval 27.8" in text
    assert "as an open-loop schedule: N: {schedule: [31, 61, 101, 111]}" in text


def test_a_signal_that_never_crosses_fires_nothing() -> None:
    r = replay_guard(_log(high=()), SPEC, 40)
    assert r.signal_steps == [] and r.lead is None and r.false_alarms == []
    assert r.interval_steps == [40, 80, 120]  # the fixed gate's own refreshes
    assert "fires (signal) at none; interval refreshes at 40, 80, 120" in replay_text(r)
    assert "onset 80: no signal firing" in replay_text(r)


def test_firings_in_a_stable_run_are_false_alarms() -> None:
    r = replay_guard(_log(collapse_at=None), SPEC, 40)
    assert r.onset is None and r.false_alarms == [31, 61, 111] and r.lead is None


def test_a_signal_the_log_lacks() -> None:
    """No correction, no IS weights: the ESS is not logged, and the replay says so."""
    r = replay_guard(_log(), GuardSpec("ess", 0.5, 5, 1), 40)
    assert r.logged == 0
    assert "is_ess is not logged here; nothing to replay" in replay_text(r)


def test_logged_refreshes_become_a_schedule() -> None:
    m = _log()
    m["refreshed"] = pd.array([s in (31, 61, 101) for s in m["step"]], dtype="boolean")
    m.loc[m["step"] == 5, "refreshed"] = pd.NA  # a step that did not log it
    assert logged_schedule(m) == [31, 61, 101]
    assert logged_schedule(m.drop(columns="refreshed")) == []


def _jsonl(path: Path, high: tuple[int, ...]) -> Path:
    """A user's own verl log: verl's keys, no run.yaml, 120 steps, accuracy falling at step 80."""
    val_key = COLUMNS["val_acc"][2][0].replace("*", "gsm8k")
    recs: list[dict[str, Any]] = [{"step": 0, "data": {val_key: 0.8}}]
    for t in range(1, 121):
        data = {
            "training/global_step": t,
            "rollout_corr/kl": 0.05,
            "training/rollout_probs_diff_mean": 0.5 if t in high else 0.01,
            "actor/entropy": 0.5,
            "critic/score/mean": 0.5,
            "actor/grad_norm": 1.0,
            "actor/kl_loss": 0.001,
        }
        if t % 10 == 0:
            data[val_key] = 0.8 if t < 80 else 0.4
        recs.append({"step": t, "data": data})
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    return path


def test_analyze_replays_the_guard_on_a_users_jsonl(tmp_path: Path, capsys) -> None:
    log = _jsonl(tmp_path / "mine.jsonl", HIGH)
    flat = _jsonl(tmp_path / "flat.jsonl", ())
    args = ["analyze", str(log), str(flat), "--N", "40", "--Tb", "1.0", "--steps", "120"]
    assert main([*args, "--guard", "probs_diff>0.1", "--guard-window", "3"]) == 0
    out = capsys.readouterr().out
    mine, rest = out.split(f"== flat  ({flat})")
    assert "guard probs_diff > 0.1, median of 3 since refresh, min 1, at most every 40 steps (120 of 120" in mine
    assert "fires (signal) at 31, 61, 111; interval refreshes at 101" in mine
    assert "onset 80: lead +49; 1 warned, 1 late, 1 false alarm(s) (horizon 40 steps)" in mine
    assert "fires (signal) at none; interval refreshes at 40, 80, 120" in rest
    assert "Guard replay (probs_diff > 0.1, median of 3 since refresh, min 1)" in rest
    # min holds the second firing of each pair back; a wider horizon turns the first into a warning
    assert (
        main([*args[:2], *args[3:], "--guard", "probs_diff>0.1", "--guard-window", "1", "--guard-horizon", "60"]) == 0
    )
    out = capsys.readouterr().out
    assert "fires (signal) at 30, 31, 60, 61, 110, 111" in out and "horizon 60 steps" in out


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--guard", "ess>0.5"], "ess warns when it falls; write ess<"),
        (["--guard", "chi3>1"], "guard signal 'chi3' is not valid; allowed: kl, kl_median"),
        (["--guard-window", "3"], "--guard-window needs --guard"),
        (["--guard", "kl>1", "--guard-window", "0"], "guard.window: 0 is not valid"),
    ],
)
def test_bad_guard_flags_are_one_line(tmp_path: Path, capsys, flags: list[str], message: str) -> None:
    log = _jsonl(tmp_path / "mine.jsonl", HIGH)
    assert main(["analyze", str(log), "--N", "40", "--Tb", "1.0", *flags]) == 2
    assert message in capsys.readouterr().err


def test_a_guard_min_beyond_a_runs_N_spares_the_other_logs(tmp_path: Path, capsys) -> None:
    log = _jsonl(tmp_path / "mine.jsonl", HIGH)
    assert main(["analyze", str(log), "--N", "40", "--Tb", "1.0", "--guard", "kl>1", "--guard-min", "50"]) == 1
    cap = capsys.readouterr()
    assert "guard not replayed: guard.min: 50 exceeds N 40" in cap.out and "guard not replayed" in cap.err
    assert "onset 80 (running max" in cap.out  # the run's own block is still printed


def test_analyze_replays_the_guard_on_a_studys_run_directories(tmp_path: Path, capsys) -> None:
    """The project's own run directories (run.yaml beside each log): every run gets its replay at its
    own N, and a guard run's logged refreshes are printed as the schedule that replays them."""
    import yaml

    from coolsampler.spec.study import study_from_dict
    from coolsampler.testkit.synthetic import write_study_results

    raw = yaml.safe_load((Path(__file__).resolve().parents[2] / "config" / "config.yaml").read_text())
    raw.pop("figures", None)
    raw["runs"].append({"N": 16, "correction": "tis", "Tb": 1.0, "seed": 1, "guard": {"signal": "kl", "threshold": 1}})
    study = study_from_dict(raw, results=tmp_path)
    write_study_results(study)
    assert main(["analyze", str(tmp_path), "--guard", "kl_median>1"]) == 0
    out = capsys.readouterr().out
    blocks = out.split("== ")[1:]
    assert len(blocks) == len(study.runs)
    for run in study.runs:
        block = next(b for b in blocks if run.key in b.splitlines()[0])
        assert f"guard kl_median > 1, median of 5 since refresh, min 1, at most every {run.N} steps" in block
    guarded = next(b for b in blocks if "_gkl1w1m1_" in b.splitlines()[0])
    # the synthetic log of that run refreshes every 16 steps (64 steps): its schedule says so
    assert "its logged refreshes as an open-loop schedule: N: {schedule: [16, 32, 48, 64]}" in guarded
