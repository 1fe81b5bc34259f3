"""The staleness diagnostics shown: one run's diagnostic view, and the lead table as text.

Why a module: the lead table (``coolsampler.results.diagnostics``) answers "which diagnostic warns
first?" in numbers; a reader also has to see the curves the numbers come from, because a threshold
crossed by one token-dominated step and one crossed by a steady climb are different warnings. The
view draws every diagnostic verl logs against the validation accuracy, with the sampler refreshes
and the onset, log axes where the values are heavy-tailed, each diagnostic's per-step values thin
and its trailing rolling median (what the lead table reads) thick, the thresholds dashed, and a last
panel with each diagnostic's first crossing beside the onset.

``run_diagnostics`` draws the report's ``runs/<key>/diagnostics.png``; ``leads_markdown`` writes the
table that ``coolsampler analyze`` prints and ``diagnostic_leads.md`` holds. Imports matplotlib and
pandas, never verl, vLLM or torch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from coolsampler.paper import labels as L
from coolsampler.paper import plotting as P
from coolsampler.paper import style as S
from coolsampler.paper.report import run_figure_from_files, status_text
from coolsampler.paper.writers import markdown_page, to_markdown
from coolsampler.results import analysis as A
from coolsampler.results import diagnostics as D
from coolsampler.spec.layout import key_of_file
from coolsampler.spec.metrics_schema import PROVIDED_BY, RunStatus
from coolsampler.spec.provenance import Provenance

# One colour per diagnostic, the same in every panel and in the lead strip.
COLOURS: dict[str, str] = {
    "kl": "#000000",
    "kl_median": "#000000",
    "k3": "#7f7f7f",
    "rkl_token": "#9467bd",
    "rkl_seq": "#e377c2",
    "ess": "#1f77b4",
    "is_high": "#ff7f0e",
    "is_low": "#2ca02c",
    "log_ppl": "#8c564b",
    "probs_diff": "#17becf",
}
ONSET_COLOUR = "#b00000"
ONSET_LABEL = "onset of degradation (Section 2)"
RAW_ALPHA = 0.35  # per-step values: thin and faint, the rolling median over them thick
NOT_LOGGED = "not logged"
NEVER = "never"


# --------------------------------------------------------------------------------------------------
# Text: the lead table


def lead_text(lead: Any, step: Any, logged: int) -> str:
    """'+12', '-3', 'never' (logged, no crossing) or 'not logged'."""
    if not logged:
        return NOT_LOGGED
    if pd.isna(step):
        return NEVER
    return f"{int(lead):+d}" if lead is not None and lead is not pd.NA else L.DASH


def _step_text(step: Any, logged: int) -> str:
    if not logged:
        return NOT_LOGGED
    return NEVER if pd.isna(step) else str(int(step))


def run_display(table: pd.DataFrame, key: str) -> pd.DataFrame:
    """One run's rows of ``results.diagnostics.lead_table`` as the printed table: per diagnostic its
    reading, the threshold, the first crossing, the lead and the lead at each threshold of the range."""
    mine = table[table["key"] == key]
    rows = []
    for _name, group in mine.groupby("diagnostic", sort=False):
        chosen = group[group["chosen"]].iloc[0]
        n = int(chosen["logged_steps"])
        over = " · ".join(
            f"{D.threshold_text(r.threshold)}: {lead_text(r.lead, r.step, n)}" for r in group.itertuples(index=False)
        )
        rows.append(
            {
                "diagnostic": chosen["label"],
                "reads": chosen["reads"],
                "steps logged": str(n),
                "crosses": chosen["condition"],
                "first step": _step_text(chosen["step"], n),
                "lead": lead_text(chosen["lead"], chosen["step"], n),
                "lead over the range": over if n else NOT_LOGGED,
            }
        )
    return pd.DataFrame(rows)


def summary_display(summary: pd.DataFrame) -> pd.DataFrame:
    """``results.diagnostics.lead_summary`` as the printed table."""
    return pd.DataFrame(
        {
            "diagnostic": s.label,
            "reads": s.reads,
            "crosses": s.condition,
            "logged in": f"{s.logged_in} of {s.degraded_runs}",
            "before / at / after onset / never": f"{s.before_onset} / {s.at_onset} / {s.after_onset} / {s.never}",
            "median lead": L.DASH if math.isnan(s.median_lead) else f"{s.median_lead:+g}",
            "earliest in": str(s.earliest_in),
            "before onset, low / chosen / high threshold": s.before_onset_over_range,
            "fires in stable runs": f"{s.fires_in_stable} of {s.stable_runs}",
        }
        for s in summary.itertuples(index=False)
    )


LEAD_NOTE = (
    "lead = onset - first step past the threshold (positive: the diagnostic warned first); onset: the"
    " Section 2 criteria on the validation curve; 'never': logged but not crossed; 'not logged': the"
    f" log lacks it (the IS-weight metrics exist only where verl applies IS weights). Every diagnostic"
    f" but the paper's own KL row is read through a trailing median of {D.ROBUST_WINDOW} steps."
    " 'earliest in': in how many degraded runs the diagnostic is the first to cross (ties count for each)."
    " Thresholds and why: coolsampler.results.diagnostics."
)


def unlogged_line(table: pd.DataFrame) -> str:
    """One line naming the diagnostics none of ``table``'s runs logged and the verl settings that log them
    ('' when every one was logged somewhere): their rows would say "not logged" in every cell."""
    names = unlogged(table)
    if not names:
        return ""
    settings = dict.fromkeys(
        PROVIDED_BY.get(D.LEAD_BY_NAME[n].column, "unknown").split(", computed from")[0] for n in names
    )
    labels = ", ".join(D.LEAD_BY_NAME[n].label for n in names)
    return f"Not logged in any of these runs, so left out below: {labels}. To log them: {'; '.join(settings)}."


def unlogged(table: pd.DataFrame) -> list[str]:
    """The diagnostics (by name) that no run of ``table`` logged a step of."""
    if not len(table):
        return []
    logged = set(table.loc[table["logged_steps"] > 0, "diagnostic"])
    return [n for n in dict.fromkeys(table["diagnostic"]) if n not in logged]


def leads_markdown(table: pd.DataFrame, *, heading: str = "##") -> str:
    """The lead table of every degraded run, and the summary over them, as Markdown. Diagnostics that no
    run logged are one line (``unlogged_line``), not a row of "not logged" each.

    ``table``: ``results.diagnostics.lead_table`` of a study's runs (degraded and stable)."""
    missing, gone = unlogged_line(table), set(unlogged(table))
    # the runs counted before the unlogged diagnostics go: a log with none of them still degrades or not
    n_degraded = D.degraded(table)["key"].nunique() if len(table) else 0
    stable = D.stable(table)["key"].nunique() if len(table) else 0
    table = table[~table["diagnostic"].isin(gone)] if len(table) else table
    present = set(table["diagnostic"]) if len(table) else set()
    shown = [d for d in D.LEAD_DIAGNOSTICS if d.name not in gone and (d.name in present or d in D.DIAGNOSTICS)]
    bad = D.degraded(table)
    runs = list(dict.fromkeys(bad["key"])) if len(bad) else []
    unjudged = table[table["validations"] == 0]["key"].nunique() if len(table) else 0
    out = [LEAD_NOTE, ""] + ([missing, ""] if missing else [])
    if unjudged:
        out += [f"{unjudged} run(s) without validation points: neither degraded nor stable, left out.", ""]
    if not runs and n_degraded:  # runs that degrade, but log nothing this table reads (another system's log)
        out.append(
            f"{n_degraded} run(s) degrade under the Section 2 criteria ({stable} stable), but none logs a diagnostic"
            " of this table: there is nothing to set against the onset."
        )
        return "\n".join(out) + "\n"
    if not runs:
        out.append(f"No run degrades under the Section 2 criteria ({stable} stable): there is nothing to lead.")
        if len(table) and table["logged_steps"].gt(0).any():
            out += ["", f"{heading} Crossings in the stable runs (false alarms)", ""]
            out.append(to_markdown(summary_display(D.lead_summary(table, shown))).rstrip())
        return "\n".join(out) + "\n"
    out += [f"{heading} Which diagnostic warns first: {len(runs)} degraded runs, {stable} stable", ""]
    out.append(to_markdown(summary_display(D.lead_summary(table, shown))).rstrip())
    for key in runs:
        onset = int(bad.loc[bad["key"] == key, "onset"].iloc[0])
        first = D.earliest(bad[bad["key"] == key]).get(key, [])
        which = ", ".join(D.LEAD_BY_NAME[n].label for n in first) if first else "none crossed"
        out += ["", f"{heading}# `{key}`: onset at step {onset}; first to cross: {which}", ""]
        out.append(to_markdown(run_display(bad, key)).rstrip())
    return "\n".join(out) + "\n"


