"""The staleness gate refuses the trainers that do not implement it (patch 0001), without the stack:
verl's own default config (composed as its entry point does) with trainer.refresh_interval set,
handed to each trainer's constructor, which refuses it before it starts anything."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import verl
from hydra import compose, initialize_config_dir
from verl.trainer.ppo.v1 import trainer_base

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


def test_only_the_sync_trainer_implements_the_gate():
    assert trainer_base.get_trainer_cls("sync").implements_refresh_interval is True
    assert OTHER_MODES == ["colocate_async", "separate_async"]  # verl 0.9.1's other modes
    for mode in OTHER_MODES:
        assert not getattr(trainer_base.get_trainer_cls(mode), "implements_refresh_interval", False)


@pytest.mark.parametrize("mode", OTHER_MODES)
def test_other_trainer_modes_refuse_a_refresh_interval(mode):
    config = verl_config(f"trainer.v1.trainer_mode={mode}", "trainer.refresh_interval=4", *MODE_OVERRIDES.get(mode, []))
    with pytest.raises(ValueError, match=rf"trainer\.refresh_interval=4 .*trainer\.v1\.trainer_mode={mode}$"):
        trainer_base.get_trainer_cls(mode)(config)


def test_the_legacy_trainer_refuses_a_refresh_interval():
    """trainer.use_v1=false runs verl's v0 trainer, which has no gate: its entry point refuses first."""
    from verl.trainer.main_ppo import main

    with pytest.raises(ValueError, match=r"trainer\.refresh_interval=4 .*trainer\.use_v1=true"):
        main(verl_config("trainer.use_v1=false", "trainer.refresh_interval=4"))
