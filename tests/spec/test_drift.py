"""A study's drift probe: the runs it reads and the checks that their checkpoint will be on disk."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from coolsampler.spec.drift import actor_dir, saved_steps, study_drift_probe
from coolsampler.spec.study import StudyError, load_study, study_from_dict

REPO = Path(__file__).resolve().parents[2]


def test_the_checkpoints_a_run_leaves_are_its_newest_saves_and_its_last_step() -> None:
    assert saved_steps(64, 32, 1) == [64]
    assert saved_steps(64, 32, 2) == [32, 64]
    assert saved_steps(70, 32, 2) == [64, 70]  # verl saves at the last step too
    assert saved_steps(64, 0, 2) == []


def test_round_4_probes_every_stage_m_run_at_its_kept_step_32() -> None:
    study = load_study(REPO / "config" / "cliff.yaml")
    probe = study_drift_probe(study.raw, study.runs, "cliff")
    assert probe is not None and (probe.step, probe.prompts) == (32, 256)
    assert probe.probed(study.runs) == study.runs  # N=64: no refresh up to step 32 in any run
    assert actor_dir("R/runs/k", 32) == Path("R/runs/k/checkpoints/global_step_32/actor")


def _raw(**changes) -> dict:
    raw = yaml.safe_load((REPO / "config" / "cliff.yaml").read_text())
    for k, v in changes.items():
        raw[k] = {**raw[k], **v} if isinstance(v, dict) and k in raw else v
    return raw


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"recipe": {"keep_checkpoints": 1}}, "keeps the checkpoints of steps [64]"),
        ({"recipe": {"save_every": 24}}, "keeps the checkpoints of steps [48, 64]"),
        ({"drift_probe": {"step": 65}}, "no run keeps its initial sampler that long"),
    ],
)
def test_a_probe_whose_checkpoint_would_be_gone_stops_in_one_line(changes: dict, says: str) -> None:
    raw = _raw(**changes)
    study = study_from_dict(raw, origin="cliff")
    with pytest.raises(StudyError, match="drift_probe.step") as err:
        study_drift_probe(raw, study.runs, "cliff")
    assert says in str(err.value) and "\n" not in str(err.value)


def test_a_refreshed_run_is_not_probed() -> None:
    raw = _raw()
    raw["runs"] = [*raw["runs"], {"source": "refreshed", "N": 8, "Tb": 1.0, "seed": 1}]
    study = study_from_dict(raw, origin="cliff")
    probe = study_drift_probe(raw, study.runs, "cliff")
    assert probe is not None and {r.N for r in probe.probed(study.runs)} == {64}
