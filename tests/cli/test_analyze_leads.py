"""``coolsampler analyze RESULTS_DIR``: a study's results directory (or one run directory) read as its
runs' logs, and the lead table printed for the runs that degrade."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import pytest

from coolsampler.cli import main
from coolsampler.results.own_logs import expand_paths
from coolsampler.spec.metrics_schema import COLUMNS
from coolsampler.spec.study import load_study
from coolsampler.testkit.synthetic import write_study_results

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The smoke study's runs as synthetic run directories: without the correction, N=32 collapses."""
    study = load_study(REPO / "config/config.yaml", results=tmp_path_factory.mktemp("smoke"))
    write_study_results(study)
    return study


def test_analyze_a_results_directory_prints_the_lead_table_of_its_degraded_runs(smoke: Any, capsys) -> None:
    assert main(["analyze", str(smoke.results)]) == 0
    out = capsys.readouterr().out
    degraded = [r.key for r in smoke.runs if r.correction == "none"]
    assert degraded and len(degraded) < len(smoke.runs)
    assert out.count("== ") == len(smoke.runs)  # one block per run directory
    n_stable = len(smoke.runs) - len(degraded)
    assert f"Which diagnostic warns first: {len(degraded)} degraded runs, {n_stable} stable" in out
    for key in degraded:
        assert re.search(rf"### `{re.escape(key)}`: onset at step \d+; first to cross: ", out), key
    stable_heads = [r.key for r in smoke.runs if r.correction != "none" and f"### `{r.key}`" in out]
    assert not stable_heads
    # the paper's KL row with its threshold range, and the IS weights not logged without a correction
    assert "| forward KL k1 (the paper's) | per step | > 1 nat |" in out
    block = out.split(f"### `{degraded[0]}`")[1].split("###")[0]
    assert re.search(r"\| IS effective sample size \| median of 5 steps \| 0 \| < 0.5 \| not logged \|", block)
    assert re.search(r"0\.5: [+-]?\w+ · 1: [+-]?\w+ · 2: [+-]?\w+", block)


def test_analyze_a_run_directory_and_a_directory_without_runs(smoke: Any, tmp_path: Path, capsys) -> None:
    run = next(r for r in smoke.runs if r.correction == "none")
    assert main(["analyze", str(Path(smoke.results) / "runs" / run.key)]) == 0
    out = capsys.readouterr().out
    assert "Which diagnostic warns first: 1 degraded runs, 0 stable" in out
    assert main(["analyze", str(tmp_path)]) == 1
    cap = capsys.readouterr()
    assert "a directory holding no run log; formats read: verl's file logger JSONL" in cap.out + cap.err


def test_a_run_directory_is_read_from_its_log_before_its_table(tmp_path: Path) -> None:
    """verl's log is the source of truth: a metrics.parquet beside it may predate the parser's columns."""
    run = tmp_path / "runs" / "m" / "t" / "N32_lr1e-4_tis_Tb1_Tl1_s1"
    run.mkdir(parents=True)
    pd.DataFrame({"step": [0]}).to_parquet(run / "metrics.parquet")
    other = tmp_path / "runs" / "m" / "t" / "N32_lr1e-4_tis_Tb1_Tl1_s2"
    other.mkdir()
    pd.DataFrame({"step": [0]}).to_parquet(other / "metrics.parquet")
    (run / "train.jsonl").write_bytes(orjson.dumps({"step": 0, "data": {}}) + b"\n")
    (tmp_path / "runs" / "m" / "t" / "untrained").mkdir()
    assert expand_paths([str(tmp_path)]) == [str(run / "train.jsonl"), str(other / "metrics.parquet")]
    assert expand_paths([str(run)]) == [str(run / "train.jsonl")]
    assert expand_paths(["a.jsonl"]) == ["a.jsonl"]


def test_analyze_a_users_jsonl_with_the_diagnostics(tmp_path: Path, capsys) -> None:
    """A user's own verl log (no run.yaml) with chi^2 rising before the accuracy falls."""
    val_key = COLUMNS["val_acc"][2][0].replace("*", "gsm8k")
    recs = [{"step": 0, "data": {val_key: 0.8}}]
    for t in range(1, 101):
        chi2 = 0.1 if t < 50 else 20.0
        data = {
            "training/global_step": t,
            "rollout_corr/kl": 0.05 if t < 80 else 2.0,
            "rollout_corr/chi2_token": chi2,
            "actor/entropy": 0.5,
            "critic/score/mean": 0.5,
            "actor/grad_norm": 1.0,
            "actor/kl_loss": 0.001,
        }
        if t % 10 == 0:
            data[val_key] = 0.8 if t < 70 else 0.4
        recs.append({"step": t, "data": data})
    log = tmp_path / "mine.jsonl"
    log.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    assert main(["analyze", str(log), "--N", "100", "--Tb", "1.0", "--steps", "100"]) == 0
    out = capsys.readouterr().out
    # onset 70; chi^2's bound log(1 + 20) = 3 nats from step 50, through the median from step 52: +18;
    # the KL per step from step 80: -10
    assert "onset at step 70; first to cross: reverse-KL bound log(1+chi2_token)" in out
    assert "| reverse-KL bound log(1+chi2_token) | median of 5 steps | 100 | > 1 nat | 52 | +18 |" in out
    assert "| forward KL k1 (the paper's) | per step | 100 | > 1 nat | 80 | -10 |" in out
