"""A run's parsed files read back: ``metrics.parquet`` (or .csv) and ``status.json``, as rule parse wrote
them. Light: pandas only.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from coolsampler.spec.metrics_schema import RunStatus


def load_status(path: str | Path | None) -> RunStatus | None:
    """A ``status.json`` (keys complete, last_step, expected_steps, problems) as a RunStatus."""
    if path is None or not Path(path).exists():
        return None
    d = json.loads(Path(path).read_text())
    return RunStatus(
        complete=bool(d["complete"]),
        last_step=int(d["last_step"]),
        expected_steps=int(d["expected_steps"]),
        problems=list(d.get("problems", [])),
    )


def load_metrics(path: str | Path | None) -> pd.DataFrame | None:
    """A run's ``metrics.parquet`` (or .csv), or None when the path is None or absent."""
    if path is None or not Path(path).exists():
        return None
    p = Path(path)
    return pd.read_csv(p) if p.suffix == ".csv" else pd.read_parquet(p)


__all__ = ["load_metrics", "load_status"]
