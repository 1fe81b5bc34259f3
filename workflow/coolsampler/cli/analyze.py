"""``coolsampler analyze PATH...``: the paper's per-run numbers for logs on a laptop, as text.

Takes training logs as verl writes them (its file logger's JSONL, its console output, TensorBoard event
files, an MLflow store, a wandb history exported to CSV: ``coolsampler.results.readers``), already parsed
metrics tables (``metrics.parquet``/``.csv``, with ``status.json`` beside them when present), and
directories of any of these (a run directory, verl's ``<project>/<experiment>.jsonl``, a tree of run-key
directories ``<model>/<task>/<settings>/``, a study's results directory), and prints the degradation
events of each run, a Table-1-style summary with one row per run (runs pool into one row only as seeds of
one arm: by their run keys, or ``--group``) and the lead table: for every degraded run, the step at which
each staleness diagnostic verl logs crosses its threshold and its lead over the onset
(``coolsampler.results.diagnostics``). Onsets and leads carry their resolution (the validation interval);
arms of two seeds or more, their spread. With ``--guard 'SIGNAL>THRESHOLD'`` it also replays the staleness
guard over each log (``coolsampler.results.guard``). ``--figure FILE`` draws the analysed runs' validation
accuracy and learner-sampler KL as Figure 1 draws them (``coolsampler.paper.figures.fig1``); ``--format``
and ``--out`` write the tables as the study targets do (``coolsampler.paper.writers``). No verl, vLLM or
torch: pandas, numpy and, for the figure, matplotlib.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from coolsampler.paper.diagnostics import leads_markdown
from coolsampler.paper.labels import DASH
from coolsampler.paper.tables import f3, fkl, flead, fstep, table1_frames
from coolsampler.paper.writers import to_latex, to_markdown
from coolsampler.results.analysis import LENGTH_UNKNOWN, summarize_run
from coolsampler.results.diagnostics import lead_table
from coolsampler.results.guard import REPLAY_NOTE, logged_schedule, replay_guard, replay_text, schedule_line
from coolsampler.spec.guard import GuardSpec, parse_guard_condition
from coolsampler.spec.inputs import InputError
from coolsampler.spec.layout import KEY_PARTS, RUN_GLOB
from coolsampler.spec.metrics_schema import PROVIDED_BY, RunStatus, absent_columns
from coolsampler.spec.settings import KL_EARLY_NAT, KL_LEAD_NAT, kl_above_text

RUN_LOGS = ("train.jsonl", "metrics.parquet", "metrics.csv")
LOG_SUFFIXES = (".jsonl", ".json", ".log", ".txt", ".out", ".csv", ".db")


def run_log(run_dir: Path) -> Path | None:
    """What to read of a run directory: verl's log (``train.jsonl``, the source of truth: a
    ``metrics.parquet`` beside it may predate the parser's newest columns), else its metrics table."""
    return next((run_dir / name for name in RUN_LOGS if (run_dir / name).is_file()), None)


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
    if rel.name in RUN_LOGS or rel.stem in GENERIC_STEMS and len(rel.parts) > 1:
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
            name = p.parent.name if p.name in RUN_LOGS else p.stem if p.suffix in LOG_SUFFIXES else p.name
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
        seen: dict[str, int] = {}
        for n in names:
            seen[n] = seen.get(n, 0) + 1
        if all(c == 1 for c in seen.values()):
            break
        for k, inp in enumerate(inputs):
            if seen[names[k]] > 1:
                p = Path(inp.path.rsplit("#", 1)[0])
                p = p.parent if p.name in RUN_LOGS else p
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
    """A run's metrics table and status, the format it was read from and its validation series."""

    metrics: pd.DataFrame
    status: RunStatus | None
    fmt: str
    series: list[ValSeries] = field(default_factory=list)
    chosen: ValSeries | None = None


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
    return Loaded(df, status, fmt, series, chosen)


