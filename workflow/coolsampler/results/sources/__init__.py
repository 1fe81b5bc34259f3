"""Other trainers' logs, one declarative mapping per system: what each logs, read into this project's columns.

The people who have the paper's problem run asynchronous trainers, and each of them logs staleness its own
way, or not at all. A system is one ``Source``: the formats its logs come in (parsed by the shared readers of
``coolsampler.results.readers``), how its records are told apart from other systems' (keys only it writes),
its step axis, and each logged key mapped to a column of the metrics schema with the key's definition and
the source file it was read from. Its lag (``coolsampler.spec.lag``) says what its lag columns measure, which
policy its mismatch keys compare with the sampler, and whether a logged ratio is before or after truncation;
where it logs no lag, the setting that bounds it (read from the run's saved configuration or given as a
flag) is shown as a bound, never as a measurement.

Adding a system is one module in this package with one ``SOURCE`` and a fixture under
``tests/fixtures/sources/<system>/`` (a stable run and one that degrades, in its real format). Nothing here
imports verl, vLLM or torch.
"""

from __future__ import annotations

import fnmatch
import importlib
import pkgutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from coolsampler.spec.lag import LAG_COLUMNS, Lag
from coolsampler.spec.metrics_schema import COLUMNS


@dataclass(frozen=True)
class Key:
    """One logged key (an fnmatch pattern where the system puts a name inside it, e.g. a data source) read
    as ``column``; ``meaning``: its definition in the system's code; ``cite``: ``path Lnn`` in the
    ``Source``'s repository at its commit; ``scale``: the factor to the column's unit (a lag in policy
    versions of several optimizer steps each); ``offset``: what to add to the step the system logs the
    key at to get the learner step it belongs to (a system that counts its steps from 0 logs the first
    update's keys at 0, which this project calls step 1, while its validation at 0 is before any update)."""

    key: str
    column: str
    meaning: str
    cite: str
    scale: float = 1.0
    component: str = ""  # the process that writes it, where several write one file (prime-rl)
    offset: int = 0

    def __post_init__(self) -> None:
        if self.column not in COLUMNS or self.column == "step":
            raise ValueError(f"key {self.key!r}: {self.column!r} is not a column of the metrics schema")


@dataclass(frozen=True)
class Bound:
    """Where a system that logs no lag keeps the setting that bounds it: ``setting`` (a config key or flag),
    its ``default``, the factor to optimizer steps, and the saved-configuration keys it is read from (dotted
    paths into a run's ``run.yaml``/config file)."""

    setting: str
    default: float | None
    paths: tuple[str, ...] = ()
    scale: float = 1.0
    meaning: str = ""


@dataclass(frozen=True)
class Source:
    """One system's logs. ``detect``: keys (patterns) of which a log must hold at least one, and that no other
    system writes; ``step``: what a record's step is, and its unit; ``formats``: the names of the readers
    (``readers.LOG_FORMATS``) its files come in; ``lag``: what its lag columns hold and how its mismatch
    keys read; ``bound``: the setting that bounds its lag where it logs none."""

    system: str
    repo: str
    commit: str
    formats: tuple[str, ...]
    files: str  # where a run's log is (what a user points `coolsampler analyze` at), e.g. <run>/metrics.jsonl
    detect: tuple[str, ...]
    step: str
    keys: tuple[Key, ...]
    lag: Lag
    bound: Bound | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    # Several components write rows of one step into one JSONL file: the rows are united per step, and a key
    # two rows give two values is an error (readers.component_rows); the keys here differ by design.
    components: tuple[str, ...] | None = None
    # What cannot be known from this system's logs, for the table of systems (docs/results.md).
    unknowable: str = ""
    # Keys (patterns) every log of this system holds besides its detect keys (its step axis's key, a key it
    # always writes): a log with a detect key that lacks one is not this system's whole log, and is refused.
    needs: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        columns = [k.column for k in self.keys]
        twice = sorted({c for c in columns if columns.count(c) > 1 and c != "val_acc"})
        if twice:
            raise ValueError(f"source {self.system}: columns mapped twice: {', '.join(twice)}")
        if self.lag.measured and not any(k.column in LAG_COLUMNS for k in self.keys):
            raise ValueError(f"source {self.system}: a measured lag ({self.lag.kind}) needs a key for a lag column")

    def matches(self, keys: Iterable[str]) -> bool:
        """Whether a log whose records hold ``keys`` is this system's."""
        keys = list(keys)
        return any(fnmatch.filter(keys, pattern) for pattern in self.detect)

    def lacking(self, keys: Iterable[str]) -> list[str]:
        """The ``needs`` patterns that none of a log's ``keys`` matches."""
        keys = list(keys)
        return [pattern for pattern in self.needs if not fnmatch.filter(keys, pattern)]

    def sources(self) -> dict[str, tuple[str, ...]]:
        """Column -> its keys in this system's logs, every other column -> none: what the shared parser
        (``results.metrics.parse_records``) reads in place of verl's keys."""
        out: dict[str, tuple[str, ...]] = {c: () for c in COLUMNS if c != "step"}
        for k in self.keys:
            out[k.column] = (*out[k.column], k.key)
        return out

    def scales(self) -> dict[str, float]:
        return {k.column: k.scale for k in self.keys if k.scale != 1.0}

    def on_learner_steps(self, by_step: Mapping[int, Mapping[str, Any]]) -> dict[int, dict[str, Any]]:
        """A log's records moved to the learner steps their values belong to: each key matched by a ``Key``
        with an ``offset`` is moved by it, every other key stays at its logged step."""
        shifts = [(k.key, k.offset) for k in self.keys if k.offset]
        if not shifts:
            return {step: dict(data) for step, data in by_step.items()}
        out: dict[int, dict[str, Any]] = {}
        for step, data in by_step.items():
            for key, value in data.items():
                moved = next((o for pattern, o in shifts if fnmatch.fnmatchcase(key, pattern)), 0)
                out.setdefault(step + moved, {})[key] = value
        return out


@cache
def sources() -> dict[str, Source]:
    """Every system's mapping, by name: each module of this package that defines ``SOURCE`` (or ``SOURCES``,
    where one project ships trainers that log differently)."""
    out: dict[str, Source] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        for src in (getattr(module, "SOURCE", None), *getattr(module, "SOURCES", ())):
            if isinstance(src, Source):
                out[src.system] = src
    return out


def detect(by_step: Mapping[int, Mapping[str, Any]]) -> Source | None:
    """The system whose keys a log's records hold, or None (verl, read by the schema's own keys). Two
    systems' keys in one log is not a log any of them writes: a ValueError naming both."""
    keys: set[str] = set()
    for data in by_step.values():
        keys.update(data)
    hits = [s for s in sources().values() if s.matches(keys)]
    if len(hits) > 1:
        raise ValueError(f"holds the keys of {' and '.join(s.system for s in hits)}: one run's log is one system's")
    return hits[0] if hits else None
