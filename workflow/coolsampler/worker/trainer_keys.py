"""coolsampler's keys in verl's ``trainer`` config section: their names, types and defaults, every rule
they obey, and the one function that reads them.

Patch 0000 declares them in verl's ``ppo_trainer.yaml`` with the defaults below (each one upstream's
behaviour), so a run sets them as verl's own keys (``trainer.refresh_interval=4``, never
``+trainer...``) and a misspelt one fails in Hydra, not silently. ``coolsampler.train.overrides`` builds
a run's values as a :class:`TrainerKeys`; every patch reads them through :func:`read`.

Every rule is checked when the keys are read, before verl starts a worker, a vLLM engine or a model,
as TRL's configs do in ``__post_init__``:

* :class:`TrainerKeys` itself (its ``__post_init__``): each key's type; the gate's settings as
  ``coolsampler.spec.guard`` builds them (a known guard signal, ``min`` within N, a schedule strictly
  ordered, a guard or a schedule, not both); the sampler-temperature spec by the controller's own parser
  (``coolsampler.spec.temperature.controller_spec``, which ``make_controller`` calls); a varying sampler
  temperature only beside a fixed learner temperature.
* :func:`read`, against the rest of verl's config: each key that the trainer reading it does not
  implement is refused, naming the key and the trainer; a guard's signal must be logged under the run's
  correction (``algorithm.rollout_correction``); a schedule must lie within
  ``trainer.total_training_steps`` when verl is given it; the sampler-temperature spec must build
  (``make_controller`` with the run's length); a fixed sampler temperature other than the rollout's
  needs a fixed learner temperature; an active gate needs vLLM's level-1 sleep.

:attr:`TrainerKeys.gate_active` is the one predicate "the gate is active" (``spec.guard.gate_active``:
N > 1, a guard or a schedule) that every patch asks. Pure Python: verl's driver imports it.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from coolsampler.spec.corrections import correction_of
from coolsampler.spec.guard import (
    RefreshGate,
    check_schedule,
    check_signal_logged,
    gate_active,
    make_gate,
)
from coolsampler.spec.temperature import controller_spec

GATE_KEYS = ("refresh_interval", "refresh_guard", "refresh_schedule")  # patch 0001: the sync trainer's
TEMPERATURE_KEYS = ("learner_temperature", "sampler_temperature_spec")  # patches 0002, 0003b: every v1 trainer's


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
    if isinstance(v, bool) or not float(v) > 0 or not math.isfinite(float(v)):
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


def _spec(v: Any) -> dict[str, Any] | float:
    """The controller's own rule (``controller_spec``, which ``make_controller`` parses with): a number
    (a fixed temperature) or a schedule's or a controller's mapping."""
    kind, params = controller_spec(v)
    return params["value"] if kind == "fixed" else dict(v)


# each key's reader, and what it accepts (for the error)
_READ = {
    "refresh_interval": (_interval, "an integer >= 1"),
    "refresh_guard": (_mapping, "a mapping, or null"),
    "refresh_schedule": (_steps, "a list of steps >= 1, or null"),
    "learner_temperature": (_temperature, "a temperature > 0, or null"),
    "sampler_temperature_spec": (_spec, "a number, {schedule: ...} or {controller: ...}, or null"),
}


def _shown(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


@dataclass(frozen=True)
class TrainerKeys:
    """A run's coolsampler keys (each default is verl's own behaviour), typed and checked on creation."""

    refresh_interval: int = 1
    """N, the staleness gate's (longest) refresh interval; 1 pushes after every step (patch 0001)."""
    refresh_guard: dict[str, Any] | None = None
    """A run's staleness guard (``coolsampler.spec.guard``): refresh when its signal fires, at the latest every N."""
    refresh_schedule: tuple[int, ...] | None = None
    """The steps after which a fixed schedule refreshes, instead of every N-th."""
    learner_temperature: float | None = None
    """The learner's log-prob temperature (patch 0002); None ties it to the sampling temperature."""
    sampler_temperature_spec: dict[str, Any] | float | None = None
    """A sampler temperature, schedule or controller (patch 0003b, ``coolsampler.worker.controller``)."""

    def __post_init__(self) -> None:
        for f in fields(self):
            object.__setattr__(self, f.name, _typed(f.name, _plain(getattr(self, f.name))))
        try:
            self.gate()  # the gate's own rules: a known signal, min <= N, an ordered schedule, not both
        except (TypeError, ValueError) as err:
            raise ValueError(f"trainer.refresh_*: {err}") from None
        if isinstance(self.sampler_temperature_spec, dict) and self.learner_temperature is None:
            raise ValueError(
                f"trainer.sampler_temperature_spec={self.sampler_temperature_spec!r}: a varying sampler "
                "temperature needs a fixed trainer.learner_temperature"
            )

    @property
    def gate_active(self) -> bool:
        """Whether the staleness gate ever keeps a stale sampler (``spec.guard.gate_active``: N > 1, a
        guard or a schedule): the one predicate every patch asks instead of looking at N."""
        return gate_active(self.refresh_interval, self.refresh_guard, self.refresh_schedule)

    def gate(self) -> RefreshGate:
        """A new refresh gate of these settings (``coolsampler.spec.guard.make_gate``)."""
        return make_gate(self.refresh_interval, self.refresh_guard, self.refresh_schedule)

    def controller(self, total_steps: int | None) -> Any:
        """The sampler-temperature controller of ``sampler_temperature_spec`` (None when unset), for a
        run of ``total_steps`` (verl's ``trainer.total_training_steps``, a schedule's length)."""
        if self.sampler_temperature_spec is None:
            return None
        from coolsampler.worker.controller import make_controller

        return make_controller(self.sampler_temperature_spec, total_steps=total_steps)

    def set_keys(self) -> tuple[str, ...]:
        """The keys set to something other than upstream's behaviour."""
        return tuple(f.name for f in fields(self) if getattr(self, f.name) != f.default)

    def overrides(self) -> dict[str, Any]:
        """The run's values as verl overrides of the declared keys."""
        return {f"trainer.{k}": _shown(v) for k, v in asdict(self).items()}


