"""A researcher's own training logs, read as runs: which runs a set of paths holds, each run's metrics
table and settings, the arms its runs pool into, and each run's degradation events.

What ``coolsampler analyze`` and ``coolsampler parse`` compute on logs the project did not write (verl's
file-logger JSONL, its console output, TensorBoard, MLflow, a wandb CSV export: ``readers``), before any
of it is printed (``coolsampler.paper.own_logs`` renders it). A run's settings come from ``run.yaml``
beside its log, else the run key its place names, else the flags, else what the log itself shows (the
refresh steps, the logged sampler temperature); a run whose N or Tb stays unknown is not analysed, and
one whose length is unknown is never called complete. No verl, vLLM or torch: pandas and numpy.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from coolsampler.results.analysis import summarize_run
from coolsampler.results.readers import RUN_TABLES, forget_flat, run_log
from coolsampler.results.sources import Source, detect
from coolsampler.spec.inputs import InputError
from coolsampler.spec.lag import GATE, LAG_COLUMNS, Lag
from coolsampler.spec.layout import KEY_PARTS, RUN_GLOB
from coolsampler.spec.metrics_schema import COLUMNS, PROVIDED_BY, RunStatus, absent_columns

Entry = tuple[dict[str, Any], pd.DataFrame, RunStatus | None]

LOG_SUFFIXES = (".jsonl", ".json", ".log", ".txt", ".out", ".csv", ".db")


@dataclass(frozen=True)
class Input:
    """One run to read: ``path`` (a file, a TensorBoard or MLflow run directory, ``store.db#run``) and
    ``name``, how the output calls it when no run key names it (the log's path below the directory given,
    verl's ``<project>/<experiment>``, the file's stem)."""

    path: str
    name: str


# Log file names that say nothing of the run (a job's stdout): such a run is named by its directory.
GENERIC_STEMS = ("stdout", "stderr", "output", "out", "log", "console", "train", "history")


def _name_below(log: Path, root: Path) -> str:
    """A run's name: its path below ``root`` without the run-file name or the log's suffix."""
    try:
        rel = log.resolve().relative_to(root.resolve())
    except ValueError:
        rel = Path(log.name)
    if rel.name in RUN_TABLES or rel.stem in GENERIC_STEMS and len(rel.parts) > 1:
        rel = rel.parent
    elif rel.suffix in LOG_SUFFIXES:
        rel = rel.with_suffix("")
    text = rel.as_posix()
    return root.resolve().name if text in ("", ".") else text


def find_inputs(paths: Sequence[str]) -> list[Input]:
    """Logs and tables as given; a directory as every run log below it (``readers.find_logs``: run
    directories, verl's ``<project>/<experiment>.jsonl``, run-key trees, TensorBoard and MLflow runs);
    an MLflow SQLite store as each of its runs. A directory holding none is kept as it is, so that reading
    it reports the error."""
    from coolsampler.results.readers import find_logs, mlflow_db_runs, mlflow_run_name

    out: list[Input] = []
    for path in paths:
        p = Path(path)
        if p.is_dir():
            log = run_log(p)
            if log is not None:
                out.append(Input(str(log), _name_below(p, p.parent if p.name else p.resolve().parent)))
                continue
            # a study's results directory: its runs alone (its job logs hold the same runs' console output)
            study_runs = [log for d in sorted(p.glob(RUN_GLOB)) if d.is_dir() and (log := run_log(d)) is not None]
            found = study_runs or find_logs(p)
            if not found:
                out.append(Input(path, p.resolve().name))
            for f in found:
                name = _name_below(f, p)
                if f.is_dir() and (f / "meta.yaml").is_file():  # an MLflow run: named as verl named it
                    name = mlflow_run_name(f) or name
                if f.suffix == ".db":
                    out += [Input(f"{f}#{run}", run) for run in sorted(mlflow_db_runs(f))]
                else:
                    out.append(Input(str(f), name))
        elif p.suffix == ".db" and p.is_file():
            out += [Input(f"{p}#{run}", run) for run in sorted(mlflow_db_runs(p))]
        else:
            name = p.parent.name if p.name in RUN_TABLES else p.stem if p.suffix in LOG_SUFFIXES else p.name
            out.append(Input(path, name.split("#")[-1]))
    return _distinct(_once(out))


def _once(inputs: list[Input]) -> list[Input]:
    """Each log once, by its resolved path: the same run given twice, reached through a symlink, or named
    both as a directory and as its log is one run, not two seeds of an arm."""
    chosen: dict[str, Input] = {}
    linked: dict[str, bool] = {}
    for inp in inputs:
        file, sep, run = inp.path.rpartition("#") if "#" in Path(inp.path).name else (inp.path, "", "")
        try:
            real = Path(file).resolve()
        except (OSError, RuntimeError):  # a link loop: kept as given, so reading it reports it
            chosen.setdefault(inp.path, inp)
            continue
        key = str(real) + sep + run
        through_link = str(real) != os.path.abspath(file)
        if key not in chosen or linked[key] and not through_link:
            chosen[key], linked[key] = inp, through_link
    return list(chosen.values())


def _distinct(inputs: list[Input]) -> list[Input]:
    """Names that tell the runs apart: two runs of one name (``baseline.jsonl`` beside the console's
    ``baseline.log``) are named by more of their paths."""
    names = [i.name for i in inputs]
    for depth in (2, 3, 0):
        seen = Counter(names)
        if all(c == 1 for c in seen.values()):
            break
        for k, inp in enumerate(inputs):
            if seen[names[k]] > 1:
                p = Path(inp.path.rsplit("#", 1)[0])
                p = p.parent if p.name in RUN_TABLES else p
                parts = p.with_suffix("").parts if p.suffix in LOG_SUFFIXES else p.parts
                names[k] = "/".join(parts[-depth:]) if depth else inp.path
    return [Input(i.path, n) for i, n in zip(inputs, names, strict=True)]


def expand_paths(paths: Sequence[str]) -> list[str]:
    """The paths ``find_inputs`` reads, in order."""
    return [i.path for i in find_inputs(paths)]


def infer_N(metrics: pd.DataFrame) -> int | None:
    """Refresh interval from the log itself: the first refreshed step, else max staleness + 1.

    Used when no settings are given; the max-staleness fallback underestimates N for a run shorter
    than one cycle, which the text output then says ("N inferred").
    """
    if "refreshed" in metrics.columns:
        r = metrics.loc[metrics["refreshed"].fillna(False).astype(bool), "step"]
        if len(r):
            return int(r.min())
    if "staleness" in metrics.columns and metrics["staleness"].notna().any():
        return int(metrics["staleness"].max()) + 1
    return None


# --------------------------------------------------------------------------------------------------
# Validation series: verl logs val-core/<data source>/<reward key>/<metric> for each validation set


# The metrics verl keeps in val-core (verl.trainer.ppo.metric_utils.process_validation_metrics): the mean
# over the n samples of a prompt, and with n > 1 the best and majority vote of n. mean@n is the default:
# the expected score of one sample, as mean@1 is for greedy validation.
_VAL_KEY = re.compile(r"^val-core/(?P<source>.+)/(?P<var>[^/]+)/(?P<metric>(?:mean|best|maj)@(?P<n>\d+)(?:/mean)?)$")


@dataclass(frozen=True)
class ValSeries:
    """One validation series a log holds: its verl key, data source and metric (``acc/mean@4``)."""

    key: str
    source: str
    metric: str

    @property
    def name(self) -> str:
        return f"{self.source}:{self.metric}"


def val_series(by_step: Mapping[int, Mapping[str, Any]]) -> list[ValSeries]:
    """Every validation series of a log, the default first: per data source (alphabetical), ``mean@n``
    at the largest n it logs, ``acc`` before ``reward`` (verl's core variable), then the rest."""
    from coolsampler.spec.metrics_schema import SAMPLED_SUFFIX

    keys = {k for data in by_step.values() for k in data if k.startswith("val-core/")}
    found = []
    for k in keys:
        m = _VAL_KEY.match(k)
        if m and f"{SAMPLED_SUFFIX}/" not in k:
            found.append((m, ValSeries(k, m["source"], f"{m['var']}/{m['metric']}")))

    def order(item: tuple[re.Match[str], ValSeries]) -> tuple[Any, ...]:
        m, v = item
        kind = 0 if m["metric"].startswith("mean@") else 1 if m["metric"].startswith("best@") else 2
        return (v.source, kind, -int(m["n"]), 0 if m["var"] == "acc" else 1, v.metric)

    return [v for _, v in sorted(found, key=order)]


def choose_val(series: Sequence[ValSeries], want: str | None) -> ValSeries | None:
    """The series ``--val SOURCE[:METRIC]`` names (METRIC: ``mean@4``, ``best@4/mean``, ``acc/mean@4``;
    none: the source's default), else the default: the first of ``val_series``. Raises ValueError naming
    the series when ``want`` matches none."""
    if not series:
        return None
    if not want:
        return series[0]
    source, _, metric = want.partition(":")

    def named(v: ValSeries) -> bool:  # a source by its name, a pattern, or its last part ("gsm8k")
        src = fnmatch.fnmatchcase(v.source, source) or v.source.rsplit("/", 1)[-1] == source
        return src and (not metric or v.metric == metric or v.metric.endswith("/" + metric))

    hits = [v for v in series if named(v)]
    if not hits:
        raise ValueError(f"--val {want}: no such validation series; the log has {', '.join(v.name for v in series)}")
    return hits[0]


def val_line(series: Sequence[ValSeries], chosen: ValSeries | None, want: str | None) -> str | None:
    """The validation series read, said when the log has more than one (the others listed)."""
    if chosen is None or len(series) < 2:
        return None
    by_source: dict[str, list[str]] = {}
    for v in series:
        by_source.setdefault(v.source, []).append(v.metric)
    listed = "; ".join(f"{src}: {', '.join(ms)}" for src, ms in by_source.items())
    why = "as --val says" if want else "the default: the first data source, its mean@n"
    return f"   validation: read {chosen.name} ({why}) of {len(series)} series ({listed}); --val SOURCE[:METRIC] picks"


@dataclass
class Loaded:
    """A run's metrics table and status, the format it was read from and its validation series; the system
    that wrote it (None: verl) and what its lag columns hold."""

    metrics: pd.DataFrame
    status: RunStatus | None
    fmt: str
    series: list[ValSeries] = field(default_factory=list)
    chosen: ValSeries | None = None
    system: str = "verl"
    lag: Lag | None = None


def read_run(
    path: str | Path,
    *,
    steps: int | None = None,
    val_every: int | None = None,
    required: tuple[str, ...] = ("step",),
    val: str | None = None,
) -> Loaded:
    """A run's metrics table from any log ``coolsampler.results.readers`` reads, or a parsed table."""
    p = Path(path)
    db_run = "#" in p.name and Path(str(p).rsplit("#", 1)[0]).suffix == ".db"
    if not p.exists() and not db_run:
        raise InputError(p, "no such file")
    if p.exists() and not p.is_file() and not p.is_dir():  # reading a pipe would wait for a writer forever
        raise InputError(p, "not a regular file (a pipe or a device); name a log file")
    if p.is_file() and p.stat().st_size == 0:
        raise InputError(p, "empty file")
    if p.suffix == ".parquet" or p.suffix == ".csv" and _is_metrics_csv(p):
        from coolsampler.results.loaders import load_metrics, load_status

        df = load_metrics(p)
        if df is None or df.empty:
            raise InputError(p, "no rows")
        return Loaded(df, load_status(p.with_name("status.json")), "metrics table")
    from coolsampler.results.metrics import parse_records
    from coolsampler.results.readers import read_records

    by_step, problems, fmt = read_records(p)
    try:
        source = detect(by_step)
    except ValueError as e:
        forget_flat()
        raise InputError(p, str(e)) from None
    if source is None or source.components is None:
        forget_flat()  # only a system whose components share a file reads its parsed rows again
    if source is not None and (lacking := source.lacking({k for data in by_step.values() for k in data})):
        raise InputError(p, f"has {source.system}'s keys but no {', '.join(lacking)}: not a whole {source.system} log")
    if source is not None:  # another system's keys, read into the same columns
        if source.components is not None:  # its components' rows of a step, united (and checked)
            from coolsampler.results.readers import component_rows

            del by_step  # the format's merge is not the components' union: freed before that is built
            by_step, problems = component_rows(p, source.components)
        check_keys(by_step, p, source)
        by_step = source.on_learner_steps(by_step)
        df, status = parse_records(
            by_step,
            problems,
            log=p,
            expected_steps=steps,
            val_every=val_every,
            required=("step",),
            sources=source.sources(),
        )
        check_lag(scaled(df, source), p, source)
        return Loaded(df, status, fmt, system=source.system, lag=source_lag(source, p))
    series = val_series(by_step)
    chosen = choose_val(series, val)
    sources = {"val_acc": (chosen.key,)} if chosen is not None else None
    df, status = parse_records(
        by_step,
        problems,
        log=p,
        expected_steps=steps,
        val_every=val_every,
        required=required,
        sources=sources,
    )
    lag = verl_lag(df)
    if lag is not None and lag.kind == "newest":  # verl's own reading (a gate's is its staleness, checked apart)
        check_lag(df, p)
    return Loaded(df, status, fmt, series, chosen, lag=lag)


def verl_lag(metrics: pd.DataFrame) -> Lag | None:
    """What a verl log's lag columns hold: the gate's staleness (coolsampler's patched verl), else verl's V1
    trainer's own reading from the newest version a trajectory used, else nothing."""
    if "staleness" in metrics and metrics["staleness"].notna().any():
        return GATE
    if metrics["lag_mean"].notna().any():
        return Lag("newest", compared="pi_old", truncation="before")
    return None


def check_keys(by_step: Mapping[int, Mapping[str, Any]], log: Path, source: Source) -> None:
    """A log detected as a system's by one of its own keys, that holds none of the system's other mapped
    keys, is not a log its logger writes (a fragment, another tool's file that shares a name): an
    ``InputError`` naming the key it was told by and the keys it lacks, rather than a run read as empty."""
    keys = {k for data in by_step.values() for k in data}
    found = sorted(k for pattern in source.detect for k in fnmatch.filter(keys, pattern))
    others = [k.key for k in source.keys if k.key not in source.detect]
    if found and not any(fnmatch.filter(keys, pattern) for pattern in others):
        lacks = ", ".join(others[:4]) + (f" and {len(others) - 4} more" if len(others) > 4 else "")
        raise InputError(
            log, f"holds {found[0]} ({source.system}'s) but none of {source.system}'s other keys ({lacks})"
        )


def check_lag(metrics: pd.DataFrame, log: Path, source: Source | None = None) -> None:
    """A lag reads steps back from the learner's step: one below 0, or past the step it was read at (no
    sample can predate the run), is not this system's lag (a column read from the wrong key, a corrupt
    log): an ``InputError`` naming the key and the step, rather than numbers nobody should trust.
    ``source``: the system whose keys were read; None: verl's own (the schema's keys)."""
    steps = metrics["step"].to_numpy()
    if source is not None:
        read = [(k.key, k.column) for k in source.keys]
    else:
        read = [(COLUMNS[c][2][0], c) for c in LAG_COLUMNS[:3]]
    for key, column in read:
        if column not in LAG_COLUMNS[:3]:
            continue
        v = metrics[column].to_numpy(dtype="float64")
        bad = (v < 0) | (v > steps)
        if bad.any():
            i = int(bad.argmax())
            what = "below 0" if v[i] < 0 else f"past its step ({int(steps[i])}): older than the run"
            raise InputError(log, f"{key} is {v[i]:g} at step {int(steps[i])}, {what}; a lag counts steps back")


def scaled(metrics: pd.DataFrame, source: Source) -> pd.DataFrame:
    """The lag columns of a system that counts in policy versions of several optimizer steps, in steps."""
    for col, factor in source.scales().items():
        metrics[col] = metrics[col] * factor
    return metrics


def source_lag(source: Source, log: Path) -> Lag:
    """A system's lag; where it logs none, the configured bound from the run's saved configuration beside
    its log (``run.yaml``, ``config.yaml``, ``config.json``), else the setting's default, each said."""
    lag = source.lag
    b = source.bound
    if b is None:
        return lag
    kind = lag.kind if lag.measured else "bound"  # a measured lag keeps its bound beside it, as the ceiling
    for value, where in configured(log, b.paths):
        return Lag(kind, lag.compared, lag.truncation, float(value) * b.scale, f"{b.setting} = {value}, from {where}")
    if b.default is None:
        return lag if lag.measured else Lag(None, lag.compared, lag.truncation)
    return Lag(
        kind, lag.compared, lag.truncation, b.default * b.scale, f"{b.setting}'s default {b.default:g}; not found"
    )


@dataclass(frozen=True)
class LagSummary:
    """A run's lag against its degradation: the lag at the onset (the step's mean and largest), the largest
    lag of any step before it, the samples dropped for staleness before it and in all, the largest lag the
    run reached while it had not degraded, and why the logs cannot tell (a lag that never varied, none)."""

    at_onset_mean: float | None
    at_onset_max: float | None
    max_before_onset: float | None
    max_undegraded: float | None
    drops_before_onset: float | None
    drops: float | None
    varied: bool
    cannot_tell: str | None


def lag_summary(metrics: pd.DataFrame, lag: Lag | None, onset: int | None) -> LagSummary:
    """``LagSummary`` of a run's metrics table (its ``lag_*`` columns) and its onset (None: stable)."""
    train = metrics[metrics["step"] > 0].set_index("step")
    top = train["lag_max"].where(train["lag_max"].notna(), train["lag_mean"]).dropna()
    drops = train["lag_drops"].dropna()

    def at(col: str) -> float | None:
        v = train[col].get(onset) if onset is not None else None
        return None if v is None or pd.isna(v) else float(v)

    until = top[top.index < onset] if onset is not None else top  # the steps before any degradation
    varied = bool(len(top) and top.max() > top.min())
    reason = None
    if lag is None or not lag.measured:
        reason = "the log measures no lag" + ("" if lag is None or lag.bound is None else " (only its bound is known)")
    elif not len(top):
        reason = "the log has no lag reading"
    elif not varied:
        reason = f"the lag never varied (always {top.iloc[0]:g}): degradation cannot be set against it"
    return LagSummary(
        at_onset_mean=at("lag_mean"),
        at_onset_max=at("lag_max") if at("lag_max") is not None else at("lag_mean"),
        max_before_onset=float(until.max()) if onset is not None and len(until) else None,
        max_undegraded=float(until.max()) if len(until) else None,
        drops_before_onset=float(drops[drops.index < onset].sum()) if onset is not None and len(drops) else None,
        drops=float(drops.sum()) if len(drops) else None,
        varied=varied,
        cannot_tell=reason,
    )


CONFIG_FILES = ("run.yaml", "config.yaml", "config.json")


def configured(log: Path, paths: Sequence[str]) -> list[tuple[Any, str]]:
    """The values of dotted ``paths`` in the saved configuration files beside ``log`` (or its directory),
    with the file each was read from; a file that is not a mapping is refused by the input contract."""
    from coolsampler.spec.yaml_file import load_yaml

    where = log if log.is_dir() else log.parent
    out = []
    for name in CONFIG_FILES:
        f = where / name
        if not f.is_file():
            continue
        doc = load_yaml(f, what="configuration")
        if not isinstance(doc, Mapping):
            raise InputError(f, "a configuration file is a mapping")
        for dotted in paths:
            node: Any = doc
            for part in dotted.split("."):
                node = node.get(part) if isinstance(node, Mapping) else None
            if isinstance(node, (int, float)) and not isinstance(node, bool):
                if node < 0:
                    raise InputError(f, f"a staleness bound is a number >= 0, not {node!r}", where=dotted)
                out.append((node, f"{f.name}:{dotted}"))
    return out


def _is_metrics_csv(path: Path) -> bool:
    """A CSV whose header is a metrics table's (``coolsampler parse --out``); one that cannot be read as
    CSV is left to the log readers, which say why."""
    try:
        return "val_acc" in pd.read_csv(path, nrows=0).columns
    except (ValueError, OSError, UnicodeDecodeError):
        return False


# What the analysis needs of a run that neither the log nor its table carries for sure: the refresh
# interval (Figure 2's KL step, Table 1's refreshes), the sampler temperature (the arm) and the run's
# length (whether the log is whole).
NEEDED = {"N": "refresh interval (--N)", "Tb": "sampler temperature (--Tb)"}

PLAIN_VERL = "assumed: plain verl (no staleness/* or sampler/* in its log)"

# verl's own default sampler temperature (actor_rollout_ref.rollout.temperature in verl 0.9.1's
# rollout.yaml): what an unpatched run, which logs no sampler/temperature, sampled at unless it set another.
VERL_DEFAULT_TEMPERATURE = 1.0

# What each part of the output reads, so that a log lacking a column is told which part it loses
# (and, through metrics_schema.PROVIDED_BY, which verl setting would have logged it).
OUTPUT_NEEDS: dict[str, tuple[str, ...]] = {
    "degradation events, peak/final/last-five accuracy, Table 1": ("val_acc",),
    "KL crossings, the KL lead over the onset, KL max and the KL at the fixed step (Figure 2)": ("kl",),
    "KL to the initial policy at step 90 (Table 2)": ("kl_to_init",),
    "the refresh steps, staleness at onset and the cycle readings (Table 3)": ("refreshed", "staleness"),
    "the lead table's chi^2 and log-ppl rows": ("chi2_token", "log_ppl_diff"),
    "the lead table's IS-weight rows (verl logs them only where it applies IS weights)": ("is_ess",),
}


def missing_lines(metrics: pd.DataFrame, system: str = "verl") -> list[str]:
    """What ``metrics`` cannot give, in one line (each part of the output it loses, with the columns it
    lacks), and in one more the verl settings that would log them, each named once."""
    absent = set(absent_columns(metrics))
    parts, lacking = [], []
    for part, cols in OUTPUT_NEEDS.items():
        lack = [c for c in cols if c in absent]
        if lack:
            parts.append(f"{part} (needs {', '.join(lack)})")
            lacking += lack
    if not parts:
        return []
    if system != "verl":  # verl's settings are no advice for another trainer: its logs just lack them
        return [f"   not computed ({system} does not log them): {'; '.join(parts)}"]
    settings = dict.fromkeys(PROVIDED_BY.get(c, "unknown") for c in lacking)
    return [
        f"   not computed: {'; '.join(parts)}",
        f"   to log them, train with: {'; '.join(settings)}",
    ]


def unpatched(metrics: pd.DataFrame) -> bool:
    """The log has none of the patched verl's keys (staleness/*, sampler/*): plain verl wrote it."""
    absent = set(absent_columns(metrics))
    return {"staleness", "refreshed", "sampler_version", "temperature"} <= absent


# A directory name that is meant as a run key's settings part (N<int>_...): one that then does not parse
# is said, not dropped.
_LOOKS_LIKE_KEY = re.compile(r"^N\d+_")


def key_candidate(path: Path) -> str | None:
    """The run key a log's place names, if it looks like one: ``<model>/<task>/<settings>/train.jsonl``
    (any run file, or a TensorBoard/MLflow run directory named so), or ``<model>/<task>/<settings>.jsonl``."""
    p = Path(str(path).rsplit("#", 1)[0]).resolve()
    where = p if p.is_dir() else p.parent if p.name in RUN_TABLES or p.name.startswith("events.") else p.with_suffix("")
    parts = where.parts[-KEY_PARTS:]
    if len(parts) == KEY_PARTS and _LOOKS_LIKE_KEY.match(parts[-1]):
        return "/".join(parts)
    return None


def known_settings(path: Path, given: Mapping[str, Any] | None) -> tuple[dict[str, Any], str, str | None]:
    """Settings of the run at ``path`` before its log is read: run.yaml beside it, else the run key its
    place names (``.../<model>/<task>/<settings>/``, any model and task), then the given ones on top.
    Returns them, where they came from, and why a name that looks like a run key was not read (or None)."""
    from coolsampler.spec.study import key_settings

    s: dict[str, Any] = {}
    how = ""
    dropped = None
    run_yaml = path.with_name("run.yaml")
    if run_yaml.exists():
        from coolsampler.results.run_yaml import load_run_yaml

        s, how = load_run_yaml(run_yaml), "run.yaml"  # an InputError for a run.yaml that is not one run's settings
    elif (key := key_candidate(path)) is not None:
        try:
            s, how = key_settings(key), "the run key of its directory"
        except ValueError as e:
            dropped = f"not read as a run key: {e}"
    given = {k: v for k, v in (given or {}).items() if v is not None}
    if given:
        s.update(given)
        how = "given" if not how else f"{how}, given {', '.join(given)}"
    return s, how, dropped


def settings_for(
    name: str, metrics: pd.DataFrame, base: Mapping[str, Any], how: str, lag: Lag | None = None
) -> tuple[dict[str, Any], str, list[str]]:
    """The run's settings: ``base`` (known_settings), then what the log itself shows (the refresh steps,
    the logged sampler temperature). Returns the settings, where they came from, and what is missing.

    ``lag``: another system's (``results.sources``). Its staleness is its lag, not a refresh interval, and
    its sampler temperature is not in its metrics: a run of it is analysed without N, and without Tb
    unless given (both shown as unknown)."""
    s = dict(base)
    if lag is not None:
        s.setdefault("key", name)
        return s, (how + "; " if how else "") + "another system's log: no refresh interval N, Tb unless given", []
    inferred = []
    if not s.get("N"):
        n = infer_N(metrics)
        if n:
            s["N"] = n
            inferred.append("N")
    if "Tb" not in s and "temperature" in metrics.columns and metrics["temperature"].notna().any():
        s["Tb"] = float(metrics["temperature"].dropna().iloc[0])  # the log's own sampler temperature
        inferred.append("Tb")
    if inferred:
        how = (how + "; " if how else "") + f"{' and '.join(inferred)} inferred from the log"
    if unpatched(metrics):  # plain verl: its sampler is refreshed every step, at its rollout temperature
        plain = []
        if not s.get("N"):
            s["N"] = 1
            plain.append("refreshes its sampler every step")
        if "Tb" not in s:
            s["Tb"] = VERL_DEFAULT_TEMPERATURE
            plain.append("samples at verl's default actor_rollout_ref.rollout.temperature (--Tb if it set another)")
        if plain:
            how = (how + "; " if how else "") + PLAIN_VERL + " " + ", ".join(plain)
    missing = [f"{k}: {what}" for k, what in NEEDED.items() if s.get(k) in (None, "", 0)]
    s.setdefault("key", name)
    return s, how or "none", missing


def interval(metrics: pd.DataFrame, column: str) -> int | None:
    """The usual step interval of a column's readings (the median gap between the steps that have one):
    a log's validation interval for ``val_acc``, 1 for a signal logged every step."""
    if column not in metrics.columns:
        return None
    steps = np.sort(metrics.loc[metrics[column].notna(), "step"].astype(int).to_numpy())
    if len(steps) < 2:
        return None
    return int(np.median(np.diff(steps)))


def onset_window(metrics: pd.DataFrame, onset: int) -> int | None:
    """The validation before the onset: the curve dropped somewhere after it, up to the onset."""
    val = metrics.loc[metrics["val_acc"].notna(), "step"].astype(int)
    before = val[val < onset]
    return int(before.max()) if len(before) else None


def parse_groups(specs: Sequence[str] | None) -> list[tuple[str, str]]:
    """``--group LABEL=GLOB`` as (label, glob) pairs, in order."""
    out = []
    for spec in specs or []:
        label, sep, glob = spec.partition("=")
        if not sep or not label or not glob:
            raise ValueError(f"--group {spec!r}: write LABEL=GLOB (runs whose name or path matches GLOB pool as LABEL)")
        out.append((label, glob))
    return out


def check_groups(groups: Sequence[tuple[str, str]], inputs: Sequence[Input]) -> None:
    """A ``--group`` that matches none of the runs given is a mistake in the flag (a typo pools nothing and
    the table looks as if the runs had no arm): refused before any log is read."""
    for label, glob in groups:
        if not any(_group_of(i.name, i.path, [(label, glob)]) for i in inputs):
            names = [i.name for i in inputs]
            shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
            raise ValueError(f"--group {label}={glob}: matches none of the runs given ({shown})")


def _comparable(value: Any) -> Any:
    """A setting as compared across a group's runs: Tb 1 from run.yaml is the log's 1.0."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)


def _group_of(name: str, path: str, groups: Sequence[tuple[str, str]]) -> str | None:
    for label, glob in groups:
        if fnmatch.fnmatchcase(name, glob) or fnmatch.fnmatchcase(path, glob):
            return label
    return None


def _arm_name(settings: Mapping[str, Any]) -> str:
    """The row label of a run known by its key: the key with its seed left out (the arm's seeds pool)."""
    key = str(settings.get("key", ""))
    return re.sub(r"_s\d+(?=_|$)", "_s*", key) if settings.get("seed_known") else key


def assign_arms(entries: list[Entry], groups: Sequence[tuple[str, str]]) -> list[str]:
    """Give each entry the arm it belongs to: runs named by a run key pool with the seeds of their arm
    (the key less its seed); a ``--group`` pools the runs it matches; every other run is its own row.
    Seeds stay seeds only where a key or run.yaml says them; a group's other runs are numbered.

    A group whose runs differ in N or Tb is no arm (its seeds would mix two settings in one row): it is
    not pooled, each of its runs keeps its own row, and the line returned says why."""
    problems = []
    labels = {id(s): _group_of(str(s["run"]), str(s["path"]), groups) for s, _, _ in entries}
    for label, glob in groups:
        members = [s for s, _, _ in entries if labels[id(s)] == label]
        for setting in ("N", "Tb"):
            values = dict.fromkeys(_comparable(s.get(setting)) for s in members)
            if len(values) > 1:
                runs = ", ".join(f"{s['run']}: {setting}={s.get(setting)}" for s in members[:6])
                problems.append(
                    f"--group {label}={glob}: pools runs of different {setting} ({runs}); a group is the seeds"
                    " of one arm, so each of its runs keeps its own row"
                )
                for s in members:
                    labels[id(s)] = None
                break
    counts: Counter[str] = Counter()
    for s, _, _ in entries:
        label = labels[id(s)]
        if label is not None:
            counts[label] += 1
            s["group"] = s["arm_name"] = label
            if not s.get("seed_known"):
                s["seed"] = counts[label]
        elif s.get("seed_known"):
            s["group"] = s["arm_name"] = _arm_name(s)
        else:  # its own row: grouped by its path, which no other run shares
            s["group"] = f"path:{s['path']}"
            s["arm_name"] = s["key"]
            s["seed"] = 1
    pooled = Counter(s["group"] for s, _, _ in entries)
    for s, _, _ in entries:  # an arm of one run is named by the run's own key, its seed included
        if pooled[s["group"]] == 1 and s["group"] == _arm_name(s):
            s["arm_name"] = s["key"]
    return problems


EVENT_FIELDS = (
    "last_step", "n_val", "peak", "peak_step", "final", "onset", "severe", "kind", "recovered_at", "kl_cross_1",
    "kl_cross_01", "lead", "kl_max", "last5", "whole", "note",
)  # fmt: skip


def events_frame(entries: Sequence[Entry]) -> pd.DataFrame:
    """One row per run: its name, settings and degradation events (what each run's block says), with the
    onset's resolution (the validation interval and the validation before the onset)."""
    rows = []
    for s, m, st in entries:
        summary = summarize_run(m, s, st)
        onset = summary.get("onset")
        row: dict[str, Any] = {
            "run": s.get("key"),
            "arm": s.get("arm_name"),
            "path": s.get("path"),
            "N": s.get("N"),
            "Tb": s.get("Tb"),
            "seed": s.get("seed") if s.get("seed_known") else None,
        }
        row.update({f: summary.get(f) for f in EVENT_FIELDS})
        row["val_interval"] = interval(m, "val_acc")
        row["onset_after"] = onset_window(m, int(onset)) if onset is not None else None
        rows.append(row)
    return pd.DataFrame(rows)
