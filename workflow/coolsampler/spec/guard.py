"""The staleness guard: refresh the sampler when the learner has drifted from it, not every N steps.

The paper refreshes the vLLM sampler's weights after every N-th learner step (patch 0001's staleness
gate). The lead table (``coolsampler.results.diagnostics``) measures which staleness diagnostic warns
first of the degradation onset; the guard acts on that warning, as sequential Monte Carlo resamples
when the effective sample size falls rather than on a fixed clock. A run's ``guard:`` block names

* ``signal``: a diagnostic of the lead table (``coolsampler.spec.diagnostics.DIAGNOSTICS``: its
  metrics column, the direction in which it warns);
* ``threshold``: the level past which it fires (strictly, in the diagnostic's direction);
* ``window``: the trailing median it reads the signal through (default: the lead table's
  ``ROBUST_WINDOW``; 1 for the paper's per-step KL row), counted over the steps since the last refresh;
* ``min``: the fewest steps between two refreshes (default 1);

and the run's ``N`` stays, as the longest interval: the guard refreshes after N steps whatever the
signal says, so a guard run is never staler than the fixed-N run it replaces.

The decision (``RefreshGate.decide``), at the end of learner step t, reads the signal of step t (the
learner's log-probs against the batch the stale sampler drew) and says whether the sampler gets the
learner's weights now:

1. ``since_refresh`` += 1 (the steps trained since the sampler's weights were last pushed, t included);
   the value joins ``window`` (the finite values since the last refresh, the last ``window`` kept);
2. the reading is ``trailing_median(window)``: the median of those values, None until a majority of
   the window is logged (``min_logged``), the lead table's robust reading;
3. refresh when the reading is past the threshold and ``since_refresh >= min`` (reason ``signal``), or
   when ``since_refresh >= N`` (reason ``interval``); a refresh empties the window, because the values
   before it describe a sampler that no longer exists (the lead table's median runs across refreshes:
   it reads a fixed-N run, which the guard does not steer).

``N: {schedule: [s1, s2, ...]}`` is the open-loop twin: the sampler is refreshed at the end of exactly
those steps, which replays a guard run's logged refreshes (``schedule_from_refreshed``) as a fixed
schedule, so "the guard's timing" and "the guard's feedback" can be told apart. Its N (the run key's,
the cost's) is the longest interval the schedule leaves (``longest_interval``).

Contract, the temperature controllers' (``coolsampler.worker.controller``): pure, deterministic from
the sequence of ``decide`` calls (all ranks and a resumed run reach the same decisions from the same
state and signal values), and its whole state is a small JSON-able dict (``state_dict`` /
``load_state_dict``, the parameters checked on resume). A step already decided is answered from the
state, not decided again. Pure Python, in the spec layer: verl's trainer process and the offline
replay (``coolsampler analyze --guard``) run this same code, and it brings neither numpy, pandas nor
torch into verl's process.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from coolsampler.spec import corrections
from coolsampler.spec.diagnostics import (
    BY_NAME,
    ROBUST_WINDOW,
    Diagnostic,
    crossed,
    diagnostic,
    min_logged,
    threshold_text,
    trailing_median,
)
from coolsampler.spec.metrics_schema import ABSENT, LOG1P_OF, pick
from coolsampler.spec.temperature import NUM_RE, num

GUARD_KEYS = ("signal", "threshold", "window", "min")
REASONS = ("signal", "interval", "schedule")

# Longest alternatives first, so that ``kl_median`` is not read as ``kl`` followed by junk.
_SIGNAL_ALTS = "|".join(sorted(BY_NAME, key=len, reverse=True))
GUARD_TOKEN_RE = rf"g(?:{_SIGNAL_ALTS}){NUM_RE}w\d+m\d+"
_GUARD_TOKEN = re.compile(rf"^g(?P<signal>{_SIGNAL_ALTS})(?P<threshold>{NUM_RE})w(?P<window>\d+)m(?P<min>\d+)$")
SCHEDULE_TOKEN_RE = r"sch[0-9a-f]{8}"


def default_window(d: Diagnostic) -> int:
    """The window a guard reads ``d`` through unless told: the lead table's own reading of it (the
    robust median, or each step for the paper's per-step KL row)."""
    return ROBUST_WINDOW if d.robust else 1


