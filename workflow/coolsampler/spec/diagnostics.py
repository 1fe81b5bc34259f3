"""The lead table's diagnostics, defined once: their metrics columns, directions, thresholds and reading.

Why in the spec layer: two readers need the same definitions. The lead table
(``coolsampler.results.diagnostics``) asks which diagnostic crosses first in a logged run; the
staleness guard (``coolsampler.spec.guard``) refreshes the sampler when one crosses, in verl's trainer
process and in the offline replay. The guard must not bring numpy, pandas or the analysis into verl's
process, so the definitions and the robust reading live here, in pure Python; the lead table reads
them from here and applies the same reading to a whole series with pandas.

Every threshold is a *choice*, named below with the reason for it (see the lead table's module for
how the leads are computed and compared).

Imports only ``coolsampler.spec.settings`` of the package (the KL level), and no heavy stack.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from coolsampler.spec.settings import KL_LEAD_NAT

ROBUST_WINDOW = 5
"""Steps in the trailing rolling median through which a diagnostic is read (at least 3 of them logged).

Trailing, so that the reading at step t uses only steps <= t: a warning cannot look ahead. Five
steps need three above the threshold (a majority) before a crossing counts, so one step that a few
tokens dominate cannot fire it; on a sustained rise it costs at most two steps, small against the
paper's leads of 9-79 steps.
"""
ROBUST_MIN_STEPS = ROBUST_WINDOW // 2 + 1  # min_logged(ROBUST_WINDOW)

KL_NATS = KL_LEAD_NAT
"""The paper's alarm level for the forward KL (Table 2: "first step with learner-sampler KL above one
nat per token"): the level Table 2's lead is measured from (``coolsampler.spec.settings`` owns it), used
for the forward KL read either way and for k3, its other estimator."""
KL_RANGE = (0.5, 1.0, 2.0)

RKL_TOKEN_NATS = 1.0
"""log(1 + chi2_token) > 1 nat: the bound on the learner's reverse KL per token reaches the level the
paper reads in the forward direction, so the two directions are compared on one scale. The bound is
loose: for a Gaussian log-ratio, log(1 + chi^2) is about twice the KL, so it crosses early by design."""
RKL_TOKEN_RANGE = (0.5, 1.0, 2.0)

RKL_SEQ_NATS = math.log(100.0)
"""log(1 + chi2_seq) > log 100: the second moment of the sequence weights is 100 times their square
mean, so an importance-weighted batch of 100 responses counts as about one (the paper's batch is
16 x 8 = 128 responses, the smoke study's 8 x 8 = 64): per-response weighting has lost the batch."""
RKL_SEQ_RANGE = (math.log(10.0), math.log(100.0), math.log(1000.0))

ESS_FRACTION = 0.5
"""Effective sample size of the capped token weights below half the tokens: the resampling trigger of
sequential Monte Carlo (resample when ESS < N/2), the field's usual reading of "the weights have
degenerated". Logged only where verl applies IS weights (correction tis)."""
ESS_RANGE = (0.3, 0.5, 0.7)

WEIGHT_FRACTION = 0.05
"""More than one token in twenty with a raw IS weight beyond the cap (above it, or below its inverse):
the truncation, meant for rare tokens, now acts on a visible share of every batch."""
WEIGHT_FRACTION_RANGE = (0.02, 0.05, 0.1)

LOG_PPL_NATS = 1.0
"""Mean |log-perplexity gap| per response above 1 nat per token: the forward KL's level, weighted by
response instead of by token, so a few long responses cannot carry it."""
LOG_PPL_RANGE = (0.5, 1.0, 2.0)

PROBS_DIFF = 0.1
"""Mean |pi(y_t) - q(y_t)| above 0.1: the learner's and the sampler's probabilities of the tokens drawn
differ by a tenth on average, a gap that no numerical difference between the two engines explains."""
PROBS_DIFF_RANGE = (0.05, 0.1, 0.2)


@dataclass(frozen=True)
class Diagnostic:
    """One row of the lead table: a metrics column, which way it warns, its threshold and how it is read.

    ``sensitivity``: the thresholds the lead is also computed at, ascending, the chosen one among
    them. ``robust``: read through the trailing rolling median (``ROBUST_WINDOW``), else per step.
    """

    name: str
    column: str
    label: str
    unit: str
    above: bool
    threshold: float
    sensitivity: tuple[float, ...]
    robust: bool = True
    # The values the signal can take, (low, high), None where unbounded: a guard threshold outside them
    # fires at every reading or at none (coolsampler.spec.guard.check_guard_fits).
    bounds: tuple[float | None, float | None] = (None, None)

    @property
    def reads(self) -> str:
        return f"median of {ROBUST_WINDOW} steps" if self.robust else "per step"

    def condition(self, threshold: float | None = None) -> str:
        """'> 1 nat', '< 0.5': the crossing, as the tables print it."""
        t = self.threshold if threshold is None else threshold
        return f"{'>' if self.above else '<'} {threshold_text(t)}{(' ' + self.unit) if self.unit else ''}"


def threshold_text(t: float) -> str:
    """A threshold as the tables print it: 1, 0.05, 4.61."""
    return f"{t:.3g}"


# The lead table's rows, in the order it prints them: the paper's own reading first.
# Bounds: k1 and the log(1 + chi^2) bounds are estimates over the sampled tokens and may fall below 0;
# k3 and an absolute gap are >= 0; the ESS fraction 1 / mean((w / mean w)^2) is in (0, 1] (Jensen);
# a fraction of tokens and a gap of probabilities are in [0, 1].
DIAGNOSTICS: tuple[Diagnostic, ...] = (
    Diagnostic("kl", "kl", "forward KL k1 (the paper's)", "nat", True, KL_NATS, KL_RANGE, robust=False),
    Diagnostic("kl_median", "kl", "forward KL k1", "nat", True, KL_NATS, KL_RANGE),
    Diagnostic("k3", "k3_kl", "forward KL k3", "nat", True, KL_NATS, KL_RANGE, bounds=(0.0, None)),
    Diagnostic("rkl_token", "rkl_bound_token", "reverse-KL bound log(1+chi2_token)", "nat", True, RKL_TOKEN_NATS,
               RKL_TOKEN_RANGE),
    Diagnostic("rkl_seq", "rkl_bound_seq", "reverse-KL bound log(1+chi2_seq)", "nat/response", True, RKL_SEQ_NATS,
               RKL_SEQ_RANGE),
    Diagnostic("ess", "is_ess", "IS effective sample size", "", False, ESS_FRACTION, ESS_RANGE, bounds=(0.0, 1.0)),
    Diagnostic("is_high", "is_cap_frac", "tokens with IS weight above the cap", "", True, WEIGHT_FRACTION,
               WEIGHT_FRACTION_RANGE, bounds=(0.0, 1.0)),
    Diagnostic("is_low", "is_low_frac", "tokens with IS weight below 1/cap", "", True, WEIGHT_FRACTION,
               WEIGHT_FRACTION_RANGE, bounds=(0.0, 1.0)),
    Diagnostic("log_ppl", "log_ppl_abs_diff", "log-perplexity gap per response (abs.)", "nat", True, LOG_PPL_NATS,
               LOG_PPL_RANGE, bounds=(0.0, None)),
    Diagnostic("probs_diff", "probs_diff_mean", "token probability gap, mean of abs(pi - q)", "", True, PROBS_DIFF,
               PROBS_DIFF_RANGE, bounds=(0.0, 1.0)),
)  # fmt: skip
BY_NAME: dict[str, Diagnostic] = {d.name: d for d in DIAGNOSTICS}

LAG_STEPS = 8.0
"""A sample more than 8 learner steps older than the learner: verl 0.9.1's own default bound on the lag
(trainer.v1.sampler.max_off_policy_threshold: 8, trainer/config/ppo_trainer.yaml), and prime-rl's
(orchestrator.max_off_policy_steps: 8): past it, the trainers themselves call a sample too stale."""
LAG_RANGE = (4.0, 8.0, 16.0)

# The lag as a candidate warning, beside the mismatch diagnostics, in the lead tables of one's own logs: read
# per step (a lag is a count, not a batch mean). Not a guard signal: a guard on the lag is a refresh interval.
LAG = Diagnostic("lag", "lag_max", "lag, the step's oldest sample", "steps", True, LAG_STEPS, LAG_RANGE, robust=False,
                 bounds=(0.0, None))  # fmt: skip
LEAD_DIAGNOSTICS: tuple[Diagnostic, ...] = (*DIAGNOSTICS, LAG)
LEAD_BY_NAME: dict[str, Diagnostic] = {d.name: d for d in LEAD_DIAGNOSTICS}  # what a lead table's row names


def diagnostic(name: str) -> Diagnostic:
    """The diagnostic called ``name``; an unknown name is a ValueError listing the known ones."""
    if name not in BY_NAME:
        raise ValueError(f"unknown diagnostic {name!r} (known: {', '.join(BY_NAME)})")
    return BY_NAME[name]


def min_logged(window: int) -> int:
    """How many logged values a trailing median of ``window`` needs before it is read: a majority, so
    that one step that a few tokens dominate cannot decide it (``ROBUST_MIN_STEPS`` for the lead
    table's window)."""
    return int(window) // 2 + 1


def trailing_median(values: Iterable[float | None], window: int) -> float | None:
    """The robust reading at the last of ``values``: the median of the last ``window`` finite ones,
    None while fewer than ``min_logged(window)`` are there.

    The same reading as the lead table's pandas rolling median (NaN dropped, then ``window`` rows, at
    least ``ROBUST_MIN_STEPS``), written without pandas for verl's trainer process; a test checks that
    the two agree.
    """
    finite = [float(v) for v in values if v is not None and math.isfinite(float(v))][-int(window) :]
    if len(finite) < min_logged(window):
        return None
    finite.sort()
    mid = len(finite) // 2
    return finite[mid] if len(finite) % 2 else (finite[mid - 1] + finite[mid]) / 2.0


def crossed(d: Diagnostic, value: float | None, threshold: float | None = None) -> bool:
    """Whether a reading is strictly past the threshold in the diagnostic's direction (``>`` for one
    that rises with the mismatch, ``<`` for one that falls); a missing reading never is."""
    if value is None or not math.isfinite(value):
        return False
    t = d.threshold if threshold is None else float(threshold)
    return value > t if d.above else value < t


__all__ = [
    "BY_NAME",
    "DIAGNOSTICS",
    "LAG",
    "LEAD_BY_NAME",
    "LEAD_DIAGNOSTICS",
    "ESS_FRACTION",
    "KL_NATS",
    "LOG_PPL_NATS",
    "PROBS_DIFF",
    "RKL_SEQ_NATS",
    "RKL_TOKEN_NATS",
    "ROBUST_MIN_STEPS",
    "ROBUST_WINDOW",
    "WEIGHT_FRACTION",
    "Diagnostic",
    "crossed",
    "diagnostic",
    "min_logged",
    "threshold_text",
    "trailing_median",
]
