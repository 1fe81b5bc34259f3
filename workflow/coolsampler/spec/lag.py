"""The lag vocabulary: how stale the samples of a learner step were, in one set of words for every trainer.

The paper makes the sampler stale with a gate (weights pushed every N steps, so the lag of step t is
(t-1) mod N); an asynchronous trainer's lag is a distribution that it may or may not measure, and each
project measures it its own way: from the newest policy version a sample used or the oldest, from when the
request was dispatched, per token or per sample, in versions or in optimizer steps. A number is only
comparable across runs once it says which. So the metrics table has one set of lag columns (``LAG_COLUMNS``:
mean, max and min over the step's samples, in optimizer steps, and the samples dropped for staleness), and
every run records once, beside its table, what kind of lag those columns hold (``Lag``): the kind
(``LAG_KINDS``), the policy the mismatch keys compare the sampler with, whether a logged importance ratio is
before or after its truncation, and, where the system logs no lag at all, the configured bound on it, which is
a ceiling and never a measurement.

Pure Python: the light install reads every system's logs with it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

# The metrics table's lag columns (coolsampler.spec.metrics_schema.COLUMNS holds their dtype and meaning).
LAG_COLUMNS = ("lag_mean", "lag_max", "lag_min", "lag_drops")

# The unit of every lag column: a learner (optimizer) step. A system that counts policy versions, of which a
# step makes one or several, is converted by its mapping's factor (coolsampler.results.sources).
LAG_UNIT = "optimizer steps"


@dataclass(frozen=True)
class LagKind:
    """What a lag is measured from: ``text`` says it in a sentence the report prints."""

    name: str
    text: str
    measured: bool = True  # False: a configured bound, not a reading


LAG_KINDS: dict[str, LagKind] = {
    k.name: k
    for k in (
        LagKind(
            "gate",
            "steps since the sampler's weights were pushed (t - 1 - sampler version; (t-1) mod N under a fixed N)",
        ),
        LagKind(
            "newest", "the learner's step minus the newest policy version a sample used (t - 1 - its newest version)"
        ),
        LagKind(
            "oldest", "the learner's step minus the oldest policy version a sample used (a response spanning versions)"
        ),
        LagKind("dispatch", "the learner's step minus the step at which the sample's request was dispatched"),
        LagKind("token", "per token: the learner's version minus the version that generated the token, averaged"),
        LagKind("bound", "no lag logged: the configured bound on it (a ceiling, never a measurement)", measured=False),
    )
}

# The policy a system's mismatch keys compare the sampler with, and where a logged ratio sits against its cap.
COMPARED = {
    "pi_old": "the learner's log-probs of this step before its update (pi_old, the proximal policy)",
    "pi_theta": "the learner's log-probs as it updates within the step (pi_theta)",
    "mixed": "pi_old or pi_theta, as the run's configuration chose",
    "unknown": "not said by the system's code",
}
TRUNCATION = {
    "before": "logged before its truncation (the raw ratio)",
    "after": "logged after its truncation (capped)",
    "none": "no importance ratio logged",
}


@dataclass(frozen=True)
class Lag:
    """A run's lag, said once: what its lag columns hold (``kind``; None: no lag at all) and how its
    mismatch keys read. ``bound``: the configured bound on the lag (``bound_from`` names the setting and
    where it was read): the lag itself where the system logs none (kind ``bound``), else the ceiling beside
    the measured lag; never shown as a measured lag."""

    kind: str | None
    compared: str = "pi_old"
    truncation: str = "none"
    bound: float | None = None
    bound_from: str | None = None

    def __post_init__(self) -> None:
        if self.kind is not None and self.kind not in LAG_KINDS:
            raise ValueError(f"lag kind {self.kind!r}: allowed {', '.join(LAG_KINDS)}")
        if self.compared not in COMPARED:
            raise ValueError(f"compared policy {self.compared!r}: allowed {', '.join(COMPARED)}")
        if self.truncation not in TRUNCATION:
            raise ValueError(f"truncation {self.truncation!r}: allowed {', '.join(TRUNCATION)}")
        if self.kind == "bound" and self.bound is None:
            raise ValueError("a lag of kind 'bound' needs its bound")
        if self.kind is None and self.bound is not None:
            raise ValueError("a bound needs a lag kind ('bound' where the lag itself is not logged)")

    @property
    def measured(self) -> bool:
        return self.kind is not None and LAG_KINDS[self.kind].measured

    def text(self) -> str:
        """The one sentence a report prints about the run's lag."""
        if self.kind is None:
            return "no lag in the log, and no configured bound read"
        if self.kind == "bound":
            bound = f"{self.bound:g} {LAG_UNIT} ({self.bound_from})"
            return f"not logged; configured bound {bound}, a ceiling, not a measurement"
        text = f"{LAG_KINDS[self.kind].text}, in {LAG_UNIT}"
        return text if self.bound is None else f"{text}; configured bound {self.bound:g} ({self.bound_from})"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


GATE = Lag("gate")
