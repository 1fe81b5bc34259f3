"""A training log in any shape verl writes it, read as verl's records: ``{step: data}`` and the problems met.

verl's ``trainer.logger`` backends each keep the same ``data`` dict per step: the ``file`` logger as JSONL
(``<project>/<experiment>.jsonl``, or ``train.jsonl`` in this project's runs), the ``console`` logger as
``step:K - key:value - ...`` lines, ``tensorboard`` as event files (``tensorboard_log/<project>/<experiment>``),
``mlflow`` as a tracking store, ``wandb`` online (its history exported to CSV). Reading each back into
those records lets one parser (``coolsampler.results.metrics.parse_records``) make the metrics table of
all of them. Light: the standard library and pandas; TensorBoard's event files need the ``tensorboard``
package (coolsampler's ``tensorboard`` extra), and without it the reader says so in one line.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from coolsampler.spec.inputs import InputError
from coolsampler.spec.runlog import (
    Records,
    as_step,
    merge_records,
    read_jsonl,
    step_problem,
    stray_line_problem,
    utf8_bytes,
)

# What `coolsampler analyze` reads, for the one line an unreadable input gets.
FORMATS = (
    "verl's file logger JSONL ({'step': K, 'data': {...}} per line, or flat {'step': K, ...} records)",
    "verl's console logger output ('step:K - key:value - ...' lines)",
    "TensorBoard event files (events.out.tfevents.*, or their directory)",
    "an MLflow store (a file store's run directory mlruns/<experiment>/<run>, or an mlflow.db)",
    "a wandb history exported to CSV (a _step or Step column)",
    "a Hugging Face trainer_state.json (TRL: its log_history)",
    "'metrics_tag: {...}' lines (ROLL's stdout tracker)",
    "a parsed metrics.parquet / metrics.csv",
)
FORMATS_LINE = "formats read: " + "; ".join(FORMATS)
TENSORBOARD_EXTRA = "install coolsampler's tensorboard extra (pip install '.[tensorboard]' in the checkout)"
WANDB_EXPORT = (
    "wandb keeps its history online: export it to CSV first, e.g. "
    "python -c \"import wandb; wandb.Api().run('ENTITY/PROJECT/RUN_ID').history(samples=100000)"
    ".to_csv('run.csv')\" (or the run page's Export CSV), then analyze run.csv"
)
TFEVENTS = "events.out.tfevents.*"

# verl's console logger: ``concat_dict_to_str`` (verl.utils.logger.aggregate_logger) prints one line a step.
_CONSOLE_RE = re.compile(r"(?:^|\s)step:(\d+)((?: - [^\s:][^:]*:\S+)*)\s*$")


class UnreadableLog(ValueError):
    """An input none of the readers takes; the message lists the formats read."""


def _number(text: str) -> Any:
    """A console value as verl printed it (pprint of a number): int, float, nan/inf; else the text."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def console_records(path: Path) -> tuple[list[tuple[int, dict[str, Any]]], int]:
    """The ``step:K - key:value`` lines of a console log (anything else in it is skipped: the console
    holds all of a run's output), and how many such lines there were."""
    records = []
    for line in utf8_bytes(path).decode("utf-8").splitlines():
        m = _CONSOLE_RE.search(line)
        if not m:
            continue
        data = {}
        for part in m[2].split(" - ")[1:]:
            key, _, value = part.rpartition(":")
            data[key] = _number(value)
        records.append((int(m[1]), data))
    return records, len(records)


def is_console_log(path: Path) -> bool:
    """Whether a text file holds verl console step lines (read from its start, up to 2 MB)."""
    try:
        with path.open("rb") as f:
            head = f.read(2_000_000).decode(errors="replace")
    except OSError:
        return False
    return any(_CONSOLE_RE.search(line) for line in head.splitlines())


# The last file ``flat_jsonl_records`` parsed, by (path, size, mtime): a system whose components write one
# file (readers.component_rows) reads the rows the format's detection already parsed, not the file again.
_LAST_FLAT: dict[tuple[str, int, int], Any] = {}


