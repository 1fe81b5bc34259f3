"""A study's drift probes as one table: per run, how far its learner has drifted from its never-refreshed
sampler, and on which candidate tokens that drift sits.

The probe (``coolsampler.world.drift_probe``, rule ``drift_probe``) writes one JSON per run; this module
only reads those numbers, so a laptop with pandas re-tabulates a study's probes in milliseconds. Sections
3.2 and 6 of the paper predict that at Tb=1 the drift sits in the tail, the tokens a hot sampler proposes
rarely, and that cooling removes it by sampling the tail less. The table shows, per run and per sampler
temperature, the learner's KL(q || pi), the tempering offset KL(q || p0) and their difference, the drift,
split by the class of the candidate token and by the bin of q (``spec.drift``: each split adds up to the
drift), and per class of the sampled token the fraction of TIS weights above the cap. A measurement, not
a verdict: a study's claims judge it (``measures.m_probe``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd

from coolsampler.spec.drift import BIN_NAMES, CLASSES

# How each class and bin reads in the table's header.
CLASS_LABELS = {
    "head": "head words",
    "tail": "tail words",
    "right_digit": "right digit",
    "wrong_digit": "wrong digits",
    "other": "other",
}
BIN_LABELS = {"low": "q < 0.05", "mid": "0.05–0.5", "high": "q > 0.5"}
PARTS = (*CLASSES, *BIN_NAMES)


def _num(value: Any) -> float:
    return float("nan") if value is None else float(value)


def drift_table(probes: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]]) -> pd.DataFrame:
    """One row per probed run, in (Tb descending, seed) order: its key, seed and Tb, the probed step, the
    learner's KL, the offset and the drift a token; the drift's part (``drift_<name>``) and share
    (``frac_<name>``) of each class and bin; per sampled class its share of the samples (``sampled_<c>``)
    and the capped fraction under the learner and the initial model (``capped_<c>``, ``capped0_<c>``).
    ``probes``: (the run's settings with ``key``, its probe JSON)."""
    rows = []
    for settings, probe in probes:
        row: dict[str, Any] = {
            "key": settings["key"],
            "seed": settings.get("seed"),
            "Tb": float(probe["Tb"]),
            "step": int(probe["step"]),
            "answer_tokens": int(probe["answer_tokens"]),
            "kl": float(probe["learner"]),
            "offset": float(probe["offset"]),
            "drift": float(probe["drift"]),
            "capped": _num(probe.get("capped")),
            "capped0": _num(probe.get("capped0")),
        }
        for name in PARTS:
            row[f"drift_{name}"] = _num(probe.get(f"drift_{name}"))
            row[f"frac_{name}"] = row[f"drift_{name}"] / row["drift"] if row["drift"] > 0 else float("nan")
        for c in CLASSES:
            for what in ("sampled", "capped", "capped0"):
                row[f"{what}_{c}"] = _num(probe.get(f"{what}_{c}"))
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


def _pct(value: float) -> str:
    return "n/a" if pd.isna(value) else f"{value:.0%}"


def _rows(table: pd.DataFrame, cells: Callable[[pd.Series], list[str]]) -> list[str]:
    """A row per run (its Tb and seed), then one per sampler temperature with the mean of its runs."""
    means = temperature_means(table)
    rows = [[f"{r['Tb']:g}", str(r["seed"]), *cells(r)] for _, r in table.iterrows()]
    rows += [[f"{r['Tb']:g}", f"**mean of {int(r['runs'])}**", *cells(r)] for _, r in means.iterrows()]
    return ["| " + " | ".join(row) + " |" for row in rows]


def _header(cols: Sequence[str]) -> list[str]:
    head = ["Tb", "seed", *cols]
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]


def drift_markdown(table: pd.DataFrame) -> str:
    """The probes as Markdown: the drift by class of the candidate token, by bin of q, and the capped
    TIS weights by class of the sampled token; a row per run, then the mean of each sampler temperature."""
    if table.empty:
        return "No run was probed.\n"
    step = ", ".join(map(str, sorted(set(table["step"]))))
    lines = [
        f"**Drift by candidate class** (step {step}; per answer token; a cell is the part · its share of the drift)",
        "",
        *_header(["KL(q‖π)", "offset KL(q‖p₀)", "drift", *(CLASS_LABELS[c] for c in CLASSES)]),
        *_rows(
            table,
            lambda r: (
                [_cell(r["kl"]), _cell(r["offset"]), _cell(r["drift"])]
                + [f"{_cell(r[f'drift_{c}'])} · {_pct(r[f'frac_{c}'])}" for c in CLASSES]
            ),
        ),
        "",
        "**Drift by the sampler's probability of the candidate**",
        "",
        *_header(["drift", *(BIN_LABELS[b] for b in BIN_NAMES)]),
        *_rows(
            table,
            lambda r: [_cell(r["drift"])] + [f"{_cell(r[f'drift_{b}'])} · {_pct(r[f'frac_{b}'])}" for b in BIN_NAMES],
        ),
        "",
        "**Capped TIS weights by class of the sampled token** (share of the samples · capped under π · under p₀)",
        "",
        *_header(["all: π · p₀", *(CLASS_LABELS[c] for c in CLASSES)]),
        *_rows(
            table,
            lambda r: (
                [f"{_pct(r['capped'])} · {_pct(r['capped0'])}"]
                + [f"{_pct(r[f'sampled_{c}'])} · {_pct(r[f'capped_{c}'])} · {_pct(r[f'capped0_{c}'])}" for c in CLASSES]
            ),
        ),
        "",
        "Between each run's initial model at its Tb (the sampler: never refreshed) and its step's learner, on"
        " samples drawn at Tb. Each term q(a)·(log q(a) − log π(a)) of the exact KL at a position goes to the"
        " class of its candidate token a and to the bin of q(a), whichever token was sampled there; the drift is"
        " the learner's KL minus the same sum with the initial model as π (the tempering offset, 0 at Tb = 1),"
        " and its parts add up to it. A weight π/q above 2 is capped by TIS.",
    ]
    return "\n".join(lines) + "\n"
