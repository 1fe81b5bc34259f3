"""Sampler-temperature schedules and controllers (Section 4 "Adaptive temperature", Figures 6a and 7).

Pure Python on purpose: it runs in verl's trainer process (patch 0003 asks it, once per step, for the
temperature to sample at and feeds it the step's statistics), is unit-tested without verl, and must
not pull torch or the analysis layer into that process.

What the paper fixes, and what is OUR READING
---------------------------------------------
The paper's Appendix A (the exact controller rule) is missing from our copy. What it does say:

* Section 4: "Reheating once groups saturate does not help: a saturation-triggered controller and a
  fixed 0.8-to-1.0 schedule end within 0.01 of fixed cooling at N=96, and at N=192 the controller
  heated to 1.05 in the second cycle and collapsed to 0.19 (Appendix A): heating is the wrong
  direction under staleness."
* Figure 7: "a saturation-triggered controller (with and without a KL gate) and a linear schedule from
  0.8 to 1.0"; "the controller heats the sampler to 1.05 in the second cycle".
* Figure 6a: "a variant that cools further whenever the KL grows".
* Table 4: "Tb* = initial value of a controller/schedule"; all controllers start at 0.8.

From that, the rules implemented here (parameters are constructor arguments; the defaults are our
choices, picked so that a run that saturates steadily creeps up by a few hundredths per cycle and can
reach the 1.05 region within a 300-step run, as the paper's N=192 controller run did):

``linear``
    T(t) = start + (end - start) * (t - 1) / (total_steps - 1) for verl's 1-based step t, clamped to
    [start, end]: the first training batch is sampled at ``start``, the last at ``end``.

``saturation`` (SaturationController)
    A *group* is the n samples of one prompt; it is *saturated* when all its rewards are equal (all
    correct or all wrong), so GRPO gives it zero advantage and it carries no gradient. After each
    step the controller sees s = the fraction of saturated groups (smoothed: s_ema = ema * s_ema +
    (1 - ema) * s, first value taken as is) and acts once per step:

    * s_ema >= saturation_threshold                 -> reheat:   T <- min(T + step_up, t_max)
    * s_ema <  saturation_threshold - hysteresis    -> cool back: T <- max(T - step_down, start)
    * otherwise                                     -> hold.

    It never goes below its start (it is a *re*-heater), and with ``step_down=0`` (default) it only
    ratchets up, which is how a controller ends a run at 1.05 from 0.8. With ``kl_gate=True`` a
    reheat is skipped (T held) whenever the learner-sampler KL of the step exceeds ``kl_threshold``
    (or is unknown): the gate's purpose is to not add mismatch when the stale sampler has already
    drifted from the learner. Cooling back is never gated.

``kl_cooling`` (KLCoolingController)
    Cools whenever the learner-sampler KL grows: it keeps a reference ``ref`` = the lowest KL seen
    since its last cooling action (so a refresh of the sampler, which drops the KL, resets the
    reference to the new low). When the KL of a step exceeds growth * max(ref, kl_floor) it cools
    multiplicatively, T <- max(T * factor, t_min), and sets ref to that KL; otherwise
    ref <- min(ref, KL). Comparing with a running minimum rather than the previous step keeps
    step-to-step noise from cooling on every other step; ``kl_floor`` keeps the near-zero KL just
    after a refresh (numerical mismatch only) from making any wobble look like growth.

All controllers are deterministic functions of the sequence of ``update`` calls, start at their
``start`` and ignore updates for steps they have already seen (so a resumed run that replays a step
cannot double-count it); ``state_dict``/``load_state_dict`` carry the state across a restart.

Wiring (patch ``patches/verl/0003-per-prompt-temperature.patch``): the trainer builds the controller
from ``trainer.sampler_temperature_spec``, given in Hydra's override syntax, e.g.
``+trainer.sampler_temperature_spec={controller:saturation,start:0.8,kl_gate:true}`` or
``+trainer.sampler_temperature_spec={schedule:linear,start:0.8,end:1.0}`` (a Python dict's ``str()``
is not valid there), with ``trainer.total_training_steps`` as the schedule's length. A varying
temperature needs a fixed ``trainer.learner_temperature``. The trainer logs ``sampler/temperature``
and ``sampler/saturated_frac`` per step and checkpoints ``state_dict()`` as ``sampler_t.pt``.

Which step a temperature belongs to: ``temperature(t)`` is what step t's batch is sampled at;
``update(t, ...)`` feeds step t's statistics and therefore moves ``temperature(t + 1)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Protocol, runtime_checkable

KL_METRIC_KEYS = ("rollout_corr/kl", "actor/rollout_corr/kl")  # trainer-side (TIS/none), actor-side (bypass)


@runtime_checkable
class TemperatureController(Protocol):
    """What verl's trainer (patch 0003) calls: one temperature per step, one update per step."""

    def temperature(self, step: int) -> float: ...

    def update(self, step: int, saturated_frac: float, kl: float | None) -> None: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...


