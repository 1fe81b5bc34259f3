"""A run's own verl log: the one reader of its lines, its attempts joined, its step times, and whether
the run is trained.

Why one module: the training job (``coolsampler.train.launch``), ``coolsampler status`` and ``plan``, the
parser (``coolsampler.results.metrics``) and the Snakemake rules all read these files, and copies of the
reading drift apart (a join that does not cut a killed attempt at the resume point reports its last step
mid-resume). In ``spec`` because ``train`` and ``results`` both read it (docs/layers.md). Pure Python.

verl's ``file`` logger writes one ``{"step": k, "data": {...}}`` line per step (validation at step 0, and
merged into the steps where it ran). It truncates its file when it starts, and Snakemake deletes a killed
job's outputs, so each attempt logs to its own ``<run>/attempts/NN.jsonl``, joined into ``train.jsonl``
once training finished (``assemble``); ``run.yaml`` is written last (``trained``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from coolsampler.spec.inputs import InputError

Records = dict[int, dict[str, Any]]
# one record of a log, in the order logged: its step, its data, its line as written (``assemble`` keeps it)
Line = tuple[int, dict[str, Any], bytes]

_UTF16 = (b"\xff\xfe", b"\xfe\xff")


def utf8_bytes(path: str | Path) -> bytes:
    """A text log's bytes, a UTF-8 byte-order mark dropped. Raises ``InputError`` for any other encoding:
    read as UTF-8 regardless, a UTF-16 log is all stray lines (every other byte a NUL), which would read
    as a log without events, i.e. a stable run."""
    path = Path(path)
    data = path.read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if data.startswith(_UTF16) or data[:4096].count(b"\x00") > 16:
        raise InputError(path, "not UTF-8; UTF-16? (save it as UTF-8)")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.end == len(data) and "end of data" in e.reason:  # a log cut mid-character while written: its
            return data  # last line is then a truncated record, which the readers say
        line = data.count(b"\n", 0, e.start) + 1
        raise InputError(path, f"not UTF-8 (byte 0x{data[e.start]:02x}); save it as UTF-8", line) from None
    return data


def as_step(value: Any) -> int | None:
    """A logged step as an integer >= 0, or None: a bool, a string, a fraction or a negative number is
    no step (``int()`` would truncate 3.5 to 3, making it look like a re-logged step)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and math.isfinite(value) and value.is_integer() and value >= 0:
        return int(value)
    return None


def step_problem(bad: list[tuple[int, Any]]) -> str:
    """One line for the records whose step is not an integer >= 0 (``bad``: line number, step given)."""
    line, given = bad[0]
    return f"{len(bad)} line(s) with a step that is not an integer >= 0 (line {line}: {given!r}), skipped"


def stray_line_problem(lines: list[int]) -> str:
    """One line for the lines of a log that are no record, skipped (a warning printed into it, say)."""
    more = f" and {len(lines) - 1} more" if len(lines) > 1 else ""
    return f"line {lines[0]}{more} is not a JSON record (a stray line), skipped"


def parse_line(raw: bytes) -> tuple[Any, dict[str, Any]] | None:
    """The step as given and the data of one ``{"step": k, "data": {...}}`` line, or None where the line
    is no such record (a stray line, or one half-written when its attempt was killed)."""
    try:
        rec = json.loads(raw)
        given, data = rec["step"], rec["data"]
    except (ValueError, KeyError, TypeError, RecursionError):  # RecursionError: a line of 10^5 brackets
        return None
    return (given, data) if isinstance(data, dict) else None


def log_lines(path: str | Path) -> tuple[list[Line], list[str]]:
    """The records of one verl JSONL in the order logged, and the problems met while reading it.

    A line that is not a record is skipped and said: the last one as a truncated end (the log was cut
    mid-write), any other as a stray line (a warning printed into the log). A record whose step is not
    an integer >= 0 is skipped and counted (``step_problem``). Raises ``InputError`` for a file that is
    not UTF-8 (``utf8_bytes``).
    """
    lines = utf8_bytes(path).split(b"\n")
    last_line = max((i for i, raw in enumerate(lines, 1) if raw.strip()), default=0)
    records: list[Line] = []
    stray: list[int] = []
    bad_steps: list[tuple[int, Any]] = []
    problems: list[str] = []
    for i, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        if (rec := parse_line(raw)) is None:
            if i == last_line:
                problems.append("last line is not a whole JSON record (truncated log?)")
            else:
                stray.append(i)
            continue
        if (step := as_step(rec[0])) is None:
            bad_steps.append((i, rec[0]))
            continue
        records.append((step, rec[1], raw))
    if stray:
        problems.insert(0, stray_line_problem(stray))
    if bad_steps:
        problems.append(step_problem(bad_steps))
    return records, problems


