"""verl JSONL -> the per-run metrics table (schema: ``coolsampler.metrics_schema``).

verl's ``file`` logger writes one JSON object per line, ``{"step": k, "data": {...}}``: the initial
validation at step 0, then one line per training step (validation metrics merged into the steps
where validation ran). The parser keeps what is sound and says what is not: a truncated last line,
NaN values, missing validation points and a run that stopped early are recorded in ``RunStatus``
(and so reach Table 4); a required metric absent from every step is an error naming the run and the
metric. Works on a user's own verl JSONL too (``coolsampler parse PATH``). pandas only.
"""

from __future__ import annotations

import fnmatch
import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from coolsampler.metrics_schema import COLUMNS, REQUIRED, RunStatus


class MetricsError(ValueError):
    pass


def _pick(data: dict[str, Any], patterns: tuple[str, ...]) -> Any:
    for pat in patterns:
        if "*" in pat:
            hits = sorted(k for k in data if fnmatch.fnmatchcase(k, pat))
            if hits:
                return data[hits[0]]
        elif pat in data:
            return data[pat]
    return None


def read_jsonl(path: str | Path) -> tuple[dict[int, dict[str, Any]], list[str]]:
    """Records merged per step, and the problems met while reading."""
    path = Path(path)
    by_step: dict[int, dict[str, Any]] = {}
    problems: list[str] = []
    lines = path.read_bytes().split(b"\n")
    for i, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw)
            step = int(rec["step"])
            data = rec["data"]
        except (ValueError, KeyError, TypeError):
            where = "last line" if i >= len(lines) - 1 else f"line {i}"
            problems.append(f"{where} is not a whole JSON record (truncated log?)")
            continue
        by_step.setdefault(step, {}).update(data)
    return by_step, problems


def parse_jsonl(
    path: str | Path, *, expected_steps: int | None = None, val_every: int | None = None, run: str | None = None
) -> tuple[pd.DataFrame, RunStatus]:
    """Parse one run's verl JSONL. ``expected_steps``/``val_every`` let the status say what is missing."""
    run = run or str(path)
    by_step, problems = read_jsonl(path)
    if not by_step:
        raise MetricsError(f"{run}: no records in {path}")
    rows = []
    for step in sorted(by_step):
        data = by_step[step]
        row: dict[str, Any] = {"step": step}
        for col, (_dtype, _meaning, sources) in COLUMNS.items():
            if col == "step":
                continue
            val = _pick(data, sources)
            row[col] = np.nan if val is None else val
        rows.append(row)
    df = pd.DataFrame(rows)
    train = df[df.step > 0]
    for col in REQUIRED:
        if col != "step" and (train.empty or train[col].isna().all()):
            raise MetricsError(f"{run}: required metric {col!r} ({' or '.join(COLUMNS[col][2])}) is missing from the log")
    df = coerce(df)
    # NaN inside metrics a step did log: keep the row, say so.
    for col in ("kl", "entropy", "reward", "grad_norm"):
        bad = train.index[train[col].apply(lambda v: isinstance(v, float) and math.isnan(v))]
        if len(bad) and not train[col].isna().all():
            problems.append(f"{len(bad)} step(s) with NaN {col} (first at step {int(df.loc[bad[0], 'step'])})")
    last = int(df.step.max())
    expected = expected_steps or last
    if last < expected:
        problems.append(f"stopped at step {last} of {expected}")
    steps = set(df.step[df.step > 0])
    missing = sorted(set(range(1, last + 1)) - steps)
    if missing:
        problems.append(f"{len(missing)} step(s) missing from the log (first: {missing[0]})")
    if val_every:
        want = {0, *range(val_every, last + 1, val_every)}
        if expected_steps and last >= expected_steps:
            want.add(expected_steps)
        have = set(df.step[df.val_acc.notna()])
        lost = sorted(want - have)
        if lost:
            problems.append(f"{len(lost)} validation point(s) missing (first: step {lost[0]})")
    status = RunStatus(complete=not problems, last_step=last, expected_steps=expected, problems=problems)
    return df, status


def coerce(df: pd.DataFrame) -> pd.DataFrame:
    out = pd.DataFrame(index=df.index)
    for col, (dtype, _m, _s) in COLUMNS.items():
        s = pd.to_numeric(df[col], errors="coerce") if col in df else pd.Series(np.nan, index=df.index)
        if dtype == "int64":
            out[col] = s.astype("Int64")
        elif dtype == "bool":
            out[col] = s.map(lambda v: pd.NA if pd.isna(v) else bool(v)).astype("boolean")
        else:
            out[col] = s.astype("float64")
    return out.reset_index(drop=True)


def write_metrics(df: pd.DataFrame, status: RunStatus, parquet: str | Path, status_json: str | Path) -> None:
    Path(parquet).parent.mkdir(parents=True, exist_ok=True)
    df.to_parquet(parquet, index=False)
    Path(status_json).write_text(json.dumps(asdict(status), indent=1) + "\n")


def read_status(path: str | Path) -> RunStatus:
    return RunStatus(**json.loads(Path(path).read_text()))
