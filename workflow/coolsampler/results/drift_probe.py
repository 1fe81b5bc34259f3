"""A study's drift probes as one table: per run, how far its learner has drifted from its never-refreshed
sampler, and in which class of token that drift sits.

The probe (``coolsampler.testkit.drift_probe``, rule ``drift_probe``) writes one JSON per run; this module
only reads those numbers, so a laptop with pandas re-tabulates a study's probes in milliseconds. Sections
3.2 and 6 of the paper predict that at Tb=1 the drift sits in the tail and that cooling removes it by
sampling the tail less: the table shows, per run and per sampler temperature, each class's share of the
sampled tokens, its mean KL(q || pi) a token, and its part of the per-token total (the parts add up to
the total). A measurement, not a verdict.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from coolsampler.spec.drift import CLASSES

# How each class reads in the table's header.
CLASS_LABELS = {"head": "head words", "tail": "tail words", "digit": "digits", "other": "other"}


def drift_table(probes: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]]) -> pd.DataFrame:
    """One row per probed run, in (Tb descending, seed) order: its key, seed and Tb, the probed step, the
    per-token KL(q || pi) and, per class, ``<class>_share``, ``<class>_kl`` and ``<class>_part``, plus
    ``tail_fraction``, the tail's part of the total. ``probes``: (the run's settings with ``key``, its
    probe JSON)."""
    rows = []
    for settings, probe in probes:
        row: dict[str, Any] = {
            "key": settings["key"],
            "seed": settings.get("seed"),
            "Tb": float(probe["Tb"]),
            "step": int(probe["step"]),
            "answer_tokens": int(probe["answer_tokens"]),
            "kl": float(probe["kl"]),
        }
        for c in CLASSES:
            for what in ("share", "kl", "part"):
                value = probe.get(f"{c}_{what}")
                row[f"{c}_{what}"] = float("nan") if value is None else float(value)
        row["tail_fraction"] = row["tail_part"] / row["kl"] if row["kl"] > 0 else float("nan")
        rows.append(row)
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    return table.sort_values(["Tb", "seed"], ascending=[False, True], kind="stable").reset_index(drop=True)


def temperature_means(table: pd.DataFrame) -> pd.DataFrame:
    """The table's numbers averaged over the seeds of each sampler temperature (``runs``: how many)."""
    numbers = [c for c in table.columns if c not in ("key", "seed", "Tb", "step")]
    means = table.groupby("Tb", sort=False)[numbers].mean()
    means.insert(0, "runs", table.groupby("Tb", sort=False).size())
    return means.reset_index()


def _cell(value: float, digits: int = 4) -> str:
    return "n/a" if pd.isna(value) else f"{value:.{digits}f}"


def drift_markdown(table: pd.DataFrame) -> str:
    """The probes as Markdown: a row per run, then the mean of each sampler temperature over its seeds.
    A class cell reads ``share · KL a token · part``."""
    if table.empty:
        return "No run was probed.\n"
    head = ["Tb", "seed", "KL(q‖π) /token", *(f"{CLASS_LABELS[c]}: share · KL · part" for c in CLASSES), "tail's part"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def row(r: Mapping[str, Any], who: str) -> str:
        cells = [f"{r['Tb']:g}", who, _cell(r["kl"])]
        cells += [
            f"{_cell(r[f'{c}_share'], 3)} · {_cell(r[f'{c}_kl'])} · {_cell(r[f'{c}_part'])}" for c in CLASSES
        ]
        cells.append("n/a" if pd.isna(r["tail_fraction"]) else f"{r['tail_fraction']:.1%}")
        return "| " + " | ".join(cells) + " |"

    for _, r in table.iterrows():
        lines.append(row(r, str(r["seed"])))
    for _, r in temperature_means(table).iterrows():
        lines.append(row(r, f"**mean of {int(r['runs'])}**"))
    step = sorted(set(table["step"]))
    lines += [
        "",
        f"Per answer token, between each run's initial model at its Tb (the sampler: never refreshed) and its"
        f" step-{', '.join(map(str, step))} learner, on samples drawn at Tb. A class's part is its share times"
        " its KL a token; the parts add up to the total.",
    ]
    return "\n".join(lines) + "\n"


def read_probes(paths: Mapping[str, str | Path]) -> dict[str, dict[str, Any]]:
    """Run key -> its probe JSON."""
    return {key: json.loads(Path(p).read_text()) for key, p in paths.items()}


__all__ = ["CLASS_LABELS", "drift_markdown", "drift_table", "read_probes", "temperature_means"]
