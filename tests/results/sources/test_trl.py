"""TRL's GRPOTrainer and AsyncGRPOTrainer: their fixtures (the example runs as ``trainer_state.json``'s
log_history) analysed with no lag, AsyncGRPOTrainer's max_staleness shown as a configured bound (read beside the
log, else named as its default) and never as a measurement, the vLLM mismatch keys read into their own columns,
the same events as the example logs, and bad histories refused in one line each."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from coolsampler.cli import main
from coolsampler.results.own_logs import read_run

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "sources"
EXAMPLES = ROOT / "examples" / "verl-logs"
STATE = "trainer_state.json"


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

    return grab(r"peak (\S+ at step \S+);"), grab(r"(onset \S+|no onset)")


def state(history: list[dict]) -> str:
    last = max((r["step"] for r in history), default=0)
    return json.dumps({"global_step": last, "log_history": history, "max_steps": last}, indent=2, sort_keys=True)


_BOUND = (
    "not logged; configured bound 8 optimizer steps (max_staleness = 8, from config.yaml:max_staleness),"
    " a ceiling, not a measurement"
)


@pytest.mark.parametrize(
    ("system", "lag"), [("trl", "no lag in the log, and no configured bound read"), ("trl-async", _BOUND)]
)
def test_analyze_gives_each_run_its_events_lag_line_and_lead_table(
    capsys: pytest.CaptureFixture[str], system: str, lag: str
) -> None:
    rc, out, err = cli(capsys, "analyze", str(FIXTURES / system))
    assert rc == 0, err
    runs = blocks(out)
    assert set(runs) == {"stable/trainer_state", "degrades/trainer_state"}
    assert "onset 32 " in runs["degrades/trainer_state"] and "no onset" in runs["stable/trainer_state"]
    for block in runs.values():
        assert f"   lag ({system}): {lag}" in block
        assert "lag at the onset" not in block  # a bound or nothing: never read as a measured lag
    assert "# Staleness diagnostics against the onset" in out
    if system == "trl-async":  # its k3 KL; the GRPO fixture logs no diagnostic (no vLLM: no sampling/* keys)
        assert "## Which diagnostic warns first: 1 degraded runs, 1 stable" in out
        assert "| forward KL k3 |" in out


@pytest.mark.parametrize("system", ["trl", "trl-async"])
def test_the_redressed_runs_give_the_original_peak_and_onset(capsys: pytest.CaptureFixture[str], system: str) -> None:
    """TRL maps no learner-sampler k1 KL, so the KL crossing is not compared; peak and onset are."""
    for run in ("stable", "degrades"):
        _, original, _ = cli(capsys, "analyze", str(EXAMPLES / run / "train.jsonl"))
        _, redressed, _ = cli(capsys, "analyze", str(FIXTURES / system / run / STATE))
        want, got = events(next(iter(blocks(original).values()))), events(next(iter(blocks(redressed).values())))
        assert got == want and want[0] is not None


def test_without_a_config_the_bound_is_named_as_the_default(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(FIXTURES / "trl-async" / "degrades" / STATE, run / STATE)
    rc, out, err = cli(capsys, "analyze", str(run / STATE))
    assert rc == 0, err
    assert (
        "configured bound 4 optimizer steps (max_staleness's default 4; not found), a ceiling, not a measurement" in out
    )


def test_grpo_reads_the_vllm_mismatch_keys_into_their_own_columns(tmp_path: Path) -> None:
    """sampling_logp_difference is |log pi_old - log q| per token (logp_abs_diff); the importance ratio is
    read as applied (after truncation or masking), not as verl's token-capped weight (is_mean)."""
    rows = [
        {"reward": 0.5, "frac_reward_zero_std": 0.1, "sampling/sampling_logp_difference/mean": 0.01 * s,
         "sampling/sampling_logp_difference/max": 1.5, "sampling/importance_sampling_ratio/min": 0.0,
         "sampling/importance_sampling_ratio/mean": 0.97, "sampling/importance_sampling_ratio/max": 2.8,
         "epoch": s / 4, "step": s}
        for s in range(1, 5)
    ]  # fmt: skip
    (tmp_path / STATE).write_text(state(rows))
    loaded = read_run(tmp_path / STATE)
    assert loaded.system == "trl" and loaded.lag is not None
    assert (loaded.lag.kind, loaded.lag.compared, loaded.lag.truncation) == (None, "pi_old", "after")
    m = loaded.metrics.set_index("step")
    assert m.loc[3, "logp_abs_diff"] == pytest.approx(0.03) and m.loc[3, "logp_abs_diff_max"] == 1.5
    assert (m.loc[3, "is_applied_min"], m.loc[3, "is_applied_mean"], m.loc[3, "is_applied_max"]) == (0.0, 0.97, 2.8)
    assert m["is_mean"].isna().all() and m["is_raw_mean"].isna().all()