@dataclass(frozen=True)
class GuardSpec:
    """A run's ``guard:`` block, validated: which diagnostic, past which level, read how."""

    signal: str
    threshold: float
    window: int
    min: int = 1

    def __post_init__(self) -> None:
        diagnostic(self.signal)  # an unknown name raises, listing the known ones
        if isinstance(self.threshold, bool) or not math.isfinite(float(self.threshold)) or self.threshold <= 0:
            raise ValueError(f"guard.threshold: {self.threshold!r} is not valid; allowed: a finite number > 0")
        for name in ("window", "min"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"guard.{name}: {value!r} is not valid; allowed: an integer >= 1")
        object.__setattr__(self, "threshold", float(self.threshold))

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> GuardSpec:
        """From the study's mapping; ``window`` and ``min`` default as the module docstring says."""
        unknown = sorted(set(cfg) - set(GUARD_KEYS))
        if unknown:
            raise ValueError(f"guard.{unknown[0]}: unknown key; allowed keys here: {', '.join(GUARD_KEYS)}")
        for need in ("signal", "threshold"):
            if need not in cfg:
                raise ValueError(f"guard.{need}: missing; required keys here: signal, threshold")
        signal = cfg["signal"]
        if signal not in BY_NAME:
            raise ValueError(f"guard.signal: {signal!r} is not valid; allowed: {', '.join(BY_NAME)}")
        d = BY_NAME[signal]
        return cls(signal, cfg["threshold"], cfg.get("window", default_window(d)), cfg.get("min", 1))

    def to_config(self) -> dict[str, Any]:
        """The mapping a study writes (every field, so that run.yaml says what was read)."""
        return {"signal": self.signal, "threshold": self.threshold, "window": self.window, "min": self.min}

    @property
    def diagnostic(self) -> Diagnostic:
        return BY_NAME[self.signal]

    def token(self) -> str:
        """The run key's token: ``gprobs_diff0.1w5m1`` (signal, threshold, window, min; all written)."""
        return f"g{self.signal}{num(self.threshold)}w{self.window}m{self.min}"

    def text(self) -> str:
        """For people: ``probs_diff > 0.1, median of 5 since refresh, min 1``."""
        d = self.diagnostic
        reads = "each step" if self.window == 1 else f"median of {self.window} since refresh"
        return f"{d.name} {'>' if d.above else '<'} {threshold_text(self.threshold)}, {reads}, min {self.min}"

    def crossed(self, reading: float | None) -> bool:
        return crossed(self.diagnostic, reading, self.threshold)


def parse_guard_token(token: str) -> GuardSpec:
    """Inverse of ``GuardSpec.token``; a ValueError names a token that does not parse."""
    m = _GUARD_TOKEN.match(token)
    if not m:
        raise ValueError(f"guard token {token!r} does not parse (expected g<signal><threshold>w<window>m<min>)")
    return GuardSpec(m["signal"], float(m["threshold"]), int(m["window"]), int(m["min"]))


def parse_guard_condition(text: str) -> GuardSpec:
    """``'probs_diff>0.1'`` or ``'ess<0.5'`` (the command line's form) -> a GuardSpec at the default
    window and min. The comparison must be the diagnostic's own direction."""
    m = re.fullmatch(r"\s*([a-z0-9_]+)\s*([<>])\s*([0-9.eE+-]+)\s*", text)
    if not m:
        raise ValueError(f"guard {text!r} does not parse; allowed: SIGNAL>THRESHOLD or SIGNAL<THRESHOLD")
    name, op, value = m.groups()
    if name not in BY_NAME:
        raise ValueError(f"guard signal {name!r} is not valid; allowed: {', '.join(BY_NAME)}")
    d = BY_NAME[name]
    want = ">" if d.above else "<"
    if op != want:
        raise ValueError(f"guard {text!r}: {name} warns when it {'rises' if d.above else 'falls'}; write {name}{want}")
    try:
        threshold = float(value)
    except ValueError:
        raise ValueError(f"guard {text!r}: {value!r} is not a number") from None
    return GuardSpec(name, threshold, default_window(d))


# --------------------------------------------------------------------------------------------------
# Schedules


