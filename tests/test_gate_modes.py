"""The staleness gate refuses the trainers that do not implement it (patch 0001), without the stack:
the refusal comes first in the trainer's constructor, so a config naming the two keys it reads is
all verl needs to reach it."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf
from verl.trainer.ppo.v1 import trainer_base, trainer_colocate_async, trainer_separate_async, trainer_sync  # noqa: F401


def _config(mode: str, n: int):
    return OmegaConf.create({"trainer": {"refresh_interval": n, "v1": {"trainer_mode": mode}}})


OTHER_MODES = sorted(m for m in trainer_base.TRAINER_REGISTRY if m != "sync")


def test_only_the_sync_trainer_implements_the_gate():
    assert trainer_base.get_trainer_cls("sync").implements_refresh_interval is True
    assert OTHER_MODES  # verl 0.9.1 has colocate_async and separate_async
    for mode in OTHER_MODES:
        assert not getattr(trainer_base.get_trainer_cls(mode), "implements_refresh_interval", False)


@pytest.mark.parametrize("mode", OTHER_MODES)
def test_other_trainer_modes_refuse_a_refresh_interval(mode):
    with pytest.raises(ValueError, match=rf"trainer\.refresh_interval=4 .*trainer\.v1\.trainer_mode={mode}$"):
        trainer_base.get_trainer_cls(mode)(_config(mode, 4))


@pytest.mark.parametrize("mode", OTHER_MODES)
def test_other_trainer_modes_pass_the_check_at_n1(mode):
    """N = 1 is upstream behaviour: the constructor goes past the check (and then needs a full config)."""
    with pytest.raises(Exception) as err:
        trainer_base.get_trainer_cls(mode)(_config(mode, 1))
    assert "refresh_interval" not in str(err.value)


def test_the_sync_trainer_passes_the_check():
    with pytest.raises(Exception) as err:
        trainer_base.get_trainer_cls("sync")(_config("sync", 4))
    assert "refresh_interval" not in str(err.value)