def _is_metrics_csv(path: Path) -> bool:
    """A CSV whose header is a metrics table's (``coolsampler parse --out``); one that cannot be read as
    CSV is left to the log readers, which say why."""
    try:
        return "val_acc" in pd.read_csv(path, nrows=0).columns
    except (ValueError, OSError, UnicodeDecodeError):
        return False


def load_any(
    path: str | Path,
    *,
    steps: int | None = None,
    val_every: int | None = None,
    required: tuple[str, ...] | None = None,
) -> tuple[pd.DataFrame, RunStatus | None]:
    """A metrics table and its status from any log ``read_run`` reads.

    ``steps``/``val_every``: what the run was configured to log, so that a log that stops early or
    misses validations is not taken for a whole one (``coolsampler.results.metrics.parse_records``).
    ``required``: the columns a log must have (default: the parser's, all the pipeline logs);
    ``("step",)`` reads any verl log, its never-logged columns NaN.
    """
    from coolsampler.spec.metrics_schema import REQUIRED

    loaded = read_run(path, steps=steps, val_every=val_every, required=required or REQUIRED)
    return loaded.metrics, loaded.status


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


def missing_lines(metrics: pd.DataFrame) -> list[str]:
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
    where = p if p.is_dir() else p.parent if p.name in RUN_LOGS or p.name.startswith("events.") else p.with_suffix("")
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


def _settings_for(
    name: str, metrics: pd.DataFrame, base: Mapping[str, Any], how: str
) -> tuple[dict[str, Any], str, list[str]]:
    """The run's settings: ``base`` (known_settings), then what the log itself shows (the refresh steps,
    the logged sampler temperature). Returns the settings, where they came from, and what is missing."""
    s = dict(base)
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


def _missing(x: Any) -> bool:
    return x is None or (isinstance(x, float) and x != x)


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


def resolution_line(metrics: pd.DataFrame, summary: Mapping[str, Any]) -> str | None:
    """What an onset and a lead are known to: the onset is a validation step, the drop happened after
    the validation before it; so a lead over it is known to that window (plus the signal's own interval)."""
    onset = summary.get("onset")
    if onset is None:
        return None
    prev = onset_window(metrics, int(onset))
    val_k = interval(metrics, "val_acc")
    if prev is None or val_k is None:
        return None
    line = f"   resolution: validated every {val_k} steps, so the drop lies in steps {prev + 1}-{onset}"
    lead, cross = summary.get("lead"), summary.get("kl_cross_1")
    if not _missing(lead) and not _missing(cross):
        kl_k = interval(metrics, "kl") or 1
        low = prev + 1 - int(cross)
        line += (
            f"; the KL lead {flead(lead)} is one reading of {low:+d} to {int(lead):+d}"
            f" (KL logged every {kl_k} step{'s' if kl_k > 1 else ''})"
        )
    return line


def run_text(
    path: str, summary: Mapping[str, Any], settings: Mapping[str, Any], how: str, status: RunStatus | None = None
) -> str:
    """One run's events in a few lines; each problem of its log on its own line."""
    s = summary
    last = s["last_step"]
    steps = settings.get("steps")
    problems = [] if status is None else [p for p in status.problems if p != LENGTH_UNKNOWN]
    cut = [p for p in problems if p.startswith("stopped at step")]
    if not steps:
        state = f"{LENGTH_UNKNOWN}: not called complete (--steps, or run.yaml beside the log)"
    elif cut or (not _missing(last) and int(last) < int(steps)):
        state = f"incomplete: the log stops at step {fstep(last)} of the run's {steps}"
    else:
        state = "complete" if not problems else f"all {steps} steps logged"
    lines = [
        f"== {settings.get('key', path)}" + (f"  ({path})" if str(settings.get("key")) != path else ""),
        f"   steps up to {fstep(last)} ({state}); {s['n_val']} validations",
        f"   N={settings.get('N', DASH)}, Tb={settings.get('Tb', DASH)} ({how})",
        f"   peak {f3(s['peak'])} at step {fstep(s['peak_step'])}; final {f3(s['final'])}",
    ]
    lines += [f"   log: {p}" for p in problems if not p.startswith("stopped at step")]
    if s["n_val"] == 0:
        lines.append("   no validation points: degradation cannot be judged")
    elif s["onset"] is None:
        lines.append(
            "   no onset: stable under the Section 2 criteria" + (f"; severe {s['severe']}" if s["severe"] else "")
        )
    else:
        back = f", back at {s['recovered_at']}" if s["recovered_at"] is not None else ""
        ref, sev = f3(s["reference"]), fstep(s["severe"])
        lines.append(f"   onset {s['onset']} (running max {ref}), severe {sev}, {s['kind']}{back}")
    if not _missing(s["kl_max"]):  # a log without the KL says so once, under "not computed"
        lines.append(
            f"   {kl_above_text(KL_LEAD_NAT)} at {fstep(s['kl_cross_1'])},"
            f" {kl_above_text(KL_EARLY_NAT)} at {fstep(s['kl_cross_01'])},"
            f" lead {flead(s['lead'])}, KL max {fkl(s['kl_max'])},"
            f" KL at step {fstep(s['kl_fixed_step'])} {fkl(s['kl_fixed'])}"
        )
    kl_init = "" if _missing(s["kl_to_init_90"]) else f", KL to init at 90 {fkl(s['kl_to_init_90'])}"
    lines.append(f"   last five {f3(s['last5'])}, whole run {f3(s['whole'])}{kl_init}")
    return "\n".join(lines)


