"""A study with a staleness guard and a schedule: ``plan`` and ``status`` name them, ``plan`` says how
it costs them, verl's overrides carry them to the refresh gate (coolsampler.worker.refresh), and a
dry run plans their training."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from coolsampler.cli import main
from coolsampler.spec.study import load_study
from coolsampler.train.overrides import RunPaths, verl_overrides
from tests.dry_run import results_config

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
    assert "2 run(s) refreshed by a guard or a schedule; each is costed" in out
    assert "costed as a run refreshed every N steps, its longest interval" in out
    assert f"  {GUARD_KEY}: guard probs_diff > 0.1, median of 3 since refresh, min 2, at most every 32 steps" in out
    assert "schedule of 2 refreshes (longest interval 34)" in out  # 30 -> the end of the 64-step run
    assert main(["status", "--study", str(study_path), "--results", str(tmp_path / "r")]) == 3
    out = capsys.readouterr().out
    assert f"{GUARD_KEY}  not started" in out
    assert f"  {GUARD_KEY}: guard probs_diff > 0.1" in out and "costed" not in out


def test_overrides_carry_the_guard_and_the_schedule_to_the_gate(study_path: Path, capsys) -> None:
    study = load_study(study_path)
    plain, guarded, scheduled = study.runs
    paths = RunPaths("m", "t", "v", "o")

    def gate_keys(run) -> list[str]:
        return [o for o in verl_overrides(run, paths) if o.startswith("trainer.refresh_")]

    assert gate_keys(plain) == [
        "trainer.refresh_interval=32",
        "trainer.refresh_guard=null",
        "trainer.refresh_schedule=null",
    ]
    assert gate_keys(guarded) == [
        "trainer.refresh_interval=32",
        "trainer.refresh_guard={signal:probs_diff,threshold:0.1,window:3,min:2}",
        "trainer.refresh_schedule=null",
    ]
    assert gate_keys(scheduled) == [
        "trainer.refresh_interval=34",
        "trainer.refresh_guard=null",
        "trainer.refresh_schedule=[10,30]",
    ]
    assert main(["overrides", GUARD_KEY, "--study", str(study_path)]) == 0
    assert "trainer.refresh_guard={signal:probs_diff" in capsys.readouterr().out


def test_the_gate_built_from_verls_config_is_the_runs(study_path: Path) -> None:
    """What verl composes from those overrides builds the run's own gate in the trainer."""
    pytest.importorskip("verl")
    from coolsampler.train.verl_config import compose_config
    from coolsampler.worker import trainer_keys
    from coolsampler.worker.refresh import gate_from_keys

    study = load_study(study_path)
    for run in study.runs:
        overrides = verl_overrides(run, RunPaths("m", "t", "v", "o"))
        cfg = compose_config([o for o in overrides if o.startswith(("trainer.", "algorithm."))])
        gate = gate_from_keys(trainer_keys.read(cfg, trainer="sync", implements=trainer_keys.NAMES))
        assert (gate.N, gate.guard, gate.schedule) == (run.N, run.guard, run.schedule), run.key


def test_snakemake_plans_a_study_with_a_guard(study_path: Path, tmp_path: Path) -> None:
    """A dry run plans the guard's and the schedule's training."""
    import subprocess
    import sys

    res = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", f"--configfile={study_path}", *results_config(tmp_path / "r")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    assert f"runs/{GUARD_KEY}/train.jsonl" in out, out[-3000:]


def test_a_guard_on_a_signal_its_correction_never_logs_is_refused(tmp_path: Path) -> None:
    from coolsampler.spec.study import StudyError

    raw = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    raw.pop("figures", None)
    raw["runs"] = [
        {"N": 8, "correction": "mu_grpo", "Tb": 1.0, "seed": 1, "guard": {"signal": "probs_diff", "threshold": 0.1}}
    ]
    path = tmp_path / "mu.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    with pytest.raises(
        StudyError, match=r"guard\.signal: probs_diff is not logged under correction mu_grpo; allowed with it: kl,"
    ):
        load_study(path)
    raw["runs"][0]["guard"]["signal"] = "kl"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    assert load_study(path).runs[0].guard.signal == "kl"