def write_leads(
    table: pd.DataFrame, md: str | Path, csv: str | Path, html: str | Path | None, study: str, provenance: Provenance
) -> None:
    """The study's lead table: Markdown (summary and one table per degraded run), CSV (every run,
    diagnostic and threshold, unrounded), and the Markdown as an HTML page for the report."""
    text = f"# Staleness diagnostics against the onset, study `{study}`\n\n" + leads_markdown(table)
    text += f"\n{provenance.footer()}\n"
    Path(md).parent.mkdir(parents=True, exist_ok=True)
    Path(md).write_text(text)
    table.to_csv(csv, index=False)
    if html is not None:
        Path(html).write_text(markdown_page(text, title=f"diagnostic leads, study {study}"))


def study_leads_from_files(
    metrics: Sequence[str | Path],
    settings: Mapping[str, Mapping[str, Any]],
    outputs: Mapping[str, str | Path],
    study: str,
) -> pd.DataFrame:
    """Body of ``workflow/scripts/diagnostic_leads.py``: the lead table of the runs whose metrics exist.

    ``metrics``: ``.../runs/<model>/<task>/<settings>/metrics.parquet`` paths (the run key is in the
    path); ``settings``: run key -> its settings (the study's); ``outputs``: md, csv and html paths."""
    from coolsampler.results.loaders import load_metrics

    runs = []
    for path in metrics:
        key = key_of_file(path)
        runs.append(({**settings.get(key, {}), "key": key}, load_metrics(path), None))
    table = D.lead_table(runs)
    prov = Provenance.here(study, script="workflow/scripts/diagnostic_leads.py")
    write_leads(table, outputs["md"], outputs["csv"], outputs.get("html"), study, prov)
    return table


