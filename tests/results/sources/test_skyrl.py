"""SkyRL's logs read as runs (``coolsampler.results.sources.skyrl``): its TensorBoard fixture analysed, the
smoke study's example runs re-dressed in its keys giving the example's events, every key read into its
column, and bad SkyRL logs refused in one line while the other logs are analysed.

``coolsampler analyze`` exits 1 where it reported a bad input among others (the input contract of a
multi-input command: the bad one is one line, the others go on)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from coolsampler.cli import main
from coolsampler.paper.own_logs import analyze_report
from coolsampler.results.own_logs import events_frame, read_run
from coolsampler.results.sources import sources
from coolsampler.testkit.redress import key_name, redress, write_tensorboard

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = ROOT / "tests" / "fixtures" / "sources" / "skyrl"
EXAMPLES = ROOT / "examples" / "verl-logs"
SOURCE = sources()["skyrl"]
LAG = "async/staleness"
EVAL = "eval/all/avg_score"


def events(paths: list[Path]) -> dict[str, dict]:
    """Each run's events (``events_frame``) by its name, from ``analyze_report`` on ``paths``."""
    report = analyze_report([str(p) for p in paths])
    return {row["run"]: row for row in events_frame(report.entries).to_dict("records")}


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    cap = capsys.readouterr()
    assert "Traceback" not in cap.out + cap.err
    return rc, cap.out, cap.err


def test_the_fixture_gives_one_block_per_run_its_onset_lag_lines_and_lead_section():
    report = analyze_report([str(FIXTURE)])
    assert not report.errors
    blocks = [ln for ln in report.text.splitlines() if ln.startswith("== ")]
    assert [b.split()[1] for b in blocks] == ["degrades", "stable"]
    ev = {row["run"]: row for row in events_frame(report.entries).to_dict("records")}
    assert ev["degrades"]["onset"] == 32
    assert ev["stable"]["onset"] is None or np.isnan(ev["stable"]["onset"])
    assert report.text.count("   lag (skyrl): the learner's step minus the step at which the sample's request") == 2
    assert "lag at the onset 31 mean, 31 max" in report.text
    assert "# Staleness diagnostics against the onset" in report.text
    # SkyRL logs none of the lead table's diagnostics (no KL; its IS ratio is raw): said, not "no run degrades"
    # its lag is its one diagnostic of the lead table: the lag row, crossed before the onset (gate lag 31 at 32)
    lag_row = next(ln for ln in report.text.splitlines() if ln.startswith("| lag, the step's oldest sample |"))
    assert "| > 8 steps | 1 of 1 | 1 / 0 / 0 / 0 |" in lag_row


@pytest.mark.parametrize("run", ["stable", "degrades"])
def test_an_example_run_redressed_as_skyrl_gives_its_peak_and_onset(tmp_path, run):
    example = read_run(EXAMPLES / run / "train.jsonl").metrics
    metrics = example.copy()
    redress(metrics, SOURCE, "TensorBoard", tmp_path / run)
    (original,) = events([EXAMPLES / run]).values()
    dressed = events([tmp_path / run])[run]
    for field in ("peak", "peak_step", "onset"):
        assert dressed[field] == original[field] or (np.isnan(dressed[field]) and np.isnan(original[field])), field
    back = read_run(tmp_path / run)
    assert back.system == "skyrl" and back.lag.kind == "dispatch" and back.lag.truncation == "before"
    train = metrics[metrics["step"] > 0].set_index("step")
    got = back.metrics.set_index("step")
    assert list(got.index) == [0, *train.index]  # the evaluation before training at 0, as verl's
    for column in ("lag_mean", "lag_max", "lag_min", "grad_norm", "reward"):
        np.testing.assert_allclose(got.loc[train.index, column], train[column], rtol=1e-6, atol=1e-7, err_msg=column)
    val = metrics.set_index("step")["val_acc"].dropna()
    np.testing.assert_allclose(got["val_acc"].dropna(), val, rtol=1e-6)


def test_every_key_is_read_into_its_column_at_its_step(tmp_path):
    values = {k.key: 0.5 + i / 100 for i, k in enumerate(SOURCE.keys)}
    values[f"{LAG}_avg"], values[f"{LAG}_max"], values[f"{LAG}_min"] = 0.5, 1.0, 0.0
    write_tensorboard([(s, {key_name(k): v for k, v in values.items()}) for s in range(1, 4)], tmp_path / "run")
    got = read_run(tmp_path / "run").metrics.set_index("step")
    assert list(got.index) == [1, 2, 3]
    for k in SOURCE.keys:
        assert got.loc[3, k.column] == pytest.approx(values[k.key], rel=1e-6), k.key


def test_the_bound_is_its_setting_and_default():
    # SkyRL saves no configuration file beside its log: only a run.yaml/config.yaml put there, else the default
    assert SOURCE.bound is not None
    assert SOURCE.bound.setting == "trainer.fully_async.max_staleness_steps" and SOURCE.bound.default == 4
    assert SOURCE.bound.paths == ("trainer.fully_async.max_staleness_steps",)


def _lag_rows(bad_step: int, **bad: float) -> list[tuple[int, dict]]:
    rows = []
    for s in range(1, 11):
        data = {f"{LAG}_mean": min(s, 1.0), f"{LAG}_max": min(s, 1.0), f"{LAG}_min": 0.0, "reward/avg_raw_reward": 0.5}
        if s % 4 == 3:
            data[EVAL] = 0.5
        if s == bad_step:
            data.update({f"{LAG}_{k}": v for k, v in bad.items()})
        rows.append((s, data))
    return rows


BAD = {
    # a detect key, none of SkyRL's other keys: not a log SkyRL writes
    "detect key alone": ([(s, {f"{LAG}_mean": 0.0}) for s in range(1, 6)], f"{LAG}_mean"),
    "a lag below 0": (_lag_rows(5, min=-1.0), f"{LAG}_min is -1 at step 5, below 0"),
    # a group dispatched before the run began
    "a lag past its step": (_lag_rows(3, max=7.0), f"{LAG}_max is 7 at step 3, past its step"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_skyrl_log_is_one_line_and_the_other_logs_go_on(tmp_path, capsys, case):
    rows, said = BAD[case]
    write_tensorboard(rows, tmp_path / "bad")
    rc, out, err = cli(capsys, "analyze", str(tmp_path / "bad"), str(FIXTURE / "stable"))
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 1 and len(lines) == 1, err
    assert lines[0].startswith(f"coolsampler analyze: {tmp_path / 'bad'}: ") and said in lines[0], lines[0]
    assert "no onset: stable under the Section 2 criteria" in out  # the good log is still analysed
    assert "| stable |" in out  # and reaches Table 1
