"""A run's metrics re-dressed as another trainer's log: its keys (``results.sources``), its layout and format.

What the fixtures of the other systems are made from, and what a test reads back: a parsed metrics table
(one of this project's real runs) written under a ``Source``'s own keys in one of the formats that system's
logger writes, so that reading it back must give the same columns, events and lag. Each writer follows the
layout its system writes (the file, the record shape, the step axis), as the ``Source`` module cites.
Pandas and the standard library; the TensorBoard writer needs the ``tensorboard`` package.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from coolsampler.results.sources import Source
from coolsampler.spec.metrics_schema import COLUMNS

# A wildcard in a key (a data source, a domain) is written as this name.
FILL = "toy"

Rows = list[tuple[int, dict[str, Any]]]


def key_name(pattern: str) -> str:
    """The key a pattern names, its wildcards filled in."""
    return pattern.replace("*", FILL)


def rows_of(metrics: pd.DataFrame, source: Source, columns: tuple[str, ...] | None = None) -> Rows:
    """``(step, {key: value})`` per step of a metrics table, under ``source``'s keys: each mapped column's
    value (divided by the key's scale, so that reading it back multiplies it again), NaN left out, at the
    step the system logs it at (the learner step less the key's offset; a value that would fall before the
    system's first step, such as the validation before step 1 of a system that validates only after an
    update, is left out)."""
    by_step: dict[int, dict[str, Any]] = {}
    keys = [k for k in source.keys if columns is None or k.column in columns]
    taken: set[str] = set()
    chosen = []
    for k in keys:  # the first key of a column is the one written
        if k.column not in taken:
            taken.add(k.column)
            chosen.append(k)
    for _, row in metrics.iterrows():
        step = int(row["step"])
        by_step.setdefault(step, {})
        for k in chosen:
            v = row.get(k.column)
            if v is None or pd.isna(v) or step - k.offset < 0:
                continue
            v = float(v) / k.scale
            value = int(v) if COLUMNS[k.column][0] in ("int64", "Int64") else v
            by_step.setdefault(step - k.offset, {})[key_name(k.key)] = value
    return sorted(by_step.items())


def write_verl_jsonl(rows: Rows, path: Path) -> None:
    """verl's file logger: ``{"step": k, "data": {...}}`` a line (verl/utils/tracking.py)."""
    with path.open("w") as f:
        for step, data in rows:
            f.write(json.dumps({"step": step, "data": data}) + "\n")


def write_verl_rows(rows: Rows, path: Path, sync_prefix: str = "fully_async/rollouter/") -> None:
    """verl's file logger called several times a step (the fully_async recipe: its sync row of rollouter
    timings, a validation row where it validates, then its training row; fully_async_trainer.py L783-786,
    L819-830, L806-809), each its own ``{"step": k, "data": {...}}`` line at the same step."""
    with path.open("w") as f:
        for step, data in rows:
            sync = {k: v for k, v in data.items() if k.startswith(sync_prefix)}
            val = {k: v for k, v in data.items() if k.startswith("val-")}
            train = {k: v for k, v in data.items() if k not in sync and k not in val}
            for part in (sync, val, train if step > 0 else {}):
                if part:
                    f.write(json.dumps({"step": step, "data": part}) + "\n")


def write_components_jsonl(rows: Rows, path: Path, split: Callable[[str], str], start: float = 1.7558e9) -> None:
    """One JSONL file that several components append to, each its own rows of a step, ``{"step", "time",
    ...}`` (prime-rl's ``FileMonitor.log_metrics``); ``split`` names the component of each key. A row that
    holds only evaluation keys carries a float step, as prime-rl's orchestrator writes it."""
    with path.open("w") as f:
        for step, data in rows:
            parts: dict[str, dict[str, Any]] = {}
            for k, v in data.items():
                parts.setdefault(split(k), {})[k] = v
            for i, (component, part) in enumerate(sorted(parts.items())):
                s: Any = float(step) if component == "eval" else step
                f.write(json.dumps({"step": s, "time": round(start + 10 * step + i * 0.1, 1), **part}) + "\n")


def write_trainer_state(rows: Rows, path: Path, eval_prefix: str = "eval_") -> None:
    """A Hugging Face ``trainer_state.json``: ``log_history`` rows of ``{**logs, "step": k}``, the
    ``eval_``-prefixed keys of a step in a row of their own (transformers' ``Trainer.log``)."""
    history = []
    for step, data in rows:
        train = {k: v for k, v in data.items() if not k.startswith(eval_prefix)}
        ev = {k: v for k, v in data.items() if k.startswith(eval_prefix)}
        if train and step > 0:
            history.append({**train, "epoch": round(step / max(1, len(rows)), 4), "step": step})
        if ev:
            history.append({**ev, "epoch": round(step / max(1, len(rows)), 4), "step": step})
    last = max((s for s, _ in rows), default=0)
    doc = {"global_step": last, "log_history": history, "logging_steps": 1, "max_steps": last}
    path.write_text(json.dumps(doc, indent=2, sort_keys=True))


def write_metrics_tag(rows: Rows, path: Path) -> None:
    """ROLL's stdout tracker lines, each after its logger's prefix, among other output."""
    with path.open("w") as f:
        f.write("[2026-08-19 15:30:00] [start_rlvr_pipeline.py (25)] [INFO] [DRIVER 0 / 1][PID 4242] config printed\n")
        for step, data in rows:
            payload = json.dumps({"step": step, "metrics": data})
            f.write(
                f"[2026-08-19 15:36:11] [tracking.py (161)] [INFO] [DRIVER 0 / 1][PID 4242] metrics_tag: {payload}\n"
            )


def write_tensorboard(rows: Rows, directory: Path) -> None:
    """TensorBoard event files: ``add_scalar(key, value, step)`` for every value (float32, as the
    trackers write them)."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    directory.mkdir(parents=True, exist_ok=True)
    writer = EventFileWriter(str(directory))
    for step, data in rows:
        for k, v in data.items():
            if isinstance(v, (int, float)) and math.isfinite(float(v)):
                summary = Summary(value=[Summary.Value(tag=k, simple_value=float(v))])
                writer.add_event(Event(step=step, wall_time=1.7558e9 + step, summary=summary))
    writer.close()


WRITERS: dict[str, Callable[..., None]] = {
    "verl JSONL": write_verl_jsonl,
    "verl JSONL rows": write_verl_rows,
    "components JSONL": write_components_jsonl,
    "trainer_state.json": write_trainer_state,
    "metrics_tag lines": write_metrics_tag,
    "TensorBoard": write_tensorboard,
}


def redress(
    metrics: pd.DataFrame,
    source: Source,
    fmt: str,
    dest: Path,
    extra: Callable[[int, dict[str, Any]], dict[str, Any]] | None = None,
    **kwargs: Any,
) -> Path:
    """``metrics`` written as ``source``'s log in format ``fmt`` at ``dest`` (a file, or a directory for
    TensorBoard). ``extra(step, data)``: keys the system writes beside its mapped ones (its own counters, the
    keys it is detected by), added to each step's data. Returns ``dest``."""
    if fmt not in WRITERS:
        raise ValueError(f"format {fmt!r}: one of {', '.join(WRITERS)}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "components JSONL" and "split" not in kwargs:  # each key in the rows of the process that writes it
        by_key = {key_name(k.key): k.component or "main" for k in source.keys}
        kwargs["split"] = lambda key: by_key.get(key, "main")
    rows = rows_of(metrics, source)
    if extra is not None:
        rows = [(step, {**data, **extra(step, data)}) for step, data in rows]
    WRITERS[fmt](rows, dest, **kwargs)
    return dest
