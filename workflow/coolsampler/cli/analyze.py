"""``coolsampler analyze PATH...``: the paper's per-run numbers for logs on a laptop, as text.

Takes verl JSONL logs (parsed by ``coolsampler.results.metrics.parse_jsonl``), already parsed metrics tables
(``metrics.parquet``/``.csv``, with ``status.json`` beside them when present), run directories or a
study's results directory (``runs/<model>/<task>/<settings>/``), and prints the degradation events of
each run, a Table-1-style summary and the lead table: for every degraded run, the step at which each
staleness diagnostic verl logs crosses its threshold and its lead over the onset
(``coolsampler.results.diagnostics``). With ``--guard 'SIGNAL>THRESHOLD'`` it also replays the
staleness guard over each log (``coolsampler.results.guard``): where it would have refreshed the sampler,
against the onset. ``--figure FILE`` draws the analysed runs' validation accuracy and learner-sampler
KL as Figure 1 draws them (``coolsampler.paper.figures.fig1``). No verl, vLLM or torch: pandas, numpy and,
for the figure, matplotlib.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from coolsampler.paper.diagnostics import leads_markdown
from coolsampler.paper.labels import DASH
from coolsampler.paper.tables import f3, fkl, flead, fstep, table1_frames
from coolsampler.paper.writers import to_markdown
from coolsampler.results.analysis import LENGTH_UNKNOWN, UNKNOWN_LENGTH_STATUS, status_note, summarize_run
from coolsampler.results.diagnostics import lead_table
from coolsampler.results.guard import REPLAY_NOTE, logged_schedule, replay_guard, replay_text, schedule_line
from coolsampler.spec.guard import GuardSpec, parse_guard_condition
from coolsampler.spec.layout import RUN_GLOB, key_of_file
from coolsampler.spec.metrics_schema import PROVIDED_BY, RunStatus, absent_columns
from coolsampler.spec.settings import KL_EARLY_NAT, KL_LEAD_NAT, kl_above_text

RUN_LOGS = ("train.jsonl", "metrics.parquet", "metrics.csv")


def run_log(run_dir: Path) -> Path | None:
    """What to read of a run directory: verl's log (``train.jsonl``, the source of truth: a
    ``metrics.parquet`` beside it may predate the parser's newest columns), else its metrics table."""
    return next((run_dir / name for name in RUN_LOGS if (run_dir / name).is_file()), None)


def expand_paths(paths: Sequence[str]) -> list[str]:
    """Logs and tables as given; a run directory as its log; a results directory (holding
    ``runs/<model>/<task>/<settings>/``) as the log of every run under it that has one; a directory of
    run directories (the shipped example logs, a folder of copied runs) as their logs. A directory
    that is none of these is kept as it is, so that reading it reports the error."""
    out: list[str] = []
    for path in paths:
        p = Path(path)
        if not p.is_dir():
            out.append(path)
            continue
        log = run_log(p)
        if log is not None:
            out.append(str(log))
            continue
        runs = sorted(d for d in p.glob(RUN_GLOB) if d.is_dir()) or sorted(d for d in p.iterdir() if d.is_dir())
        found = [str(log) for log in map(run_log, runs) if log is not None]
        out.extend(found or [path])
    return out


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