@dataclass
class Report:
    """What ``coolsampler analyze`` prints, and the paths it could not analyse (then it exits 1)."""

    text: str
    errors: list[str] = field(default_factory=list)
    entries: list[tuple[dict[str, Any], pd.DataFrame, RunStatus | None]] = field(default_factory=list)
    tables: dict[str, tuple[pd.DataFrame, pd.DataFrame]] = field(default_factory=dict)


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


def assign_arms(
    entries: list[tuple[dict[str, Any], pd.DataFrame, RunStatus | None]], groups: Sequence[tuple[str, str]]
) -> list[str]:
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
    counts: dict[str, int] = {}
    for s, _, _ in entries:
        label = labels[id(s)]
        if label is not None:
            counts[label] = counts.get(label, 0) + 1
            s["group"] = label
            s["arm_name"] = label
            if not s.get("seed_known"):
                s["seed"] = counts[label]
        elif s.get("seed_known"):
            s["group"] = _arm_name(s)
            s["arm_name"] = _arm_name(s)
        else:  # its own row: grouped by its path, which no other run shares
            s["group"] = f"path:{s['path']}"
            s["arm_name"] = s["key"]
            s["seed"] = 1
    pooled: dict[str, int] = {}
    for s, _, _ in entries:
        pooled[s["group"]] = pooled.get(s["group"], 0) + 1
    for s, _, _ in entries:  # an arm of one run is named by the run's own key, its seed included
        if pooled[s["group"]] == 1 and s["group"] == _arm_name(s):
            s["arm_name"] = s["key"]
    return problems


VOLATILITY_NOTE = (
    "Note: {n} of {total} arm(s) rest on 2 seeds or fewer. Greedy validation can dip by 0.1 for one"
    " validation and recover, so Section 2's onset was volatile at two seeds in this project's own runs"
    " (docs/guard.md: 'Greedy validation in this world is too volatile for Section 2's criterion at two"
    " seeds'); read a single run's onset and lead as one draw."
)


def spread_lines(entries: Sequence[tuple[dict[str, Any], pd.DataFrame, RunStatus | None]]) -> list[str]:
    """For each arm of two runs or more: the spread of its onsets, KL leads and last-five means."""
    arms: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {}
    for s, m, st in entries:
        arms.setdefault(str(s["arm_name"]), []).append((s, summarize_run(m, s, st)))
    out = []
    for arm, runs in arms.items():
        if len(runs) < 2:
            continue
        onsets = [r["onset"] for _, r in runs]
        leads = [r["lead"] for _, r in runs if not _missing(r["lead"])]
        last5 = [r["last5"] for _, r in runs if not _missing(r["last5"])]
        on = ", ".join(DASH if o is None else str(o) for o in onsets)
        parts = [f"onsets {on} ({sum(o is not None for o in onsets)} of {len(runs)} degrade)"]
        if leads:
            parts.append(f"KL leads {min(leads):+g} to {max(leads):+g}")
        if last5:
            parts.append(f"last five {f3(min(last5))}-{f3(max(last5))}")
        out.append(f"   {arm} ({len(runs)} runs): " + "; ".join(parts))
    return out


