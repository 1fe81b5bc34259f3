"""verl JSONL -> the per-run metrics table (schema: ``coolsampler.spec.metrics_schema``).

The log is read by ``coolsampler.spec.runlog`` (verl's ``file`` logger: one ``{"step": k, "data": {...}}``
record per line, validation metrics merged into the steps where validation ran). The parser keeps what
is sound and says what is not: a truncated last line, NaN values, missing validation points and a run
that stopped early are recorded in ``RunStatus`` (and so reach Table 4); a required metric absent from
every step is an error naming the run and the metric. Works on a user's own verl JSONL too
(``coolsampler parse PATH``). Imports pandas and pyarrow only: no verl, vLLM or torch.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from coolsampler.spec.lag import LAG_COLUMNS
from coolsampler.spec.metrics_schema import (
    ABSENT,
    COLUMNS,
    DIAGNOSTIC_COLUMNS,
    GUARD_COLUMNS,
    LOG1P_OF,
    OTHER_SYSTEM_COLUMNS,
    PROVIDED_BY,
    REQUIRED,
    RunStatus,
    pick,
)
from coolsampler.spec.runlog import read_jsonl

# The validation columns: logged at validation steps only (the initial one, step 0, included), so sparse
# by design; their gaps are checked against the validation interval, not step by step.
VALIDATION_COLUMNS: tuple[str, ...] = ("val_acc", "val_acc_sampled", "val_digit_error")


class MetricsError(ValueError):
    """A log the table cannot be built from (no records, a required metric never logged)."""


def column_value(data: dict[str, Any], column: str) -> Any:
    """The value of metrics-table ``column`` in one verl record's ``data``, or None when absent.

    For readers of a log while it is written (``coolsampler status``): the same source keys as the
    parser (``metrics_schema.COLUMNS``), so both name the same metric.
    """
    val = pick(data, COLUMNS[column][2])
    return None if val is ABSENT else val


# Where a log of unknown length stops being believed: no run of the paper's recipe comes near 10^7 steps,
# and a step past it is a corrupt line, which must not make the checks below cost memory by its size.
MAX_STEP = 10**7


def _number_for(column: str, v: Any) -> bool:
    """Whether ``v`` is a value ``column`` reads: a number or null (logged, not a number: NaN), and true or
    false for a flag. A string ("0.9") or, for a number, a boolean is none: pandas would read "0.9" as 0.9
    and true as 1.0, a validation accuracy the run never had."""
    if v is None:
        return True
    if isinstance(v, bool):
        return COLUMNS[column][0] == "bool"
    return isinstance(v, (int, float))


def _finite(v: Any) -> bool:
    """A real, finite number; bools count (the ``refreshed`` flag), null/NaN/inf/text do not."""
    if isinstance(v, bool):
        return True
    return isinstance(v, (int, float)) and math.isfinite(v)


def parse_jsonl(
    path: str | Path,
    *,
    expected_steps: int | None = None,
    val_every: int | None = None,
    run: str | None = None,
    max_response_length: int | None = None,
    required: tuple[str, ...] = REQUIRED,
    sources: Mapping[str, tuple[str, ...]] | None = None,
) -> tuple[pd.DataFrame, RunStatus]:
    """Parse one run's verl JSONL. ``expected_steps``/``val_every`` let the status say what is missing.

    Values that are null, NaN or infinite are kept as NaN/inf in the table (they are what the run
    logged) but every such step is reported, so a summary over them carries a note.

    ``max_response_length``: the run's configured limit, which ``clip_frac`` is measured against
    (``length_clip_fraction``). None: read from ``run.yaml`` beside the log (``recipe``), as the
    training job writes it; if that is absent too, ``clip_frac`` is NaN rather than verl's
    batch-width fraction.

    ``required``: the columns whose absence from every step is an error. The pipeline's own logs must
    carry all of ``REQUIRED``; a user's own verl log is read with ``("step",)`` and its never-logged
    columns stay NaN (``metrics_schema.absent_columns`` names them, ``PROVIDED_BY`` says what logs them).
    """
    by_step, problems = read_jsonl(path)
    return parse_records(
        by_step,
        problems,
        log=path,
        expected_steps=expected_steps,
        val_every=val_every,
        run=run,
        max_response_length=max_response_length,
        required=required,
        sources=sources,
    )


def parse_records(
    by_step: Mapping[int, dict[str, Any]],
    problems: list[str],
    *,
    log: str | Path,
    expected_steps: int | None = None,
    val_every: int | None = None,
    run: str | None = None,
    max_response_length: int | None = None,
    required: tuple[str, ...] = REQUIRED,
    sources: Mapping[str, tuple[str, ...]] | None = None,
) -> tuple[pd.DataFrame, RunStatus]:
    """``parse_jsonl`` on records already read (one per step, as ``runlog.merge_records`` gives them),
    whatever wrote them: verl's file logger, its console, TensorBoard or MLflow
    (``coolsampler.results.readers``).

    ``sources``: source keys to read a column from in place of the schema's (``--val`` names the
    validation series this way).
    """
    path = log
    run = run or str(path)
    problems = list(problems)
    if not by_step:
        raise MetricsError(f"{run}: no records in {path}")
    # A step past the run's length (or, of unknown length, at 10^7 or beyond) is a corrupt line, not part
    # of the run: skipped and said, so that no check below costs memory or time by the step's size.
    limit = expected_steps if expected_steps else MAX_STEP - 1
    beyond = sorted(s for s in by_step if s > limit)
    if beyond:
        past = f"past the run's {expected_steps} steps" if expected_steps else f"at or past {MAX_STEP}"
        problems.append(f"{len(beyond)} step(s) {past}, skipped (first: step {beyond[0]})")
        if len(beyond) == len(by_step):
            raise MetricsError(f"{run}: every step of {path} is {past}")
    rows = []
    absent: dict[str, list[int]] = {}  # column -> training steps whose record lacks it
    bad: dict[str, list[int]] = {}  # column -> steps that logged it as null / NaN / inf
    refused: list[tuple[str, int, Any]] = []  # (column, step, value) of values that are not numbers
    for step in sorted(s for s in by_step if s <= limit):
        data = by_step[step]
        row: dict[str, Any] = {"step": step}
        for col, (_dtype, _meaning, schema_sources) in COLUMNS.items():
            keys = (sources or {}).get(col, schema_sources)
            if col == "step":
                continue
            if not keys:  # derived below from the columns read here, or a column this log's system never logs
                row[col] = np.nan
                continue
            val = pick(data, keys)
            if val is ABSENT:
                row[col] = np.nan
                if step > 0:
                    absent.setdefault(col, []).append(step)
                continue
            if not _number_for(col, val):  # read one way: a number (a flag may be true/false), else refused
                refused.append((col, step, val))
                row[col] = np.nan
                continue
            if not _finite(val) and (step > 0 or col in VALIDATION_COLUMNS):
                bad.setdefault(col, []).append(step)
            row[col] = np.nan if val is None else val
        rows.append(row)
    df = pd.DataFrame(rows)
    n_train = int((df.step > 0).sum())
    if n_train:
        for col in required:
            if col != "step" and len(absent.get(col, [])) == n_train:
                raise MetricsError(
                    f"{run}: required metric {col!r} ({' or '.join(COLUMNS[col][2])}) is missing from the log;"
                    f" verl logs it with {PROVIDED_BY[col]}"
                )
    else:
        problems.append("no training step logged (the run died before step 1)")
    limit = max_response_length if max_response_length is not None else configured_max_response_length(path)
    df["clip_frac"] = length_clip_fraction(df["clip_frac"], df["response_length_max"], limit)
    df = coerce(df)
    for col, of in LOG1P_OF.items():
        df[col] = log1p_bound(df[of])
    gate_lag(df)
    # A column the run logs (somewhere) but some steps lack, or logged as null/NaN/inf: keep the
    # rows, say so. The validation columns are sparse by design; val_acc's gaps are the validation
    # check below (the sampled copy and the digit error come with the same validations). The
    # staleness diagnostics describe a run without measuring it: their gaps leave the log whole.
    for col in COLUMNS:
        if col in DIAGNOSTIC_COLUMNS or col in GUARD_COLUMNS or col in LAG_COLUMNS or col in OTHER_SYSTEM_COLUMNS:
            continue  # a system that measures no lag leaves it empty; verl logs evictions only where it evicted
        miss = absent.get(col, [])
        if col != "step" and col not in VALIDATION_COLUMNS and miss and len(miss) < n_train:
            problems.append(f"{len(miss)} step(s) without {col} (first at step {miss[0]})")
        if bad.get(col):
            problems.append(
                f"{len(bad[col])} step(s) with NaN/inf {col} (null, NaN or inf in the log; first at step {bad[col][0]})"
            )
    if refused:
        col, step, val = refused[0]
        problems.append(f"{len(refused)} value(s) not a number, skipped ({col} at step {step}: {val!r})")
    last = int(df.step.max())
    expected = expected_steps or last
    if last < expected:
        problems.append(f"stopped at step {last} of {expected}")
    # the gaps counted from the steps logged, never from the range of steps (a log's last step is its size)
    steps = sorted(int(s) for s in df.step[df.step > 0])
    if len(steps) < last:
        first = next((k for k, s in enumerate(steps, 1) if s != k), len(steps) + 1)
        problems.append(f"{last - len(steps)} step(s) missing from the log (first: {first})")
    if val_every:
        have = {int(s) for s in df.step[df.val_acc.notna()]}
        wanted = 1 + last // val_every  # step 0 and every val_every-th step up to the last
        found = 1 if 0 in have else 0
        found += sum(1 for s in have if s > 0 and s % val_every == 0)
        lost_first = 0 if 0 not in have else None
        if lost_first is None and found < wanted:
            lost_first = next(k for k in range(val_every, last + 1, val_every) if k not in have)
        end = expected_steps if expected_steps and last >= expected_steps and expected_steps % val_every else None
        if end is not None:
            wanted += 1
            if end in have:
                found += 1
            elif lost_first is None:
                lost_first = end
        if found < wanted:
            problems.append(f"{wanted - found} validation point(s) missing (first: step {lost_first})")
    status = RunStatus(complete=not problems, last_step=last, expected_steps=expected, problems=problems)
    return df, status


def gate_lag(df: pd.DataFrame) -> None:
    """A gated run's lag, in place: its gate's staleness, the same for every sample of a step (a batch is
    drawn from one set of weights), replacing verl's own reading. verl's V1 trainer logs the lag as
    (global_steps - 1) minus the weight version its server was last given, and the gate's pushes give it the
    current step also where they put the stale snapshot back (patch 0001's ``_push``, after a validation),
    so verl's reading can under-report until the next refresh; the gate's own column (``staleness``,
    spec.guard.staleness) counts from the weights the sampler holds."""
    gate = df["staleness"].notna() if "staleness" in df else pd.Series(False, index=df.index)
    if not gate.any():
        return
    for col in LAG_COLUMNS[:3]:
        df[col] = df["staleness"].where(gate).astype("float64")


def configured_max_response_length(log: str | Path) -> int | None:
    """The max response length a run was trained with, from ``run.yaml`` beside its log (or None)."""
    run_yaml = Path(log).with_name("run.yaml")
    if not run_yaml.exists():
        return None
    import yaml

    try:
        recipe = (yaml.safe_load(run_yaml.read_text()) or {}).get("recipe") or {}
        value = recipe.get("max_response_length")
    except (yaml.YAMLError, AttributeError):
        return None
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def length_clip_fraction(clip_ratio: pd.Series, longest: pd.Series, limit: int | None) -> pd.Series:
    """Fraction of sampled responses that ran to the configured length limit, from verl's metrics.

    verl logs ``response_length/clip_ratio`` = mean(length == width of the padded response batch)
    and ``response_length/max`` = the longest response. Where the batch is padded to its longest
    response, that ratio is at least 1/batch even when no response reached the limit. The two
    logged numbers give the right answer without per-sample lengths: if the longest response
    reached the limit, the width is the limit and the ratio counts exactly the responses at it;
    otherwise no response reached it and the fraction is 0. Seen on the patched verl 0.9.1 stack
    (smoke study, limit 8): ``response_length/max`` 4, ``clip_ratio`` 0.375, i.e. 24 of 64 responses
    "clipped" at length 4, none at 8. Where a batch is padded to the limit the ratio is already right
    and this changes nothing. NaN where ``limit`` is unknown or a step lacks either metric.
    """
    ratio = pd.to_numeric(clip_ratio, errors="coerce").astype("float64")
    if limit is None:
        return pd.Series(np.nan, index=ratio.index)
    top = pd.to_numeric(longest, errors="coerce").astype("float64")
    out = ratio.where(top >= float(limit), 0.0)
    return out.where(ratio.notna() & top.notna())


def log1p_bound(chi2: pd.Series) -> pd.Series:
    """log(1 + chi^2), the bound on the reverse KL that a chi^2 column implies (``metrics_schema.LOG1P_OF``).

    verl's chi^2 is a batch estimate, mean(rho^2) - 1, which can dip below 0 (never below -1) when
    the batch's tokens all have rho < 1; log1p keeps that sign, so such a step reads <= 0 nats, as a
    k1 KL of a batch can. NaN stays NaN; a value <= -1 (impossible for a mean of squares) is NaN.
    """
    x = pd.to_numeric(chi2, errors="coerce").astype("float64")
    return np.log1p(x.where(x > -1.0))


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
