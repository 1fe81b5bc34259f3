"""The sampler temperature Tb, in every form it takes, and the number grammar of run keys.

Why one module: a run's sampler temperature travels from the study's YAML to a figure legend through
six forms (the YAML value, the ``Temperature`` object, the run-key token, ``Run.settings()``, the
controller spec verl's trainer receives, and the reader's label). Each form is parsed and written
here and nowhere else, so two of them cannot drift apart:

=================  ===================================================  ==========================
form               example                                              here
=================  ===================================================  ==========================
YAML / settings    ``0.8``, ``{controller: saturation, start: 0.8}``    ``from_config`` / ``to_config``
key token          ``Tb0.8``, ``Tbsat0.8kl``, ``Tblin0.8-1``            ``parse_token`` / ``token``
controller spec    ``("saturation", {"start": 0.8, "kl_gate": True})``  ``controller_spec``
label              ``Tb=0.8``, ``saturation controller + KL gate``      ``label`` / ``table_text``
=================  ===================================================  ==========================

Numbers in run keys (learning rates, temperatures) share one grammar: ``num`` writes them, ``NUM_RE``
reads them back. Imports only ``coolsampler.spec.settings``: verl's trainer process loads this module
through the controller, so it stays pure Python.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from coolsampler.spec.settings import SATURATION_RULES, SCOPES

SCHEDULES = ("linear",)
CONTROLLERS = ("saturation", "kl_cooling")
KINDS = ("fixed", *SCHEDULES, *CONTROLLERS)

# --------------------------------------------------------------------------------------------------
# Numbers in keys

NUM_RE = r"\d+(?:\.\d+)?(?:e-?\d+)?"


def num(x: float) -> str:
    """Shortest stable text for a number in a key: 1.0 -> '1', 0.8 -> '0.8', 2e-06 -> '2e-6'."""
    x = float(x)
    s = f"{x:.6e}" if 0 < abs(x) < 0.01 else f"{x:.6g}"  # small values (learning rates) as 3e-5
    if "e" in s:
        mant, exp = s.split("e")
        mant = mant.rstrip("0").rstrip(".") if "." in mant else mant
        s = f"{mant}e{int(exp)}"
    return s


# --------------------------------------------------------------------------------------------------
# The controller spec: what the YAML mapping and verl's trainer.sampler_temperature_spec say


def controller_spec(spec: float | int | Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """``(kind, parameters)`` of a temperature spec: a number is ``("fixed", {"value": x})``, a
    schedule ``("linear", {"start", "end", ...})``, a controller ``(name, {"start", ...})``.

    Parameters beyond the ones a run key holds (``step_up``, ``t_max``, ``total_steps``, ...) are
    passed through for the controller to accept or refuse; the kind itself is checked here."""
    if isinstance(spec, bool) or not isinstance(spec, (int, float, Mapping)):
        raise ValueError(f"not a temperature spec: {spec!r}")
    if isinstance(spec, (int, float)):
        return "fixed", {"value": float(spec)}
    params = dict(spec)
    if "schedule" in params:
        kind = params.pop("schedule")
        if kind not in SCHEDULES:
            raise ValueError(f"unknown schedule {kind!r} in {dict(spec)!r}; known: {', '.join(SCHEDULES)}")
        return kind, params
    kind = params.pop("controller", None)
    if kind not in CONTROLLERS:
        raise ValueError(f"unknown controller {kind!r}; known: {', '.join(CONTROLLERS)}")
    return kind, params


# --------------------------------------------------------------------------------------------------
# The object


@dataclass(frozen=True)
class Temperature:
    """The sampler temperature Tb of a run.

    ``kind`` is ``fixed`` (``value``), ``linear`` (``value`` -> ``end`` over the run),
    ``saturation`` (starts at ``value``; reheats as groups saturate; ``kl_gate`` blocks reheating
    while the learner-sampler KL is high) or ``kl_cooling`` (starts at ``value``; cools further
    whenever the KL grows). The saturation controller's ``scope`` is ``global`` (default: one
    run-wide temperature, moved by the fraction of the step's groups that saturate: the reading under
    which the paper's N=192 controller can reach 1.05 in its second cycle) or ``per_prompt`` (each
    prompt identity its own temperature; CAVEAT: a prompt's temperature moves only when that prompt
    is sampled again, and a 300-step paper run of 16 prompts a step visits no GSM8K or MATH prompt
    twice, so there it stays at its start), and ``saturated`` says when a group counts as saturated:
    ``all_correct`` (default) or ``all_equal``. The rules are in ``coolsampler.worker.controller``.

    Key tokens: ``Tb0.8``, ``Tblin0.8-1``, ``Tbklc0.8``, ``Tbsat0.8[kl][-prompt][-alleq]``: the
    default saturation controller keeps the short token, each non-default choice adds its suffix.
    Each Temperature has exactly one token (keys are directory names): the retired ``-global``
    suffix, which named the run-wide controller when it was not the default, is refused with the
    token to write instead.
    """

    kind: str = "fixed"
    value: float = 1.0
    end: float | None = None
    kl_gate: bool = False
    scope: str = SCOPES[0]
    saturated: str = SATURATION_RULES[0]

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown temperature kind {self.kind!r}; allowed: {', '.join(KINDS)}")
        if self.scope not in SCOPES or self.saturated not in SATURATION_RULES:
            raise ValueError(
                f"Tb: scope {self.scope!r} / saturated {self.saturated!r}; allowed: {SCOPES} / {SATURATION_RULES}"
            )
        if self.kind != "saturation" and (self.scope, self.saturated) != (SCOPES[0], SATURATION_RULES[0]):
            raise ValueError(f"Tb: scope and saturated are options of the saturation controller, not of {self.kind}")

    @property
    def initial(self) -> float:
        return self.value

    # ---- key token ------------------------------------------------------------------------------

    def token(self) -> str:
        if self.kind == "fixed":
            return f"Tb{num(self.value)}"
        if self.kind == "linear":
            return f"Tblin{num(self.value)}-{num(self.end)}"
        if self.kind == "saturation":
            return (
                f"Tbsat{num(self.value)}"
                + ("kl" if self.kl_gate else "")
                + ("" if self.scope == SCOPES[0] else f"-{_SCOPE_TOKENS[self.scope]}")
                + ("" if self.saturated == SATURATION_RULES[0] else f"-{_SATURATED_TOKENS[self.saturated]}")
            )
        return f"Tbklc{num(self.value)}"

    # ---- YAML, settings and the trainer's spec --------------------------------------------------

    def to_config(self) -> float | dict[str, Any]:
        if self.kind == "fixed":
            return self.value
        if self.kind == "linear":
            return {"schedule": "linear", "start": self.value, "end": self.end}
        out: dict[str, Any] = {"controller": self.kind, "start": self.value}
        if self.kind == "saturation":
            out["kl_gate"] = self.kl_gate
            if self.scope != SCOPES[0]:  # defaults are left out: the paper's specs stay as written
                out["scope"] = self.scope
            if self.saturated != SATURATION_RULES[0]:
                out["saturated"] = self.saturated
        return out

    @classmethod
    def from_config(cls, spec: float | int | Mapping[str, Any]) -> Temperature:
        kind, p = controller_spec(spec)
        if kind == "fixed":
            return cls("fixed", p["value"])
        if kind == "linear":
            return cls("linear", float(p["start"]), float(p["end"]))
        return cls(
            kind,
            float(p.get("start", DEFAULT_START)),
            None,
            bool(p.get("kl_gate", False)),
            str(p.get("scope", SCOPES[0])),
            str(p.get("saturated", SATURATION_RULES[0])),
        )

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> Temperature:
        """From ``Run.settings()`` (or a run.yaml's settings): its ``Tb`` entry, 1.0 when absent."""
        return cls.from_config(settings.get("Tb", 1.0))

    # ---- what a reader sees ---------------------------------------------------------------------

    @property
    def label_kind(self) -> str:
        """'fixed', 'linear', 'saturation', 'saturation+kl' or 'kl_cooling' (figure styles key on it)."""
        return "saturation+kl" if self.kind == "saturation" and self.kl_gate else self.kind

    def label(self) -> str:
        """'Tb=0.8', 'Tb 0.8->1 (linear)', 'saturation controller + KL gate', ... (figure legends)."""
        if self.kind == "fixed":
            return f"Tb={num(self.value)}"
        if self.kind == "linear":
            return f"Tb {num(self.value)}->{num(self.end)} (linear)"
        if self.kind == "saturation":
            return "saturation controller" + (" + KL gate" if self.kl_gate else "")
        return "KL-triggered cooling"

    def table_text(self) -> str:
        """As in Table 4: '1.0', '0.8', and '0.8*' for the start of a controller or schedule."""
        x = self.value
        s = f"{x:.1f}" if abs(round(x, 1) - x) < 1e-9 else num(x)
        return s if self.kind == "fixed" else s + "*"

    def short(self) -> str:
        """The key token without its 'Tb' for a fixed value ('0.8'), else the whole token (claims tables)."""
        return self.token()[2:] if self.kind == "fixed" else self.token()


DEFAULT_START = 0.8  # a controller without a start begins where the paper's controllers do

# the key suffixes of the saturation controller's non-default choices (the defaults have none)
_SCOPE_TOKENS = {"per_prompt": "prompt"}
_SATURATED_TOKENS = {"all_equal": "alleq"}
# A suffix that once named a scope which is now the default. Key tokens are matched with it (so a
# key holding one reaches parse_token and gets a hint rather than a bare "does not parse"), and
# parse_token refuses it: accepting it would give one Temperature two spellings.
_RETIRED_SCOPE_TOKENS = ("global",)
_SCOPE_ALTS = "|".join((*_SCOPE_TOKENS.values(), *_RETIRED_SCOPE_TOKENS))
SAT_SUFFIX_RE = rf"(?:kl)?(?:-(?:{_SCOPE_ALTS}))?(?:-{'|-'.join(_SATURATED_TOKENS.values())})?"
TOKEN_RE = rf"Tb[a-z]*{NUM_RE}(?:-{NUM_RE})?{SAT_SUFFIX_RE}"
_TB_RE = re.compile(
    rf"^Tb(?:(?P<fixed>{NUM_RE})|lin(?P<lin0>{NUM_RE})-(?P<lin1>{NUM_RE})"
    rf"|sat(?P<sat>{NUM_RE})(?P<kl>kl)?(?:-(?P<scope>{_SCOPE_ALTS}))?"
    rf"(?:-(?P<saturated>{'|'.join(_SATURATED_TOKENS.values())}))?|klc(?P<klc>{NUM_RE}))$"
)


def parse_token(tok: str) -> Temperature:
    """A key token (``Tb0.8``, ``Tbsat0.8kl``, ...) back into its Temperature; ValueError if it does not parse.

    ``token(parse_token(t)) == t`` for every token it accepts: a retired spelling is refused with
    the canonical one, never read as an alias."""
    m = _TB_RE.match(tok)
    if not m:
        raise ValueError(f"bad sampler-temperature token {tok!r}")
    if m["scope"] in _RETIRED_SCOPE_TOKENS:
        canonical = tok.replace(f"-{m['scope']}", "", 1)
        raise ValueError(
            f"sampler-temperature token {tok!r}: the suffix '-{m['scope']}' is retired, the run-wide"
            f" saturation controller is the default and has no suffix; write {canonical!r}"
            f" (the per-prompt controller is '-{_SCOPE_TOKENS['per_prompt']}')"
        )
    if m["fixed"]:
        return Temperature("fixed", float(m["fixed"]))
    if m["lin0"]:
        return Temperature("linear", float(m["lin0"]), float(m["lin1"]))
    if m["sat"]:
        scope = {v: k for k, v in _SCOPE_TOKENS.items()}.get(m["scope"] or "", SCOPES[0])
        saturated = {v: k for k, v in _SATURATED_TOKENS.items()}.get(m["saturated"] or "", SATURATION_RULES[0])
        return Temperature("saturation", float(m["sat"]), None, bool(m["kl"]), scope, saturated)
    return Temperature("kl_cooling", float(m["klc"]))


__all__ = [
    "CONTROLLERS",
    "KINDS",
    "NUM_RE",
    "SCHEDULES",
    "TOKEN_RE",
    "Temperature",
    "controller_spec",
    "num",
    "parse_token",
]