def test_async_grpo_reads_its_ratio_as_raw_against_pi_theta() -> None:
    loaded = read_run(FIXTURES / "trl-async" / "degrades" / STATE)
    assert loaded.system == "trl-async" and loaded.lag is not None
    assert (loaded.lag.kind, loaded.lag.compared, loaded.lag.truncation) == ("bound", "pi_theta", "before")
    assert loaded.metrics["k3_kl"].notna().sum() == 64


def _bad(tmp_path: Path, name: str, history: list[dict]) -> Path:
    d = tmp_path / name
    d.mkdir()
    (d / STATE).write_text(state(history))
    return d / STATE


BAD = {
    "no reward": (
        [{"frac_reward_zero_std": 0.0, "loss": 0.1, "epoch": 0.1, "step": 1}],
        "has trl's keys but no reward: not a whole trl log",
    ),
    "steps go back": (
        [
            {"reward": 0.5, "frac_reward_zero_std": 0.0, "step": 2},
            {"reward": 0.4, "frac_reward_zero_std": 0.0, "step": 1},
        ],
        "log_history goes back from step 2 to step 1 (row 2): not one run's history",
    ),
    "two trainers": (
        [{"reward": 0.5, "frac_reward_zero_std": 0.0, "weight_sync_time_s": 0.1, "step": 1}],
        "holds the keys of trl and trl-async: one run's log is one system's",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_history_is_one_line_and_the_other_run_is_analysed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    history, problem = BAD[case]
    bad = _bad(tmp_path, "bad", history)
    good = FIXTURES / "trl" / "stable" / STATE
    rc, out, err = cli(capsys, "analyze", str(bad), str(good))
    lines = [x for x in err.splitlines() if x.strip()]
    assert rc == 1 and len(lines) == 1, err
    assert lines[0] == f"coolsampler analyze: {bad}: {problem}"
    assert "no onset" in blocks(out)["stable/trainer_state"]


def test_a_bound_given_as_a_flag_is_a_bound_and_a_run_s_own_config_wins(capsys) -> None:
    """--lag-bound is the bound of a log whose system logs no lag and saved none beside it; a bound read from
    the run's own config.yaml is kept; a negative one is argparse's one line."""
    fixtures = Path(__file__).resolve().parents[2] / "fixtures" / "sources"
    assert main(["analyze", str(fixtures / "trl"), "--lag-bound", "3"]) == 0
    out = capsys.readouterr().out
    assert out.count("configured bound 3 optimizer steps (given as --lag-bound), a ceiling, not a measurement") == 2
    assert main(["analyze", str(fixtures / "trl-async"), "--lag-bound", "3"]) == 0
    out = capsys.readouterr().out
    assert "given as --lag-bound" not in out and out.count("max_staleness = 8, from config.yaml") == 2
    with pytest.raises(SystemExit) as e:
        main(["analyze", str(fixtures / "trl"), "--lag-bound", "-1"])
    assert e.value.code == 2 and "--lag-bound: '-1'" in capsys.readouterr().err
