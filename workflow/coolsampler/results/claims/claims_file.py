"""The claims file (``config/claims.yaml`` and a study's own): loading, validating, selecting, relaxing.

Owns ``Claims`` (its filters and claims), ``load_claims`` and ``check_claims`` (the schema, then what a
schema cannot say: filter names, quantities and their arguments, unique ids; one-line ``ClaimError``
messages naming the claim and field), ``select``/``check_selects`` (which runs a claim's filters
pick) and ``relax`` (a probe: filters cut down to the mechanism settings). Why apart: what a claim
*says* is checked here once, so evaluation can trust it.
"""

from __future__ import annotations

import difflib
import inspect
import math
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from coolsampler.results import diagnostics as D
from coolsampler.results.claims.measures import CYCLE_READINGS, NEEDS_ALSO, PAIRED, QUANTITIES, RunData
from coolsampler.spec.inputs import InputError
from coolsampler.spec.metrics_schema import COLUMNS
from coolsampler.spec.study import Run, matches
from coolsampler.spec.validate import FILTER_FIELDS, StudyError, check_filter, text_number_hint
from coolsampler.spec.yaml_file import load_yaml, parse_yaml


class ClaimError(ValueError):
    """A claims file that cannot be evaluated. The message is one line naming the claim and field."""


# A count claim's bound ("in at least 2 of 3 seeds the gap is >= 0.15"): the quantity key that names it,
# how a value is compared with it, and the sign the report prints. One of them per claim.
COUNT_BOUNDS: dict[str, tuple[str, Any]] = {
    "count_at_least": ("≥", lambda v, b: v >= b),
    "count_above": (">", lambda v, b: v > b),
    "count_at_most": ("≤", lambda v, b: v <= b),
}


@cache
def claims_schema() -> dict[str, Any]:
    text = resources.files("coolsampler.spec").joinpath("schemas/claims.schema.yaml").read_text()
    return parse_yaml(text, "schemas/claims.schema.yaml")


def _where(doc: Mapping[str, Any], path: Sequence[Any]) -> str:
    """'claim <id>: field' for a schema error path."""
    parts = list(path)
    if len(parts) >= 2 and parts[0] == "claims" and isinstance(parts[1], int):
        claims = doc.get("claims") or []
        cid = claims[parts[1]].get("id", f"#{parts[1]}") if isinstance(claims[parts[1]], Mapping) else parts[1]
        rest = ".".join(str(p) for p in parts[2:]) or "(the claim)"
        return f"claim {cid}: {rest}"
    return ".".join(str(p) for p in parts) or "(top level)"


