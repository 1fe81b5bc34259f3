"""A Snakemake profile (``profiles/<name>/config.v8+.yaml``) read as what it gives a study's training jobs.

Why one reader: rule train asks for its platform's resources (``coolsampler.train.platform``, the study's
``profile:``: GPUs, ``runtime``, ``mem_mb``, CPUs), and a profile's ``set-resources: train:`` replaces
them. ``coolsampler plan`` and ``memory`` cost and check a run against what its job really gets, so they
read a profile here, the keys as Snakemake reads them (a ``runtime`` of ``12h`` is 720 minutes, a
``set-resources`` written as Snakemake's ``RULE:RESOURCE=VALUE`` list is the same as the mapping), and
refuse in one line, naming the file and the key, what Snakemake would refuse or what no check can size
(``mem_mb: 0``, which SLURM reads as a whole node). A study handed over as a profile is refused as such.

Light: no Snakemake import (its duration parser is matched, ``runtime_minutes``).
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from coolsampler.spec.inputs import InputError
from coolsampler.spec.yaml_file import load_yaml
from coolsampler.train.platform import Platform, study_platform

PROFILE_FILE = "config.v8+.yaml"
TRAIN_RULE = "train"
UNLIMITED = sys.maxsize  # ``jobs: unlimited``, as Snakemake's own parser reads it

# The units Snakemake's ``runtime`` takes after a number (humanfriendly.parse_timespan's, case-insensitive),
# in seconds: Snakemake reads ``12h`` as round(seconds) / 60 minutes, a bare number as minutes.
_SECONDS = {
    **dict.fromkeys(("ns", "nanosecond", "nanoseconds"), 1e-9),
    **dict.fromkeys(("us", "microsecond", "microseconds"), 1e-6),
    **dict.fromkeys(("ms", "millisecond", "milliseconds"), 1e-3),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60),
    **dict.fromkeys(("h", "hour", "hours"), 3600),
    **dict.fromkeys(("d", "day", "days"), 86400),
    **dict.fromkeys(("w", "week", "weeks"), 7 * 86400),
    **dict.fromkeys(("y", "year", "years"), 52 * 7 * 86400),
}
_TIMESPAN = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]+)\s*")
DURATION = "minutes (720) or a number and one unit (30m, 12h, 1d), as Snakemake reads a runtime"


def runtime_minutes(value: Any) -> int:
    """A ``runtime`` resource in whole minutes, as Snakemake reads it (a number: minutes, rounded; text: a
    whole number of minutes, or a number and one unit); ``ValueError`` with the problem where it is none,
    is not above zero, or is under a minute (Snakemake would round it up to one)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"{value!r} is not a duration; give {DURATION}")
    if isinstance(value, str):
        text = value.strip().strip("'\"")
        if text.isdecimal():
            minutes = int(text)
        elif (m := _TIMESPAN.fullmatch(text)) is None or m[2].lower() not in _SECONDS:
            bare = re.fullmatch(r"\s*[-+]?\d*\.\d+\s*", text) is not None
            why = " (a number without a unit is read as seconds)" if bare else ""
            raise ValueError(f"{value!r} is not a duration{why}; give {DURATION}")
        else:
            seconds = round(float(m[1]) * _SECONDS[m[2].lower()])
            if seconds < 60:
                raise ValueError(f"{value!r} is under a minute; a training job's time limit is {DURATION}")
            minutes = int(seconds / 60)
    else:
        if not math.isfinite(value):
            raise ValueError(f"{value!r} is not a duration; give {DURATION}")
        minutes = round(value)
    if minutes <= 0:
        raise ValueError(f"{value!r}: a training job's time limit is > 0; give {DURATION}")
    return minutes


def _count(value: Any, *, allow: tuple[str, ...] = ()) -> int | str | None:
    """A whole number > 0 (a YAML int, or text of one, as Snakemake reads a profile's value), one of the
    words ``allow``; None for anything else."""
    if isinstance(value, str):
        if value.strip() in allow:
            return value.strip()
        value = int(value) if value.strip().isdecimal() else None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return None
    return value


def _mem_mb(value: Any) -> int | None:
    """A ``mem_mb`` resource: a number of MB > 0 (a float rounded, as Snakemake does); None where it is not."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    mb = round(value)
    return mb if mb > 0 else None


def _study_keys() -> frozenset[str]:
    from coolsampler.spec.validate import study_schema

    return frozenset(study_schema()["properties"])


def _pairs(value: Any, file: Path, key: str) -> dict[str, Any]:
    """``resources``: a mapping, or Snakemake's ``NAME=VALUE`` words (a list, or one string of them)."""
    if value is None:
        return {}
    if isinstance(value, str):
        value = value.split()
    if isinstance(value, Mapping):
        return {str(k): v for k, v in value.items()}
    if isinstance(value, list):
        out = {}
        for entry in value:
            name, eq, text = str(entry).partition("=")
            if not eq or not name.strip():
                raise InputError(file, f"entry {entry!r} is not NAME=VALUE (e.g. gpu=4)", key)
            out[name.strip()] = _cli_value(text)
        return out
    shown = f"a {type(value).__name__} {value!r}"
    raise InputError(file, f"{shown}; expected a mapping (gpu: 4) or a list of NAME=VALUE", key)