def linear(step: int, total_steps: int, start: float, end: float) -> float:
    """Linear schedule over verl's 1-based training steps: ``start`` at step 1, ``end`` at ``total_steps``.

    Steps outside [1, total_steps] are clamped, so a resumed or over-long run stays at ``end``.
    """
    if total_steps < 1:
        raise ValueError(f"total_steps must be >= 1, got {total_steps}")
    if total_steps == 1:
        return float(end)
    frac = min(max((step - 1) / (total_steps - 1), 0.0), 1.0)
    return float(start + (end - start) * frac)


def _check_temperature(name: str, value: float) -> float:
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive finite temperature, got {value}")
    return value


class _Stateful:
    """Shared state handling: a dataclass of parameters plus mutable state fields, and the step guard."""

    kind: str = ""
    _state_fields: tuple[str, ...] = ()
    last_step: int

    def _fresh(self, step: int) -> bool:
        """True once per step: updates for an already-seen step are ignored (resume replays)."""
        if step <= self.last_step:
            return False
        self.last_step = step
        return True

    def _params(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in self._state_fields}  # type: ignore[arg-type]

    def state_dict(self) -> dict[str, Any]:
        state = {name: getattr(self, name) for name in self._state_fields}
        return {"kind": self.kind, "params": self._params(), "state": state}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state.get("kind") != self.kind:
            raise ValueError(
                f"controller state is for {state.get('kind')!r}, this controller is {self.kind!r}"
            )
        params = self._params()
        if dict(state.get("params", {})) != params:
            raise ValueError(
                f"controller parameters changed across resume: {state.get('params')} != {params}"
            )
        for name in self._state_fields:
            setattr(self, name, state["state"][name])


@dataclass
class FixedTemperature(_Stateful):
    """A constant sampler temperature (the paper's fixed T_b arms)."""

    value: float
    last_step: int = 0
    kind = "fixed"
    _state_fields = ("last_step",)

    def __post_init__(self) -> None:
        self.value = _check_temperature("value", self.value)

    def temperature(self, step: int) -> float:
        return self.value

    def update(self, step: int, saturated_frac: float, kl: float | None) -> None:
        self._fresh(step)


@dataclass
class LinearSchedule(_Stateful):
    """``linear(step, total_steps, start, end)`` as a controller (Figure 7a's 0.8-to-1.0 schedule)."""

    start: float
    end: float
    total_steps: int
    last_step: int = 0
    kind = "linear"
    _state_fields = ("last_step",)

    def __post_init__(self) -> None:
        self.start = _check_temperature("start", self.start)
        self.end = _check_temperature("end", self.end)
        self.total_steps = int(self.total_steps)
        if self.total_steps < 1:
            raise ValueError(f"total_steps must be >= 1, got {self.total_steps}")

    def temperature(self, step: int) -> float:
        return linear(step, self.total_steps, self.start, self.end)

    def update(self, step: int, saturated_frac: float, kl: float | None) -> None:
        self._fresh(step)  # open loop: statistics do not move a schedule


