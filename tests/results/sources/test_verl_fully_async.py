"""verl's fully_async recipe: its fixture (the example runs as the recipe's file logger writes them, several rows
a parameter version) analysed with no lag, its counts read as running totals and its sample budget never shown
as a lag bound, the same events as the example logs, and a log lacking its training rows refused in one line."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from coolsampler.cli import main
from coolsampler.results.own_logs import read_run
from coolsampler.results.sources.verl_fully_async import SOURCE

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = ROOT / "tests" / "fixtures" / "sources" / "verl-fully-async"
EXAMPLES = ROOT / "examples" / "verl-logs"


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    cap = capsys.readouterr()
    assert "Traceback" not in cap.out + cap.err
    return rc, cap.out, cap.err


def blocks(out: str) -> dict[str, str]:
    return dict(re.findall(r"^== (\S+)[^\n]*\n(.*?)(?=^== |^Summary)", out, flags=re.M | re.S))


def events(block: str) -> tuple[str | None, ...]:
    def grab(pattern: str) -> str | None:
        m = re.search(pattern, block)
        return m.group(1) if m else None

    return grab(r"peak (\S+ at step \S+);"), grab(r"(onset \S+|no onset)"), grab(r"KL > 1 at (\S+),")


def test_the_fixture_has_the_recipes_rows_and_keys() -> None:
    """A sync row and a training row at each version (a validation row between them where it validates), the
    training row alone with training/global_step; the counts are running totals."""
    recs = [json.loads(x) for x in (FIXTURE / "degrades" / "train.jsonl").read_text().splitlines()]
    at8 = [r["data"] for r in recs if r["step"] == 8]
    assert [sorted(d)[0].split("/")[0] for d in at8] == ["fully_async", "val-core", "actor"]
    assert "training/global_step" in at8[2] and "training/global_step" not in at8[0]
    loaded = read_run(FIXTURE / "degrades" / "train.jsonl")
    assert loaded.system == "verl-fully-async"
    m = loaded.metrics[loaded.metrics.step > 0]
    assert m["stale_total"].is_monotonic_increasing and m["stale_total"].iloc[-1] > 0
    assert m["lag_mean"].isna().all() and m["lag_drops"].isna().all()  # counts only: no lag, no staleness drops
    assert m["kl"].notna().all()  # bypass mode's actor/rollout_corr/kl


def test_analyze_gives_each_run_its_events_no_lag_and_the_lead_table(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = cli(capsys, "analyze", str(FIXTURE))
    assert rc == 0, err
    runs = blocks(out)
    assert set(runs) == {"stable", "degrades"}
    assert "onset 32 " in runs["degrades"] and "no onset" in runs["stable"]
    for block in runs.values():
        assert "   lag (verl-fully-async): no lag in the log, and no configured bound read" in block
        assert "lag cannot tell: the log measures no lag" in block
    assert "## Which diagnostic warns first: 1 degraded runs, 1 stable" in out


def test_the_redressed_runs_give_the_original_peak_onset_and_kl_crossing(capsys: pytest.CaptureFixture[str]) -> None:
    for run in ("stable", "degrades"):
        _, original, _ = cli(capsys, "analyze", str(EXAMPLES / run / "train.jsonl"))
        _, redressed, _ = cli(capsys, "analyze", str(FIXTURE / run / "train.jsonl"))
        want, got = events(next(iter(blocks(original).values()))), events(next(iter(blocks(redressed).values())))
        assert got == want and want[0] is not None
    assert got[1:] == ("onset 32", "31")


def test_the_sample_budget_is_never_a_lag_bound(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """staleness_threshold bounds samples started per sync, not a sample's lag: even saved beside the log it
    is not shown as a configured bound."""
    assert SOURCE.bound is None and SOURCE.lag.kind is None and SOURCE.lag.compared == "pi_theta"
    assert any("sample budget, not a lag bound" in n for n in SOURCE.notes)
    run = tmp_path / "run"
    shutil.copytree(FIXTURE / "degrades", run)
    (run / "config.yaml").write_text("async_training:\n  staleness_threshold: 0.5\n  trigger_parameter_sync_step: 4\n")
    rc, out, err = cli(capsys, "analyze", str(run / "train.jsonl"))
    assert rc == 0, err
    assert "no lag in the log, and no configured bound read" in out and "configured bound 0.5" not in out
    assert "a ceiling, not a measurement" not in out


def test_a_log_with_its_keys_but_no_training_rows_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A log holding fully_async's keys but no training/global_step (only the sync and validation rows, the
    training rows lost): one line naming the file and what it lacks, the other log analysed."""
    bad = tmp_path / "bad" / "train.jsonl"
    bad.parent.mkdir()
    recs = [json.loads(x) for x in (FIXTURE / "degrades" / "train.jsonl").read_text().splitlines()]
    for r in recs:
        r["data"].pop("training/global_step", None)
    bad.write_text("".join(json.dumps(r) + "\n" for r in recs))
    rc, out, err = cli(capsys, "analyze", str(bad), str(FIXTURE / "stable" / "train.jsonl"))
    lines = [x for x in err.splitlines() if x.strip()]
    assert rc == 1 and len(lines) == 1, err
    assert lines[0] == (
        f"coolsampler analyze: {bad}: has verl-fully-async's keys but no training/global_step:"
        " not a whole verl-fully-async log"
    )
    assert "no onset" in blocks(out)["stable"]