def _cli_value(text: str) -> Any:
    """A value as Snakemake's command line gives it: a number where it is one, else the text."""
    text = text.strip()
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _set_resources(value: Any, file: Path) -> dict[str, dict[str, Any]]:
    """``set-resources``: a mapping of rule to its resources, or Snakemake's ``RULE:RESOURCE=VALUE`` words."""
    key = "set-resources"
    example = "write set-resources: {train: {mem_mb: 192000}} (or the list form train:mem_mb=192000)"
    if value is None:
        return {}
    if isinstance(value, str):  # one string is the command line's words
        value = value.split()
    if isinstance(value, list):
        out: dict[str, dict[str, Any]] = {}
        for entry in value:
            rule, colon, assign = str(entry).partition(":")
            name, eq, text = assign.partition("=")
            if isinstance(entry, (dict, list)) or not (colon and eq and rule.strip() and name.strip()):
                raise InputError(file, f"entry {entry!r} is not RULE:RESOURCE=VALUE; {example}", key)
            out.setdefault(rule.strip(), {})[name.strip()] = _cli_value(text)
        return out
    if not isinstance(value, Mapping):
        raise InputError(file, f"a {type(value).__name__} {value!r}; {example}", key)
    out = {}
    for rule, resources in value.items():
        if not isinstance(resources, Mapping):
            shown = "null" if resources is None else f"a {type(resources).__name__} {resources!r}"
            raise InputError(file, f"{shown}; a rule's resources are a mapping ({example})", f"{key}.{rule}")
        out[str(rule)] = {str(k): v for k, v in resources.items()}
    return out


@dataclass(frozen=True)
class Profile:
    """What a profile gives the training jobs, checked: ``jobs`` (runs queued at once on a cluster;
    ``UNLIMITED``), ``gpus`` (its machine's ``resources: gpu=``), and rule train's ``set-resources``
    (``mem_mb`` in MB, ``runtime`` in minutes; None: rule train's own, its platform's)."""

    path: Path
    jobs: int | None = None
    gpus: int | None = None
    mem_mb: int | None = None
    runtime_min: int | None = None
    train: dict[str, Any] = field(default_factory=dict)  # rule train's set-resources, as written

    @property
    def jobs_text(self) -> str:
        return "unlimited" if self.jobs == UNLIMITED else str(self.jobs)


def load_profile(path: str | Path) -> Profile:
    """The Snakemake profile at ``path``, its keys that decide a training job's cost checked; every way it
    is wrong is one ``InputError`` naming the file and the key (module docstring)."""
    file = Path(path)
    cfg = load_yaml(file, mapping=True, what="Snakemake profile")
    if study := sorted(set(map(str, cfg)) & (_study_keys() | {"filters"})):
        raise InputError(
            file,
            f"this is a study (or an overlay or claims file), not a Snakemake profile: it sets"
            f" {', '.join(study[:4])}; give a profile's {PROFILE_FILE} (e.g. profiles/slurm/{PROFILE_FILE})",
        )
    jobs = None
    if "jobs" in cfg and cfg["jobs"] is not None:
        got = _count(cfg["jobs"], allow=("unlimited",))
        if got is None:
            raise InputError(file, f"{cfg['jobs']!r}; jobs is a whole number > 0 or unlimited", "jobs")
        jobs = UNLIMITED if got == "unlimited" else int(got)
    gpus = None
    resources = _pairs(cfg.get("resources"), file, "resources")
    if "gpu" in resources:
        if (got := _count(resources["gpu"])) is None:
            raise InputError(file, f"gpu={resources['gpu']!r}; the machine's GPUs are a whole number > 0", "resources")
        gpus = int(got)
    train = _set_resources(cfg.get("set-resources"), file).get(TRAIN_RULE, {})
    where = f"set-resources.{TRAIN_RULE}"
    mem_mb = None
    if train.get("mem_mb") is not None:
        if (mem_mb := _mem_mb(train["mem_mb"])) is None:
            zero = train["mem_mb"] == 0 and not isinstance(train["mem_mb"], bool)
            why = " (0 is not unset: SLURM reads --mem=0 as a whole node, which no check can size)" if zero else ""
            raise InputError(
                file,
                f"{train['mem_mb']!r}; a training job's memory is a number of MB > 0{why}; delete the line"
                " for the platform's",
                f"{where}.mem_mb",
            )
    runtime = None
    if train.get("runtime") is not None:
        try:
            runtime = runtime_minutes(train["runtime"])
        except ValueError as e:
            raise InputError(file, str(e), f"{where}.runtime") from None
    return Profile(file, jobs, gpus, mem_mb, runtime, train)


def job_platform(config: Mapping[str, Any], profile: Profile | None = None) -> Platform:
    """The platform a study's training jobs get under ``profile`` (None: no profile): the study's own
    (``study_platform``, what the Snakefile trains it on) with its ``hardware:``, under the job's time
    limit (the profile's set-resources ``runtime``, else the study's ``runtime_min``, else the platform's;
    the watchdog keeps its margin below it) and memory (the profile's ``mem_mb``, else the platform's)."""
    platform = study_platform(config).for_study(dict(config))
    runtime = (profile.runtime_min if profile else None) or config.get("runtime_min")
    platform = platform.with_runtime(runtime)
    if profile is not None and profile.mem_mb is not None:
        platform = replace(platform, mem_mb=profile.mem_mb)
    return platform
