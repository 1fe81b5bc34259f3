"""ROLL's driver log (its ``metrics_tag:`` lines) read as runs: its fixture analysed, the smoke example
re-dressed in its layout giving the original's events, bad inputs in one line, and a resumed run's history
re-logged."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from coolsampler.cli import main
from coolsampler.paper.own_logs import analyze_report
from coolsampler.results.own_logs import events_frame, read_run
from coolsampler.results.readers import metrics_tag_records
from coolsampler.results.sources import sources
from coolsampler.testkit.redress import redress

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = ROOT / "tests" / "fixtures" / "sources" / "roll"
EXAMPLES = ROOT / "examples" / "verl-logs"
SOURCE = sources()["roll"]
LOG = "log_rank_DRIVER_0_1.log"
LAG_KEY = "toy/scheduler/off_policy_ratio"


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    cap = capsys.readouterr()
    assert "Traceback" not in cap.out + cap.err
    return rc, cap.out, cap.err


def blocks(out: str) -> dict[str, str]:
    parts = out.split("\n\nSummary (Table 1 style")[0].split("== ")[1:]
    return {p.split()[0]: p for p in parts}


def written(tmp: Path, run: str, name: str = LOG) -> Path:
    f = tmp / run / name
    redress(read_run(EXAMPLES / run / "train.jsonl").metrics, SOURCE, "metrics_tag lines", f)
    return f


def tag_lines(path: Path) -> list[tuple[str, dict]]:
    """(prefix, payload) of each metrics_tag line of a ROLL log, in order."""
    out = []
    for line in path.read_text().splitlines():
        if "metrics_tag: " in line:
            head, _, body = line.partition("metrics_tag: ")
            out.append((head, json.loads(body)))
    return out


def write_lines(path: Path, lines: list[tuple[str, dict]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{head}metrics_tag: {json.dumps(rec)}\n" for head, rec in lines))
    return path


def test_the_fixture_is_two_runs_with_their_events_lag_lines_and_lead_table(capsys) -> None:
    rc, out, err = cli(capsys, "analyze", str(FIXTURE))
    assert rc == 0 and not err
    runs = blocks(out)
    assert sorted(runs) == [f"degrades/{LOG[:-4]}", f"stable/{LOG[:-4]}"]
    degrades, stable = runs[f"degrades/{LOG[:-4]}"], runs[f"stable/{LOG[:-4]}"]
    assert "onset 32 (running max 0.555)" in degrades and "no onset: stable" in stable
    lag = "   lag (roll): the learner's step minus the step at which the sample's request was dispatched"
    assert lag in degrades and lag in stable
    assert "lag at the onset 31 mean, 31 max; largest before it 30" in degrades
    assert "read as metrics_tag lines" in degrades
    assert "# Staleness diagnostics against the onset" in out


def test_the_fixture_is_rolls_driver_log() -> None:
    """What ROLL's driver writes: its logger's prefix, then metrics_tag with the 0-based global_step; step g
    holds the validation of the weights pushed at its start and the metrics of the update it then makes."""
    lines = tag_lines(FIXTURE / "degrades" / LOG)
    assert all(
        re.match(r"^\[[\d\- :]+\] \[tracking\.py \(161\)\] \[INFO\] \[DRIVER 0 / 1\]\[PID \d+\] $", h) for h, _ in lines
    )
    first = lines[0][1]
    assert first["step"] == 0 and {"val_correct/all/mean", LAG_KEY, "critic/score/mean"} <= set(first["metrics"])
    assert first["metrics"][LAG_KEY] == 0  # the first update's samples: no step older
    assert not any("@" in k for _, rec in lines for k in rec["metrics"])  # reducer tags stripped, as the tracker does


@pytest.mark.parametrize("run", ["stable", "degrades"])
def test_the_example_redressed_as_roll_gives_the_originals_events(tmp_path: Path, run: str) -> None:
    original = events_frame(analyze_report([str(EXAMPLES / run)]).entries).iloc[0]
    redressed = events_frame(analyze_report([str(written(tmp_path, run))]).entries).iloc[0]
    for field in ("peak", "peak_step", "onset"):
        assert redressed[field] == original[field], field
    a = read_run(EXAMPLES / run / "train.jsonl").metrics.set_index("step")
    b = read_run(tmp_path / run / LOG).metrics.set_index("step")
    for col in ("lag_mean", "reward", "grad_norm", "entropy", "val_acc"):
        assert b[col].to_numpy() == pytest.approx(a[col].to_numpy(), rel=1e-6, nan_ok=True), col


def test_a_log_with_a_roll_key_and_none_of_its_others_is_one_line_and_the_others_go_on(tmp_path: Path, capsys) -> None:
    lines = [
        (h, {"step": r["step"], "metrics": {LAG_KEY: r["metrics"].get(LAG_KEY, 0)}})
        for h, r in tag_lines(FIXTURE / "degrades" / LOG)
    ]
    bad = write_lines(tmp_path / "bad" / LOG, lines)
    rc, out, err = cli(capsys, "analyze", str(bad), str(FIXTURE / "stable"))
    errs = err.splitlines()
    assert rc == 1 and len(errs) == 1
    assert errs[0].startswith(f"coolsampler analyze: {bad}: holds {LAG_KEY} (roll's) but none of roll's other keys")
    assert "no onset: stable" in out and f"| stable/{LOG[:-4]} |" in out


def test_metrics_tag_lines_without_their_step_are_one_line_and_the_others_go_on(tmp_path: Path, capsys) -> None:
    lines = [(h, {"metrics": r["metrics"]}) for h, r in tag_lines(FIXTURE / "degrades" / LOG)]
    bad = write_lines(tmp_path / "bad" / LOG, lines)
    rc, out, err = cli(capsys, "analyze", str(bad), str(FIXTURE / "stable"))
    errs = err.splitlines()
    assert rc == 1 and len(errs) == 1
    assert (
        errs[0]
        == f'coolsampler analyze: {bad}:1: 65 metrics_tag line(s), none a {{"step": K, "metrics": {{...}}}} record'
    )
    assert f"| stable/{LOG[:-4]} |" in out


@pytest.mark.parametrize(("value", "said"), [(-1.0, "below 0"), (40.0, "past its step (10): older than the run")])
def test_a_lag_below_0_or_older_than_the_run_is_one_line(tmp_path: Path, capsys, value: float, said: str) -> None:
    lines = tag_lines(FIXTURE / "degrades" / LOG)
    lines[9][1]["metrics"][LAG_KEY] = value  # global_step 9: learner step 10
    bad = write_lines(tmp_path / "bad" / LOG, lines)
    rc, out, err = cli(capsys, "analyze", str(bad), str(FIXTURE / "stable"))
    errs = err.splitlines()
    assert rc == 1 and len(errs) == 1
    assert errs[0].startswith(
        f"coolsampler analyze: {bad}: */scheduler/off_policy_ratio is {value:g} at step 10, {said}"
    )
    assert f"| stable/{LOG[:-4]} |" in out


def test_a_resumed_runs_driver_log_re_logs_its_history_and_reads_as_the_whole_run(tmp_path: Path) -> None:
    """A resumed run's driver log (opened anew) re-logs the checkpoint's history from a thread while the
    new steps are logged: out of order, each step once, read as the run."""
    lines = tag_lines(FIXTURE / "degrades" / LOG)
    history, new = lines[:40], lines[40:]
    mixed = [x for pair in zip(new, history, strict=False) for x in pair] + history[len(new) :]
    f = write_lines(tmp_path / "resumed" / LOG, mixed)
    by_step, problems = metrics_tag_records(f)
    assert sorted(by_step) == list(range(65)) and not problems
    original = events_frame(analyze_report([str(FIXTURE / "degrades")]).entries).iloc[0]
    resumed = events_frame(analyze_report([str(f)]).entries).iloc[0]
    assert (resumed["peak"], resumed["onset"]) == (original["peak"], original["onset"])


def test_the_console_of_a_crashed_run_and_its_resumption_reports_the_re_logged_steps(tmp_path: Path, capsys) -> None:
    """The output of both processes in one file (a job's stdout appended): steps 0-44 of the crashed run, then
    the resumed run's history 0-39 re-logged and its own steps from 40: the steps logged twice are said, and
    each keeps its last value, the resumed run's."""
    lines = tag_lines(FIXTURE / "degrades" / LOG)
    crashed = [(h, {"step": r["step"], "metrics": {**r["metrics"], "critic/score/mean": -1.0}}) for h, r in lines[:45]]
    f = write_lines(tmp_path / "console" / LOG, crashed + lines[:40] + lines[40:])
    by_step, problems = metrics_tag_records(f)
    assert problems == ["45 step(s) logged more than once (resumed run?), kept the last value of each (first: step 0)"]
    assert all(by_step[s]["critic/score/mean"] != -1.0 for s in range(45) if "critic/score/mean" in by_step[s])
    rc, out, err = cli(capsys, "analyze", str(f))
    assert rc == 0 and not err
    assert "log: 45 step(s) logged more than once (resumed run?)" in out and "onset 32" in out


def test_rolls_default_tracker_tensorboard_reads_as_the_same_run(tmp_path: Path) -> None:
    """track_with: tensorboard (ROLL's default) writes the same names at the same global_step."""
    pytest.importorskip("tensorboard")
    d = tmp_path / "tb"
    redress(read_run(EXAMPLES / "degrades" / "train.jsonl").metrics, SOURCE, "TensorBoard", d)
    loaded = read_run(d)
    assert (loaded.system, loaded.fmt) == ("roll", "TensorBoard")
    assert events_frame(analyze_report([str(d)]).entries).iloc[0]["onset"] == 32
