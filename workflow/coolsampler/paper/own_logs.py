"""The report of ``coolsampler analyze``: each of a researcher's own runs as a few lines of events, a
Table-1-style summary with one row per arm, the lead table, and the same tables as Markdown, CSV, JSON or
LaTeX and the runs' curves as Figure 1 draws them.

The runs, their settings, arms and events come from ``coolsampler.results.own_logs``; this module only
renders them, with the paper's own formatters (``tables``, ``writers``, ``diagnostics``, ``figures``). With a
staleness guard it also replays the guard over each log (``coolsampler.results.guard``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from coolsampler.paper.diagnostics import leads_markdown
from coolsampler.paper.labels import DASH
from coolsampler.paper.tables import f3, fkl, flead, fstep, is_missing, table1_frames
from coolsampler.paper.writers import to_latex, to_markdown
from coolsampler.results.analysis import LENGTH_UNKNOWN, summarize_run
from coolsampler.results.diagnostics import LEAD_DIAGNOSTICS, lead_table
from coolsampler.results.guard import REPLAY_NOTE, logged_schedule, replay_guard, replay_text, schedule_line
from coolsampler.results.own_logs import (
    Entry,
    LagSummary,
    assign_arms,
    check_groups,
    events_frame,
    find_inputs,
    interval,
    known_settings,
    lag_summary,
    missing_lines,
    onset_window,
    read_run,
    settings_for,
    val_line,
)
from coolsampler.spec.guard import GuardSpec
from coolsampler.spec.inputs import InputError
from coolsampler.spec.lag import COMPARED, TRUNCATION, Lag
from coolsampler.spec.metrics_schema import RunStatus
from coolsampler.spec.settings import KL_EARLY_NAT, KL_LEAD_NAT, kl_above_text


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
    if not is_missing(lead) and not is_missing(cross):
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
    elif cut or (not is_missing(last) and int(last) < int(steps)):
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
    if not is_missing(s["kl_max"]):  # a log without the KL says so once, under "not computed"
        lines.append(
            f"   {kl_above_text(KL_LEAD_NAT)} at {fstep(s['kl_cross_1'])},"
            f" {kl_above_text(KL_EARLY_NAT)} at {fstep(s['kl_cross_01'])},"
            f" lead {flead(s['lead'])}, KL max {fkl(s['kl_max'])},"
            f" KL at step {fstep(s['kl_fixed_step'])} {fkl(s['kl_fixed'])}"
        )
    kl_init = "" if is_missing(s["kl_to_init_90"]) else f", KL to init at 90 {fkl(s['kl_to_init_90'])}"
    lines.append(f"   last five {f3(s['last5'])}, whole run {f3(s['whole'])}{kl_init}")
    return "\n".join(lines)


def lag_lines(settings: Mapping[str, Any], ls: LagSummary) -> list[str]:
    """What the run's lag was and what it says about the degradation, in two or three lines."""
    lag = settings.get("lag")
    system = settings.get("system", "verl")
    lines = [f"   lag ({system}): {lag.text() if lag is not None else Lag(None).text()}"]
    if lag is not None and system != "verl":  # which policy its mismatch keys compare, and their truncation
        lines.append(
            f"   its mismatch keys compare q with {COMPARED[lag.compared]}; ratios {TRUNCATION[lag.truncation]}"
        )
    if lag is not None and lag.measured:
        parts = []
        if ls.at_onset_max is not None:
            parts.append(f"at the onset {fnum(ls.at_onset_mean)} mean, {fnum(ls.at_onset_max)} max")
        if ls.max_before_onset is not None:
            parts.append(f"largest before it {fnum(ls.max_before_onset)}")
        if ls.max_undegraded is not None:
            parts.append(f"largest with no degradation {fnum(ls.max_undegraded)}")
        if ls.drops is not None:
            before = "" if ls.drops_before_onset is None else f" ({fnum(ls.drops_before_onset)} before the onset)"
            parts.append(f"{fnum(ls.drops)} samples dropped as too stale{before}")
        if parts:
            lines.append("   lag " + "; ".join(parts))
    if ls.cannot_tell:
        lines.append(f"   lag cannot tell: {ls.cannot_tell}")
    return lines