def analyze_report(
    paths: Sequence[str],
    settings: Mapping[str, Any] | None = None,
    *,
    guard: GuardSpec | None = None,
    horizon: int | None = None,
    val: str | None = None,
    groups: Sequence[tuple[str, str]] = (),
) -> Report:
    """Degradation events of every log in ``paths``, a Table-1-style summary and the lead table.

    ``paths``: logs, tables, run directories or directories of them (``find_inputs``).

    ``settings`` (optional, e.g. ``{"N": 192, "Tb": 0.8, "steps": 300}`` or a full ``Run.settings()``)
    applies to every path, over each run's ``run.yaml`` (or the run key its directory names). N and Tb
    not found there are read from the log where it shows them; a run for which they stay unknown is not
    analysed (its block says what is missing), and a run whose length is unknown is not called complete.
    A path that cannot be read is reported in the text and in ``errors``, not raised, so one bad log
    does not hide the others.

    ``val``: the validation series to read (``SOURCE[:METRIC]``, ``choose_val``). ``groups``: (label,
    glob) pairs pooling the runs they match as the seeds of one arm (``assign_arms``).

    ``guard``: replay it over every analysed log at the run's N (``coolsampler.results.guard``;
    ``horizon``: the false-alarm horizon, default N), under the run's block.
    """
    from coolsampler.results.run_yaml import settings_problem

    given = {k: v for k, v in (settings or {}).items() if v is not None}
    if (bad := settings_problem(given)) is not None:  # --N -5 is refused as run.yaml's N: -5 is
        raise ValueError(f"--{bad[0].replace('_', '-')}: {bad[1]}")
    blocks, entries, errors = [], [], []
    inputs = find_inputs(paths)
    check_groups(groups, inputs)
    for inp in inputs:
        path = inp.path
        p = Path(path)
        try:
            base, how, dropped = known_settings(p, settings)
            loaded = read_run(path, steps=base.get("steps"), val_every=base.get("val_every"), val=val)
        except Exception as e:  # report and continue: the other logs are still worth reading
            if isinstance(e, InputError):  # it names its file (the log, or the run.yaml beside it)
                blocks.append(f"== {path}\n   cannot read: {e}")
                errors.append(str(e))
                continue
            msg = str(e) if isinstance(e, ValueError) else f"{type(e).__name__}: {e}"
            # the block and the error line name the path already
            msg = " ".join(msg.removeprefix(f"{path}: ").removesuffix(f": {path}").split())
            blocks.append(f"== {path}\n   cannot read: {msg}")
            errors.append(f"{path}: {msg}")
            continue
        metrics, status = loaded.metrics, loaded.status
        if not (metrics["step"] > 0).any():  # nothing trained: no curve to judge, so never "stable"
            msg = "not judged: the log holds no training step (only the validation before step 1)"
            blocks.append(f"== {path}\n   {msg}")
            errors.append(f"{path}: {msg}")
            continue
        s, how, missing = _settings_for(inp.name, metrics, base, how)
        s["run"], s["path"] = inp.name, path
        s["seed_known"] = "seed" in base
        if missing:
            msg = "missing settings: " + "; ".join(missing) + " (or keep the run's run.yaml beside the log)"
            blocks.append(f"== {path}\n   not analysed: {msg}" + (f"\n   {dropped}" if dropped else ""))
            msg += f"; {dropped}" if dropped else ""
            errors.append(f"{path}: {msg}")
            continue
        last = int(metrics["step"].max())
        if status is None and s.get("steps"):  # a table without status.json: judge its length at least
            steps = int(s["steps"])
            status = RunStatus(
                last >= steps, last, steps, [] if last >= steps else [f"stopped at step {last} of {steps}"]
            )
        if not s.get("steps") and status is not None and status.complete:
            status = RunStatus(False, status.last_step, status.expected_steps, [LENGTH_UNKNOWN])
        summary = summarize_run(metrics, s, status)
        extra = [f"   {dropped}"] if dropped else []
        if loaded.fmt not in ("verl JSONL", "metrics table"):
            extra.append(f"   read as {loaded.fmt}")
        if (line := val_line(loaded.series, loaded.chosen, val)) is not None:
            extra.append(line)
        if (line := resolution_line(metrics, summary)) is not None:
            extra.append(line)
        block = run_text(path, summary, s, how, status)
        block = "\n".join([block, *extra, *missing_lines(metrics)])
        if s.get("guard") and (logged := logged_schedule(metrics)):  # a guard run: its refreshes, replayable
            block += f"\n   its logged refreshes as an open-loop schedule: {schedule_line(logged)}"
        if guard is not None:
            try:
                block += "\n" + replay_text(replay_guard(metrics, guard, int(s["N"]), horizon))
            except ValueError as e:  # e.g. a guard whose min exceeds this run's N: the other logs still count
                block += f"\n   guard not replayed: {e}"
                errors.append(f"{path}: guard not replayed: {e}")
        blocks.append(block)
        entries.append((s, metrics, status))
    tables: dict[str, tuple[pd.DataFrame, pd.DataFrame]] = {}
    if entries:
        errors += assign_arms(entries, groups)
        data, disp = table1_frames(entries)
        tables["table1"] = (data, disp)
        blocks.append(
            "Summary (Table 1 style, one row per run; the seeds of one arm share a row):\n" + to_markdown(disp)
        )
        arms = data["runs"].tolist()
        if spread := spread_lines(entries):
            blocks.append("Spread over the runs of one arm:\n" + "\n".join(spread))
        few = sum(1 for n in arms if n <= 2)
        if few:
            blocks.append(VOLATILITY_NOTE.format(n=few, total=len(arms)))
        leads = lead_table(entries)
        events = events_frame(entries)
        tables["events"] = (events, events)
        # each lead with the resolution of its onset: the validation interval, the validation before it
        res = events[["run", "val_interval", "onset_after"]].rename(columns={"run": "key"})
        tables["leads"] = (leads.merge(res, on="key", how="left") if len(leads) else leads, leads)
        blocks.append(
            "# Staleness diagnostics against the onset\n\n"
            + leads_markdown(leads).rstrip()
            + "\n\nEvery onset is a validation step: the drop it marks lies between it and the validation"
            " before it, so each lead is known only to the validation interval (each run's 'resolution' line)."
        )
        if guard is not None:
            blocks.append(f"Guard replay ({guard.text()}): under each run above. {REPLAY_NOTE}")
    return Report("\n\n".join(blocks) + "\n", errors, entries, tables)