def check_schedule(schedule: Iterable[int], steps: int | None = None) -> tuple[int, ...]:
    """A refresh schedule as a tuple: strictly increasing steps >= 1 (and <= ``steps`` when given).
    A ValueError says what is wrong in one line."""
    out = tuple(schedule)
    for s in out:
        if isinstance(s, bool) or not isinstance(s, int) or s < 1:
            raise ValueError(f"N.schedule: {s!r} is not valid; allowed: steps, integers >= 1")
    if not out:
        raise ValueError("N.schedule: empty; allowed: a non-empty list of steps")
    for a, b in zip(out, out[1:], strict=False):
        if b <= a:
            raise ValueError(f"N.schedule: {b} follows {a}; allowed: strictly increasing steps")
    if steps is not None and out[-1] > steps:
        raise ValueError(f"N.schedule: step {out[-1]} is past the run's {steps} steps; allowed: 1..{steps}")
    return out


def longest_interval(schedule: Iterable[int], steps: int) -> int:
    """The most steps a schedule lets the sampler go without a refresh, from the start to the end of a
    run of ``steps``: what N means for a fixed gate, and what a schedule run is keyed and costed at."""
    points = [0, *check_schedule(schedule, steps), steps]
    return max(b - a for a, b in zip(points, points[1:], strict=False))


def schedule_from_refreshed(refreshed: Mapping[int, Any] | Iterable[tuple[int, Any]]) -> tuple[int, ...]:
    """The steps at whose end the sampler was refreshed, from a log's ``staleness/refreshed`` per step
    (step -> flag, or (step, flag) pairs; a missing or null flag is no refresh): the ``N: {schedule:
    [...]}`` that replays a guard run open loop."""
    items = refreshed.items() if isinstance(refreshed, Mapping) else refreshed
    return tuple(sorted(int(step) for step, flag in items if flag is not None and flag == flag and bool(flag)))


def schedule_token(schedule: Iterable[int]) -> str:
    """The run key's token for a schedule: ``sch`` + a hash of its steps (a schedule is too long for a
    directory name; the study that lists the run holds it, as it holds extra verl overrides)."""
    text = ",".join(str(s) for s in check_schedule(schedule))
    return "sch" + hashlib.sha256(text.encode()).hexdigest()[:8]


# --------------------------------------------------------------------------------------------------
# What a guard can do within its run's N


def check_guard_fits(spec: GuardSpec, N: int) -> None:
    """A ValueError (one line, ``guard.<key>: ...``) for a guard that cannot act as a guard at interval
    ``N``: one whose first possible signal refresh, at ``max(min, min_logged(window))`` steps since the
    last refresh (``RefreshGate.decide``), comes no earlier than the N-th step, where the interval
    refreshes anyway, so the run trains exactly as fixed N under a key and a cost that name a guard; and
    one whose threshold lies outside the values its signal can take (``Diagnostic.bounds``), so that it
    fires at every reading (the run becomes fixed ``min``) or at none (fixed N)."""
    need = min_logged(spec.window)
    if spec.min > N:
        raise ValueError(f"guard.min: {spec.min} exceeds N {N}; allowed: 1..N (N is the longest interval)")
    if need >= N:
        raise ValueError(
            f"guard.window: {spec.window} needs {need} readings since the last refresh before it is read,"
            f" and N {N} refreshes by then; allowed: a window of at most {2 * N - 3} (its median needs"
            " window//2+1 readings) or a larger N"
            if N > 1
            else f"guard.window: a guard at N {N} never refreshes before the interval does; allowed: N >= 2"
        )
    if spec.min == N:
        raise ValueError(
            f"guard.min: {spec.min} equals N {N}: the guard could refresh only when the interval does;"
            f" allowed: 1..{N - 1}"
        )
    d = spec.diagnostic
    low, high = d.bounds
    t, op = spec.threshold, ">" if d.above else "<"
    fires = None
    if high is not None and (t >= high if d.above else t > high):
        fires = "no" if d.above else "every"
    elif low is not None and (t < low if d.above else t <= low):
        fires = "every" if d.above else "no"
    if fires is not None:
        lo = "-inf" if low is None else threshold_text(low)
        hi = "inf" if high is None else threshold_text(high)
        inside = f"({lo}, {hi})" if d.above else f"({lo}, {hi}]"
        raise ValueError(
            f"guard.threshold: {threshold_text(t)} is outside the values {d.name} takes ({lo}..{hi}), so"
            f" '{d.name} {op} {threshold_text(t)}' holds at {fires} reading; allowed: a threshold in {inside}"
        )


# --------------------------------------------------------------------------------------------------
# Which signals a correction logs


