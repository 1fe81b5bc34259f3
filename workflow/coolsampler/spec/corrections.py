"""The corrections a run may train with: one entry each, and every module that treats them asks here.

A correction is what stands between a stale sampler's samples and the learner's update: verl's
truncated importance sampling, nothing, or a policy loss of its own. The run keys, the study schema's
enum (a test holds them equal), the verl overrides, the guard's signal check, the metrics table, the
tables' order and labels and the figures' colours and line styles all read this registry, so adding a
correction is one entry here and, where it brings a new policy loss, that loss in
``coolsampler.worker.losses`` (verl registers a loss by the name the entry's overrides select).

Nothing here imports verl, vLLM or torch: the worker, the pipeline and the analysis all read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

ROLLOUT_IS = "algorithm.rollout_correction.rollout_is"
BYPASS_MODE = "algorithm.rollout_correction.bypass_mode"
LOSS_MODE = "actor_rollout_ref.actor.policy_loss.loss_mode"


@dataclass(frozen=True)
class FromRecipe:
    """An override value read from the paper's recipe (``coolsampler.spec.settings.PAPER_RECIPE``)."""

    key: str


@dataclass(frozen=True)
class Signal:
    """A metrics-table column that only this correction's runs log: its dtype, its description and the
    verl metric keys it is read from (``coolsampler.spec.metrics_schema.COLUMNS``), and how a figure
    draws it (line style and legend text)."""

    column: str
    description: str
    keys: tuple[str, ...]
    linestyle: str
    legend: str


@dataclass(frozen=True)
class Correction:
    """One correction. ``overrides`` are verl's Hydra keys for it (a ``FromRecipe`` value reads the
    recipe); ``unlogged`` the guard signals (``coolsampler.spec.diagnostics``) its runs never log, so a
    guard on one is refused; ``signals`` the metrics columns only it logs. ``colour`` None draws its runs
    in their sampler temperature's colour; ``dashed`` says when a line is dashed: "never", "always" or
    "cooled" (a sampler below 1 at the start)."""

    name: str
    label: str  # figure legends and notes
    table_label: str  # Table 4's 'Correction' column
    order: int  # the tables' order of corrections (Appendix D: TIS first)
    overrides: Mapping[str, Any]
    is_weights: bool  # verl applies IS weights (its rollout_corr/rollout_is_* rows exist)
    unlogged: tuple[str, ...] = ()
    signals: tuple[Signal, ...] = ()
    colour: str | None = None
    dashed: str = "never"
    description: str = field(default="", compare=False)

    @property
    def bypass(self) -> bool:
        """Bypass mode: the learner's old-log-prob pass is skipped (old log-prob := the sampler's)."""
        return self.overrides.get(BYPASS_MODE) is True

    @property
    def loss(self) -> str | None:
        """The verl policy loss it selects (registered in ``coolsampler.worker.losses``), None for verl's own."""
        return self.overrides.get(LOSS_MODE)

    @property
    def corrects(self) -> bool:
        """It changes the update at all: IS weights or a policy loss of its own (not 'none')."""
        return self.is_weights or self.loss is not None

    def verl_overrides(self, recipe: Mapping[str, Any]) -> dict[str, Any]:
        return {k: recipe[v.key] if isinstance(v, FromRecipe) else v for k, v in self.overrides.items()}

    def is_dashed(self, tb_initial: float) -> bool:
        return self.dashed == "always" or (self.dashed == "cooled" and tb_initial < 1.0)


_MU_GRPO_KEYS = "actor/mu_grpo"  # the loss's metrics, under actor/ (coolsampler.worker.losses)

# Registry order is the order run keys, schemas and messages list the corrections in.
_REGISTRY: dict[str, Correction] = {}


def register(correction: Correction) -> Correction:
    """Add ``correction`` to the registry (a name taken already is a ValueError)."""
    if correction.name in _REGISTRY:
        raise ValueError(f"correction {correction.name!r} is registered already")
    _REGISTRY[correction.name] = correction
    return correction


def unregister(name: str) -> None:
    """Remove a correction registered by ``register`` (tests that register one of their own)."""
    _REGISTRY.pop(name, None)