def check_claims(doc: Any, origin: str = "claims") -> None:
    """Schema, then what it cannot say: filter names exist, quantities exist and take their args,
    ids are unique, versus/value/per are given where the reduction needs them, each filter names values a
    run can hold, each measure's arguments fit its signature and the paper's value fits the reduction.
    One-line errors."""
    import jsonschema

    if not isinstance(doc, Mapping):
        raise ClaimError(f"{origin}: expected a mapping with claims:")
    for i, c in enumerate(doc.get("claims") or []):  # the schema says it too, without naming the field
        for fld in ("paper", "tolerance"):
            if isinstance(c, Mapping) and c.get("reported") is True and fld in c:
                where = _where(doc, ["claims", i, fld])
                raise ClaimError(f"{origin}: {where}: a reported claim takes no {fld}: its value is shown, not judged")
    errors = sorted(jsonschema.Draft202012Validator(claims_schema()).iter_errors(doc), key=lambda e: list(e.path))
    if errors:
        e = min(errors, key=lambda e: len(list(e.path)) * -1)
        raise ClaimError(f"{origin}: {_where(doc, e.absolute_path)}: {e.message}".replace("\n", " "))
    names = set(doc.get("filters") or {})
    for name, filt in (doc.get("filters") or {}).items():
        _check_filter(filt, f"{origin}: filters.{name}")
    seen: set[str] = set()
    for c in doc["claims"]:
        cid, q = c["id"], c["quantity"]
        if cid in seen:
            raise ClaimError(f"{origin}: claim {cid}: id: duplicate")
        seen.add(cid)
        for fld, sel in (("runs", c["runs"]), ("quantity.versus", q.get("versus")), ("quantity.also", q.get("also"))):
            for i, item in enumerate(sel if isinstance(sel, list) else [sel]):
                if isinstance(item, str) and item not in names:
                    raise ClaimError(
                        f"{origin}: claim {cid}: {fld}: unknown filter {item!r} (define it under filters:)"
                    )
                if isinstance(item, Mapping):
                    _check_filter(item, f"{origin}: claim {cid}: {fld}" + (f"[{i}]" if isinstance(sel, list) else ""))
        table = PAIRED if q["reduce"] == "paired" else QUANTITIES
        if q["fn"] not in table:
            kind = "paired measure" if table is PAIRED else "quantity"
            raise ClaimError(
                f"{origin}: claim {cid}: quantity.fn: unknown {kind} {q['fn']!r} (allowed: {', '.join(table)})"
            )
        params = inspect.signature(table[q["fn"]]).parameters
        for a in q.get("args") or {}:
            if a not in params or a in ("d", "ref", "also"):
                raise ClaimError(f"{origin}: claim {cid}: quantity.args: {q['fn']} takes no argument {a!r}")
        if (problem := args_problem(q["fn"], table[q["fn"]], q.get("args") or {})) is not None:
            raise ClaimError(f"{origin}: claim {cid}: quantity.args.{problem}")
        if q["fn"] == "diag_lead":
            try:
                D.diagnostic(str((q.get("args") or {}).get("diagnostic", "kl")))
            except ValueError as e:
                raise ClaimError(f"{origin}: claim {cid}: quantity.args.diagnostic: {e}") from None
        needs_versus = q["reduce"] in ("difference", "ratio", "brackets", "paired")
        if needs_versus != ("versus" in q) and q["reduce"] != "realizations":  # there versus is optional
            what = "needs" if needs_versus else "takes no"
            raise ClaimError(f"{origin}: claim {cid}: quantity.versus: reduce {q['reduce']} {what} versus")
        wants_also = q["reduce"] == "paired" and q["fn"] in NEEDS_ALSO
        if wants_also != ("also" in q):
            what = "needs" if wants_also else "takes no"
            raise ClaimError(f"{origin}: claim {cid}: quantity.also: {q['fn']} {what} also (a third run of each seed)")
        bounds = [k for k in COUNT_BOUNDS if k in q]
        if len(bounds) > 1:
            raise ClaimError(f"{origin}: claim {cid}: quantity: one count bound at most, not {' and '.join(bounds)}")
        if q["reduce"] == "brackets" and "value" not in q:
            raise ClaimError(f"{origin}: claim {cid}: quantity.value: reduce brackets needs value")
        if "per" in q and q["reduce"] not in ("difference", "ratio"):
            raise ClaimError(f"{origin}: claim {cid}: quantity.per: only with difference or ratio")
        if "paper" in c and (problem := paper_problem(q, c["paper"])) is not None:
            raise ClaimError(f"{origin}: claim {cid}: paper: {problem}")


def _check_filter(filt: Mapping[str, Any], where: str) -> None:
    """A claim's filter by the rules of a study's ``figures:`` filters (``spec.validate.check_filter``): a
    value no run can hold (``lr: 1e-4`` that YAML read as text, ``correction: TIS``) is told as that, not
    as a claim whose runs are not among the logs."""
    try:
        check_filter(filt, where, FILTER_FIELDS | {"key"})
    except StudyError as e:
        raise ClaimError(str(e)) from None


# Ranges of a measure's arguments, by name (the annotations give only the type): steps count from 0, a
# cycle and a count of validations from 1, a band or a fraction is not negative.
_AT_LEAST = {
    **dict.fromkeys(("step", "since", "until", "base", "before"), 0),
    **dict.fromkeys(("cycle", "last"), 1),
    **dict.fromkeys(("band", "delta", "closed", "kl_ratio"), 0),
}
_TYPE_TEXT = {int: "a whole number", float: "a number", str: "text", bool: "true or false", type(None): "null"}
_COLUMN_ARGS = ("col", "minus")
_CHOICES: dict[str, tuple[str, ...]] = {"event": ("onset", "severe"), "reading": CYCLE_READINGS}


