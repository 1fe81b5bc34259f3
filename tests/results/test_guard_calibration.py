"""A guard's threshold by the calibration rule (config/guard-calibration.yaml): N* from the fixed-N runs'
onsets, then the median of the guard's own reading at staleness N*-1 over the N* runs' cycles."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from coolsampler.results.guard import calibrate, readings_at
from coolsampler.results.metrics import write_metrics
from coolsampler.spec.diagnostics import BY_NAME, trailing_median
from coolsampler.spec.metrics_schema import RunStatus
from coolsampler.spec.study import load_study
from coolsampler.testkit.synthetic import make_metrics

REPO = Path(__file__).resolve().parents[2]
STUDY = load_study(REPO / "config" / "guard-calibration.yaml")


def runs(collapse: dict[int, int | None]) -> list[tuple[dict, object]]:
    """The calibration study's runs, synthetic: N -> the step its runs collapse at (None: they hold)."""
    return [
        (r.settings(), make_metrics(r.N, r.steps, r.val_every, 1.0, collapse.get(r.N), seed=r.seed)) for r in STUDY.runs
    ]


def test_the_reading_is_the_trailing_median_since_the_refresh_at_that_age() -> None:
    m = make_metrics(16, 64, 8, 1.0, None, seed=1)
    col = BY_NAME["probs_diff"].column
    got = readings_at(m, "probs_diff", 5, 15)
    # the steps where the sampler is 15 steps old: 16, 32, 48, 64; each reads its own cycle's last five
    want = [trailing_median(list(m.loc[(m.step > e - 16) & (m.step <= e), col]), 5) for e in (16, 32, 48, 64)]
    assert got == pytest.approx(want) and len(got) == 4


def test_n_star_is_the_largest_safe_n_and_the_threshold_the_median_of_its_readings() -> None:
    data = runs({32: 40, 64: 40})
    cal = calibrate(data, ["ess", "probs_diff"], 5)
    assert cal.N_star == 16
    assert cal.degraded == {8: [False, False], 16: [False, False], 32: [True, True], 64: [True, True]}
    for signal in ("ess", "probs_diff"):
        readings = [x for s, m in data if s["N"] == 16 for x in readings_at(m, signal, 5, 15)]
        assert len(readings) == 8 and cal.thresholds[signal] == pytest.approx(float(np.median(readings)))
    text = cal.text(5)
    assert "N* = 16" in text and "threshold ess" in text and "refresh when below it" in text


def test_a_single_degraded_seed_rules_its_n_out_and_no_safe_n_gives_no_threshold() -> None:
    data = runs({})
    data[-1] = (data[-1][0], make_metrics(64, 64, 8, 1.0, 40, seed=2))  # N=64, seed 2 only
    assert calibrate(data, ["ess"], 5).N_star == 32
    cal = calibrate(runs({8: 40, 16: 40, 32: 40, 64: 40}), ["ess"], 5)
    assert cal.N_star is None and cal.thresholds == {"ess": None} and "no threshold" in cal.text(5)


def test_the_command_prints_the_rule_from_run_directories(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from coolsampler.cli import main

    for settings, m in runs({32: 40, 64: 40}):
        d = tmp_path / "runs" / settings["key"]
        write_metrics(m, RunStatus(True, 64, 64, []), d / "metrics.parquet", d / "status.json")
        (d / "run.yaml").write_text(
            yaml.safe_dump({"study": "guard-calibration", "settings": {"key": settings["key"]}})
        )
    assert main(["guard-threshold", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "N=32: 2 of 2 runs degrade" in out and "N* = 16" in out
    assert "threshold probs_diff" in out and "median of 8 readings at staleness 15" in out
    assert main(["guard-threshold", str(tmp_path / "none")]) == 2