def merge_records(records: Iterable[tuple[int, dict[str, Any]]]) -> tuple[Records, list[str]]:
    """verl's records (step, data), in the order logged, as one record per step, and what was merged.

    A step *trained* more than once (its ``training/global_step`` record logged again, as when a
    resumed run re-logs the steps after its last checkpoint) keeps its *last* training record
    whole, not a merge: the first attempt's values belong to a trajectory that was thrown away.
    That is reported, since those steps were trained twice. A record without
    ``training/global_step`` (a validation: step 0, or the one a resumed run makes at its
    checkpoint step, which ``join`` keeps) is merged into its step.
    """
    train: Records = {}
    extra: Records = {}  # validation-only records, merged per step
    relogged: list[int] = []
    for step, data in records:
        if "training/global_step" not in data:
            extra.setdefault(step, {}).update(data)
            continue
        if step in train:
            relogged.append(step)
        train[step] = dict(data)
    by_step = {step: {**train.get(step, {}), **extra.get(step, {})} for step in sorted({*train, *extra})}
    problems = []
    if relogged:
        steps = sorted(set(relogged))
        problems.append(
            f"{len(steps)} step(s) logged more than once (resumed run?), kept the last record of each"
            f" (first: step {steps[0]})"
        )
    return by_step, problems


def read_jsonl(path: str | Path) -> tuple[Records, list[str]]:
    """One record per step of one verl JSONL, and the problems met while reading it (``log_lines``,
    ``merge_records``)."""
    lines, problems = log_lines(path)
    by_step, merged = merge_records((step, data) for step, data, _raw in lines)
    return by_step, problems + merged


def attempt_logs(run_dir: str | Path) -> list[Path]:
    """verl's JSONL of each attempt at a run, oldest first (``<run>/attempts/NN.jsonl``)."""
    return sorted((Path(run_dir) / "attempts").glob("[0-9][0-9].jsonl"))


def join(attempts: list[list[Line]]) -> list[Line]:
    """One log from the attempts' records, oldest first: an attempt resumed from the checkpoint of step
    c replaces what the earlier ones logged after c (those steps were trained again, or, while it is
    still running, are being trained again); records of step c are kept from both (the earlier holds
    its training metrics, the later its validation on resuming)."""
    kept: list[list[Line]] = []
    cut: int | None = None  # the lowest step any later attempt logged: where it resumed
    for lines in reversed(attempts):
        kept.append([x for x in lines if cut is None or x[0] <= cut])
        cut = min([x[0] for x in lines] + ([cut] if cut is not None else []), default=None)
    return [x for lines in reversed(kept) for x in lines]


def run_records(logs: Iterable[Path]) -> Records:
    """One record per step of the attempts' logs joined (``join``), or of ``train.jsonl`` alone. A log
    gone while it is read (a run directory moved aside) counts as empty; one that is there but cannot be
    read (a directory of that name, no permission) raises ``InputError``: as empty, its run would read as
    trained without a step."""
    attempts = []
    for path in logs:
        try:
            attempts.append(log_lines(path)[0])
        except FileNotFoundError:
            continue
        except OSError as e:
            raise InputError(path, f"cannot be read ({e.strerror or e})") from None
    return merge_records((step, data) for step, data, _raw in join(attempts))[0]


def assemble(attempts: list[Path], jsonl: Path) -> None:
    """Write the attempts joined (``join``) as the run's ``jsonl``, each line as verl wrote it; a line
    a killed attempt left half-written is dropped."""
    lines = join([log_lines(path)[0] for path in attempts])
    tmp = jsonl.with_suffix(".jsonl.tmp")
    tmp.write_bytes(b"".join(raw + b"\n" for _step, _data, raw in lines))
    tmp.replace(jsonl)


def train_steps(records: Records) -> list[int]:
    """The training steps logged (a validation-only record, as step 0's, is none), in order."""
    return sorted(s for s, d in records.items() if "training/global_step" in d)


def step_times(records: Records) -> list[float]:
    """Wall time of each logged training step: verl's step timer plus its validation timer (validation
    runs outside verl's step timer)."""
    out = []
    for d in records.values():
        t = d.get("timing_s/step")
        if isinstance(t, (int, float)) and math.isfinite(t):
            extra = d.get("timing_s/testing")
            out.append(float(t) + (float(extra) if isinstance(extra, (int, float)) and math.isfinite(extra) else 0.0))
    return out


def trained(run_dir: str | Path) -> bool:
    """Training finished: rule train's outputs exist, ``train.jsonl`` and ``run.yaml`` (written last, so a
    killed or failed job leaves neither: Snakemake deletes them). What rule parse reads."""
    d = Path(run_dir)
    return (d / "train.jsonl").exists() and (d / "run.yaml").exists()