# --------------------------------------------------------------------------------------------------
# The per-run view


def _series(metrics: pd.DataFrame, column: str) -> tuple[np.ndarray, np.ndarray]:
    s = D.training_series(metrics, column)
    return s.index.to_numpy(), s.to_numpy(dtype="float64")


def _has(metrics: pd.DataFrame, column: str) -> bool:
    return column in metrics.columns and D.logged_steps(metrics, column) > 0


def _not_logged(ax: Axes, why: str) -> None:
    ax.text(0.5, 0.5, why, transform=ax.transAxes, ha="center", va="center", fontsize=S.TEXT_PT, color="#666666")
    ax.set_yticks([])


def _curve(
    ax: Axes, metrics: pd.DataFrame, column: str, colour: str, label: str, *, median: bool = True, floor: float | None
) -> None:
    """Per-step values thin and faint, their trailing median thick (``median``); on a log axis
    (``floor``) values <= 0 or below the floor go on it, marked."""
    x, y = _series(metrics, column)
    if floor is not None:
        y, _ = P.to_floor(ax, x, y, floor, colour)
    if median:
        ax.plot(x, y, color=colour, lw=0.6, alpha=RAW_ALPHA)
        m = D.rolling_median(pd.Series(D.training_series(metrics, column)))
        my = m.to_numpy(dtype="float64")
        if floor is not None:
            my = np.maximum(my, floor)
        ax.plot(m.index.to_numpy(), my, color=colour, lw=1.5, label=label)
    else:
        ax.plot(x, y, color=colour, lw=1.0, label=label)


def _threshold(ax: Axes, d: D.Diagnostic) -> None:
    ax.axhline(d.threshold, color=COLOURS[d.name], ls="--", lw=0.8, zorder=1)


def _log_panel(
    ax: Axes, metrics: pd.DataFrame, curves: Sequence[tuple[str, str, str, bool]], reference: float, missing: str
) -> bool:
    """A log-axis panel of ``(column, colour, label, median)`` curves; where none is logged, ``missing``
    says so on the panel. Returns whether a curve was drawn."""
    have = [c for c in curves if _has(metrics, c[0])]
    if not have:
        _not_logged(ax, missing)
        return False
    lo, hi = P.log_limits([_series(metrics, c[0])[1] for c in have], reference=reference)
    for column, colour, label, median in have:
        _curve(ax, metrics, column, colour, label, median=median, floor=lo)
    ax.set_yscale("log")
    ax.set_ylim(lo, hi)
    return True


def _fraction_panel(
    ax: Axes,
    metrics: pd.DataFrame,
    curves: Sequence[tuple[str, str, str, bool]],
    thresholds: Sequence[str],
    ylabel: str,
    missing: str,
) -> None:
    """A panel of fractions (0 to 1) of the ``(column, colour, label, median)`` curves logged, with the
    ``thresholds`` of the named diagnostics; where the first curve is not logged, ``missing`` says so."""
    if not _has(metrics, curves[0][0]):
        _not_logged(ax, missing)
        return
    for column, colour, label, median in curves:
        if _has(metrics, column):
            _curve(ax, metrics, column, colour, label, median=median, floor=None)
    for name in thresholds:
        _threshold(ax, D.LEAD_BY_NAME[name])
    ax.set_ylim(0.0, 1.05)
    ax.set_ylabel(ylabel)