EVENT_FIELDS = (
    "last_step",
    "n_val",
    "peak",
    "peak_step",
    "final",
    "onset",
    "severe",
    "kind",
    "recovered_at",
    "kl_cross_1",
    "kl_cross_01",
    "lead",
    "kl_max",
    "last5",
    "whole",
    "note",
)


def events_frame(entries: Sequence[tuple[dict[str, Any], pd.DataFrame, RunStatus | None]]) -> pd.DataFrame:
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


TABLE_FORMATS = ("md", "csv", "json", "tex")
TABLE_TITLES = {
    "table1": "Table 1 style summary of the analysed runs",
    "events": "Degradation events of each run",
    "leads": "Staleness diagnostics against the onset",
}


def table_text(name: str, frames: tuple[pd.DataFrame, pd.DataFrame], fmt: str) -> str:
    """One table as ``fmt``: Markdown and LaTeX of the display (as printed), CSV and JSON of the numbers."""
    data, disp = frames
    if fmt == "md":
        if name == "leads":
            return leads_markdown(disp)
        return to_markdown(disp)
    if fmt == "tex":
        shown = disp if name != "leads" else data
        return to_latex(shown.astype(str), caption=TABLE_TITLES[name], label=f"tab:analyze-{name}")
    if fmt == "csv":
        return data.to_csv(index=False)
    if fmt == "json":
        return json.dumps(json.loads(data.to_json(orient="records")), indent=1) + "\n"
    raise ValueError(f"--format {fmt}: one of {', '.join(TABLE_FORMATS)}")