@dataclass
class SaturationController(_Stateful):
    """Reheats the sampler as GRPO groups saturate; optionally gated by the learner-sampler KL.

    See the module docstring for the rule (OUR READING of Section 4 / Figure 7; Appendix A is missing).
    """

    start: float = 0.8
    t_max: float = 1.2
    step_up: float = 0.005
    step_down: float = 0.0
    saturation_threshold: float = 0.5
    hysteresis: float = 0.1
    ema: float = 0.5
    kl_gate: bool = False
    kl_threshold: float = 0.1
    # state
    current: float = field(default=float("nan"))
    sat_ema: float | None = None
    last_step: int = 0
    kind = "saturation"
    _state_fields = ("current", "sat_ema", "last_step")

    def __post_init__(self) -> None:
        self.start = _check_temperature("start", self.start)
        self.t_max = _check_temperature("t_max", self.t_max)
        if self.t_max < self.start:
            raise ValueError(f"t_max {self.t_max} is below start {self.start}")
        if self.step_up < 0 or self.step_down < 0:
            raise ValueError("step_up and step_down must be >= 0")
        if not 0.0 <= self.saturation_threshold <= 1.0 or self.hysteresis < 0:
            raise ValueError("saturation_threshold must be in [0, 1] and hysteresis >= 0")
        if not 0.0 <= self.ema < 1.0:
            raise ValueError(f"ema must be in [0, 1), got {self.ema}")
        if math.isnan(self.current):
            self.current = self.start

    def temperature(self, step: int) -> float:
        return self.current

    def update(self, step: int, saturated_frac: float, kl: float | None) -> None:
        if not self._fresh(step):
            return
        s = float(saturated_frac)
        if not math.isfinite(s):
            return  # no groups this step: hold, and keep the average as it was
        self.sat_ema = s if self.sat_ema is None else self.ema * self.sat_ema + (1.0 - self.ema) * s
        if self.sat_ema >= self.saturation_threshold:
            gate_closed = self.kl_gate and (kl is None or not math.isfinite(kl) or kl > self.kl_threshold)
            if not gate_closed:
                self.current = min(self.current + self.step_up, self.t_max)
        elif self.sat_ema < self.saturation_threshold - self.hysteresis:
            self.current = max(self.current - self.step_down, self.start)


@dataclass
class KLCoolingController(_Stateful):
    """Cools the sampler further whenever the learner-sampler KL grows (Figure 6a's variant).

    See the module docstring for the rule (OUR READING).
    """

    start: float = 0.8
    t_min: float = 0.6
    factor: float = 0.97
    growth: float = 1.5
    kl_floor: float = 0.01
    # state
    current: float = field(default=float("nan"))
    ref: float | None = None
    last_step: int = 0
    kind = "kl_cooling"
    _state_fields = ("current", "ref", "last_step")

    def __post_init__(self) -> None:
        self.start = _check_temperature("start", self.start)
        self.t_min = _check_temperature("t_min", self.t_min)
        if self.t_min > self.start:
            raise ValueError(f"t_min {self.t_min} is above start {self.start}")
        if not 0.0 < self.factor < 1.0:
            raise ValueError(f"factor must be in (0, 1), got {self.factor}")
        if self.growth <= 1.0 or self.kl_floor < 0:
            raise ValueError("growth must be > 1 and kl_floor >= 0")
        if math.isnan(self.current):
            self.current = self.start

    def temperature(self, step: int) -> float:
        return self.current

    def update(self, step: int, saturated_frac: float, kl: float | None) -> None:
        if not self._fresh(step) or kl is None or not math.isfinite(kl):
            return
        kl = float(kl)
        if self.ref is None:
            self.ref = kl
        elif kl > self.growth * max(self.ref, self.kl_floor):
            self.current = max(self.current * self.factor, self.t_min)
            self.ref = kl
        else:
            self.ref = min(self.ref, kl)


_CONTROLLERS: dict[str, type[_Stateful]] = {
    "saturation": SaturationController,
    "kl_cooling": KLCoolingController,
}