def _lead_strip(ax: Axes, table: pd.DataFrame, steps: int) -> None:
    """One row per diagnostic: its first crossing at the chosen threshold (a dot), the span of its
    crossings over the threshold range (a bar), or why there is none."""
    names = [d.name for d in D.DIAGNOSTICS]
    for i, d in enumerate(D.DIAGNOSTICS):
        rows = table[table["diagnostic"] == d.name]
        y = len(names) - 1 - i
        colour = COLOURS[d.name]
        # the name above its row, inside the panel: tick labels this long would run into the next panel
        label = f"{d.label}, {d.condition()}" + ("" if d.robust else " (per step)")
        ax.text(
            0.005,
            y + 0.12,
            label,
            transform=ax.get_yaxis_transform(),
            fontsize=S.SMALL_PT,
            va="bottom",
            color="#333333",
        )
        if rows.empty or int(rows["logged_steps"].iloc[0]) == 0:
            ax.text(steps, y, f"  {NOT_LOGGED}", va="center", ha="left", fontsize=S.SMALL_PT, color="#888888")
            continue
        crossed = rows["step"].dropna().astype(int)
        if len(crossed):
            ax.plot([crossed.min(), crossed.max()], [y, y], color=colour, lw=3.0, alpha=0.35, solid_capstyle="butt")
        chosen = rows[rows["chosen"]]["step"].iloc[0]
        if pd.isna(chosen):
            ax.text(steps, y, f"  {NEVER}", va="center", ha="left", fontsize=S.SMALL_PT, color=colour)
        else:
            ax.plot([int(chosen)], [y], "o", color=colour, ms=5)
    ax.set_yticks([])
    ax.set_ylim(-0.5, len(names) - 0.1)


PANELS = (
    "(a) validation accuracy",
    "(b) per token: forward KL and the reverse-KL bound (nats, log)",
    "(c) per response: reverse-KL bound log(1+chi2_seq) (nats, log)",
    "(d) per response: log-perplexity gap, mean and min-max (nats)",
    "(e) IS weights: effective sample size, tokens beyond the cap",
    "(f) IS weights: extremes, mean and std (log)",
    "(g) per token: |pi - q| in probability",
    "(h) first crossing (dot: chosen threshold; bar: over the range)",
)


