"""verl's V1 trainer in its async modes, read by the schema's own keys: its fixture (the example runs as its
file logger writes them in colocate_async mode, no patched keys) analysed as a measured lag of kind "newest",
with the same events as the example logs it was made from, and its bad lags refused in one line."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from coolsampler.cli import main
from coolsampler.results.own_logs import read_run

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = ROOT / "tests" / "fixtures" / "sources" / "verl-v1-async"
EXAMPLES = ROOT / "examples" / "verl-logs"
STALENESS = "training/off_policy/trajectory_staleness"


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    cap = capsys.readouterr()
    assert "Traceback" not in cap.out + cap.err
    return rc, cap.out, cap.err


def blocks(out: str) -> dict[str, str]:
    """Each run's block of the analyze output, by the run's name."""
    found = re.findall(r"^== (\S+)[^\n]*\n(.*?)(?=^== |^Summary)", out, flags=re.M | re.S)
    return dict(found)


def events(block: str) -> tuple[str | None, ...]:
    """The peak, the onset and the first KL > 1 crossing a block states."""

    def grab(pattern: str) -> str | None:
        m = re.search(pattern, block)
        return m.group(1) if m else None

    return grab(r"peak (\S+ at step \S+);"), grab(r"(onset \S+|no onset)"), grab(r"KL > 1 at (\S+),")


def test_the_fixture_is_verls_own_keys_with_the_lag_as_trajectory_staleness() -> None:
    """No key only the patched verl writes; the lag is in verl's own trajectory_staleness keys."""
    for run in ("stable", "degrades"):
        recs = [json.loads(x) for x in (FIXTURE / run / "train.jsonl").read_text().splitlines()]
        keys = {k for r in recs for k in r["data"]}
        assert not [k for k in keys if re.match(r"^(staleness|sampler|guard)/", k)]
        assert {f"{STALENESS}/mean", f"{STALENESS}/max", f"{STALENESS}/min"} <= keys
        assert not (FIXTURE / run / "run.yaml").exists()  # verl writes none
    loaded = read_run(FIXTURE / "degrades" / "train.jsonl")
    assert loaded.system == "verl" and loaded.lag is not None and loaded.lag.kind == "newest"
    assert loaded.metrics["lag_max"].max() == 31  # the gate's lag, not verl's under-reported reading


def test_analyze_gives_each_run_its_events_lag_and_lead_table(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = cli(capsys, "analyze", str(FIXTURE))
    assert rc == 0, err
    runs = blocks(out)
    assert set(runs) == {"stable", "degrades"}
    assert "onset 32 " in runs["degrades"] and "no onset" in runs["stable"]
    for block in runs.values():
        assert "   lag (verl): the learner's step minus the newest policy version a sample used" in block
    assert "lag at the onset 31 mean, 31 max; largest before it 30" in runs["degrades"]
    assert "## Which diagnostic warns first: 1 degraded runs, 1 stable" in out


def test_the_redressed_runs_give_the_original_peak_onset_and_kl_crossing(capsys: pytest.CaptureFixture[str]) -> None:
    for run in ("stable", "degrades"):
        _, original, _ = cli(capsys, "analyze", str(EXAMPLES / run / "train.jsonl"))
        _, redressed, _ = cli(capsys, "analyze", str(FIXTURE / run / "train.jsonl"))
        want, got = events(next(iter(blocks(original).values()))), events(next(iter(blocks(redressed).values())))
        assert got == want and want[0] is not None
    assert got[1] == "onset 32" and got[2] == "31"  # the degrading run: its onset and KL crossing


@pytest.mark.parametrize(
    ("value", "problem"),
    [(-1, "is -1 at step 5, below 0"), (9, "is 9 at step 5, past its step (5): older than the run")],
)
def test_a_lag_below_0_or_past_its_step_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: int, problem: str
) -> None:
    """A bad lag in one log: that log's one line (naming the file and the key), the other log still read;
    analyze exits 1 where it reported a bad input (the project's contract, tests/cli/test_fuzz_logs.py)."""
    bad = tmp_path / "bad" / "train.jsonl"
    bad.parent.mkdir()
    lines = (FIXTURE / "degrades" / "train.jsonl").read_text().splitlines()
    recs = [json.loads(x) for x in lines]
    for r in recs:
        if r["step"] == 5:
            r["data"][f"{STALENESS}/max"] = value
    bad.write_text("".join(json.dumps(r) + "\n" for r in recs))
    good = tmp_path / "good"
    shutil.copytree(FIXTURE / "stable", good)
    rc, out, err = cli(capsys, "analyze", str(bad), str(good / "train.jsonl"))
    lines = [x for x in err.splitlines() if x.strip()]
    assert rc == 1 and len(lines) == 1, err
    assert lines[0].startswith(f"coolsampler analyze: {bad}: {STALENESS}/max ") and problem in lines[0]
    assert "no onset" in blocks(out)["good"]
    rc, _, err = cli(capsys, "analyze", str(bad))  # alone: its line, and analyze's exit for a bad input
    assert rc == 1 and len(err.strip().splitlines()) == 1 and problem in err
