"""Sampler-temperature schedules and controllers (Section 4 "Adaptive temperature", Figures 6a and 7).

Pure Python on purpose: it runs in verl's trainer process (patch 0003b asks it, once per step, for
the temperature of each prompt to sample at and feeds it the step's rewards), is unit-tested without
verl, and must not pull torch or the analysis layer into that process.

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

* Appendix C: "The controller of Appendix A needs different prompts in one batch to be sampled at
  different temperatures." So its temperature can differ between prompts; the rule that makes it
  differ is in the missing Appendix A.
* Section 2: 16 prompts a step, 300 steps; GSM8K has 7473 training prompts, MATH levels 3-5 5586.
  A paper run therefore samples 4800 prompts and no prompt twice, so any temperature keyed on a
  prompt's identity stays at its start for the whole run. The N=192 controller nevertheless
  "heated to 1.05 in the second cycle": its state carried across prompts. That is why the default
  is the run-wide controller below; the per-prompt one is kept as a named option (``-prompt`` in a
  run key), for datasets small enough that prompts come back.

From that, the rules implemented here (parameters are constructor arguments; the paper gives none of
the constants below, so each is a setting whose default is OUR CHOICE, stated where it is defined):

``linear``
    T(t) = start + (end - start) * (t - 1) / (total_steps - 1) for verl's 1-based step t, clamped to
    [start, end]: the first training batch is sampled at ``start``, the last at ``end``.

``saturation`` (default ``scope: global``: SaturationController)
    A *group* is the n samples of one prompt. It is *saturated* when all its rewards are correct
    (``saturated: all_correct``, the default: "reheating once groups saturate" reads as the prompts
    having become easy, and heating restores diversity) or, as an option, when all its rewards
    are equal (``saturated: all_equal``: all correct or all wrong, i.e. zero GRPO advantage; this
    also counts prompts the model cannot solve at all). "Correct" is a reward >= ``correct_score``
    (1.0: our rewards are 0/1).

    One temperature for the whole batch. After each step the controller sees s = the fraction of
    saturated groups (smoothed: s_ema = ema * s_ema + (1 - ema) * s, first value taken as is) and
    acts once per step:

    * s_ema >= saturation_threshold                 -> reheat:   T <- min(T + step_up, t_max)
    * s_ema <  saturation_threshold - hysteresis    -> cool back: T <- max(T - step_down, start)
    * otherwise                                     -> hold.

    It never goes below its start (it is a *re*-heater), and with ``step_down=0`` (default) it only
    ratchets up, which is how a controller ends a run at 1.05 from 0.8. With ``kl_gate=True`` a
    reheat is skipped (T held) whenever the learner-sampler KL of the step exceeds ``kl_threshold``
    (or is unknown): the gate's purpose is to not add mismatch when the stale sampler has already
    drifted from the learner. Cooling back is never gated. Its defaults (step_up 0.005, t_max 1.2,
    threshold 0.5, hysteresis 0.1, ema 0.5, kl_threshold 0.1 nat: the KL level of Figure 2b) are OUR
    CHOICE, picked so that a run that saturates steadily creeps up by a few hundredths per cycle and
    can reach the 1.05 region within a 300-step run, as the paper's N=192 controller run did.

``saturation`` with ``scope: per_prompt`` (PerPromptSaturationController; ``-prompt`` in a run key)
    The same saturation rule, but every prompt carries its own temperature, keyed by a stable prompt
    id (verl's ``index`` column, i.e. the parquet's ``extra_info.index``); a prompt never seen
    before starts at ``start`` (the run's Tb). After each step, for each prompt of the step:

    * its group saturated and the KL gate open -> T_p <- min(T_p + step_up, t_max)
    * its group not saturated                  -> T_p <- max(T_p - step_down, start)
    * otherwise (saturated, gate closed)       -> hold.

    Defaults (OUR CHOICE): step_up 0.05 (a prompt that saturates on five visits in a row reaches the
    paper's 1.05 from 0.8), step_down 0 (a re-heater only ratchets up), t_max 1.2 (the hottest
    temperature the paper samples at, in its plumbing check), kl_threshold 0.1 nat (the KL level of
    Figure 2b). CAVEAT for paper-scale runs: with 16 prompts per step, 300 steps visit 4800 prompts,
    fewer than GSM8K's 7473 (or MATH's 5586) training prompts, so no prompt is sampled twice in a run
    and a per-prompt controller keyed on prompt identity never moves off Tb there: on the paper's
    tasks it behaves as fixed cooling at Tb. It is meant for small datasets (the smoke study's toy
    task) where prompts come back within a run.

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

Wiring (patch ``patches/verl/0003b-controller-wiring.patch``; the per-row temperature itself is
``0003-per-row-temperature.patch``): the trainer builds the controller
from ``trainer.sampler_temperature_spec``, given in Hydra's override syntax, e.g.
``trainer.sampler_temperature_spec={controller:saturation,start:0.8,kl_gate:true}`` or
``trainer.sampler_temperature_spec={schedule:linear,start:0.8,end:1.0}`` (a Python dict's ``str()``
is not valid there), with ``trainer.total_training_steps`` as the schedule's length. A varying
temperature needs a fixed ``trainer.learner_temperature``. At submission the trainer asks
``temperatures(t, prompt_ids)`` and tags each row; after the step it calls ``observe(t, prompt_ids,
scores, kl)`` with one entry per response and logs what that returns: ``sampler/temperature`` (mean
over the step's prompts), ``sampler/temperature_min``, ``sampler/temperature_max`` and
``sampler/saturated_frac`` (fraction of groups saturated by the controller's rule; ``all_equal``
for controllers without one). It checkpoints ``state_dict()`` as ``sampler_t.pt`` and restores it
on resume through ``resume_state`` (a checkpoint without it warns that the controller starts afresh).

Which step a temperature belongs to: ``temperature(t)`` / ``temperatures(t, ids)`` is what step t's
batch is sampled at; ``update``/``observe`` for step t move step t + 1's. The temperatures
``observe`` reports for step t are those its prompts held before the update, i.e. those they were
sampled at (verl's sync trainer mode submits and trains a batch within one step).
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Protocol, runtime_checkable

from coolsampler.spec.metrics_schema import COLUMNS
from coolsampler.spec.settings import KL_EARLY_NAT, SATURATION_RULES, SCOPES  # noqa: F401 (defined with the run settings)
from coolsampler.spec.temperature import controller_spec

# verl's habit: a module logger at VERL_LOGGING_LEVEL, printed by the handler verl's import installs
logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "INFO"))

# where verl logs the KL: trainer-side (TIS/none), actor-side (bypass); the metrics schema's column names them
KL_METRIC_KEYS = COLUMNS["kl"][2]


@runtime_checkable
class TemperatureController(Protocol):
    """What verl's trainer (patch 0003b) calls: per-prompt temperatures at submission, one
    ``observe`` per step with the step's rewards, and a state to checkpoint."""

    def temperatures(self, step: int, prompt_ids: Sequence[Any]) -> list[float]: ...

    def observe(
        self,
        step: int,
        prompt_ids: Sequence[Any],
        scores: Sequence[float],
        kl: float | None,
        keep: Sequence[bool] | None = None,
    ) -> dict[str, float]: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...