def make_controller(
    spec: float | int | Mapping[str, Any], total_steps: int | None = None
) -> TemperatureController:
    """Build a controller from the study's temperature spec (``coolsampler.study.Temperature.to_config``).

    ``spec`` is a number (fixed), ``{"schedule": "linear", "start", "end"[, "total_steps"]}`` or
    ``{"controller": "saturation" | "kl_cooling", "start", ...}`` where any further key is a parameter
    of that controller (``kl_gate``, ``step_up``, ``t_max``, ...). ``total_steps`` (verl's
    ``trainer.total_training_steps``) is needed by a schedule unless the spec carries it. Unknown keys
    raise, so a misspelt parameter cannot silently fall back to a default.
    """
    if isinstance(spec, bool):
        raise ValueError(f"not a temperature spec: {spec!r}")
    if isinstance(spec, (int, float)):
        return FixedTemperature(float(spec))
    if not isinstance(spec, Mapping):
        raise ValueError(f"not a temperature spec: {spec!r}")
    spec = dict(spec)
    if "schedule" in spec:
        if spec.pop("schedule") != "linear":
            raise ValueError(f"unknown schedule in {spec!r}")
        steps = spec.pop("total_steps", total_steps)
        if steps is None:
            raise ValueError("a linear schedule needs total_steps")
        unknown = set(spec) - {"start", "end"}
        if unknown:
            raise ValueError(f"unknown keys for a linear schedule: {sorted(unknown)}")
        return LinearSchedule(float(spec["start"]), float(spec["end"]), int(steps))
    kind = spec.pop("controller", None)
    if kind not in _CONTROLLERS:
        raise ValueError(f"unknown controller {kind!r}; known: {sorted(_CONTROLLERS)}")
    cls = _CONTROLLERS[kind]
    allowed = {f.name for f in fields(cls)} - set(cls._state_fields)  # type: ignore[arg-type]
    unknown = set(spec) - allowed
    if unknown:
        raise ValueError(
            f"unknown keys for controller {kind!r}: {sorted(unknown)}; allowed: {sorted(allowed)}"
        )
    return cls(**spec)  # type: ignore[return-value]


def saturated_fraction(
    uids: Sequence[Any], scores: Sequence[float], keep: Sequence[bool] | None = None
) -> float:
    """Fraction of groups (responses sharing a prompt uid) whose rewards are all equal.

    All-correct and all-wrong groups both count: either way GRPO's group-normalised advantage is zero.
    A group of one response counts as saturated for the same reason. ``keep`` drops rows (verl's
    padding rows). NaN when there is no group.
    """
    if len(uids) != len(scores) or (keep is not None and len(keep) != len(uids)):
        raise ValueError("uids, scores and keep must have one entry per response")
    lo: dict[Any, float] = {}
    hi: dict[Any, float] = {}
    for i, (uid, score) in enumerate(zip(uids, scores, strict=True)):
        if keep is not None and not keep[i]:
            continue
        s = float(score)
        lo[uid] = min(lo.get(uid, s), s)
        hi[uid] = max(hi.get(uid, s), s)
    if not lo:
        return float("nan")
    return sum(lo[u] == hi[u] for u in lo) / len(lo)


def kl_from_metrics(metrics: Mapping[str, Any]) -> float | None:
    """The step's learner-sampler KL from verl's metrics dict, wherever this correction logs it.

    Trainer-side ``rollout_corr/kl`` (TIS / no correction: computed in ``_compute_advantage``), or
    actor-side ``actor/rollout_corr/kl`` (bypass mode, e.g. mu-GRPO). None when neither is present.
    """
    for key in KL_METRIC_KEYS:
        if key in metrics and metrics[key] is not None:
            return float(metrics[key])
    return None


__all__ = [
    "FixedTemperature",
    "KLCoolingController",
    "LinearSchedule",
    "SaturationController",
    "TemperatureController",
    "kl_from_metrics",
    "linear",
    "make_controller",
    "saturated_fraction",
]