def write_tables(report: Report, out: Path) -> list[Path]:
    """Every table of the report in every format, into ``out`` (``table1.md``, ``events.csv``, ...)."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, frames in report.tables.items():
        for fmt in TABLE_FORMATS:
            path = out / f"{name}.{fmt}"
            path.write_text(table_text(name, frames, fmt))
            written.append(path)
    return written


def analyze(paths: Sequence[str], settings: Mapping[str, Any] | None = None) -> str:
    """``analyze_report``'s text alone."""
    return analyze_report(paths, settings).text


def guard_of(args: argparse.Namespace) -> GuardSpec | None:
    """The ``--guard`` condition with its ``--guard-window`` / ``--guard-min``, or None."""
    if args.guard is None:
        for flag in ("guard_window", "guard_min", "guard_horizon"):
            if getattr(args, flag) is not None:
                raise ValueError(f"--{flag.replace('_', '-')} needs --guard")
        return None
    spec = parse_guard_condition(args.guard)
    window = spec.window if args.guard_window is None else args.guard_window
    return GuardSpec(spec.signal, spec.threshold, window, 1 if args.guard_min is None else args.guard_min)


FIGURE_FORMATS = (".png", ".pdf", ".svg")
# One colour per run (matplotlib's tab10, then tab20's light shades): runs are told apart by colour
# in the figure of one's own logs, where the sampler-temperature colours of the paper's figures would
# give every run at Tb=1 the same one.
RUN_COLOURS = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
    "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#c7c7c7", "#dbdb8d", "#9edae5",
)  # fmt: skip


def draw(entries: Sequence[tuple[dict[str, Any], pd.DataFrame, RunStatus | None]], path: str | Path) -> Path:
    """The analysed runs as Figure 1 draws a study's: (a) validation accuracy, (b) learner-sampler KL;
    one colour per run (the seeds of one arm share it), refresh lines only where the runs share an N > 1;
    the format is the file's suffix. Returns the path written."""
    from coolsampler.paper.figures import fig1
    from coolsampler.spec.provenance import Provenance

    path = Path(path)
    if path.suffix.lower() not in FIGURE_FORMATS:
        raise ValueError(f"--figure {path}: name a {', '.join(FIGURE_FORMATS)} file")
    colours: dict[str, str] = {}
    named = []
    for s, m, st in entries:
        arm = str(s.get("arm_name") or s.get("key"))
        colour = colours.setdefault(arm, RUN_COLOURS[len(colours) % len(RUN_COLOURS)])
        seed = s.get("seed") if s.get("seed_known") else None  # no "seed 1" legend for a run nobody seeded
        named.append(({**s, "label": _legend_name(s), "colour": colour, "seed": seed}, m, st))
    titles = {"a": "(a) validation accuracy", "b": "(b) learner-sampler KL"}
    fig1({"a": named, "b": named}, Provenance.here("own logs", script="coolsampler analyze"), [path], titles=titles)
    return path


def _legend_name(settings: Mapping[str, Any]) -> str:
    """A log's legend entry: its arm's name (its key, less the seed where seeds pool), its N and Tb."""
    name = str(settings.get("arm_name") or settings.get("key", ""))
    return f"{name}: N={settings.get('N')}, Tb={settings.get('Tb')}"


