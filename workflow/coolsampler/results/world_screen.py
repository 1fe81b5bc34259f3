"""A study's world screen judged: each candidate's probed properties against the study's bounds, and the
first candidate, in the study's order, that meets all of them.

The probe (``coolsampler.world.probe``) writes one JSON per world; this module only reads those
numbers, so a laptop with pandas re-judges a screen in milliseconds. The rule is the study's
(``screen:``, ``coolsampler.spec.world.Screen``), fixed before any run, so the verdict never depends on a
trained run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from coolsampler.spec.world import PROPERTIES, Screen

# How each property reads in the table, with its unit.
LABELS = {
    "entropy": "entropy (nats/token)",
    "tail_ratio": "tail ratio p/q",
    "offset": "offset (nats/token)",
    "error_link": "error link",
    "error_link_local": "local error link",
}


# Decimals a property is shown with: enough to see which side of its bound it falls on.
DECIMALS = {"entropy": 3, "tail_ratio": 3, "offset": 4, "error_link": 3, "error_link_local": 3}


def value_text(prop: str, value: float | None) -> str:
    return "n/a" if value is None or pd.isna(value) else f"{float(value):.{DECIMALS[prop]}f}"


def cell_text(row: Mapping[str, Any], prop: str) -> str:
    """A property's value in a screen's table, ticked where it meets the study's bound, crossed where not."""
    return value_text(prop, row[prop]) + (" \u2713" if row[f"{prop}_ok"] else " \u2717")


def verdict_text(row: Mapping[str, Any]) -> str:
    """A world's verdict: 'chosen', 'meets all' (every bound) or 'fails'."""
    return "chosen" if row["chosen"] else ("meets all" if row["meets_all"] else "fails")


def within(value: float | None, bound: tuple[float | None, float | None]) -> bool:
    """Whether ``value`` lies in the closed interval ``bound`` (None: open on that side); a property the
    probe could not measure (no tail word sampled, say) never meets a bound."""
    if value is None:
        return False
    lo, hi = bound
    return (lo is None or value >= lo) and (hi is None or value <= hi)


def bound_text(bound: tuple[float | None, float | None]) -> str:
    lo, hi = bound
    if lo is not None and hi is not None:
        return f"{lo:g}-{hi:g}"
    return f">= {lo:g}" if lo is not None else f"<= {hi:g}"


def screen_table(screen: Screen, probes: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """One row per probed world, the candidates in the screen's order, then the references: its world key,
    each property, its bound and whether it meets it, whether it meets all, and ``chosen`` on the first
    candidate that does (none, if no candidate does)."""
    rows = []
    for name in screen.probed:
        probe = probes[name]
        row: dict[str, Any] = {"world": name, "ident": probe["world"], "candidate": name in screen.worlds}
        for prop in PROPERTIES:
            row[prop] = probe.get(prop)
            if prop in screen.bounds:
                row[f"{prop}_ok"] = within(probe.get(prop), screen.bounds[prop])
                row[f"{prop}_bound"] = bound_text(screen.bounds[prop])
        row["meets_all"] = all(row[f"{p}_ok"] for p in screen.bounds)
        rows.append(row)
    df = pd.DataFrame(rows)
    df["chosen"] = False
    hits = df.index[df["meets_all"] & df["candidate"]]
    if len(hits):
        df.loc[hits[0], "chosen"] = True
    return df


def chosen_world(table: pd.DataFrame) -> str | None:
    """The screen's choice, or None when no candidate meets every bound (the study then stops: no retuning)."""
    hit = table.loc[table["chosen"], "world"]
    return str(hit.iloc[0]) if len(hit) else None


def read_probes(paths: Mapping[str, str | Path]) -> dict[str, dict[str, Any]]:
    return {name: json.loads(Path(p).read_text()) for name, p in paths.items()}


def screen_markdown(screen: Screen, table: pd.DataFrame) -> str:
    """The screen as a Markdown table: each value with a mark for its bound, the bounds in the header."""
    props = [p for p in PROPERTIES if p in screen.bounds]
    head = ["world", *(f"{LABELS[p]} [{bound_text(screen.bounds[p])}]" for p in props), "verdict"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for _, r in table.iterrows():
        verdict = verdict_text(r)
        shown = f"**{verdict}**" if r["chosen"] else verdict
        cells = [f"{r['world']} (`{r['ident']}`)", *(cell_text(r, p) for p in props)]
        cells.append(shown if r["candidate"] else f"reference ({verdict})")
        lines.append("| " + " | ".join(cells) + " |")
    pick = chosen_world(table)
    lines.append("")
    lines.append(
        f"Chosen: **{pick}**, the first candidate in order that meets every bound (sampler temperature {screen.Tb:g},"
        f" {screen.prompts} validation prompts)."
        if pick
        else "No candidate meets every bound: the study stops here, and the worlds are not retuned."
    )
    return "\n".join(lines) + "\n"
