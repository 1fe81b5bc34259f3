"""coolsampler's keys in verl's ``trainer`` config section: their names, types and defaults, and the one
function that reads them.

Patch 0000 declares them in verl's ``ppo_trainer.yaml`` with the defaults below (each one upstream's
behaviour), so a run sets them as verl's own keys (``trainer.refresh_interval=4``, never
``+trainer...``) and a misspelt one fails in Hydra, not silently. ``coolsampler.train.overrides`` builds
a run's values as a :class:`TrainerKeys`; every patch reads them through :func:`read`, which also
refuses a staleness gate that the trainer reading it does not implement. Pure Python: verl's driver
imports it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass(frozen=True)
class TrainerKeys:
    """A run's coolsampler keys (each default is verl's own behaviour)."""

    refresh_interval: int = 1
    """N, the staleness gate's (longest) refresh interval; 1 pushes after every step (patch 0001)."""
    refresh_guard: dict[str, Any] | None = None
    """A run's staleness guard (``coolsampler.spec.guard``): refresh when its signal fires, at the latest every N."""
    refresh_schedule: tuple[int, ...] | None = None
    """The steps after which a fixed schedule refreshes, instead of every N-th."""
    learner_temperature: float | None = None
    """The learner's log-prob temperature (patch 0002); None ties it to the sampling temperature."""
    sampler_temperature_spec: dict[str, Any] | str | None = None
    """A sampler-temperature schedule or controller (patch 0003b, ``coolsampler.worker.controller``)."""

    def overrides(self) -> dict[str, Any]:
        """The run's values as verl overrides of the declared keys."""
        return {f"trainer.{k}": list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


NAMES = tuple(f.name for f in fields(TrainerKeys))


def _plain(value: Any) -> Any:
    """An OmegaConf node as plain Python (verl's config); anything else as it is."""
    try:
        from omegaconf import OmegaConf

        if OmegaConf.is_config(value):
            return OmegaConf.to_container(value, resolve=True)
    except ImportError:  # pragma: no cover - verl's process always has omegaconf
        pass
    return value


def _interval(v: Any) -> int:
    if isinstance(v, bool) or int(v) != v or int(v) < 1:
        raise ValueError
    return int(v)


def _temperature(v: Any) -> float:
    if isinstance(v, bool) or not float(v) > 0:
        raise ValueError
    return float(v)


def _steps(v: Any) -> tuple[int, ...] | None:
    if isinstance(v, (str, Mapping)):
        raise ValueError
    return tuple(_interval(s) for s in v) or None


def _mapping(v: Any) -> dict[str, Any] | None:
    if not isinstance(v, Mapping):
        raise ValueError
    return dict(v) or None


def _spec(v: Any) -> dict[str, Any] | str:
    if not isinstance(v, (Mapping, str)):
        raise ValueError
    return dict(v) if isinstance(v, Mapping) else v


# each key's reader, and what it accepts (for the error)
_READ = {
    "refresh_interval": (_interval, "an integer >= 1"),
    "refresh_guard": (_mapping, "a mapping, or null"),
    "refresh_schedule": (_steps, "a list of steps >= 1, or null"),
    "learner_temperature": (_temperature, "a temperature > 0, or null"),
    "sampler_temperature_spec": (_spec, "a mapping or a name, or null"),
}


def _typed(name: str, value: Any) -> Any:
    """One key's value in its declared type (None: the default), or a ValueError naming the key."""
    if value is None:
        return getattr(TrainerKeys, name)
    convert, want = _READ[name]
    try:
        return convert(value)
    except (TypeError, ValueError):
        raise ValueError(f"trainer.{name}={value!r}: expected {want}") from None


def for_upstream(overrides: Sequence[str]) -> list[str]:
    """The overrides without the declared keys: what unpatched verl accepts (its config has none of
    them; a run compared with it sets them at upstream's behaviour, so nothing is lost)."""
    declared = {f"trainer.{k}" for k in NAMES}
    return [o for o in overrides if o.partition("=")[0].lstrip("+") not in declared]


def read(trainer: Mapping[str, Any], *, implements_gate: bool, trainer_name: str) -> TrainerKeys:
    """The run's keys from verl's ``trainer`` section, typed. A trainer that does not implement the
    staleness gate (``implements_gate``) refuses N > 1 here, before it starts anything: it would push
    fresh weights after every step and log a stale sampler that never was."""
    keys = TrainerKeys(**{name: _typed(name, _plain(trainer.get(name, None))) for name in NAMES})
    if keys.refresh_interval > 1 and not implements_gate:
        raise ValueError(
            f"trainer.refresh_interval={keys.refresh_interval} (staleness gate) is implemented only by "
            f"trainer.use_v1=true with trainer.v1.trainer_mode=sync, not {trainer_name}"
        )
    return keys


__all__ = ["NAMES", "TrainerKeys", "for_upstream", "read"]
