"""The claims file (``config/claims.yaml`` and a study's own): loading, validating, selecting, relaxing.

Owns ``Claims`` (its filters and claims), ``load_claims`` and ``check_claims`` (the schema, then what a
schema cannot say: filter names, quantities and their arguments, unique ids; one-line ``ClaimError``
messages naming the claim and field), ``select``/``check_selects`` (which runs a claim's filters
pick) and ``relax`` (a probe: filters cut down to the mechanism settings). Why apart: what a claim
*says* is checked here once, so evaluation can trust it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from coolsampler.results import diagnostics as D
from coolsampler.results.claims.measures import NEEDS_ALSO, PAIRED, QUANTITIES
from coolsampler.spec.inputs import InputError
from coolsampler.spec.study import Run, matches
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
    ids are unique, versus/value/per are given where the reduction needs them. One-line errors."""
    import inspect

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
    seen: set[str] = set()
    for c in doc["claims"]:
        cid, q = c["id"], c["quantity"]
        if cid in seen:
            raise ClaimError(f"{origin}: claim {cid}: id: duplicate")
        seen.add(cid)
        for fld, sel in (("runs", c["runs"]), ("quantity.versus", q.get("versus")), ("quantity.also", q.get("also"))):
            for item in sel if isinstance(sel, list) else [sel]:
                if isinstance(item, str) and item not in names:
                    raise ClaimError(
                        f"{origin}: claim {cid}: {fld}: unknown filter {item!r} (define it under filters:)"
                    )
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
    "check_claims",
    "check_selects",
    "claims_schema",
    "load_claims",
    "relax",
    "select",
]
