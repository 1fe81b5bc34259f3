"""AReaL's logs read as runs (``coolsampler.results.sources.areal``): its TensorBoard fixture analysed, the
smoke study's example runs re-dressed in its keys and on its 0-based step axis giving the example's events,
every key read into its column, and bad AReaL logs refused in one line while the other logs are analysed.

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
FIXTURE = ROOT / "tests" / "fixtures" / "sources" / "areal"
EXAMPLES = ROOT / "examples" / "verl-logs"
SOURCE = sources()["areal"]
LAG = "ppo_actor/update/version_stats/sample_staleness_theta"
EVAL = "eval-rollout/reward"


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
    assert report.text.count("   lag (areal): per token") == 2
    assert "lag at the onset 31 mean, 31 max" in report.text
    assert "# Staleness diagnostics against the onset" in report.text
    # AReaL logs none of the lead table's diagnostics (its k1 is against pi_theta): said, not "no run degrades"
    # its lag is its one diagnostic of the lead table: the lag row, crossed before the onset (gate lag 31 at 32)
    lag_row = next(ln for ln in report.text.splitlines() if ln.startswith("| lag, the step's oldest sample |"))
    assert "| > 8 steps | 1 of 1 | 1 / 0 / 0 / 0 |" in lag_row


@pytest.mark.parametrize("run", ["stable", "degrades"])
def test_an_example_run_redressed_as_areal_gives_its_peak_and_onset(tmp_path, run):
    example = read_run(EXAMPLES / run / "train.jsonl").metrics
    metrics = example.copy()
    metrics["kl_pi_theta"] = metrics["kl"]
    redress(metrics, SOURCE, "TensorBoard", tmp_path / run)
    (original,) = events([EXAMPLES / run]).values()
    dressed = events([tmp_path / run])[run]
    for field in ("peak", "peak_step", "onset"):
        assert dressed[field] == original[field] or (np.isnan(dressed[field]) and np.isnan(original[field])), field
    back = read_run(tmp_path / run)
    assert back.system == "areal" and back.lag.kind == "token" and back.lag.compared == "pi_theta"
    train = metrics[metrics["step"] > 0].set_index("step")
    got = back.metrics.set_index("step")
    assert list(got.index) == list(train.index)  # logged at 0..63, read at the learner's steps 1..64
    for column in ("lag_mean", "lag_max", "lag_min", "grad_norm", "reward", "kl_pi_theta"):
        np.testing.assert_allclose(got[column], train[column], rtol=1e-6, atol=1e-7, err_msg=column)
    assert got["kl"].isna().all()  # k1 against pi_theta is not verl's kl
    val = train["val_acc"].dropna()  # the validation before step 1 has no AReaL step
    np.testing.assert_allclose(got["val_acc"].dropna(), val, rtol=1e-6)


def test_every_key_is_read_into_its_column_at_the_next_learner_step(tmp_path):
    values = {k.key: 0.5 + i / 100 for i, k in enumerate(SOURCE.keys)}
    values[f"{LAG}_avg"], values[f"{LAG}_max"], values[f"{LAG}_min"] = 0.5, 1.0, 0.0
    write_tensorboard([(s, {key_name(k): v for k, v in values.items()}) for s in range(3)], tmp_path / "run")
    got = read_run(tmp_path / "run").metrics.set_index("step")
    assert list(got.index) == [1, 2, 3]
    for k in SOURCE.keys:
        assert got.loc[3, k.column] == pytest.approx(values[k.key], rel=1e-6), k.key


def test_the_bound_is_the_saved_configurations_setting():
    assert SOURCE.bound is not None
    assert SOURCE.bound.setting == "rollout.max_head_offpolicyness" and SOURCE.bound.default == 0
    assert SOURCE.bound.paths == ("rollout.max_head_offpolicyness",)


def _lag_rows(bad_step: int, **bad: float) -> list[tuple[int, dict]]:
    rows = []
    for s in range(10):
        data = {f"{LAG}_avg": min(s, 1.0), f"{LAG}_max": min(s, 1.0), f"{LAG}_min": 0.0, "rollout/reward": 0.5}
        if s % 4 == 3:
            data[EVAL] = 0.5
        if s == bad_step:
            data.update({f"{LAG}_{k}": v for k, v in bad.items()})
        rows.append((s, data))
    return rows


BAD = {
    # a detect key, none of AReaL's other keys: not a log AReaL writes
    "detect key alone": ([(s, {f"{LAG}_avg": 0.0}) for s in range(5)], f"{LAG}_avg"),
    "a lag below 0": (_lag_rows(4, avg=-1.0), f"{LAG}_avg is -1 at step 5, below 0"),
    # logged at 0-based step 2, the learner's step 3: a lag of 7 predates the run
    "a lag past its step": (_lag_rows(2, max=7.0), f"{LAG}_max is 7 at step 3, past its step"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_areal_log_is_one_line_and_the_other_logs_go_on(tmp_path, capsys, case):
    rows, said = BAD[case]
    write_tensorboard(rows, tmp_path / "bad")
    rc, out, err = cli(capsys, "analyze", str(tmp_path / "bad"), str(FIXTURE / "stable"))
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 1 and len(lines) == 1, err
    assert lines[0].startswith(f"coolsampler analyze: {tmp_path / 'bad'}: ") and said in lines[0], lines[0]
    assert "no onset: stable under the Section 2 criteria" in out  # the good log is still analysed
    assert "| stable |" in out  # and reaches Table 1
