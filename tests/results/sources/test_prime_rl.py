"""prime-rl's logs read as runs (``coolsampler.results.sources.prime_rl``): its ``metrics.jsonl`` fixture
analysed, the smoke study's example runs re-dressed as its trainer's, orchestrator's and evaluation rows
giving the example's events, the evaluation rows' float steps, and bad prime-rl logs (among them two of one
run's components disagreeing about a step) refused in one line while the other logs are analysed.

``coolsampler analyze`` exits 1 where it reported a bad input among others (the input contract of a
multi-input command: the bad one is one line, the others go on)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from coolsampler.cli import main
from coolsampler.paper.own_logs import analyze_report
from coolsampler.results.own_logs import events_frame, read_run
from coolsampler.results.readers import component_rows
from coolsampler.results.sources import sources
from coolsampler.spec.inputs import InputError
from coolsampler.testkit.redress import redress

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = ROOT / "tests" / "fixtures" / "sources" / "prime-rl"
EXAMPLES = ROOT / "examples" / "verl-logs"
SOURCE = sources()["prime-rl"]
EVAL = "eval/gsm8k/effective/agent/reward/mean"
REWARD = "train/agg/effective/agent/reward/mean"


def events(paths: list[Path]) -> dict[str, dict]:
    """Each run's events (``events_frame``) by its name, from ``analyze_report`` on ``paths``."""
    report = analyze_report([str(p) for p in paths])
    return {row["run"]: row for row in events_frame(report.entries).to_dict("records")}


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    cap = capsys.readouterr()
    assert "Traceback" not in cap.out + cap.err
    return rc, cap.out, cap.err