def fnum(v: float | None) -> str:
    """A lag or a count: an integer as one, else three significant digits; a dash for none."""
    if v is None:
        return DASH
    return f"{v:.0f}" if float(v).is_integer() else f"{v:.3g}"


@dataclass
class Report:
    """What ``coolsampler analyze`` prints, and the paths it could not analyse (then it exits 1)."""

    text: str
    errors: list[str] = field(default_factory=list)
    entries: list[Entry] = field(default_factory=list)
    tables: dict[str, tuple[pd.DataFrame, pd.DataFrame]] = field(default_factory=dict)


VOLATILITY_NOTE = (
    "Note: {n} of {total} arm(s) rest on 2 seeds or fewer. Greedy validation can dip by 0.1 for one"
    " validation and recover, so Section 2's onset was volatile at two seeds in this project's own runs"
    " (docs/guard.md: 'Greedy validation in this world is too volatile for Section 2's criterion at two"
    " seeds'); read a single run's onset and lead as one draw."
)


def spread_lines(entries: Sequence[Entry]) -> list[str]:
    """For each arm of two runs or more: the spread of its onsets, KL leads and last-five means."""
    arms: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {}
    for s, m, st in entries:
        arms.setdefault(str(s["arm_name"]), []).append((s, summarize_run(m, s, st)))
    out = []
    for arm, runs in arms.items():
        if len(runs) < 2:
            continue
        onsets = [r["onset"] for _, r in runs]
        leads = [r["lead"] for _, r in runs if not is_missing(r["lead"])]
        last5 = [r["last5"] for _, r in runs if not is_missing(r["last5"])]
        on = ", ".join(DASH if o is None else str(o) for o in onsets)
        parts = [f"onsets {on} ({sum(o is not None for o in onsets)} of {len(runs)} degrade)"]
        if leads:
            parts.append(f"KL leads {min(leads):+g} to {max(leads):+g}")
        if last5:
            parts.append(f"last five {f3(min(last5))}-{f3(max(last5))}")
        out.append(f"   {arm} ({len(runs)} runs): " + "; ".join(parts))
    return out


def with_given_bound(lag: Lag | None, bound: float | None) -> Lag | None:
    """A run's lag with the bound given on the command line (``--lag-bound``), said as given; a bound read
    from the run's own configuration is kept (the file is the run's, the flag is everyone's)."""
    read_from_file = lag is not None and lag.bound is not None and "not found" not in str(lag.bound_from)
    if bound is None or read_from_file:
        return lag
    base = lag or Lag(None)
    kind = base.kind if base.measured else "bound"
    return Lag(kind, base.compared, base.truncation, float(bound), "given as --lag-bound")


