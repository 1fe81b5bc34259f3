"""slime's TensorBoard event files read as runs: its fixture analysed, the smoke example re-dressed in its
layout giving the original's events, bad inputs in one line, and its configured bound labelled as one."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("tensorboard")

from coolsampler.cli import main  # noqa: E402
from coolsampler.paper.own_logs import analyze_report  # noqa: E402
from coolsampler.results.own_logs import events_frame, read_run  # noqa: E402
from coolsampler.results.sources import sources  # noqa: E402
from coolsampler.testkit.redress import redress  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = ROOT / "tests" / "fixtures" / "sources" / "slime"
EXAMPLES = ROOT / "examples" / "verl-logs"
SOURCE = sources()["slime"]
EVENTS = ("peak", "peak_step", "onset", "kl_cross_1")


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    cap = capsys.readouterr()
    assert "Traceback" not in cap.out + cap.err
    return rc, cap.out, cap.err


def blocks(out: str) -> dict[str, str]:
    """Each run's block of the report, by the run's name."""
    parts = out.split("\n\nSummary (Table 1 style")[0].split("== ")[1:]
    return {p.split()[0]: p for p in parts}


def written(tmp: Path, run: str, columns: tuple[str, ...] | None = None, config: str | None = None) -> Path:
    """The example run ``run`` re-dressed as slime's event files in ``tmp/<run>`` (only ``columns``)."""
    metrics = read_run(EXAMPLES / run / "train.jsonl").metrics
    if columns is not None:
        metrics = metrics[["step", *columns]]
    d = tmp / run
    redress(metrics, SOURCE, "TensorBoard", d)
    if config is not None:
        (d / "config.yaml").write_text(config)
    return d


def test_the_fixture_is_two_runs_with_their_events_lag_lines_and_lead_table(capsys) -> None:
    rc, out, err = cli(capsys, "analyze", str(FIXTURE))
    assert rc == 0 and not err
    runs = blocks(out)
    assert sorted(runs) == ["degrades", "stable"]
    assert "onset 32 (running max 0.555)" in runs["degrades"]
    assert "no onset: stable" in runs["stable"]
    for block in runs.values():
        assert "   lag (slime): not logged; configured bound 2 optimizer steps" in block
        assert "read as TensorBoard" in block
    assert "# Staleness diagnostics against the onset" in out


def test_the_fixture_holds_slimes_keys_at_slimes_steps() -> None:
    """What slime's logger writes: train/* and rollout/* from step 0 (its 0-based train/step and rollout id),
    eval/<data set> after a rollout was trained, never the step key itself."""
    from coolsampler.results.readers import tensorboard_records

    by_step, problems = tensorboard_records(FIXTURE / "degrades")
    keys = {k for data in by_step.values() for k in data}
    assert {"train/entropy_loss", "train/grad_norm", "rollout/raw_reward", "eval/toy"} <= keys
    assert not {"train/step", "rollout/step", "eval/step"} & keys and not problems
    assert "train/grad_norm" in by_step[0] and "eval/toy" not in by_step[0]
    assert "eval/toy" in by_step[7]  # the validation after learner step 8: after rollout 7
    assert max(by_step) == 63


@pytest.mark.parametrize("run", ["stable", "degrades"])
def test_the_example_redressed_as_slime_gives_the_originals_events(tmp_path: Path, run: str) -> None:
    original = events_frame(analyze_report([str(EXAMPLES / run)]).entries).iloc[0]
    redressed = events_frame(analyze_report([str(written(tmp_path, run))]).entries).iloc[0]
    for field in ("peak", "peak_step", "onset"):
        assert redressed[field] == original[field], field
    a = read_run(EXAMPLES / run / "train.jsonl").metrics.set_index("step")
    b = read_run(tmp_path / run).metrics.set_index("step")
    for col in ("reward", "grad_norm", "entropy"):  # each value back at the learner step it belongs to
        assert b[col].loc[1:].to_numpy() == pytest.approx(a[col].loc[1:].to_numpy(), rel=1e-6), col


def test_a_log_with_a_slime_key_and_none_of_its_others_is_one_line_and_the_others_go_on(tmp_path: Path, capsys) -> None:
    bad = written(tmp_path, "degrades", columns=("reward",))
    rc, out, err = cli(capsys, "analyze", str(bad), str(FIXTURE / "stable"))
    lines = err.splitlines()
    assert rc == 1 and len(lines) == 1
    assert lines[0].startswith(f"coolsampler analyze: {bad}: holds rollout/raw_reward (slime's) but none of")
    assert "no onset: stable" in out and "| stable |" in out


def test_a_negative_bound_in_config_yaml_is_one_line(tmp_path: Path, capsys) -> None:
    bad = written(tmp_path, "degrades", config="update_weights_interval: -1\n")
    rc, out, err = cli(capsys, "analyze", str(bad), str(FIXTURE / "stable"))
    lines = err.splitlines()
    assert rc == 1 and len(lines) == 1
    assert lines[0].startswith(f"coolsampler analyze: {bad / 'config.yaml'}:update_weights_interval: ")
    assert "| stable |" in out


def test_the_bound_from_config_yaml_is_a_configured_bound_never_a_measured_lag(tmp_path: Path, capsys) -> None:
    d = written(tmp_path, "degrades", config="update_weights_interval: 4\n")
    rc, out, _ = cli(capsys, "analyze", str(d))
    block = blocks(out)["degrades"]
    assert rc == 0
    assert (
        "lag (slime): not logged; configured bound 4 optimizer steps (--update-weights-interval = 4, from"
        " config.yaml:update_weights_interval), a ceiling, not a measurement" in block
    )
    assert "lag at the onset" not in block and "only its bound is known" in block


def test_without_a_config_file_the_bound_is_slimes_default_named_as_one(tmp_path: Path, capsys) -> None:
    d = tmp_path / "degrades"
    shutil.copytree(FIXTURE / "degrades", d)
    (d / "config.yaml").unlink()
    rc, out, _ = cli(capsys, "analyze", str(d))
    assert rc == 0
    assert "configured bound 1 optimizer steps (--update-weights-interval's default 1; not found)" in out