def prompt_key(value: Any) -> str:
    """A prompt id as the controller keys it: verl's ``index`` may arrive as an int, a 0-d tensor,
    a numpy scalar or a string; all become the same text."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def prompt_ids(values: Any) -> list[str]:
    """The prompt ids of a batch column (a tensor, a numpy array, a tensordict stack or a list)."""
    if hasattr(values, "tolist"):
        values = values.tolist()
    return [prompt_key(v) for v in values]


def group_scores(
    prompt_ids: Sequence[Any], scores: Sequence[float], keep: Sequence[bool] | None = None
) -> dict[str, list[float]]:
    """The rewards of each prompt's group (responses sharing a prompt id), in first-seen order.

    ``keep`` drops rows (verl's padding rows)."""
    if len(prompt_ids) != len(scores) or (keep is not None and len(keep) != len(prompt_ids)):
        raise ValueError("prompt_ids, scores and keep must have one entry per response")
    groups: dict[str, list[float]] = {}
    for i, (pid, score) in enumerate(zip(prompt_ids, scores, strict=True)):
        if keep is None or keep[i]:
            groups.setdefault(prompt_key(pid), []).append(float(score))
    return groups


def is_saturated(scores: Sequence[float], rule: str = "all_correct", correct_score: float = 1.0) -> bool:
    """Whether one group is saturated: all rewards >= ``correct_score`` (``all_correct``) or all
    rewards equal (``all_equal``). A lone response is saturated under ``all_equal`` only."""
    if rule == "all_correct":
        return bool(scores) and all(s >= correct_score for s in scores)
    if rule == "all_equal":
        return bool(scores) and min(scores) == max(scores)
    raise ValueError(f"unknown saturation rule {rule!r}; known: {SATURATION_RULES}")


def _check_choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {value!r}")


def _summary(temps: Sequence[float], saturated_frac: float) -> dict[str, float]:
    """The per-step metrics the trainer logs (NaN temperatures when the step had no group)."""
    nan = float("nan")
    return {
        "sampler/temperature": sum(temps) / len(temps) if temps else nan,
        "sampler/temperature_min": min(temps) if temps else nan,
        "sampler/temperature_max": max(temps) if temps else nan,
        "sampler/saturated_frac": saturated_frac,
    }


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
    # the rule sampler/saturated_frac is computed with (the saturation controllers set their own)
    saturated: str = "all_equal"
    correct_score: float = 1.0

    # -- the one-temperature-per-step controllers: the trainer's per-prompt interface on top
    def temperature(self, step: int) -> float:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def update(self, step: int, saturated_frac: float, kl: float | None) -> None:  # pragma: no cover
        raise NotImplementedError

    def temperatures(self, step: int, prompt_ids: Sequence[Any]) -> list[float]:
        """Every prompt of the step at the one temperature of the step."""
        return [self.temperature(step)] * len(prompt_ids)

    def observe(
        self,
        step: int,
        prompt_ids: Sequence[Any],
        scores: Sequence[float],
        kl: float | None,
        keep: Sequence[bool] | None = None,
    ) -> dict[str, float]:
        """Feed step ``step``'s rewards (one per response); return the step's metrics."""
        groups = group_scores(prompt_ids, scores, keep)
        sat = saturated_fraction_of(groups, self.saturated, self.correct_score)
        temp = self.temperature(step)
        self.update(step, sat, kl)
        return _summary([temp] * len(groups), sat)

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
            raise ValueError(f"controller state is for {state.get('kind')!r}, this controller is {self.kind!r}")
        params = self._params()
        if dict(state.get("params", {})) != params:
            raise ValueError(f"controller parameters changed across resume: {state.get('params')} != {params}")
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
    """One run-wide temperature, reheated as GRPO groups saturate; optionally KL-gated
    (``scope: global``, the default: its state carries across prompts, so it can move in a paper run
    that never samples a prompt twice; PerPromptSaturationController is the ``per_prompt`` option).

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
    kl_threshold: float = KL_EARLY_NAT
    saturated: str = "all_correct"
    correct_score: float = 1.0
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
        _check_choice("saturated", self.saturated, SATURATION_RULES)
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
class PerPromptSaturationController(_Stateful):
    """Each prompt carries its own sampler temperature, reheated when its own group saturates
    (``scope: per_prompt``, ``-prompt`` in a run key; Appendix C: "The controller of Appendix A needs
    different prompts in one batch to be sampled at different temperatures."). Optionally KL-gated.

    Not the default: keyed on prompt identity, it moves only for prompts sampled more than once, and
    a 300-step paper run samples no GSM8K or MATH prompt twice. See the module docstring for the rule
    and for which defaults are OUR CHOICE.
    """

    start: float = 0.8
    t_max: float = 1.2
    step_up: float = 0.05
    step_down: float = 0.0
    kl_gate: bool = False
    kl_threshold: float = KL_EARLY_NAT
    saturated: str = "all_correct"
    correct_score: float = 1.0
    # state: the temperature of every prompt seen so far (absent = never seen = start)
    temps: dict[str, float] = field(default_factory=dict)
    last_step: int = 0
    kind = "saturation_per_prompt"
    _state_fields = ("temps", "last_step")

    def __post_init__(self) -> None:
        self.start = _check_temperature("start", self.start)
        self.t_max = _check_temperature("t_max", self.t_max)
        if self.t_max < self.start:
            raise ValueError(f"t_max {self.t_max} is below start {self.start}")
        if self.step_up < 0 or self.step_down < 0:
            raise ValueError("step_up and step_down must be >= 0")
        _check_choice("saturated", self.saturated, SATURATION_RULES)

    def temperature_of(self, prompt_id: Any) -> float:
        """A prompt's current temperature; ``start`` for a prompt never seen."""
        return self.temps.get(prompt_key(prompt_id), self.start)

    def temperatures(self, step: int, prompt_ids: Sequence[Any]) -> list[float]:
        keys = [prompt_key(p) for p in prompt_ids]
        if len(set(keys)) != len(keys):
            raise ValueError(
                "prompt ids repeat within one batch: the per-prompt controller needs a distinct id "
                "per prompt (verl's 'index' column, from the parquet's extra_info.index)"
            )
        return [self.temps.get(k, self.start) for k in keys]

    def observe(
        self,
        step: int,
        prompt_ids: Sequence[Any],
        scores: Sequence[float],
        kl: float | None,
        keep: Sequence[bool] | None = None,
    ) -> dict[str, float]:
        groups = group_scores(prompt_ids, scores, keep)
        sampled = [self.temps.get(k, self.start) for k in groups]  # what this step was sampled at
        saturated = {k: is_saturated(v, self.saturated, self.correct_score) for k, v in groups.items()}
        sat = sum(saturated.values()) / len(groups) if groups else float("nan")
        if self._fresh(step):  # a replayed step (resume) is not counted twice
            gate_closed = self.kl_gate and (kl is None or not math.isfinite(kl) or kl > self.kl_threshold)
            for k, t in zip(groups, sampled, strict=True):
                if saturated[k]:
                    self.temps[k] = t if gate_closed else min(t + self.step_up, self.t_max)
                else:
                    self.temps[k] = max(t - self.step_down, self.start)
        return _summary(sampled, sat)


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


def make_controller(spec: float | int | Mapping[str, Any], total_steps: int | None = None) -> TemperatureController:
    """Build a controller from a temperature spec (``coolsampler.spec.temperature``, ``Temperature.to_config``).

    ``spec`` is a number (fixed), ``{"schedule": "linear", "start", "end"[, "total_steps"]}`` or
    ``{"controller": "saturation" | "kl_cooling", "start", ...}`` where any further key is a parameter
    of that controller (``kl_gate``, ``step_up``, ``t_max``, ``saturated``, ...); for ``saturation``,
    ``scope`` picks ``global`` (default: SaturationController, one run-wide temperature) or
    ``per_prompt`` (PerPromptSaturationController). ``total_steps`` (verl's
    ``trainer.total_training_steps``) is needed by a schedule unless the spec carries it. Unknown keys
    raise, so a misspelt parameter cannot silently fall back to a default.
    """
    kind, spec = controller_spec(spec)  # the one parser of a temperature spec
    if kind == "fixed":
        return FixedTemperature(spec["value"])
    if kind == "linear":
        steps = spec.pop("total_steps", total_steps)
        if steps is None:
            raise ValueError("a linear schedule needs total_steps")
        unknown = set(spec) - {"start", "end"}
        if unknown:
            raise ValueError(f"unknown keys for a linear schedule: {sorted(unknown)}")
        return LinearSchedule(float(spec["start"]), float(spec["end"]), int(steps))
    cls = _CONTROLLERS[kind]
    if kind == "saturation":
        scope = spec.pop("scope", SCOPES[0])
        _check_choice("scope", scope, SCOPES)
        cls = SaturationController if scope == "global" else PerPromptSaturationController
    allowed = {f.name for f in fields(cls)} - set(cls._state_fields)  # type: ignore[arg-type]
    unknown = set(spec) - allowed
    if unknown:
        raise ValueError(f"unknown keys for controller {kind!r}: {sorted(unknown)}; allowed: {sorted(allowed)}")
    return cls(**spec)  # type: ignore[return-value]


def saturated_fraction(
    uids: Sequence[Any],
    scores: Sequence[float],
    keep: Sequence[bool] | None = None,
    rule: str = "all_equal",
    correct_score: float = 1.0,
) -> float:
    """Fraction of groups (responses sharing a prompt uid or id) saturated by ``rule``.

    ``all_equal`` (this function's default): all-correct and all-wrong groups both count, either way
    GRPO's group-normalised advantage is zero, and a group of one response counts for the same
    reason. ``all_correct``: every reward >= ``correct_score``. ``keep`` drops rows (verl's padding
    rows). NaN when there is no group.
    """
    return saturated_fraction_of(group_scores(uids, scores, keep), rule, correct_score)


def saturated_fraction_of(groups: Mapping[str, Sequence[float]], rule: str, correct_score: float = 1.0) -> float:
    """Fraction of ``groups`` (prompt id -> rewards) saturated by ``rule``; NaN when there is none."""
    if not groups:
        return float("nan")
    return sum(is_saturated(v, rule, correct_score) for v in groups.values()) / len(groups)


def resume_state(controller: TemperatureController, path: str, load: Callable[[str], Any]) -> bool:
    """On resume (patch 0003b): the controller's state from the checkpoint's ``sampler_t.pt`` (``load``:
    ``torch.load``, so that this module stays torch-free). A checkpoint without the file was written by a
    run without a controller: it then starts from its start, with a warning, never silently. Whether the
    state was restored."""
    if os.path.exists(path):
        controller.load_state_dict(load(path))
        return True
    logger.warning("sampler temperature: no controller state %s in the checkpoint; the controller starts afresh", path)
    return False


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
    "PerPromptSaturationController",
    "SATURATION_RULES",
    "SCOPES",
    "SaturationController",
    "TemperatureController",
    "kl_from_metrics",
    "linear",
    "group_scores",
    "is_saturated",
    "make_controller",
    "prompt_ids",
    "prompt_key",
    "resume_state",
    "saturated_fraction",
    "saturated_fraction_of",
]