register(
    Correction(
        name="tis",
        label="TIS",
        table_label="TIS",
        order=0,
        overrides={ROLLOUT_IS: "token", "algorithm.rollout_correction.rollout_is_threshold": FromRecipe("tis_cap")},
        is_weights=True,
        description="token-level truncated importance sampling min(pi/q, cap), verl's rollout_correction",
    )
)
register(
    Correction(
        name="none",
        label="no correction",
        table_label="none",
        order=2,
        overrides={ROLLOUT_IS: None},
        is_weights=False,
        # without IS weights verl logs none of their rows
        unlogged=("ess", "is_high", "is_low"),
        dashed="always",
        description="no correction",
    )
)
register(
    Correction(
        name="mu_grpo",
        label="mu-GRPO",
        table_label="mu-GRPO",
        order=1,
        overrides={ROLLOUT_IS: None, BYPASS_MODE: True, LOSS_MODE: "mu_grpo"},
        is_weights=False,
        # bypass mode skips the learner's old-log-prob pass and with it the probability gap (its loss logs
        # the KL, k3, chi^2 and log-ppl rows itself, under actor/)
        unlogged=("ess", "is_high", "is_low", "probs_diff"),
        signals=(
            Signal(
                "veto_frac",
                "mu-GRPO: fraction of responses vetoed (NaN otherwise)",
                (f"{_MU_GRPO_KEYS}/veto_frac",),
                "-",
                "vetoed responses",
            ),
            Signal(
                "ratio_clip_frac",
                "mu-GRPO: fraction of response tokens where clip(rho, 0, 5) is active (rho > 5, A > 0; NaN otherwise)",
                (f"{_MU_GRPO_KEYS}/clip_frac",),
                ":",
                "clipped tokens (rho > 5)",
            ),
        ),
        colour="#2ca02c",  # green: Figure 4 draws mu-GRPO in green (solid Tb = 1, dashed 0.8)
        dashed="cooled",
        description="the mu-GRPO policy loss (coolsampler.worker.losses)",
    )
)

# The built-in names, fixed at import: the run-key grammar and the study schema's enum are built from them.
NAMES: tuple[str, ...] = tuple(_REGISTRY)


def corrections() -> tuple[Correction, ...]:
    """Every registered correction, in registry order (the built-ins, then any registered later)."""
    return tuple(_REGISTRY.values())


def get(name: Any) -> Correction | None:
    """The correction of that name, None for an unknown name (a bare log's settings may name none)."""
    return _REGISTRY.get(str(name)) if name is not None else None


def order(name: Any) -> int:
    """Sort position of a correction; unknown names after every registered one."""
    c = get(name)
    return c.order if c is not None else len(_REGISTRY) + 1


def is_standard(name: Any) -> bool:
    """The paper's standard correction (the first in the tables' order, TIS) or none named: labels that
    name a run leave it out and name any other."""
    return name is None or order(name) == min(c.order for c in corrections())


def signal_columns() -> dict[str, Signal]:
    """Every correction's own metrics columns, by column name (registry order)."""
    return {s.column: s for c in corrections() for s in c.signals}


def correction_of(rollout_correction: Mapping[str, Any] | None) -> str | None:
    """The correction that verl's ``algorithm.rollout_correction`` section runs: bypass mode is the
    registered bypass correction (the learner's old-log-prob pass is skipped, whatever IS setting);
    otherwise the one whose IS weights match ``rollout_is`` (verl's default, ``rollout_is: null``, is
    none). None when no registered correction matches."""
    section = rollout_correction or {}
    bypass = bool(section.get("bypass_mode", False))
    weights = section.get("rollout_is", None) is not None
    for c in corrections():
        if c.bypass == bypass and (bypass or c.is_weights == weights):
            return c.name
    return None


__all__ = [
    "BYPASS_MODE",
    "LOSS_MODE",
    "NAMES",
    "ROLLOUT_IS",
    "Correction",
    "FromRecipe",
    "Signal",
    "correction_of",
    "corrections",
    "get",
    "is_standard",
    "order",
    "register",
    "signal_columns",
    "unregister",
]