def _fits(value: Any, kind: Any) -> bool:
    if kind is type(None):
        return value is None
    if kind is bool:
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind is int:
        return isinstance(value, int)
    if kind is float:
        return isinstance(value, (int, float)) and math.isfinite(value)
    return isinstance(value, kind) if isinstance(kind, type) else True


def args_problem(name: str, fn: Callable[..., Any], args: Mapping[str, Any]) -> str | None:
    """What is wrong with measure ``name``'s ``args`` against ``fn``'s signature, as '<arg>: <problem>',
    or None: an argument it needs and is not given, a value of another type than its annotation (an int
    step, a number threshold), out of its range (steps >= 0, last >= 1, since <= until), a column the
    metrics table does not have, a word it does not know. Checked when the claims file is read, so that
    a typo is told as one, not as a run whose logs cannot measure it."""
    hints = typing.get_type_hints(fn)
    for p in inspect.signature(fn).parameters.values():
        if hints.get(p.name) is RunData:  # the run, its pair, the third run: not arguments
            continue
        hint = hints.get(p.name, Any)
        kinds = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        if p.name not in args:
            if p.default is inspect.Parameter.empty:
                want = " or ".join(_TYPE_TEXT.get(k, str(k)) for k in kinds)
                return f"{p.name}: missing; {name} needs {p.name} ({want})"
            continue
        value = args[p.name]
        if not any(_fits(value, k) for k in kinds):
            want = " or ".join(_TYPE_TEXT.get(k, str(k)) for k in kinds)
            return f"{p.name}: {value!r} is not valid; allowed: {want}{text_number_hint(value)}"
        low = _AT_LEAST.get(p.name)
        if low is not None and value is not None and value < low:
            return f"{p.name}: {value!r} is not valid; allowed: {_TYPE_TEXT[int if int in kinds else float]} >= {low}"
        if p.name in _COLUMN_ARGS and value not in COLUMNS:
            near = difflib.get_close_matches(str(value), list(COLUMNS), n=1)
            hint_text = f" (did you mean {near[0]!r}?)" if near else " (the columns: coolsampler.spec.metrics_schema)"
            return f"{p.name}: {value!r} is not a column of the metrics table{hint_text}"
        if p.name in _CHOICES and value not in _CHOICES[p.name]:
            return f"{p.name}: {value!r} is not valid; allowed: {', '.join(_CHOICES[p.name])}"
    since, until = args.get("since"), args.get("until")
    if isinstance(since, (int, float)) and isinstance(until, (int, float)) and since > until:
        return f"until: {until!r} is before since {since!r}; allowed: since <= until"
    return None


def _one_value(q: Mapping[str, Any]) -> bool:
    """Whether the reduction gives one value (a number, a count, a word), not one per run, pair or group."""
    how, per = q["reduce"], q.get("per")
    if any(k in q for k in COUNT_BOUNDS) or how in ("mean", "min", "max", "count", "realizations", "brackets"):
        return True
    if how == "paired":
        return q.get("pairs") == "mean"
    if how in ("difference", "ratio"):
        return per in (None, "frontier")
    if how == "one":  # a cycle reading without its cycle is [cycle 1, cycle 2]
        return not (q["fn"] == "cycle_reading" and (q.get("args") or {}).get("cycle") is None)
    return False