def analyze_report(
    paths: Sequence[str],
    settings: Mapping[str, Any] | None = None,
    *,
    lag_bound: float | None = None,
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
        s, how, missing = settings_for(inp.name, metrics, base, how, loaded.lag if loaded.system != "verl" else None)
        s["run"], s["path"] = inp.name, path
        s["system"], s["lag"] = loaded.system, with_given_bound(loaded.lag, lag_bound)
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
        s["lag_summary"] = lag_summary(metrics, loaded.lag, summary.get("onset"))
        s["onset_step"] = summary.get("onset")
        block = "\n".join([block, *lag_lines(s, s["lag_summary"]), *extra, *missing_lines(metrics, loaded.system)])
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
        leads = lead_table(entries, LEAD_DIAGNOSTICS)  # the lag, too, as a candidate warning
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
        lag_block, lag_frame = lag_table(entries)
        tables["lag"] = (lag_frame, lag_frame)
        blocks.append(lag_block)
        if guard is not None:
            blocks.append(f"Guard replay ({guard.text()}): under each run above. {REPLAY_NOTE}")
    return Report("\n\n".join(blocks) + "\n", errors, entries, tables)


def lag_table(entries: Sequence[Entry]) -> tuple[str, pd.DataFrame]:
    """Across runs: each run's lag against its degradation, and what the runs say together: the lags the
    degraded runs had at their onsets beside the largest lag the others reached without degrading. Said
    plainly where the logs cannot tell (no run measures its lag, or none varied)."""
    rows = []
    for s, _m, _st in entries:
        ls: LagSummary = s["lag_summary"]
        lag: Lag | None = s.get("lag")
        onset = s.get("onset_step")
        rows.append(
            {
                "run": s.get("key"),
                "system": s.get("system", "verl"),
                "lag": (lag.kind if lag is not None and lag.kind else "none"),
                "degraded": onset is not None,
                "onset": onset,
                "lag at onset (max)": ls.at_onset_max,
                "largest lag before onset / with no degradation": ls.max_undegraded,
                "dropped as too stale": ls.drops,
                "configured bound": lag.bound if lag is not None else None,
            }
        )
    frame = pd.DataFrame(rows)
    disp = frame.astype(object)
    for col in frame.columns[4:]:
        disp[col] = [fnum(None if pd.isna(v) else float(v)) for v in frame[col]]
    disp["degraded"] = ["yes" if d else "no" for d in frame["degraded"]]
    measured = [s for s, _, _ in entries if s.get("lag") is not None and s["lag"].measured]
    varied = [s for s in measured if s["lag_summary"].varied]
    if not measured:
        verdict = (
            "The logs cannot tell whether staleness hurt: no run measures its lag (a bound, where shown, is a ceiling)."
        )
    elif not varied:
        verdict = (
            "The logs cannot tell whether staleness hurt: no run's lag varied, so no lag can be set against a fall."
        )
    else:
        bad = [s["lag_summary"].at_onset_max for s in varied if s.get("onset_step") is not None]
        good = [s["lag_summary"].max_undegraded for s in varied]
        bad = [b for b in bad if b is not None]
        good = [g for g in good if g is not None]
        parts = []
        if bad:
            span = fnum(min(bad)) if min(bad) == max(bad) else f"{fnum(min(bad))}-{fnum(max(bad))}"
            parts.append(f"the degraded runs were at lag {span} at their onsets")
        if good:
            parts.append(
                f"the largest lag any run reached before degrading (or at all, if it never did) is {fnum(max(good))}"
            )
        verdict = "Across runs: " + "; ".join(parts) + "." if parts else "No lag reading at any onset."
    return "# Lag against degradation\n\n" + to_markdown(disp).rstrip() + "\n\n" + verdict, frame


TABLE_FORMATS = ("md", "csv", "json", "tex")
TABLE_TITLES = {
    "table1": "Table 1 style summary of the analysed runs",
    "events": "Degradation events of each run",
    "leads": "Staleness diagnostics against the onset",
    "lag": "Lag against degradation",
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


FIGURE_FORMATS = (".png", ".pdf", ".svg")
# One colour per run (matplotlib's tab10, then tab20's light shades): runs are told apart by colour
# in the figure of one's own logs, where the sampler-temperature colours of the paper's figures would
# give every run at Tb=1 the same one.
RUN_COLOURS = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
    "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#c7c7c7", "#dbdb8d", "#9edae5",
)  # fmt: skip


def draw(entries: Sequence[Entry], path: str | Path) -> Path:
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
        # the legend names the arm (its key, less the seed where seeds pool), its N and Tb
        name = s.get("arm_name") or s.get("key", "")
        lag = s.get("lag")
        if s.get("N"):
            label = f"{name}: N={s.get('N')}, Tb={s.get('Tb')}"
        else:  # another trainer's run: no refresh interval, its lag says how stale it was
            label = (
                f"{name}: {s.get('system', 'verl')}, lag {lag.kind if lag is not None and lag.kind else 'not logged'}"
            )
        named.append(({**s, "label": label, "colour": colour, "seed": seed}, m, st))
    titles = {"a": "(a) validation accuracy", "b": "(b) learner-sampler KL", "lag": "(c) lag"}
    panels = {"a": named, "b": named}
    if any(m["lag_max"].notna().any() or m["lag_mean"].notna().any() for _, m, _ in named):
        panels["lag"] = named  # the lag beside accuracy and KL, where a run logs or derives one
    fig1(panels, Provenance.here("own logs", script="coolsampler analyze"), [path], titles=titles)
    return path