def load_any(
    path: str | Path,
    *,
    steps: int | None = None,
    val_every: int | None = None,
    required: tuple[str, ...] | None = None,
) -> tuple[pd.DataFrame, RunStatus | None]:
    """A metrics table and its status from a JSONL log, a parquet/CSV table (+ status.json beside it).

    ``steps``/``val_every``: what the run was configured to log, so that a log that stops early or
    misses validations is not taken for a whole one (``coolsampler.results.metrics.parse_jsonl``).
    ``required``: the columns a JSONL log must have (default: the parser's, all the pipeline logs);
    ``("step",)`` reads any verl log, its never-logged columns NaN.
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no such file: {p}")
    if p.is_dir():
        raise ValueError(f"{p}: a directory with no train.jsonl or metrics.parquet, and no runs/ below it")
    if p.is_file() and p.stat().st_size == 0:
        raise ValueError(f"empty file: {p}")
    if p.suffix in (".parquet", ".csv"):
        from coolsampler.results.loaders import load_metrics, load_status

        df = load_metrics(p)
        if df is None or df.empty:
            raise ValueError(f"no rows in {p}")
        return df, load_status(p.with_name("status.json"))
    from coolsampler.results.metrics import parse_jsonl  # the parser module may land after this one

    if required is None:
        return parse_jsonl(p, expected_steps=steps, val_every=val_every)
    return parse_jsonl(p, expected_steps=steps, val_every=val_every, required=required)


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
    "the lead table's chi^2, IS-weight and log-ppl diagnostics": ("chi2_token", "is_ess", "log_ppl_diff"),
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


def known_settings(path: Path, given: Mapping[str, Any] | None) -> tuple[dict[str, Any], str]:
    """Settings of the run at ``path`` before its log is read: run.yaml beside it, else the run key its
    directory names (``.../<model>/<task>/<settings>/``), then the given ones on top."""
    s: dict[str, Any] = {}
    how = ""
    run_yaml = path.with_name("run.yaml")
    if run_yaml.exists():
        import yaml

        loaded = yaml.safe_load(run_yaml.read_text()) or {}
        s, how = dict(loaded.get("settings", loaded)), "run.yaml"
    else:
        from coolsampler.spec.study import parse_key

        try:
            s, how = parse_key(key_of_file(path.resolve())).settings(), "the run key of its directory"
        except ValueError:
            pass
    given = {k: v for k, v in (given or {}).items() if v is not None}
    if given:
        s.update(given)
        how = "given" if not how else f"{how}, given {', '.join(given)}"
    return s, how


def _settings_for(
    path: Path, metrics: pd.DataFrame, base: Mapping[str, Any], how: str
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
    s.setdefault("key", str(path))
    s.setdefault("seed", 0)
    return s, how or "none", missing


def _missing(x: Any) -> bool:
    return x is None or (isinstance(x, float) and x != x)


def run_text(path: str, summary: Mapping[str, Any], settings: Mapping[str, Any], how: str) -> str:
    """One run's events in a few lines."""
    s = summary
    last = s["last_step"]
    state = "complete" if s["complete"] else "NOT complete"
    if not settings.get("steps"):
        state = f"{LENGTH_UNKNOWN}: not called complete (--steps, or run.yaml beside the log)"
    lines = [
        f"== {path}",
        f"   steps up to {fstep(last)} ({state}); {s['n_val']} validations",
        f"   N={settings.get('N', DASH)}, Tb={settings.get('Tb', DASH)} ({how})",
        f"   peak {f3(s['peak'])} at step {fstep(s['peak_step'])}; final {f3(s['final'])}",
    ]
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
    if s["note"] and s["note"] != status_note(UNKNOWN_LENGTH_STATUS, True):  # the length: said above already
        lines.append(f"   NOTE: {s['note']}")
    return "\n".join(lines)


@dataclass
class Report:
    """What ``coolsampler analyze`` prints, and the paths it could not analyse (then it exits 1)."""

    text: str
    errors: list[str] = field(default_factory=list)
    entries: list[tuple[dict[str, Any], pd.DataFrame, RunStatus | None]] = field(default_factory=list)