def paper_problem(q: Mapping[str, Any], paper: Any) -> str | None:
    """What is wrong with a claim's ``paper`` value for its reduction, or None: a range whose low end is
    above its high end (no value is inside: it always differs) or that bounds neither end (every value is
    inside: it is always reproduced), one value per run where the reduction gives one value, a yes/no
    other than brackets' or a kind of degradation of a measure that gives none."""
    if isinstance(paper, list):
        lo, hi = paper
        if lo is None and hi is None:
            return "[null, null] bounds nothing (every value is inside); allowed: [low, high] with a number at one end"
        if lo is not None and hi is not None and lo > hi:
            return f"[{lo}, {hi}]: the low end is above the high end (no value is inside); allowed: low <= high"
    if isinstance(paper, Mapping) and _one_value(q):
        return f"each: reduce {q['reduce']} here gives one value, not one per run; allowed: a number or [low, high]"
    if q["reduce"] == "brackets" and not isinstance(paper, bool):
        return f"{paper!r} is not valid; reduce brackets gives true or false"
    if isinstance(paper, str) and q["fn"] != "kind":
        return f"{paper!r} is a kind of degradation; only fn kind gives one"
    return None


@dataclass
class Claims:
    filters: dict[str, Any]
    claims: list[dict[str, Any]]

    def selector(self, sel: Any) -> list[Mapping[str, Any]]:
        """A claim's ``runs``/``versus`` as a list of filters (names resolved)."""
        items = sel if isinstance(sel, list) else [sel]
        return [self.filters[i] if isinstance(i, str) else i for i in items]


def load_claims(path: str | Path) -> Claims:
    """The claims file at ``path``, validated. A file that is not a YAML mapping (missing, binary, a
    duplicate key, an anchor cycle or bomb, a tag) is an ``InputError`` with its line; a bad claim is a
    ``ClaimError`` naming the claim and field."""
    path = Path(path)
    doc = load_yaml(path, what="claims file")
    shape = "a claims file is a mapping with claims: (config/claims.yaml is one)"
    if doc is None:
        raise InputError(path, f"is empty; {shape}")
    if not isinstance(doc, Mapping):
        raise InputError(path, f"{shape}, not {'a list' if isinstance(doc, list) else repr(doc)[:40]}", where=1)
    check_claims(doc, str(path))
    return Claims(dict(doc.get("filters") or {}), list(doc["claims"]))


def select(runs: Sequence[Run], filters: Sequence[Mapping[str, Any]]) -> list[Run]:
    """The runs any filter selects, in study order (``Study.select`` on a plain list of runs)."""
    return [r for r in runs if any(matches(r, f) for f in filters)]


def check_selects(claims: Claims, runs: Sequence[Run], origin: str = "claims") -> None:
    """Every claim's filters select at least one of ``runs`` (the paper study: a claim no paper run
    can check is a wrong filter). One-line ClaimError naming the claim and field."""
    for c in claims.claims:
        if not select(runs, claims.selector(c["runs"])):
            raise ClaimError(f"{origin}: claim {c['id']}: runs: selects no run of the study")
        if "versus" in c["quantity"] and not select(runs, claims.selector(c["quantity"]["versus"])):
            raise ClaimError(f"{origin}: claim {c['id']}: quantity.versus: selects no run of the study")


# The settings that name the paper's scale; a probe drops them and keeps the mechanism.
PROBE_DROP = ("model", "task", "N", "lr", "seed", "steps", "val_every", "key")


def relax(claims: Claims) -> Claims:
    """The claims with every filter reduced to its mechanism settings (a probe: stand-in runs, e.g. the smoke study)."""

    def strip(f: Any) -> Any:
        if isinstance(f, list):
            return [strip(x) for x in f]
        if isinstance(f, dict):
            return {k: v for k, v in f.items() if k not in PROBE_DROP}
        return f

    out = []
    for c in claims.claims:
        c = dict(c)
        q = dict(c["quantity"])
        if q["reduce"] == "one":
            q["reduce"] = "each"  # several stand-in runs may match a single paper run
        c["runs"] = strip(c["runs"])
        if "versus" in q:
            q["versus"] = strip(q["versus"])
        c["quantity"] = q
        out.append(c)
    return Claims({k: strip(v) for k, v in claims.filters.items()}, out)


__all__ = [
    "COUNT_BOUNDS",
    "PROBE_DROP",
    "ClaimError",
    "Claims",
    "args_problem",
    "check_claims",
    "check_selects",
    "claims_schema",
    "load_claims",
    "paper_problem",
    "relax",
    "select",
]