def run_diagnostics(
    settings: Mapping[str, Any],
    metrics: pd.DataFrame | None,
    status: RunStatus | None,
    outputs: Sequence[str | Path],
    provenance: Provenance,
) -> Any:
    """One run's staleness diagnostics against its validation accuracy (see the module docstring).
    Returns the figure."""
    key = str(settings.get("key", ""))
    state = status_text(status)
    notes = [] if status is None or status.complete else [f"run {state}"]
    footnote = (
        f"thin: per step; thick: trailing median of {D.ROBUST_WINDOW} steps (what the lead table reads); dashed:"
        " thresholds (coolsampler.results.diagnostics); hollow triangles: values <= 0 or below a log axis's floor"
    )
    fig, ax = P.new_figure(11, 11.5, notes, nrows=4, ncols=2, caption=[footnote])
    steps = int(settings.get("steps", 0) or 0)
    has = metrics is not None and not metrics.empty
    if has:
        steps = max(steps, int(metrics["step"].max()))
    steps = steps or 300
    m = metrics if has else pd.DataFrame({"step": pd.Series(dtype="int64")})
    table = D.run_leads(key, m) if has else pd.DataFrame(columns=D.LEAD_COLUMNS)
    onset = D.onset_of(m) if has else None
    by = D.LEAD_BY_NAME
    (a, b), (c, dd), (e, f), (g, h) = ax

    # (a) accuracy
    val = A.validation(m)
    a.plot(val.index.to_numpy(), val.to_numpy(dtype="float64"), "o-", color="#444444", ms=3, lw=1.2,
           label="validation accuracy")  # fmt: skip
    P.accuracy_axis(a)
    # (b) per-token divergences, with the 1-nat reference of Figure 1b
    divergences = [
        ("kl", COLOURS["kl"], "forward KL k1 (per step: the paper's reading)", False),
        ("k3_kl", COLOURS["k3"], "forward KL k3", True),
        ("rkl_bound_token", COLOURS["rkl_token"], "reverse-KL bound log(1+chi2_token)", True),
        ("log_ppl_abs_diff", COLOURS["log_ppl"], "|log-perplexity gap| per response", True),
    ]
    if _log_panel(b, m, divergences, 1.0, "no KL logged"):
        P.kl_axis(b, label="nats per token", limits=b.get_ylim())
    # (c) per-response chi^2 bound
    chi2_seq = [("rkl_bound_seq", COLOURS["rkl_seq"], "reverse-KL bound log(1+chi2_seq)", True)]
    if _log_panel(c, m, chi2_seq, by["rkl_seq"].threshold, "chi2_seq not logged"):
        _threshold(c, by["rkl_seq"])
        c.set_ylabel("nats per response")
    # (d) log-perplexity gap per response: mean, and the batch's min-max
    if _has(m, "log_ppl_diff"):
        x, y = _series(m, "log_ppl_diff")
        lo_x, lo = _series(m, "log_ppl_diff_min")
        hi_x, hi = _series(m, "log_ppl_diff_max")
        if len(lo) == len(hi) == len(x):
            dd.fill_between(x, lo, hi, color=COLOURS["log_ppl"], alpha=0.18, lw=0, label="log-perplexity gap, min-max")
        dd.plot(x, y, color=COLOURS["log_ppl"], lw=1.0, label="log-perplexity gap, mean (signed)")
        dd.axhline(0.0, color="#444444", lw=0.6)
        dd.set_ylabel("mean log q - mean log pi (nats)")
    else:
        _not_logged(dd, "log_ppl_diff not logged")
    # (e) IS weights, fractions
    weights = [
        ("is_ess", COLOURS["ess"], "IS effective sample size (fraction)", True),
        (by["is_high"].column, COLOURS["is_high"], "tokens with weight > cap", True),
        (by["is_low"].column, COLOURS["is_low"], "tokens with weight < 1/cap", True),
    ]
    _fraction_panel(e, m, weights, ("ess", "is_high"), "fraction", "no IS weights logged (no correction, or mu-GRPO)")
    # (f) IS weight extremes
    extremes = [
        ("is_max", "#d62728", "largest weight (capped)", False),
        ("is_mean", "#555555", "mean weight", False),
        ("is_std", "#bcbd22", "std of the weights", True),
        ("is_min", "#393b79", "smallest weight", True),
    ]
    if _log_panel(f, m, extremes, 1.0, "no IS weights logged (no correction, or mu-GRPO)"):
        f.set_ylabel("token IS weight")
    # (g) |pi - q|
    gaps = [
        ("probs_diff_mean", COLOURS["probs_diff"], "mean |pi - q|", True),
        ("probs_diff_max", "#0b5c66", "largest |pi - q|", False),
        ("probs_diff_std", "#7fd3dc", "std of |pi - q|", False),
    ]
    _fraction_panel(g, m, gaps, ("probs_diff",), "probability", "rollout_probs_diff not logged")
    # (h) the lead strip
    _lead_strip(h, table, steps)

    for axis, title in zip((a, b, c, dd, e, f, g, h), PANELS, strict=True):
        P.refresh_lines(axis, settings.get("N"), steps)
        if onset is not None:
            axis.axvline(onset, color=ONSET_COLOUR, ls="-.", lw=1.1, zorder=4, label=ONSET_LABEL)
        axis.set_xlim(0, steps)
        axis.set_xlabel("step")
        axis.set_title(title, fontsize=S.TITLE_PT, loc="left")
    first = D.earliest(table).get(key, []) if onset is not None else []
    if onset is None:
        verdict = "no onset (stable under Section 2)"
    elif first:
        lead = table[(table["diagnostic"] == first[0]) & table["chosen"]]["lead"].iloc[0]
        verdict = f"onset at step {onset}; first to cross: {D.LEAD_BY_NAME[first[0]].label} (lead {int(lead):+d})"
    else:
        verdict = f"onset at step {onset}; no diagnostic crossed its threshold"
    colour = "#1a7f37" if status is not None and status.complete else "#b00000"
    fig.suptitle(f"{key}  [{state}]\n{verdict}", fontsize=S.TITLE_PT, x=0.01, ha="left", color=colour)
    fig.subplots_adjust(top=1.0 - 0.75 / fig.get_figheight(), hspace=0.55)
    P.figure_legend(fig, fig.axes)
    P.save(fig, outputs, provenance=provenance, title=f"{key}: staleness diagnostics")
    return fig


# Body of ``workflow/scripts/run_diagnostics.py``: one run's ``diagnostics.png`` from its run directory,
# called with (metrics, status, run.yaml, out, study) as ``run_figure_from_files`` takes them.
run_diagnostics_from_files = partial(run_figure_from_files, run_diagnostics, "workflow/scripts/run_diagnostics.py")