def analyze_report(
    paths: Sequence[str],
    settings: Mapping[str, Any] | None = None,
    *,
    guard: GuardSpec | None = None,
    horizon: int | None = None,
) -> Report:
    """Degradation events of every log in ``paths``, a Table-1-style summary and the lead table.

    ``paths``: logs, tables, run directories or results directories (``expand_paths``).

    ``settings`` (optional, e.g. ``{"N": 192, "Tb": 0.8, "steps": 300}`` or a full ``Run.settings()``)
    applies to every path, over each run's ``run.yaml`` (or the run key its directory names). N and Tb
    not found there are read from the log where it shows them; a run for which they stay unknown is not
    analysed (its block says what is missing), and a run whose length is unknown is not called complete.
    A path that cannot be read is reported in the text and in ``errors``, not raised, so one bad log
    does not hide the others.

    ``guard``: replay it over every analysed log at the run's N (``coolsampler.results.guard``;
    ``horizon``: the false-alarm horizon, default N), under the run's block.
    """
    blocks, entries, errors = [], [], []
    for path in expand_paths(paths):
        p = Path(path)
        base, how = known_settings(p, settings)
        try:
            metrics, status = load_any(
                path, steps=base.get("steps"), val_every=base.get("val_every"), required=("step",)
            )
        except Exception as e:  # report and continue: the other logs are still worth reading
            msg = str(e) if isinstance(e, (FileNotFoundError, ValueError)) else f"{type(e).__name__}: {e}"
            blocks.append(f"== {path}\n   cannot read: {msg}")
            errors.append(f"{path}: {msg}")
            continue
        s, how, missing = _settings_for(p, metrics, base, how)
        if missing:
            msg = "missing settings: " + "; ".join(missing) + " (or keep the run's run.yaml beside the log)"
            blocks.append(f"== {path}\n   not analysed: {msg}")
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
        block = run_text(path, summarize_run(metrics, s, status), s, how)
        block = "\n".join([block, *missing_lines(metrics)])
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
    if entries:
        _, disp = table1_frames(entries)
        blocks.append("Summary (Table 1 style, one row per arm):\n" + to_markdown(disp))
        blocks.append("# Staleness diagnostics against the onset\n\n" + leads_markdown(lead_table(entries)).rstrip())
        if guard is not None:
            blocks.append(f"Guard replay ({guard.text()}): under each run above. {REPLAY_NOTE}")
    return Report("\n\n".join(blocks) + "\n", errors, entries)


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


def draw(entries: Sequence[tuple[dict[str, Any], pd.DataFrame, RunStatus | None]], path: str | Path) -> Path:
    """The analysed runs as Figure 1 draws a study's: (a) validation accuracy, (b) learner-sampler KL;
    the format is the file's suffix. Returns the path written."""
    from coolsampler.paper.figures import fig1
    from coolsampler.spec.provenance import Provenance

    path = Path(path)
    if path.suffix.lower() not in FIGURE_FORMATS:
        raise ValueError(f"--figure {path}: name a {', '.join(FIGURE_FORMATS)} file")
    named = [({**s, "label": _legend_name(s)}, m, st) for s, m, st in entries]
    titles = {"a": "(a) validation accuracy", "b": "(b) learner-sampler KL"}
    fig1({"a": named, "b": named}, Provenance.here("own logs", script="coolsampler analyze"), [path], titles=titles)
    return path


def _legend_name(settings: Mapping[str, Any]) -> str:
    """A log's legend entry: its folder (or file) name, then its N, Tb and correction."""
    where = Path(str(settings.get("key", "")))
    name = where.parent.name if where.name in RUN_LOGS else where.name
    corr = f", {settings['correction']}" if settings.get("correction") else ""
    return f"{name}: N={settings.get('N')}, Tb={settings.get('Tb')}{corr}"


def _analyze(args: argparse.Namespace) -> int:
    given = {"N": args.N, "Tb": args.Tb, "steps": args.steps, "val_every": args.val_every}
    report = analyze_report(
        args.paths,
        {k: v for k, v in given.items() if v is not None},
        guard=guard_of(args),
        horizon=args.guard_horizon,
    )
    sys.stdout.write(report.text)
    if args.figure and report.entries:
        print(f"wrote {draw(report.entries, args.figure)}")
    for err in report.errors:
        print(f"coolsampler analyze: {err}", file=sys.stderr)
    return 1 if report.errors else 0


def register(sub: argparse._SubParsersAction) -> None:
    a = sub.add_parser("analyze")
    a.add_argument("paths", nargs="+", help="train.jsonl, metrics.parquet/.csv, a run directory or a results directory")
    a.add_argument("--N", type=int, help="refresh interval for every path (default: run.yaml, the run key, the log)")
    a.add_argument("--Tb", type=float, help="sampler temperature for every path (default: as --N)")
    a.add_argument("--steps", type=int, help="the run's length, to tell a whole log from a cut one (default: run.yaml)")
    a.add_argument("--val-every", type=int, help="validation interval (default: run.yaml)")
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
    "Report",
    "analyze",
    "analyze_report",
    "expand_paths",
    "guard_of",
    "infer_N",
    "known_settings",
    "load_any",
    "register",
    "run_log",
]
