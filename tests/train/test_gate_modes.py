"""Every trainer refuses each coolsampler key it does not implement (patch 0001), without the stack:
verl's own default config (composed as its entry point does) with the key set, handed to each trainer's
constructor (or the legacy trainer's entry point), which refuses it in one line naming key and trainer
before it starts anything."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
import verl
from hydra import compose, initialize_config_dir
from verl.trainer.ppo.v1 import trainer_base

from coolsampler.worker import trainer_keys

# what separate_async itself asserts before the gate's check is reached
MODE_OVERRIDES = {
    "separate_async": [
        "actor_rollout_ref.rollout.nnodes=1",
        "actor_rollout_ref.rollout.n_gpus_per_node=1",
        "actor_rollout_ref.rollout.checkpoint_engine.backend=nccl",
        "trainer.v1.separate_async.parameter_sync_step=1",
        "data.train_batch_size=4",
        "actor_rollout_ref.actor.ppo_mini_batch_size=4",
    ]
}
OTHER_MODES = sorted(m for m in trainer_base.TRAINER_REGISTRY if m != "sync")


PATCHES = sorted((Path(__file__).resolve().parents[2] / "patches" / "verl").glob("*.patch"))


def test_the_installed_verl_is_built_from_these_patches():
    """What this file tests is the current patches/verl (rerun setup_env.sh after changing them)."""
    listed = (Path(verl.__file__).parent / "coolsampler_patches.txt").read_text().splitlines()
    assert listed == [f"{p.name} {hashlib.sha256(p.read_bytes()).hexdigest()}" for p in PATCHES]


def verl_config(*overrides: str):
    with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer" / "config"), version_base=None):
        return compose(config_name="ppo_trainer", overrides=list(overrides))


def test_each_trainer_says_which_keys_it_implements():
    """The sync trainer implements every key; verl's other v1 modes the temperature keys (patches 0002,
    0003b live in their common base), not the gate."""
    assert trainer_base.get_trainer_cls("sync").coolsampler_implements == trainer_keys.NAMES
    assert OTHER_MODES == ["colocate_async", "separate_async"]  # verl 0.9.1's other modes
    for mode in OTHER_MODES:
        implements = getattr(trainer_base.get_trainer_cls(mode), "coolsampler_implements", None)
        assert implements in (None, trainer_keys.TEMPERATURE_KEYS), mode


# every key of the gate, as a researcher sets it on verl's command line
GATE_SETTINGS = [
    "trainer.refresh_interval=4",
    "trainer.refresh_schedule=[3,6]",
    "trainer.refresh_guard={signal:probs_diff,threshold:0.1}",
]


@pytest.mark.parametrize("setting", GATE_SETTINGS)
@pytest.mark.parametrize("mode", OTHER_MODES)
def test_other_trainer_modes_refuse_every_key_of_the_gate(mode, setting):
    """A schedule or a guard gates too (at interval 1 as well): a trainer without the gate refuses each."""
    config = verl_config(f"trainer.v1.trainer_mode={mode}", setting, *MODE_OVERRIDES.get(mode, []))
    key = re.escape(setting.partition("=")[0])
    with pytest.raises(ValueError, match=rf"^{key}=.* is not implemented by trainer\.v1\.trainer_mode={mode}, only by"):
        trainer_base.get_trainer_cls(mode)(config)


@pytest.mark.parametrize(
    "setting", [*GATE_SETTINGS, "trainer.learner_temperature=1.0", "trainer.sampler_temperature_spec=0.8"]
)
def test_the_legacy_trainer_refuses_every_key_in_one_line(setting, monkeypatch):
    """trainer.use_v1=false runs verl's v0 trainer, which implements none of the keys (no patch touches
    it): its entry point refuses each, naming key and trainer, before Ray or a worker starts."""
    from verl.trainer import main_ppo
    from verl.trainer.main_ppo import main

    def started(*args, **kwargs):
        raise AssertionError(f"the legacy trainer started with {setting}")

    monkeypatch.setattr(main_ppo, "run_ppo", started)

    key = re.escape(setting.partition("=")[0])
    with pytest.raises(ValueError, match=rf"^{key}=.* is not implemented by trainer\.use_v1=false, only by [^\n]*$"):
        main(verl_config("trainer.use_v1=false", setting))


def test_the_sync_trainer_is_built_from_verls_default_config_with_an_active_gate():
    """What the refusals below are measured against: the constructor itself starts no worker and, given
    valid keys, builds the gate with the trainer."""
    t = trainer_base.get_trainer_cls("sync")(verl_config("trainer.refresh_schedule=[3,6]"))
    assert t.coolsampler_keys.gate_active and t._refresh_gate.schedule == (3, 6)
    assert t.config.actor_rollout_ref.rollout.custom["sleep_level"] == 1  # the gate keeps its sampler through sleep


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (["trainer.refresh_guard={signal:nonsense,threshold:0.1}"], "guard.signal: 'nonsense' is not valid"),
        (["trainer.refresh_schedule=[6,3]"], "3 follows 6"),
        (["trainer.refresh_schedule=[3,12]", "trainer.total_training_steps=10"], "past the run's 10 steps"),
        (["trainer.refresh_guard={signal:ess,threshold:0.5}"], "ess is not logged under correction none"),
        (
            ["actor_rollout_ref.actor.strategy=megatron", "trainer.max_actor_ckpt_to_keep=2", "trainer.save_freq=10"],
            "strategy megatron",
        ),
    ],
)
def test_the_sync_trainer_refuses_a_bad_setting_when_it_is_built(settings, message):
    """Each of these once passed the constructor and failed (or deleted good checkpoints) only once the
    workers, vLLM and the model were loaded."""
    with pytest.raises(ValueError, match=re.escape(message)):
        trainer_base.get_trainer_cls("sync")(verl_config(*settings))