NAMES = tuple(f.name for f in fields(TrainerKeys))
DEFAULTS = {f.name: f.default for f in fields(TrainerKeys)}


def _typed(name: str, value: Any) -> Any:
    """One key's value in its declared type (None: the default), or a ValueError naming the key."""
    if value is None:
        return DEFAULTS[name]
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


def _get(config: Any, *path: str) -> Any:
    """``config[path]`` of verl's config (a DictConfig or a mapping), None where a section is absent."""
    for name in path:
        if config is None:
            return None
        config = config.get(name, None) if hasattr(config, "get") else None
    return _plain(config)


def read(config: Mapping[str, Any], *, trainer: str, implements: Collection[str]) -> TrainerKeys:
    """The run's keys from verl's config (its ``trainer`` section, checked against the rest), typed, or
    a ValueError in one line. ``trainer`` names the trainer reading them; ``implements`` the keys it
    implements: each other key set to anything but upstream's behaviour is refused here, before the
    trainer starts anything (it would do nothing, or log a stale sampler that never was)."""
    section = config.get("trainer", None) or {}
    keys = TrainerKeys(**{name: _plain(section.get(name, None)) for name in NAMES})
    for name in keys.set_keys():
        if name not in implements:
            who = "trainer.v1.trainer_mode=sync" if name in GATE_KEYS else "the v1 trainers (trainer.use_v1=true)"
            raise ValueError(
                f"trainer.{name}={_shown(getattr(keys, name))!r} is not implemented by {trainer}, only by {who}"
            )
    guard, schedule = keys.refresh_guard, keys.refresh_schedule
    if guard is not None:
        correction = correction_of(_get(config, "algorithm", "rollout_correction"))
        try:
            check_signal_logged(guard["signal"], correction)
        except ValueError as err:
            raise ValueError(f"trainer.refresh_guard: {err} (algorithm.rollout_correction)") from None
    total = _get(config, "trainer", "total_training_steps")
    if schedule is not None and total is not None:
        try:
            check_schedule(schedule, int(total))
        except ValueError as err:
            raise ValueError(f"trainer.refresh_schedule: {err} (trainer.total_training_steps)") from None
    if keys.sampler_temperature_spec is not None:
        try:
            keys.controller(total)
        except (TypeError, ValueError) as err:
            raise ValueError(f"trainer.sampler_temperature_spec={keys.sampler_temperature_spec!r}: {err}") from None
    rollout_t = _get(config, "actor_rollout_ref", "rollout", "temperature")
    fixed = keys.sampler_temperature_spec
    if isinstance(fixed, float) and keys.learner_temperature is None and rollout_t is not None and fixed != rollout_t:
        raise ValueError(
            f"trainer.sampler_temperature_spec={fixed}: a sampler temperature other than "
            f"actor_rollout_ref.rollout.temperature={rollout_t} needs a fixed trainer.learner_temperature"
        )
    name = _get(config, "actor_rollout_ref", "rollout", "name")
    free = _get(config, "actor_rollout_ref", "rollout", "free_cache_engine")
    if keys.gate_active and name not in (None, "vllm") and free is not False:
        raise ValueError(f"trainer.refresh_*: the staleness gate needs vLLM's level-1 sleep, not rollout {name}")
    return keys


__all__ = ["DEFAULTS", "GATE_KEYS", "NAMES", "TEMPERATURE_KEYS", "TrainerKeys", "for_upstream", "read"]
