"""The patches' trainer keys (coolsampler.worker.trainer_keys): declared once in verl's config by patch
0000 with the reader's defaults, set by a run without Hydra's "+", read typed, refused when malformed."""

from __future__ import annotations

import re
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


def read(trainer: dict, **sections) -> TrainerKeys:
    """The keys as the sync trainer (which implements every one) reads them from verl's config."""
    return trainer_keys.read({"trainer": trainer, **sections}, trainer="sync", implements=NAMES)


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
        ("sampler_temperature_spec", "saturation", "a number"),
        ("sampler_temperature_spec", True, "a number"),
    ],
)
def test_a_malformed_value_names_its_key_and_what_it_takes(key, value, want):
    with pytest.raises(ValueError, match=rf"^trainer\.{key}=.*: expected {want}"):
        read({key: value})


def test_a_trainer_refuses_each_key_it_does_not_implement_but_not_the_defaults():
    legacy = {"trainer": "trainer.use_v1=false", "implements": ()}
    assert trainer_keys.read({"trainer": dict.fromkeys(NAMES)}, **legacy) == TrainerKeys()
    assert trainer_keys.read({"trainer": {"refresh_interval": 1}}, **legacy).refresh_interval == 1
    for key, value in [("refresh_interval", 4), ("learner_temperature", 1.0), ("sampler_temperature_spec", 0.8)]:
        with pytest.raises(ValueError, match=rf"^trainer\.{key}={value} is not implemented by trainer\.use_v1=false"):
            trainer_keys.read({"trainer": {key: value}}, **legacy)


def test_a_schedule_or_a_guard_activates_the_gate_at_interval_1():
    """ "The gate is active" is one predicate: N > 1, a guard or a schedule (each of them gates)."""
    assert not read({}).gate_active and not read({"refresh_interval": 1}).gate_active
    assert read({"refresh_interval": 4}).gate_active
    assert read({"refresh_schedule": [3, 6]}).gate_active
    assert read({"refresh_guard": {"signal": "probs_diff", "threshold": 0.1}}).gate_active


@pytest.mark.parametrize(
    ("trainer", "sections", "message"),
    [
        ({"refresh_guard": {"signal": "nonsense", "threshold": 0.1}}, {}, "guard.signal: 'nonsense' is not valid"),
        ({"refresh_schedule": [6, 3]}, {}, "3 follows 6"),
        ({"refresh_schedule": [3, 12], "total_training_steps": 10}, {}, "step 12 is past the run's 10 steps"),
        ({"refresh_interval": 2, "refresh_guard": {"signal": "kl", "threshold": 0.1, "min": 3}}, {}, "guard.min"),
        ({"refresh_schedule": [3], "refresh_guard": {"signal": "kl", "threshold": 0.1}}, {}, "not both"),
        # the run logs no IS weights (verl's default correction) or skips the old log-prob pass (bypass)
        ({"refresh_guard": {"signal": "ess", "threshold": 0.5}}, {}, "ess is not logged under correction none"),
        (
            {"refresh_guard": {"signal": "probs_diff", "threshold": 0.1}},
            {"algorithm": {"rollout_correction": {"bypass_mode": True}}},
            "probs_diff is not logged",
        ),
        ({"sampler_temperature_spec": {"schedule": "linear", "start": 0.8, "end": 1.0}}, {}, "fixed trainer.learner"),
        (
            {"sampler_temperature_spec": {"schedule": "linear", "start": 0.8, "end": 1.0}, "learner_temperature": 1},
            {},
            "needs total_steps",
        ),
        ({"sampler_temperature_spec": 0.8}, {"actor_rollout_ref": {"rollout": {"temperature": 1.0}}}, "learner_temp"),
        ({"refresh_interval": 4}, {"actor_rollout_ref": {"rollout": {"name": "sglang"}}}, "needs vLLM"),
    ],
)
def test_every_rule_is_checked_when_the_keys_are_read(trainer, sections, message):
    """Each of these used to pass the reader and fail (or do the wrong thing) only after verl had loaded
    its workers, vLLM and the model; now the read refuses it, in one line."""
    with pytest.raises(ValueError, match=re.escape(message)) as err:
        read(trainer, **sections)
    assert "\n" not in str(err.value)


def test_the_spec_has_one_type_rule_the_controllers():
    """trainer.sampler_temperature_spec is accepted exactly where make_controller (and patch 0003b's
    header: a number, a schedule, a controller) accepts it."""
    from coolsampler.worker.controller import make_controller

    for spec in [0.8, 1, "saturation", "0.8", True, [0.8], {"controller": "saturation", "start": 0.8}, {"x": 1}]:
        try:
            make_controller(spec, total_steps=10)
            built = True
        except ValueError:
            built = False
        try:
            TrainerKeys(sampler_temperature_spec=spec, learner_temperature=1.0)
            read_ok = True
        except ValueError:
            read_ok = False
        assert read_ok == built, spec


def test_verls_generated_config_lists_every_key_with_the_readers_default():
    """verl's flattened reference config (_generated_ppo_trainer.yaml) holds the keys patch 0000 declares,
    with the defaults of TrainerKeys and of ppo_trainer.yaml."""
    verl = pytest.importorskip("verl")
    import yaml

    config = Path(verl.__file__).parent / "trainer" / "config"
    generated = yaml.safe_load((config / "_generated_ppo_trainer.yaml").read_text())["trainer"]
    declared = yaml.safe_load((config / "ppo_trainer.yaml").read_text())["trainer"]
    assert {k: generated.get(k, "missing") for k in NAMES} == trainer_keys.DEFAULTS
    assert {k: declared.get(k, "missing") for k in NAMES} == trainer_keys.DEFAULTS


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
        # the keys, with what they are checked against: the run's length and its correction
        context = {f"trainer.{k}" for k in NAMES} | {"trainer.total_training_steps"}
        section = tuple(o for o in overrides if o.partition("=")[0] in context or o.startswith("algorithm."))
        if section not in composed:
            config = compose_config(list(section))
            composed[section] = trainer_keys.read(config, trainer="sync", implements=NAMES)
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