def flat_jsonl_records(path: Path) -> tuple[list[tuple[int, dict[str, Any]]], list[str]] | None:
    """Flat JSON records (``{"step": K, "key": value, ...}``, or wandb's ``_step``), or None if the file
    holds none."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key in _LAST_FLAT:
        return _LAST_FLAT[key]
    _LAST_FLAT.clear()
    _LAST_FLAT[key] = got = _flat_jsonl_records(path)
    return got


def forget_flat() -> None:
    """Drop the rows ``flat_jsonl_records`` keeps of its last file (once it is known no one reads them again)."""
    _LAST_FLAT.clear()


def _flat_jsonl_records(path: Path) -> tuple[list[tuple[int, dict[str, Any]]], list[str]] | None:
    records, stray, bad_steps = [], [], []
    for i, raw in enumerate(utf8_bytes(path).split(b"\n"), 1):
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw)
            given = rec["step" if "step" in rec else "_step"]
        except (ValueError, KeyError, TypeError, RecursionError):  # RecursionError: a line of 10^5 brackets
            stray.append(i)
            continue
        if (step := as_step(given)) is None:
            bad_steps.append((i, given))
            continue
        records.append((step, {k: v for k, v in rec.items() if k not in ("step", "_step")}))
    if not records:
        return None
    problems = [stray_line_problem(stray)] if stray else []
    return records, problems + ([step_problem(bad_steps)] if bad_steps else [])


def _training(records: list[tuple[int, dict[str, Any]]]) -> list[tuple[int, dict[str, Any]]]:
    """Records from a backend that does not keep verl's ``training/global_step`` key (MLflow renames
    nothing, but a CSV export may drop it): a record with training metrics is marked as a training one,
    so that ``merge_records`` tells a re-logged (resumed) step from a validation merged into it."""
    out = []
    for step, data in records:
        if "training/global_step" not in data and any(not k.startswith("val-") for k in data) and step > 0:
            data = {**data, "training/global_step": step}
        out.append((step, data))
    return out


def tensorboard_records(path: Path) -> tuple[Records, list[str]]:
    """The scalars of TensorBoard event files (a file, or every one in a directory), by step.

    verl's tensorboard logger writes ``add_scalar(key, value, step)`` per metric; a step written more than
    once (a resumed run) keeps its last value and is reported."""
    try:
        from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    except ImportError:
        raise UnreadableLog(
            f"{path}: TensorBoard event files need the tensorboard package: {TENSORBOARD_EXTRA}"
        ) from None
    files = sorted(path.glob(TFEVENTS)) if path.is_dir() else [path]
    by_step: Records = {}
    seen: set[tuple[int, str]] = set()
    relogged: set[int] = set()
    for f in files:
        for event in EventFileLoader(str(f)).Load():
            if not event.HasField("summary"):
                continue
            for v in event.summary.value:
                if v.HasField("simple_value"):
                    value = float(v.simple_value)
                elif v.HasField("tensor") and v.tensor.float_val:
                    value = float(v.tensor.float_val[0])
                elif v.HasField("tensor") and v.tensor.tensor_content:
                    import numpy as np

                    value = float(np.frombuffer(v.tensor.tensor_content, dtype=np.float32)[0])
                else:
                    continue
                step = int(event.step)
                if (step, v.tag) in seen and not v.tag.startswith("val-"):
                    relogged.add(step)
                seen.add((step, v.tag))
                by_step.setdefault(step, {})[v.tag] = value
    return by_step, _relogged_problem(relogged)


def trainer_state_records(path: Path) -> tuple[Records, list[str]] | None:
    """The ``log_history`` of a Hugging Face ``trainer_state.json`` (TRL's trainers: transformers'
    ``Trainer.log`` appends ``{**logs, "step": global_step}``, a training row every ``logging_steps`` and an
    evaluation row of ``eval_``-prefixed keys at the same step; transformers 5.19 ``trainer.py`` L4148-4170),
    one record per step: the rows of a step merged. None for a JSON file without such a history."""
    try:
        doc = json.loads(utf8_bytes(path))
    except (ValueError, RecursionError):
        return None
    history = doc.get("log_history") if isinstance(doc, dict) else None
    if not isinstance(history, list):
        return None
    by_step: Records = {}
    bad: list[tuple[int, Any]] = []
    last: int | None = None
    for i in range(len(history)):
        row, history[i] = history[i], None  # each row kept once, as its step's record: no copy of the history
        if not isinstance(row, dict):
            bad.append((i + 1, row))
            continue
        step = as_step(row.get("step"))
        if step is None:
            bad.append((i + 1, row.get("step")))
            continue
        # Trainer.log appends at the current global step, and a resumed run's state is the checkpoint's, so
        # one run's history never goes back: one that does is two histories spliced (rows would be merged
        # into steps they were not logged at).
        if last is not None and step < last:
            raise InputError(
                path, f"log_history goes back from step {last} to step {step} (row {i + 1}): not one run's history"
            )
        last = step
        row.pop("step")
        if step in by_step:
            by_step[step].update(row)
        else:
            by_step[step] = row
    if not by_step:
        return None
    problems = [step_problem(bad).replace("line(s)", "log_history row(s)").replace("(line", "(row")] if bad else []
    return by_step, problems


# ROLL's stdout tracker: ``logger.info(f"metrics_tag: {json.dumps({'step': step, 'metrics': values})}")``
# (alibaba/ROLL roll/utils/tracking.py L154-164, at 8eb27cc2), after its logger's own prefix.
_METRICS_TAG = b"metrics_tag: "


def metrics_tag_records(path: Path) -> tuple[Records, list[str]] | None:
    """The ``metrics_tag: {"step": K, "metrics": {...}}`` lines of a log (ROLL's stdout tracker; every other
    line of the process's output is skipped), one record per step; None where there is no such line. A step
    logged again (ROLL re-logs its history on resume) keeps its last line, and that is said."""
    by_step: Records = {}
    relogged: set[int] = set()
    stray: list[int] = []
    found = False
    for i, raw in enumerate(utf8_bytes(path).split(b"\n"), 1):
        at = raw.find(_METRICS_TAG)
        if at < 0:
            continue
        found = True
        try:
            rec = json.loads(raw[at + len(_METRICS_TAG) :])
            step, data = as_step(rec["step"]), rec["metrics"]
        except (ValueError, KeyError, TypeError, RecursionError):
            stray.append(i)
            continue
        if step is None or not isinstance(data, dict):
            stray.append(i)
            continue
        if step in by_step:
            relogged.add(step)
        by_step[step] = dict(data)
    if not found:
        return None
    if not by_step:  # a ROLL log in which no line has its step axis: nothing to read, said as such
        raise InputError(
            path, f'{len(stray)} metrics_tag line(s), none a {{"step": K, "metrics": {{...}}}} record', stray[0]
        )
    return by_step, ([stray_line_problem(stray)] if stray else []) + _relogged_problem(relogged)


def component_rows(path: Path, ignore: tuple[str, ...] = ()) -> tuple[Records, list[str]]:
    """Flat JSONL rows of which several make one step, each written by another component of the trainer
    (prime-rl: the trainer's and the orchestrator's rows in one ``metrics.jsonl``), united per step. Two rows
    of one step that give one key two values (``ignore``: keys that differ by design, as each row's time)
    are not one run's log: an ``InputError`` naming the step and the key."""
    flat = flat_jsonl_records(path)
    _LAST_FLAT.clear()  # read once more at most: the rows are united below, the parse is not kept
    if flat is None:
        raise InputError(path, "no JSON rows with a step")
    rows, problems = flat
    by_step: Records = {}
    for step, data in rows:
        have = by_step.setdefault(step, {})
        for k, v in data.items():
            if k in have and k not in ignore and have[k] != v and not (_nan(have[k]) and _nan(v)):
                raise InputError(
                    path,
                    f"two rows of step {step} give {k} two values ({have[k]!r} and {v!r}):"
                    " one run's components disagree",
                )
            have[k] = v
    return by_step, problems


def _nan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _relogged_problem(relogged: set[int]) -> list[str]:
    if not relogged:
        return []
    return [
        f"{len(relogged)} step(s) logged more than once (resumed run?), kept the last value of each"
        f" (first: step {min(relogged)})"
    ]


def is_mlflow_run(path: Path) -> bool:
    """An MLflow file store's run directory: ``meta.yaml`` and a ``metrics/`` folder."""
    return path.is_dir() and (path / "meta.yaml").is_file() and (path / "metrics").is_dir()


def mlflow_run_name(path: Path) -> str | None:
    """The run's name in an MLflow file store (verl names it by trainer.experiment_name)."""
    tag = path / "tags" / "mlflow.runName"
    if tag.is_file():
        return tag.read_text().strip() or None
    for line in (path / "meta.yaml").read_text().splitlines():
        if line.startswith("run_name:"):
            return line.split(":", 1)[1].strip().strip("'\"") or None
    return None


def _mlflow_key(name: str) -> str:
    """A metric's name back as verl logged it: verl's MLflow adapter writes ``@`` as ``_at_``."""
    return name.replace("_at_", "@")


def mlflow_records(path: Path) -> tuple[Records, list[str]]:
    """A run of an MLflow file store: each ``metrics/<key>`` file holds ``timestamp value step`` lines."""
    by_step: Records = {}
    relogged: set[int] = set()
    malformed: list[str] = []  # "metrics/<key>:<line>" of each line that is not "timestamp value step"
    metrics = path / "metrics"
    for f in sorted(p for p in metrics.rglob("*") if p.is_file()):
        key = _mlflow_key(f.relative_to(metrics).as_posix())
        seen: set[int] = set()
        for i, line in enumerate(utf8_bytes(f).decode("utf-8").splitlines(), 1):
            parts = line.split()
            if not parts:
                continue
            try:
                step, value = as_step(int(parts[2])), float(parts[1])
            except (IndexError, ValueError):
                step = None
            if step is None or len(parts) > 3:
                malformed.append(f"{f.relative_to(path).as_posix()}:{i}")
                continue
            if step in seen and not key.startswith("val-"):
                relogged.add(step)
            seen.add(step)
            by_step.setdefault(step, {})[key] = value
    problems = _relogged_problem(relogged)
    if malformed:
        more = f" and {len(malformed) - 1} more" if len(malformed) > 1 else ""
        problems.append(f"{len(malformed)} line(s) of {malformed[0]}{more} not 'timestamp value step', skipped")
    return by_step, problems


def mlflow_db_runs(path: Path) -> dict[str, tuple[Records, list[str]]]:
    """Every run of an MLflow SQLite store (verl's default tracking URI is ``sqlite:////tmp/mlruns.db``),
    by run name. Plain sqlite3: no mlflow package."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        names = dict(con.execute("SELECT run_uuid, name FROM runs"))
        rows = con.execute("SELECT run_uuid, key, value, step, is_nan FROM metrics ORDER BY run_uuid, timestamp")
        out: dict[str, tuple[Records, list[str]]] = {}
        seen: dict[str, set[tuple[int, str]]] = {}
        relogged: dict[str, set[int]] = {}
        for run, key, value, step, is_nan in rows:
            name = names.get(run) or run
            by_step = out.setdefault(name, ({}, []))[0]
            key = _mlflow_key(str(key))
            step = as_step(step)
            if step is None or not is_nan and not isinstance(value, (int, float)):
                raise InputError(
                    path,
                    f"metric {key!r} of run {name!r}: step {step!r}, value {value!r}; expected"
                    " an integer step >= 0 and a number",
                )
            if (step, key) in seen.setdefault(name, set()) and not key.startswith("val-"):
                relogged.setdefault(name, set()).add(step)
            seen[name].add((step, key))
            by_step.setdefault(step, {})[key] = math.nan if is_nan else float(value)
    except sqlite3.DatabaseError as e:
        raise UnreadableLog(f"{path}: not an MLflow store ({e}); {FORMATS_LINE}") from None
    finally:
        con.close()
    return {name: (recs, _relogged_problem(relogged.get(name, set()))) for name, (recs, _) in out.items()}


def wandb_csv_records(frame: pd.DataFrame) -> tuple[Records, list[str]]:
    """A wandb history exported to CSV: ``run.history().to_csv()`` (a ``_step`` column, metric names as
    logged) or the UI's export (a ``Step`` column, ``<run> - <metric>`` headers, ``__MIN``/``__MAX`` copies)."""
    step_col = next(c for c in ("_step", "step", "Step") if c in frame.columns)
    keep = {}
    for col in frame.columns:
        if col == step_col or str(col).startswith("_") or str(col).endswith(("__MIN", "__MAX")):
            continue
        keep[col] = col.split(" - ", 1)[1] if " - " in col else col
    # A CSV cell is text: each is read as a number, or refused and counted (a text cell would otherwise
    # turn its whole column into text, and the column would vanish unsaid).
    cols = [
        (name, frame[c].to_numpy(), pd.to_numeric(frame[c], errors="coerce").to_numpy(float))
        for c, name in keep.items()
    ]
    raw_steps = frame[step_col].to_numpy()
    steps = pd.to_numeric(frame[step_col], errors="coerce").to_numpy(float)
    records, bad_steps, refused = [], [], []
    for i in range(len(frame)):
        if pd.isna(raw_steps[i]):
            continue
        step = as_step(float(steps[i]))
        if step is None:
            bad_steps.append((i + 2, _plain(raw_steps[i])))  # its line: the header is line 1
            continue
        data = {}
        for name, raw, num in cols:
            if not math.isnan(num[i]):
                data[name] = float(num[i])
            elif not pd.isna(raw[i]) and str(raw[i]).strip().lower() not in ("nan", "inf", "-inf", ""):
                refused.append((name, step, _plain(raw[i])))
        if data:
            records.append((step, data))
    by_step, problems = merge_records(_training(records))
    if bad_steps:
        problems.insert(0, step_problem(bad_steps))
    if refused:
        name, step, raw = refused[0]
        problems.append(f"{len(refused)} value(s) not a number, skipped ({name} at step {step}: {raw!r})")
    return by_step, problems


def _plain(value: Any) -> Any:
    """A cell as the file wrote it (5.5, not numpy's np.float64(5.5)), for the line that names it."""
    return value.item() if hasattr(value, "item") and not isinstance(value, str) else value


def read_csv(path: Path) -> pd.DataFrame:
    """A CSV as pandas reads it; a row it cannot split (more cells than the header) an ``InputError``
    naming the line, not pandas' traceback."""
    try:
        return pd.read_csv(path)
    except pd.errors.ParserError as e:
        m = re.search(r"line (\d+)", str(e))
        raise InputError(path, f"not a CSV table: {' '.join(str(e).split())}", m[1] if m else None) from None
    except pd.errors.EmptyDataError:
        raise InputError(path, "no CSV header") from None


def is_wandb_csv(path: Path) -> bool:
    """A CSV with a wandb step column and no metrics-table columns (those are ``coolsampler parse``'s)."""
    try:
        cols = pd.read_csv(path, nrows=0).columns
    except (ValueError, OSError, UnicodeDecodeError):
        return False
    return any(c in cols for c in ("_step", "Step")) or ("step" in cols and any("/" in c for c in cols))


def is_wandb_run(path: Path) -> bool:
    """A wandb run's local files (``wandb/run-<date>-<id>/``, its binary ``run-<id>.wandb``): not its
    history in a readable form, which wandb keeps on its server."""
    return path.suffix == ".wandb" or path.is_dir() and any(path.glob("*.wandb"))


def _tensorboard(path: Path) -> bool:
    return path.name.startswith("events.out.tfevents") or path.is_dir() and any(path.glob(TFEVENTS))


def _store_of(path: Path) -> tuple[Path, str | None] | None:
    """An MLflow SQLite store and the run named after its ``#`` (``mlruns.db#baseline``), or None."""
    if path.suffix == ".db":
        return path, None
    if "#" in path.name and Path(str(path).rsplit("#", 1)[0]).suffix == ".db":
        db, name = str(path).rsplit("#", 1)
        return Path(db), name
    return None


def _refuse_wandb_run(path: Path) -> None:
    raise UnreadableLog(f"{path}: {WANDB_EXPORT}")


def _store_records(path: Path) -> tuple[Records, list[str]]:
    db, name = _store_of(path) or (path, None)
    runs = mlflow_db_runs(db)
    if name is None:
        if len(runs) != 1:
            raise UnreadableLog(f"{db}: an MLflow store of {len(runs)} runs: name one as {db}#RUN_NAME")
        return next(iter(runs.values()))
    if name not in runs:
        raise UnreadableLog(f"{db}: no MLflow run named {name!r} (runs: {', '.join(sorted(runs))})")
    return runs[name]


def _csv_records(path: Path) -> tuple[Records, list[str]]:
    utf8_bytes(path)  # a CSV in another encoding: one line saying so, not a parser's error
    if not is_wandb_csv(path):
        raise UnreadableLog(f"{path}: a CSV with no step column; {FORMATS_LINE}")
    by_step, problems = wandb_csv_records(read_csv(path))
    if not by_step:
        raise UnreadableLog(f"{path}: no training records found; {FORMATS_LINE}")
    return by_step, problems


def _jsonl_records(path: Path) -> tuple[Records, list[str]] | None:
    by_step, problems = read_jsonl(path)
    return (by_step, problems) if by_step else None


def _flat_records(path: Path) -> tuple[Records, list[str]] | None:
    if (flat := flat_jsonl_records(path)) is None:
        return None
    by_step, merged = merge_records(_training(_components(flat[0])))
    return by_step, flat[1] + merged


def _components(records: list[tuple[int, dict[str, Any]]]) -> list[tuple[int, dict[str, Any]]]:
    """Rows of one step that share no key but a timestamp are parts of one record, written by several
    components of a trainer into one file (prime-rl's trainer and orchestrator): joined, so that the row
    written last does not read as the step re-logged. A row that repeats a key of its step stays apart (a
    resumed run's re-logged step, which ``merge_records`` reports)."""
    out: list[tuple[int, dict[str, Any]]] = []
    at: dict[int, int] = {}  # step -> index in out of its joined record
    for step, data in records:
        i = at.get(step)
        if i is not None and not (set(data) - {"time"}) & (set(out[i][1]) - {"time"}):
            out[i] = (step, {**out[i][1], **data})
            continue
        at[step] = len(out)
        out.append((step, dict(data)))
    return out


def _console_records(path: Path) -> tuple[Records, list[str]] | None:
    records, n = console_records(path)
    return merge_records(_training(records)) if n else None


def _has_tag(path: Path) -> bool:
    """Whether a text log's head holds a ``metrics_tag:`` line (what the walk lists as a ROLL log)."""
    try:
        with path.open("rb") as f:
            return _METRICS_TAG in f.read(1 << 16)
    except OSError:
        return False


def _text(path: Path) -> bool:
    return path.is_file() or not path.exists() and _store_of(path) is None


@dataclass(frozen=True)
class LogFormat:
    """One shape a run log comes in. ``detect``: whether a path may be one (cheap: its name, a file's
    head); ``read``: its records and problems, ``None`` where the content is not this format after all (the
    text formats are told apart only by reading); ``listed``: whether the directory walk lists a path as
    one (stricter than ``detect`` where a file's name is all the walk looks at); ``whole``: a directory
    that is one run, which the walk does not enter."""

    name: str
    detect: Callable[[Path], bool]
    read: Callable[[Path], tuple[Records, list[str]] | None]
    listed: Callable[[Path], bool]
    whole: bool = False


TEXT_LOGS = (".log", ".txt", ".out")


def _listed_store(path: Path) -> bool:
    return path.suffix == ".db" and path.stem.startswith("mlruns")  # not every SQLite file a tree holds


def _listed_csv(path: Path) -> bool:
    return path.suffix == ".csv" and (is_wandb_csv(path) or _utf16(path))


def _listed_jsonl(path: Path) -> bool:
    return path.suffix == ".jsonl" or path.suffix in (".log", ".out") and _utf16(path)


# The formats in the order they are tried: the first whose ``detect`` holds and whose ``read`` takes the
# path reads it; ``read_records`` and ``find_logs`` both go through this table.
LOG_FORMATS: tuple[LogFormat, ...] = (
    LogFormat("wandb run", is_wandb_run, _refuse_wandb_run, lambda p: p.is_dir() and is_wandb_run(p)),
    LogFormat("MLflow", is_mlflow_run, mlflow_records, is_mlflow_run, whole=True),
    LogFormat("TensorBoard", _tensorboard, tensorboard_records, lambda p: p.is_dir() and _tensorboard(p)),
    LogFormat("MLflow", lambda p: _store_of(p) is not None, _store_records, _listed_store),
    LogFormat("wandb CSV", lambda p: p.suffix == ".csv", _csv_records, _listed_csv),
    LogFormat(
        "trainer_state.json",
        lambda p: p.suffix == ".json" and p.is_file(),
        trainer_state_records,
        lambda p: p.name == "trainer_state.json",
    ),
    LogFormat("metrics_tag lines", _text, metrics_tag_records, lambda p: p.suffix in TEXT_LOGS and _has_tag(p)),
    LogFormat("verl JSONL", _text, _jsonl_records, _listed_jsonl),
    LogFormat("flat JSONL", _text, _flat_records, lambda p: p.suffix == ".jsonl"),
    LogFormat("verl console", _text, _console_records, lambda p: p.suffix in TEXT_LOGS and is_console_log(p)),
)


def read_records(path: str | Path) -> tuple[Records, list[str], str]:
    """verl's records of one run log, the problems met, and the format's name. Raises ``UnreadableLog``
    (one line listing the formats read) where no reader takes it."""
    p = Path(path)
    for fmt in LOG_FORMATS:
        if fmt.detect(p) and (got := fmt.read(p)) is not None:
            return *got, fmt.name
    if p.is_dir():
        raise UnreadableLog(f"{p}: a directory holding no run log; {FORMATS_LINE}")
    raise UnreadableLog(f"{p}: no training records found; {FORMATS_LINE}")


# --------------------------------------------------------------------------------------------------
# Walking a directory for run logs

# Directories never holding a run log worth reading (and costly to walk).
_SKIP_DIRS = {".git", ".snakemake", ".venv", "venv", "node_modules", "__pycache__", "checkpoints", ".ipynb_checkpoints"}
RUN_TABLES = ("train.jsonl", "metrics.parquet", "metrics.csv")


def run_log(run_dir: Path) -> Path | None:
    """What to read of a run directory: verl's log (``train.jsonl``, the source of truth: a
    ``metrics.parquet`` beside it may predate the parser's newest columns), else its metrics table."""
    return next((run_dir / name for name in RUN_TABLES if (run_dir / name).is_file()), None)


def _walk(root: Path) -> Iterator[Path]:
    """Directories below ``root`` (itself included), hidden and known-irrelevant ones skipped, sorted;
    each once. A symlink into the walk or to one of its ancestors (``latest -> .``) is not followed: what
    it points at is walked by its own path, or holds the walk itself, so following it would read the same
    runs again (two links to a parent make the walk exponential). A link out of the tree is followed once."""
    top = root.resolve()
    visited = {top}
    stack = [root]
    while stack:
        d = stack.pop()
        yield d
        try:
            subs = sorted((c for c in d.iterdir() if c.is_dir()), reverse=True)
        except OSError:
            continue
        for c in subs:
            if c.name in _SKIP_DIRS or c.name.startswith("."):
                continue
            try:
                real = c.resolve()
            except (OSError, RuntimeError):  # a link loop
                continue
            if real in visited or c.is_symlink() and (real in top.parents or real.is_relative_to(top)):
                continue
            visited.add(real)
            stack.append(c)


def find_logs(root: str | Path) -> list[Path]:
    """Every run log below a directory, each once: a run directory's ``train.jsonl`` (else its metrics
    table), and every directory or file ``LOG_FORMATS`` lists (a wandb run is listed so that reading it
    says how to export it; a file in another encoding, so that reading it says so). A run directory, an
    MLflow run and a TensorBoard run are not walked further: their files are that run's."""
    out: list[Path] = []
    taken: set[Path] = set()
    for d in _walk(Path(root)):
        if any(d.is_relative_to(t) for t in taken):
            continue
        table = run_log(d)
        fmt = next((f for f in LOG_FORMATS if f.listed(d)), None)
        if table is not None or fmt is not None:
            out.append(table or d)
            if table is not None or fmt.whole:
                taken.add(d)
            continue
        try:
            files = sorted(c for c in d.iterdir() if c.is_file())
        except OSError:  # unreadable: the directory is skipped, as the walk skips it
            continue
        out += [f for f in files if any(fmt.listed(f) for fmt in LOG_FORMATS)]
    return out


def _utf16(path: Path) -> bool:
    """A file that starts with a UTF-16 byte-order mark: a log saved in the wrong encoding (Windows' default
    for PowerShell redirection), which the checks above cannot see as one."""
    try:
        with path.open("rb") as f:
            return f.read(2) in (b"\xff\xfe", b"\xfe\xff")
    except OSError:
        return False