def _analyze(args: argparse.Namespace) -> int:
    from coolsampler.cli.outputs import Output, check_outputs  # output flags first, before any log is read

    check_outputs(
        (args.figure, Output("--figure", suffixes=FIGURE_FORMATS)), (args.out, Output("--out", directory=True))
    )
    given = {"N": args.N, "Tb": args.Tb, "steps": args.steps, "val_every": args.val_every}
    report = analyze_report(
        args.paths,
        {k: v for k, v in given.items() if v is not None},
        guard=guard_of(args),
        horizon=args.guard_horizon,
        val=args.val,
        groups=parse_groups(args.group),
    )
    if args.format == "md" or not report.tables:
        sys.stdout.write(report.text)
    else:  # the tables alone, to paste or pipe
        for name, frames in report.tables.items():
            if args.format in ("md", "tex"):
                sys.stdout.write(f"% {TABLE_TITLES[name]}\n" if args.format == "tex" else "")
            sys.stdout.write(table_text(name, frames, args.format).rstrip() + "\n\n")
    if args.out and report.tables:
        written = write_tables(report, Path(args.out))
        print(f"wrote {len(written)} files to {args.out}", file=sys.stderr if args.format != "md" else sys.stdout)
    if args.figure and report.entries:
        print(f"wrote {draw(report.entries, args.figure)}", file=sys.stderr if args.format != "md" else sys.stdout)
    for err in report.errors:
        print(f"coolsampler analyze: {err}", file=sys.stderr)
    return 1 if report.errors else 0


def register(sub: argparse._SubParsersAction) -> None:
    a = sub.add_parser("analyze")
    a.add_argument(
        "paths",
        nargs="+",
        help="verl logs (file-logger JSONL, console output, TensorBoard event files, an MLflow store, a wandb"
        " CSV export), metrics.parquet/.csv, or directories of them (run directories, <project>/<experiment>.jsonl,"
        " run-key trees, a results directory)",
    )
    a.add_argument("--N", type=int, help="refresh interval for every path (default: run.yaml, the run key, the log)")
    a.add_argument("--Tb", type=float, help="sampler temperature for every path (default: as --N)")
    a.add_argument("--steps", type=int, help="the run's length, to tell a whole log from a cut one (default: run.yaml)")
    a.add_argument("--val-every", type=int, help="validation interval (default: run.yaml)")
    a.add_argument(
        "--val",
        metavar="SOURCE[:METRIC]",
        help="the validation series to read, e.g. 'gsm8k' or 'math500:best@4/mean' (default: the first data"
        " source alphabetically, its mean@n at the largest n logged; a log of several series lists them)",
    )
    a.add_argument(
        "--group",
        action="append",
        metavar="LABEL=GLOB",
        help="pool the runs whose name or path matches GLOB as the seeds of one arm LABEL (repeatable; default:"
        " only runs whose run keys differ in the seed alone pool)",
    )
    a.add_argument(
        "--format",
        choices=TABLE_FORMATS,
        default="md",
        help="md (default): the full text; csv, json or tex: the tables alone (Table 1, the events, the leads)",
    )
    a.add_argument("--out", metavar="DIR", help="also write every table in every format into DIR")
    a.add_argument(
        "--guard",
        metavar="SIGNAL>THRESHOLD",
        help="replay the staleness guard over each log, e.g. 'probs_diff>0.1' or 'ess<0.5' (a diagnostic of the"
        " lead table, in its own direction), at the run's N as the longest interval",
    )
    a.add_argument("--guard-window", type=int, help="steps of the guard's trailing median (default: the lead table's)")
    a.add_argument("--guard-min", type=int, help="fewest steps between two guard refreshes (default 1)")
    a.add_argument(
        "--guard-horizon", type=int, help="a firing with no onset this many steps after it is a false alarm (default N)"
    )
    a.add_argument(
        "--figure",
        metavar="FILE",
        help="also draw the runs' validation accuracy and KL as Figure 1 does into FILE (.png, .pdf or .svg)",
    )
    a.set_defaults(func=_analyze)


__all__ = [
    "Input",
    "Report",
    "ValSeries",
    "analyze",
    "analyze_report",
    "choose_val",
    "events_frame",
    "expand_paths",
    "find_inputs",
    "guard_of",
    "infer_N",
    "known_settings",
    "load_any",
    "read_run",
    "register",
    "run_log",
    "val_series",
    "write_tables",
]