def check_signal_logged(signal: str, correction: str | None) -> None:
    """A ValueError (one line) when ``correction``'s runs never log the guard's ``signal`` (its registry
    entry's ``unlogged``, ``coolsampler.spec.corrections``): a guard on such a signal would never read a
    value and refresh every N steps under a key that names a guard, so the pairing is refused."""
    c = corrections.get(correction)
    if c is not None and signal in c.unlogged:
        allowed = ", ".join(n for n in BY_NAME if n not in c.unlogged)
        raise ValueError(
            f"guard.signal: {signal} is not logged under correction {correction}; allowed with it: {allowed}"
        )


# --------------------------------------------------------------------------------------------------
# The signal of one step, from verl's metrics dict


def signal_value(metrics: Mapping[str, Any], signal: str) -> float | None:
    """The step's value of a guard signal from verl's metrics dict (the keys verl logs,
    ``coolsampler.spec.metrics_schema.COLUMNS``; the reverse-KL bounds are log1p of verl's chi^2, as the
    parser computes them). None when the step did not log it or logged a non-number."""
    column = diagnostic(signal).column
    source = LOG1P_OF.get(column)
    value = pick(dict(metrics), source or column)
    if value is ABSENT or value is None:
        return None
    try:
        x = float(value.item() if hasattr(value, "item") else value)
    except (TypeError, ValueError):
        return None
    if source is not None:
        x = math.log1p(x) if x > -1 else math.nan
    return x if math.isfinite(x) else None


# --------------------------------------------------------------------------------------------------
# The gate


def staleness(step: int, sampler_version: int) -> int:
    """The staleness of learner step ``step`` (1-based): the learner updates the sampler that drew its
    batch is behind, ``step - 1 - sampler_version`` (0 on fresh weights; ``(step - 1) mod N`` under a
    fixed N, "up to N-1 steps old"). The one definition: the trainer logs it (``staleness/staleness``)
    and the claims measure it at an onset."""
    return int(step) - 1 - int(sampler_version)


def gate_active(N: int, guard: Any = None, schedule: Any = None) -> bool:
    """Whether a gate of these settings ever keeps a stale sampler, so that the trainer must keep one
    (a level-1 sleep, a host snapshot): N > 1, a guard or a schedule. An inactive gate refreshes after
    every step: verl's own behaviour."""
    return int(N) > 1 or guard is not None or schedule is not None


@dataclass(frozen=True)
class Decision:
    """What ``decide`` says about one step: refresh now or not, why, and the reading it compared."""

    step: int
    refresh: bool
    reason: str | None  # one of REASONS when refresh, else None
    reading: float | None  # the trailing median (None: not enough values, or no guard)
    since_refresh: int  # steps trained on the current sampler weights, this one included