def write_rows(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def run_rows(steps: int = 10, **at: dict) -> list[dict]:
    """A prime-rl run's rows as its components append them: per step an orchestrator row, a trainer row
    (each with its own time), and every fourth step an evaluation row with a float step; ``at``: rows
    to add, by a name of the form ``s<step>``."""
    rows = []
    for s in range(1, steps + 1):
        lag = float(min(s - 1, 2))
        rows.append({"step": s, "time": 10.0 * s, "off_policy/mean": lag, "off_policy/max": lag, REWARD: 0.5})
        rows.append({"step": s, "time": 10.0 * s + 0.1, "mismatch_kl/all/mean": 0.01, "optim/grad_norm": 1.0})
        if s % 4 == 0:
            rows.append({"step": float(s), "time": 10.0 * s + 0.2, EVAL: 0.5})
        rows += at.get(f"s{s}", [])
    return rows


def test_the_fixture_gives_one_block_per_run_its_onset_lag_lines_and_lead_table():
    report = analyze_report([str(FIXTURE)])
    assert not report.errors
    blocks = [ln for ln in report.text.splitlines() if ln.startswith("== ")]
    assert [b.split()[1] for b in blocks] == ["degrades/metrics", "stable/metrics"]
    ev = {row["run"]: row for row in events_frame(report.entries).to_dict("records")}
    assert ev["degrades/metrics"]["onset"] == 32
    assert ev["stable/metrics"]["onset"] is None or np.isnan(ev["stable/metrics"]["onset"])
    assert report.text.count("   lag (prime-rl): the learner's step minus the step at which the sample's") == 2
    assert "## Which diagnostic warns first: 1 degraded runs, 1 stable" in report.text
    assert "| forward KL k3 | median of 5 steps |" in report.text  # its mismatch_kl is verl's k3


@pytest.mark.parametrize("run", ["stable", "degrades"])
def test_an_example_run_redressed_as_prime_rl_gives_its_peak_and_onset(tmp_path, run):
    metrics = read_run(EXAMPLES / run / "train.jsonl").metrics
    redress(metrics, SOURCE, "components JSONL", tmp_path / run / "metrics.jsonl")
    (original,) = events([EXAMPLES / run]).values()
    (dressed,) = events([tmp_path / run / "metrics.jsonl"]).values()
    for field in ("peak", "peak_step", "onset"):
        assert dressed[field] == original[field] or (np.isnan(dressed[field]) and np.isnan(original[field])), field
    back = read_run(tmp_path / run / "metrics.jsonl")
    assert back.system == "prime-rl" and back.lag.kind == "dispatch"
    got, want = back.metrics.set_index("step"), metrics.set_index("step")
    for column in ("lag_mean", "lag_max", "k3_kl", "entropy", "grad_norm", "reward", "val_acc"):
        np.testing.assert_allclose(got[column], want[column], rtol=1e-12, err_msg=column)
    assert got["kl"].isna().all()  # prime-rl logs no k1


def test_evaluation_rows_with_a_float_step_are_that_steps_validation(tmp_path):
    log = write_rows(tmp_path / "run" / "metrics.jsonl", [{"step": 0.0, "time": 0.0, EVAL: 0.25}, *run_rows()])
    loaded = read_run(log)
    assert not loaded.status.problems  # no step read as re-logged: the float rows join their step's
    val = loaded.metrics.set_index("step")["val_acc"].dropna()
    assert list(val.index) == [0, 4, 8] and list(val) == [0.25, 0.5, 0.5]
    train = loaded.metrics.set_index("step")
    assert train.loc[8, "lag_mean"] == 2.0 and train.loc[8, "k3_kl"] == 0.01  # one record a step
    assert train.loc[8, "reward"] == 0.5  # the reward key as prime-rl names it: per agent


def test_two_components_disagreeing_about_a_step_raise_input_error(tmp_path):
    other = {"step": 5, "time": 50.3, "off_policy/mean": 3.0}  # a second writer of step 5's lag
    log = write_rows(tmp_path / "run" / "metrics.jsonl", run_rows(s5=[other]))
    with pytest.raises(InputError, match=r"two rows of step 5 give off_policy/mean two values \(2\.0 and 3\.0\)"):
        component_rows(log, SOURCE.components)


def _with(rows: list[dict], step: int, key: str, value: float) -> list[dict]:
    """``rows`` with ``key`` set to ``value`` in the row of ``step`` that holds it."""
    return [dict(r, **{key: value}) if r["step"] == step and key in r else r for r in rows]


BAD = {
    "components disagree": (
        run_rows(s5=[{"step": 5, "time": 50.3, "mismatch_kl/all/mean": 0.5}]),
        "two rows of step 5 give mismatch_kl/all/mean two values (0.01 and 0.5): one run's components disagree",
    ),
    # a detect key, none of prime-rl's other keys: not a log prime-rl writes
    "detect key alone": ([{"step": s, "time": s, "off_policy/mean": 0.0} for s in range(1, 6)], "off_policy/mean"),
    "a lag below 0": (_with(run_rows(), 6, "off_policy/max", -1.0), "off_policy/max is -1 at step 6, below 0"),
    "a lag past its step": (
        _with(run_rows(), 3, "off_policy/mean", 9.0),
        "off_policy/mean is 9 at step 3, past its step",
    ),
    # no row with its step axis: nothing to read as a run
    "no step axis": ([{"time": 1.0 * s, "off_policy/mean": 0.0, REWARD: 0.5} for s in range(1, 6)], "metrics.jsonl"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_prime_rl_log_is_one_line_and_the_other_logs_go_on(tmp_path, capsys, case):
    rows, said = BAD[case]
    bad = write_rows(tmp_path / "bad" / "metrics.jsonl", rows)
    rc, out, err = cli(capsys, "analyze", str(bad), str(FIXTURE / "stable"))
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 1 and len(lines) == 1, err
    assert lines[0].startswith(f"coolsampler analyze: {bad}") and said in lines[0], lines[0]
    assert "no onset: stable under the Section 2 criteria" in out  # the good log is still analysed
    assert "| stable/metrics |" in out  # and reaches Table 1
