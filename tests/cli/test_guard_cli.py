"""A study with a staleness guard and a schedule: ``plan`` and ``status`` name them, ``plan`` says how
it costs them, and nothing builds verl's overrides for them until the guard is wired into the stack."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from coolsampler.cli import main
from coolsampler.spec.study import load_study
from coolsampler.train.overrides import NOT_WIRED, NotWiredError, RunPaths, verl_overrides

REPO = Path(__file__).resolve().parents[2]
GUARD = {"signal": "probs_diff", "threshold": 0.1, "window": 3, "min": 2}


@pytest.fixture
def study_path(tmp_path: Path) -> Path:
    raw = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    raw["runs"] = [
        {"N": 32, "correction": "tis", "Tb": 1.0, "seed": 1, "guard": [None, GUARD]},
        {"N": {"schedule": [10, 30]}, "correction": "tis", "Tb": 1.0, "seed": 1},
    ]
    raw.pop("figures", None)
    path = tmp_path / "guard.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


GUARD_KEY = "toy-qwen2/arith/N32_gprobs_diff0.1w3m2_lr1e-4_tis_Tb1_Tl1_s1"


def test_plan_and_status_name_the_guard(study_path: Path, tmp_path: Path, capsys) -> None:
    assert main(["plan", "--study", str(study_path), "--results", str(tmp_path / "r"), "--runs"]) == 0
    out = capsys.readouterr().out
    assert f"2 run(s) refreshed by a guard or a schedule ({NOT_WIRED}: they cannot train)" in out
    assert "costed as a run refreshed every N steps, its longest interval" in out
    assert f"  {GUARD_KEY}: guard probs_diff > 0.1, median of 3 since refresh, min 2, at most every 32 steps" in out
    assert "schedule of 2 refreshes (longest interval 34)" in out  # 30 -> the end of the 64-step run
    assert main(["status", "--study", str(study_path), "--results", str(tmp_path / "r")]) == 3
    out = capsys.readouterr().out
    assert f"{GUARD_KEY}  not started" in out
    assert f"  {GUARD_KEY}: guard probs_diff > 0.1" in out and "costed" not in out


def test_overrides_refuse_a_guard_run(study_path: Path, capsys) -> None:
    study = load_study(study_path)
    plain, guarded, scheduled = study.runs
    paths = RunPaths("m", "t", "v", "o")
    assert any(o.startswith("+trainer.refresh_interval=32") for o in verl_overrides(plain, paths))
    for run in (guarded, scheduled):
        with pytest.raises(NotWiredError, match=f"^run {run.key}: {NOT_WIRED} \\(its refresh: "):
            verl_overrides(run, paths)
    assert main(["overrides", GUARD_KEY, "--study", str(study_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"coolsampler overrides: run {GUARD_KEY}: {NOT_WIRED}") and "\n" not in err


def test_snakemake_trains_no_study_with_a_guard(study_path: Path) -> None:
    """The study is refused before any job: a dry run names the run and why, in one line."""
    import subprocess
    import sys

    res = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", f"--configfile={study_path}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    out = res.stdout + res.stderr
    assert res.returncode != 0, out
    assert f"smoke: run {GUARD_KEY}: {NOT_WIRED} (its refresh: guard probs_diff > 0.1" in out, out
    assert "Job stats" not in out