@dataclass
class RefreshGate:
    """When the sampler gets the learner's weights: every ``N`` steps, or by a ``guard``, or at the
    steps of a ``schedule`` (at most one of guard and schedule; see the module docstring).

    State (``state_dict()["state"]``): ``last_step`` (the last step decided, 0 = none),
    ``since_refresh``, ``window`` (finite signal values since the last refresh, the last ``window``),
    ``refreshes`` (count so far), ``sampler_version`` (the learner step whose weights the sampler holds,
    0 = the initial ones) and ``last`` (the last decision as ``{"refresh", "reason", "reading",
    "since_refresh"}``, None before the first: a replayed step is answered from it).
    """

    N: int
    guard: GuardSpec | None = None
    schedule: tuple[int, ...] | None = None
    last_step: int = 0
    since_refresh: int = 0
    window: list[float] = field(default_factory=list)
    refreshes: int = 0
    sampler_version: int = 0
    last: dict[str, Any] | None = None

    kind = "refresh_gate"
    _state_fields = ("last_step", "since_refresh", "window", "refreshes", "sampler_version", "last")

    def __post_init__(self) -> None:
        if isinstance(self.N, bool) or not isinstance(self.N, int) or self.N < 1:
            raise ValueError(f"N: {self.N!r} is not valid; allowed: an integer >= 1")
        if self.guard is not None and self.schedule is not None:
            raise ValueError("a run has a guard or a schedule, not both")
        if self.guard is not None and self.guard.min > self.N:
            raise ValueError(f"guard.min: {self.guard.min} exceeds N {self.N}; allowed: 1..N")
        if self.schedule is not None:
            self.schedule = check_schedule(self.schedule)

    def decide(self, step: int, value: float | None = None) -> Decision:
        """At the end of learner step ``step`` (1-based), given that step's signal value (None: not
        logged), whether the sampler is refreshed now. Deterministic from (state, step, value).

        A step at or before the last one decided changes nothing: the last one is answered as it was
        decided (a resumed run may replay it), an older one raises (its decision is no longer held)."""
        step = int(step)
        if step == self.last_step and self.last is not None:
            return Decision(step, **self.last)
        if step <= self.last_step or step < 1:
            raise ValueError(f"step {step} is not after the last decided step {self.last_step}")
        self.since_refresh += 1
        reading: float | None = None
        reason: str | None = None
        if self.schedule is not None:
            reason = "schedule" if step in self.schedule else None
        else:
            if self.guard is not None:
                if value is not None and math.isfinite(float(value)):
                    self.window = [*self.window, float(value)][-self.guard.window :]
                reading = trailing_median(self.window, self.guard.window)
                if self.guard.crossed(reading) and self.since_refresh >= self.guard.min:
                    reason = "signal"
            if reason is None and self.since_refresh >= self.N:
                reason = "interval"
        decision = Decision(step, reason is not None, reason, reading, self.since_refresh)
        self.last_step = step
        self.last = {
            "refresh": decision.refresh,
            "reason": reason,
            "reading": reading,
            "since_refresh": decision.since_refresh,
        }
        if decision.refresh:
            self.refreshes += 1
            self.sampler_version = step
            self.since_refresh = 0
            self.window = []
        return decision

    @property
    def active(self) -> bool:
        """``gate_active`` of this gate's settings."""
        return gate_active(self.N, self.guard, self.schedule)

    def fresh_at(self, step: int) -> None:
        """The state of an inactive gate after ``step``, which it needs no file to know: every step
        refreshed, so the sampler holds that step's weights (a resume at interval 1 from a checkpoint
        without the gate's state, e.g. one of upstream verl)."""
        if self.active:
            raise ValueError("only an inactive gate (N 1, no guard, no schedule) knows its state without a file")
        step = int(step)
        self.last_step, self.since_refresh, self.window = step, 0, []
        self.refreshes, self.sampler_version = step, step
        self.last = {"refresh": True, "reason": "interval", "reading": None, "since_refresh": 1} if step else None

    def params(self) -> dict[str, Any]:
        """What must not change across a resume."""
        return {
            "N": self.N,
            "guard": self.guard.to_config() if self.guard is not None else None,
            "schedule": list(self.schedule) if self.schedule is not None else None,
        }

    def state_dict(self) -> dict[str, Any]:
        """``{"kind", "params", "state"}``, JSON-able (lists, numbers, strings, None)."""
        state = {name: getattr(self, name) for name in self._state_fields}
        state["window"] = list(self.window)
        state["last"] = dict(self.last) if self.last is not None else None
        return {"kind": self.kind, "params": self.params(), "state": state}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore exactly; a state of other parameters (a changed guard, N or schedule) raises."""
        if state.get("kind") != self.kind:
            raise ValueError(f"refresh gate state is for {state.get('kind')!r}, this is {self.kind!r}")
        if dict(state.get("params", {})) != self.params():
            raise ValueError(f"refresh gate parameters changed across resume: {state.get('params')} != {self.params()}")
        for name in self._state_fields:
            value = state["state"][name]
            if name == "window":
                value = [float(v) for v in value]
            elif name == "last" and value is not None:
                value = dict(value)
            setattr(self, name, value)


def make_gate(
    N: int, guard: GuardSpec | Mapping[str, Any] | None = None, schedule: Iterable[int] | None = None
) -> RefreshGate:
    """A gate from a run's settings: ``N`` (the longest interval), its ``guard`` block or its schedule."""
    if guard is not None and not isinstance(guard, GuardSpec):
        guard = GuardSpec.from_config(guard)
    return RefreshGate(int(N), guard, tuple(schedule) if schedule is not None else None)


__all__ = [
    "GUARD_KEYS",
    "GUARD_TOKEN_RE",
    "REASONS",
    "SCHEDULE_TOKEN_RE",
    "Decision",
    "GuardSpec",
    "RefreshGate",
    "check_guard_fits",
    "check_schedule",
    "check_signal_logged",
    "default_window",
    "gate_active",
    "longest_interval",
    "make_gate",
    "parse_guard_condition",
    "parse_guard_token",
    "schedule_from_refreshed",
    "schedule_token",
    "signal_value",
    "staleness",
]
