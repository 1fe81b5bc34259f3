"""A run's parsed files read back: ``metrics.parquet`` (or .csv) and ``status.json``, as rule parse wrote
them. Light: pandas only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from coolsampler.spec.inputs import InputError
from coolsampler.spec.metrics_schema import COLUMNS, RunStatus


def load_status(path: str | Path | None) -> RunStatus | None:
    """A ``status.json`` (keys complete, last_step, expected_steps, problems) as a RunStatus. Raises
    ``InputError`` for one that is not that (a hand-edited or cut file)."""
    if path is None or not Path(path).exists():
        return None
    p = Path(path)
    try:
        d = json.loads(p.read_bytes().decode("utf-8-sig"))
    except OSError as e:  # a directory of that name, or one this user may not read
        raise InputError(p, f"cannot be read ({e.strerror or e})") from None
    except (UnicodeDecodeError, ValueError, RecursionError) as e:  # RecursionError: 10^5 nested brackets
        raise InputError(p, f"not a JSON status ({' '.join(str(e).split()) or type(e).__name__})") from None
    if not isinstance(d, dict):
        kind = {list: "list", str: "string", bool: "boolean", type(None): "null"}.get(type(d), "number")
        raise InputError(p, f"a JSON {kind}; expected an object (complete, last_step, expected_steps)")
    for key, kind in (("complete", bool), ("last_step", int), ("expected_steps", int)):
        value = d.get(key)
        if not isinstance(value, kind) or kind is int and (isinstance(value, bool) or value < 0):
            want = "true or false" if kind is bool else "an integer >= 0"
            raise InputError(p, f"{value!r} is not valid; allowed: {want}", key)
    problems = d.get("problems", [])
    if not isinstance(problems, list) or not all(isinstance(x, str) for x in problems):
        raise InputError(p, "not a list of strings", "problems")
    return RunStatus(
        complete=d["complete"], last_step=d["last_step"], expected_steps=d["expected_steps"], problems=problems
    )


def _plain(value: Any) -> Any:
    """A cell as the file wrote it (3, not numpy's np.int64(3)), for the line that names it."""
    return value.item() if isinstance(value, np.generic) else value


def _bad_cell(values: pd.Series, flag: bool) -> int | None:
    """The position of the first cell of a table column that is not a number (or, for a flag, true/false)."""
    if pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
        return None
    numbers = pd.to_numeric(values, errors="coerce")
    for i, (v, n) in enumerate(zip(values.to_numpy(), numbers.to_numpy(), strict=True)):
        if pd.isna(v) or not pd.isna(n) or flag and str(v).lower() in ("true", "false"):
            continue
        return i
    return None


def check_table(df: pd.DataFrame, path: Path) -> pd.DataFrame:
    """A metrics table as ``coolsampler parse`` writes it: a ``step`` column of integers >= 0 below 10^7,
    each column of the schema numbers (a flag true/false). Raises ``InputError`` naming the cell's line
    (a CSV's header is line 1) and column; returns the table with its columns as numbers."""
    from coolsampler.results.metrics import MAX_STEP
    from coolsampler.spec.runlog import as_step

    def where(i: int) -> str:
        return str(i + 2) if path.suffix == ".csv" else f"row {i + 1}"

    if "step" not in df.columns:
        raise InputError(path, "no step column; expected a metrics table as coolsampler parse writes it")
    out = df.copy()
    for col in df.columns:
        if col not in COLUMNS:
            continue
        flag = COLUMNS[col][0] == "bool"
        if (i := _bad_cell(df[col], flag)) is not None:
            raise InputError(path, f"{col}: {_plain(df[col].iloc[i])!r} is not a number", where(i))
        if not flag:
            out[col] = pd.to_numeric(df[col], errors="coerce")
    steps: Any = pd.to_numeric(out["step"], errors="coerce").to_numpy(float)
    for i, s in enumerate(steps):
        step = as_step(float(s))
        if step is None or step >= MAX_STEP:
            shown, allowed = _plain(df["step"].iloc[i]), f"an integer 0..{MAX_STEP - 1}"
            raise InputError(path, f"step: {shown!r} is not valid; allowed: {allowed}", where(i))
    out["step"] = steps.astype("int64")
    return out


def load_metrics(path: str | Path | None) -> pd.DataFrame | None:
    """A run's ``metrics.parquet`` (or .csv), or None when the path is None or absent."""
    if path is None or not Path(path).exists():
        return None
    p = Path(path)
    if p.suffix == ".csv":
        from coolsampler.results.readers import read_csv
        from coolsampler.spec.runlog import utf8_bytes

        utf8_bytes(p)
        return check_table(read_csv(p), p)
    try:
        df = pd.read_parquet(p)
    except Exception as e:  # pyarrow's errors have no common base: a file that is not Parquet, cut short
        raise InputError(p, f"not a Parquet table ({type(e).__name__}: {' '.join(str(e).split())})") from None
    return check_table(df, p)
