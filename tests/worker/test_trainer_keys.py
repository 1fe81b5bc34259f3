"""The patches' trainer keys (coolsampler.worker.trainer_keys): declared once in verl's config by patch
0000 with the reader's defaults, set by a run without Hydra's "+", read typed, refused when malformed."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pytest

from coolsampler.spec.study import load_study
from coolsampler.train.overrides import trainer_keys as run_keys
from coolsampler.train.overrides import verl_overrides
from coolsampler.train.paths import RunPaths
from coolsampler.worker import trainer_keys
from coolsampler.worker.trainer_keys import NAMES, TrainerKeys

REPO = Path(__file__).resolve().parents[2]
STUDIES = ["config/paper.yaml", "config/guard.yaml", "config/config.yaml", "config/cliff.yaml"]


def read(trainer: dict) -> TrainerKeys:
    return trainer_keys.read(trainer, implements_gate=True, trainer_name="sync")


def test_an_empty_section_is_upstream_behaviour():
    assert read({}) == TrainerKeys() and TrainerKeys().refresh_interval == 1
    assert read(dict.fromkeys(NAMES)) == TrainerKeys()  # every key null: its default


@pytest.mark.parametrize(
    ("key", "value", "want"),
    [
        ("refresh_interval", 0, "an integer >= 1"),
        ("refresh_interval", 2.5, "an integer >= 1"),
        ("refresh_interval", True, "an integer >= 1"),
        ("refresh_schedule", "3,5", "a list of steps"),
        ("refresh_schedule", [3, 0], "a list of steps"),
        ("refresh_guard", [1], "a mapping"),
        ("learner_temperature", 0, "a temperature > 0"),
        ("learner_temperature", "hot", "a temperature > 0"),
        ("sampler_temperature_spec", 0.8, "a mapping or a name"),
    ],
)
def test_a_malformed_value_names_its_key_and_what_it_takes(key, value, want):
    with pytest.raises(ValueError, match=rf"^trainer\.{key}=.*: expected {want}"):
        read({key: value})


def test_a_trainer_without_the_gate_refuses_an_interval_but_not_the_default():
    assert trainer_keys.read({"refresh_interval": 1}, implements_gate=False, trainer_name="x").refresh_interval == 1
    with pytest.raises(ValueError, match=r"refresh_interval=4 \(staleness gate\).* not trainer\.use_v1=false$"):
        trainer_keys.read({"refresh_interval": 4}, implements_gate=False, trainer_name="trainer.use_v1=false")


def test_verls_config_declares_every_key_with_the_readers_default():
    pytest.importorskip("verl")
    from coolsampler.train.verl_config import compose_config

    declared = compose_config([]).trainer
    assert {k: declared[k] for k in NAMES} == asdict(TrainerKeys())


@pytest.mark.parametrize("study", STUDIES)
def test_every_runs_keys_reach_the_trainer_as_set(study):
    """What verl composes from a run's overrides (no "+": a misspelt key fails in Hydra) reads back as
    the run's own keys."""
    pytest.importorskip("verl")
    from coolsampler.train.verl_config import compose_config

    composed: dict[tuple[str, ...], TrainerKeys] = {}  # one composition per distinct trainer section
    for run in load_study(REPO / study).runs:
        overrides = verl_overrides(run, RunPaths("m", "t", "v", "o"))
        assert not [o for o in overrides if o.startswith("+trainer.")], run.key
        section = tuple(o for o in overrides if o.partition("=")[0] in {f"trainer.{k}" for k in NAMES})
        if section not in composed:
            composed[section] = read(compose_config(list(section)).trainer)
        assert composed[section] == run_keys(run), run.key


def test_a_misspelt_key_fails_in_hydra():
    pytest.importorskip("verl")
    from hydra.errors import ConfigCompositionException

    from coolsampler.train.verl_config import compose_config

    with pytest.raises(ConfigCompositionException, match="refresh_intervall"):
        compose_config(["trainer.refresh_intervall=4"])


def test_unpatched_verl_gets_the_overrides_without_the_declared_keys():
    run = load_study(REPO / "config/config.yaml").runs[0]
    overrides = verl_overrides(run, RunPaths("m", "t", "v", "o"))
    kept = trainer_keys.for_upstream([*overrides, "+trainer.learner_temperature=1"])
    assert sorted(set(overrides) - set(kept)) == sorted(f"trainer.{k}={v}" for k, v in _hydra(run_keys(run)).items())
    assert all(o in overrides for o in kept)


def _hydra(keys: TrainerKeys) -> dict[str, str]:
    """The keys as they stand in the run's override list."""
    from coolsampler.train.overrides import _hydra as fmt

    return {k.removeprefix("trainer."): fmt(v) for k, v in keys.overrides().items()}
