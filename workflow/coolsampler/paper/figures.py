"""Figures 1-8 of the paper.

Interface (shared with ``coolsampler.paper.tables``; the registry is ``coolsampler.spec.targets``): every
target is a function ``f(panels, provenance, outputs, options)`` where ``panels`` maps a panel name
to a list of ``(settings, metrics, status)`` entries -- ``settings`` from ``Run.settings()``,
``metrics`` the run's metrics table (None when the run has not produced one), ``status`` its
``RunStatus`` (None when unknown) --, ``provenance`` says what drew it, ``outputs`` are the paths to
write (``.pdf``/``.png`` for figures, ``.csv``/``.tex``/``.md`` for tables) and ``options`` the
target's validated ``options:`` from the study (``coolsampler.spec.targets.OPTIONS``). A run whose
metrics are missing or whose log is incomplete is drawn as far as it goes and *named* in a red
"runs missing/unfinished" note on the figure (tables: ``note`` column).

The panels of each target, and what a study's filter for each should select, are the registry's
(``coolsampler.spec.targets``: ``Target.panels`` and ``panel_help``; docs/figures/ is written from it).

Colours are fixed per sampler temperature across all figures (``coolsampler.paper.plotting``); grey
vertical lines are the refreshes (multiples of N); KL axes are logarithmic with a dashed 1-nat line.
The learner-sampler KL is verl's ``rollout_corr/kl`` (k1: mean of log q - log pi over the tokens the
sampler drew, token-weighted), named on every KL axis; option ``kl: k3`` draws verl's
``rollout_corr/k3_kl`` instead, which is never negative, so a log axis drops no point.

Imports matplotlib (through ``coolsampler.paper.plotting``), never verl, vLLM or torch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from coolsampler.paper import labels as L
from coolsampler.paper import plotting as P
from coolsampler.paper import style as S
from coolsampler.paper.tables import Panels, RunEntry
from coolsampler.results.analysis import (
    _column,
    first_crossing,
    kl_growth_curve,
    kl_step_for,
    validation,
    value_at,
)
from coolsampler.results.guard import frontier_arms, frontier_table, largest_safe_N
from coolsampler.spec import corrections
from coolsampler.spec.provenance import Provenance
from coolsampler.spec.settings import KL_EARLY_NAT, kl_above_text, nat_text
from coolsampler.spec.targets import TARGETS

Options = Mapping[str, Any]
Selection = Mapping[str, Any] | None  # panel -> the study's settings filter, printed under the figure
Drawn = tuple[Figure, str, Sequence[RunEntry]]  # a drawing's figure, its title, the runs whose seeds it draws

PANEL_LETTERS = "abcdefgh"


# --------------------------------------------------------------------------------------------------
# Shared pieces


def _unique_entries(panels: Panels, names: Sequence[str]) -> list[RunEntry]:
    """Entries of several panels, each run once (a run may sit in two panels of one figure)."""
    out: dict[str, RunEntry] = {}
    for n in names:
        for e in panels.get(n, []):
            out.setdefault(str(e[0].get("key") or id(e)), e)
    return list(out.values())


def _logged(metrics: pd.DataFrame | None, column: str | None = None) -> bool:
    """The run has metrics (holding ``column``, where one is named): something to draw."""
    return metrics is not None and not metrics.empty and (column is None or column in metrics.columns)


def _numeric(metrics: pd.DataFrame, column: str) -> np.ndarray:
    """``column`` as floats, a value that is not a number NaN."""
    return pd.to_numeric(metrics[column], errors="coerce").to_numpy(dtype="float64")


def _common(entries: Sequence[RunEntry], field: str) -> Any:
    vals = {repr(e[0].get(field)) for e in entries}
    return entries[0][0].get(field) if entries and len(vals) == 1 else None


def panel_title(letter: str, entries: Sequence[RunEntry], extra: str = "") -> str:
    """'(a) 1.5B GSM8K, N=192' from the settings all of the panel's runs share."""
    parts = []
    if entries:
        s0 = entries[0][0]
        if _common(entries, "model") is not None and _common(entries, "task") is not None:
            parts += L.model_task_labels(s0)
        elif _common(entries, "model") is not None:
            parts.append(L.model_label(s0))
        elif _common(entries, "task") is not None:
            parts.append(L.task_label(s0))
        N = _common(entries, "N")
        if N is not None:
            parts.append(f"N={N}")
        lr = _common(entries, "lr")
        if lr is not None and not L.default_lr(lr) and parts:
            parts[-1] += f", lr {L.lr_text(lr)}"
    text = f"({letter}) " + " ".join(parts)
    return text + (f", {extra}" if extra else "") if parts or extra else f"({letter}) no runs selected"


def _max_steps(entries: Sequence[RunEntry]) -> int:
    steps = [int(e[0].get("steps", 0) or 0) for e in entries]
    steps += [int(m["step"].max()) for _, m, _ in entries if _logged(m)]
    return max(steps, default=300) or 300


def _own_loss(settings: Mapping[str, Any]) -> bool:
    """The run's correction brings a policy loss of its own (mu-GRPO), not verl's PPO loss."""
    c = corrections.get(settings.get("correction"))
    return c is not None and c.loss is not None


def default_linestyle(settings: Mapping[str, Any]) -> str:
    """Solid, except: no correction dashed; mu-GRPO with a cooled sampler dashed (Figure 4);
    learner tied to the sampler dotted; a replicate (cut/re-run) dash-dotted. The data seed is the
    marker (``plotting.seed_marker``), so seeds of one arm share colour and style yet stay apart."""
    if settings.get("replicate"):
        return "-."
    if settings.get("Tl") == "tied":
        return ":"
    correction = corrections.get(settings.get("correction"))
    if correction is not None and correction.is_dashed(L.tb_initial(settings)):
        return "--"
    return "-"


LOG_COLUMNS = ("kl", "k3_kl", "grad_norm")  # drawn on log axes: values <= 0 go on the floor, marked


def _series(metrics: pd.DataFrame, column: str) -> tuple[np.ndarray, np.ndarray]:
    if column == "val_acc":
        s = validation(metrics)
        return s.index.to_numpy(), s.to_numpy(dtype="float64")
    return metrics["step"].to_numpy(), _numeric(metrics, column)


def plot_runs(
    ax: Axes,
    entries: Sequence[RunEntry],
    column: str,
    *,
    correction: bool = False,
    lw: float = 1.2,
    floor: float | None = None,
    shown_N: Sequence[int] | None = None,
) -> int:
    """Draw ``column`` against step for every run that has metrics (validation: points joined).

    Colour: ``plotting.run_colour``; line style: ``default_linestyle``; marker: the data seed
    (``plotting.seed_marker``: on every validation point, on every few steps of a per-step column).
    The legend label names the arm, not the seed (the figure legend lists the seed markers once).
    ``floor``: a log axis's lower limit; values below it, and values <= 0, are drawn on it and
    marked with a hollow triangle. Returns the number of values so marked. ``shown_N``: the refresh
    intervals told apart by shade and legend (default: this panel's runs'); a figure whose panels share
    one legend passes all of its runs', so a run reads the same in every panel.
    """
    marked = 0
    shared_lr = _common(entries, "lr")  # one lr for the whole panel: the title names it (panel_title)
    # a panel whose runs differ in N (a fresh control beside a stale sampler): each N its own shade of the
    # arm's colour, darkest for the smallest, and N in the legend, or the two arms would read as one
    Ns = sorted(shown_N if shown_N is not None else {int(e[0]["N"]) for e in entries if e[0].get("N") is not None})
    shade_of = {n: 0.55 + 0.45 * i / (len(Ns) - 1) for i, n in enumerate(Ns)} if len(Ns) > 1 else {}
    for settings, metrics, _ in entries:
        if not _logged(metrics, column):
            continue
        x, y = _series(metrics, column)
        if shared_lr is not None:  # no lr shading or lr in the legend when nothing differs by lr
            settings = {**settings, "lr": L.DEFAULT_LR}
        colour = settings.get("colour") or P.run_colour(settings)
        if shade_of and settings.get("N") is not None and not settings.get("colour"):
            colour = P.shade(colour, shade_of[int(settings["N"])])
        if floor is not None:
            y, on_floor = P.to_floor(ax, x, y, floor, colour)
            marked += on_floor
        elif column in LOG_COLUMNS:
            y = np.where(y > 0, y, np.nan)  # a log axis without a floor: nothing to draw these on
        marker = P.seed_marker(settings.get("seed"))
        every: Any = None if column == "val_acc" else max(1, len(x) // 8)
        label = settings.get("label") or L.run_label(settings, seed=False, correction=correction)
        if shade_of and settings.get("N") is not None and not settings.get("label"):
            label = f"{label}, N={int(settings['N'])}"
        ax.plot(
            x,
            y,
            color=colour,
            ls=default_linestyle(settings),
            lw=lw,
            label=label,
            marker=marker,
            ms=3.0,
            markevery=every,
            mfc="white" if settings.get("replicate") else colour,
        )
    return marked


def _step_axis(
    ax: Axes,
    entries: Sequence[RunEntry],
    title: str | None = None,
    *,
    ylabel: str | None = None,
    refresh: Sequence[RunEntry] | None = None,
) -> None:
    """The step axis every panel of runs shares: the refresh lines of ``refresh`` (the panel's runs unless
    given), the runs' steps, and the panel's labels. Refresh lines only where those runs share one N, as in
    every paper panel, and N > 1: a sampler refreshed every step has no stale cycles to mark."""
    refresh = entries if refresh is None else refresh
    N = _common(refresh, "N")
    if N and int(N) > 1:
        P.refresh_lines(ax, int(N), _max_steps(refresh))
    ax.set_xlim(0, _max_steps(entries))
    ax.set_xlabel("step")
    if ylabel is not None:
        ax.set_ylabel(ylabel)
    if title is not None:
        ax.set_title(title, fontsize=S.TITLE_PT, loc="left")


def _acc_panel(ax: Axes, entries: Sequence[RunEntry], title: str, **kw: Any) -> None:
    plot_runs(ax, entries, "val_acc", **kw)
    _step_axis(ax, entries, title)
    P.accuracy_axis(ax)


def kl_estimator(options: Options | None) -> tuple[str, str]:
    """(metrics column, axis label) of the learner-sampler KL the figure draws: option ``kl``."""
    return L.KL_ESTIMATORS[str((options or {}).get("kl", "k1"))]


KL_FLOOR_NOTE = "hollow triangles on the floor: values <= 0 (k1 of a batch can be negative) or below the axis floor"


def log_panel(ax: Axes, entries: Sequence[RunEntry], column: str, *, reference: float = 1.0, **kw: Any) -> int:
    """A log-axis panel of ``column``: limits from ``plotting.log_limits`` (one near-zero point does
    not stretch the axis), values <= 0 or below the floor drawn on it, marked. Returns that count."""
    lo, hi = P.log_limits([_series(m, column)[1] for _, m, _ in entries if _logged(m, column)], reference=reference)
    marked = plot_runs(ax, entries, column, floor=lo, **kw)
    ax.set_yscale("log")
    ax.set_ylim(lo, hi)
    return marked


def _kl_panel(ax: Axes, entries: Sequence[RunEntry], title: str, options: Options | None, **kw: Any) -> None:
    column, label = kl_estimator(options)
    log_panel(ax, entries, column, lw=0.8, **kw)
    _step_axis(ax, entries, title)
    P.kl_axis(ax, label=label, limits=ax.get_ylim())


def _growth_panel(ax: Axes, entries: Sequence[RunEntry], title: str, **kw: Any) -> None:
    """Each run's KL growth (``analysis.kl_growth_curve``): verl's k1 KL minus its own value at step 1, the
    tempering offset, so that what is drawn is the drift staleness added. A linear axis: a cooled run's
    growth can fall below zero."""
    grown = []
    for settings, metrics, status in entries:
        if _logged(metrics, "kl"):
            g = kl_growth_curve(_column(metrics, "kl"))
            metrics = pd.DataFrame({"step": g.index.to_numpy(), "kl_growth": g.to_numpy()})
        grown.append((settings, metrics, status))
    plot_runs(ax, grown, "kl_growth", lw=0.8, **kw)
    _step_axis(ax, entries, title, refresh=grown)
    ax.axhline(0.0, color="black", lw=0.6, zorder=1)
    ax.set_ylabel("KL growth: KL(t) - KL(step 1) (nats/token)", fontsize=S.TEXT_PT)


def _lag_panel(ax: Axes, entries: Sequence[RunEntry], title: str, **kw: Any) -> None:
    """Each run's lag (``lag_max``, the step's oldest sample; the mean where only it is logged), in learner
    steps: the gate's sawtooth from 0 to N-1, a queue's lag near its depth, another trainer's as it logs it
    (coolsampler.spec.lag)."""
    lagged = []
    for settings, metrics, status in entries:
        if metrics is not None and "lag_max" in metrics:
            lag = metrics["lag_max"].where(metrics["lag_max"].notna(), metrics["lag_mean"])
            metrics = pd.DataFrame({"step": metrics["step"].to_numpy(), "lag": lag.to_numpy()})
        lagged.append((settings, metrics, status))
    plot_runs(ax, lagged, "lag", lw=0.8, **kw)
    _step_axis(ax, entries, title, refresh=lagged)
    ax.set_ylabel("lag: learner steps behind (oldest sample)", fontsize=S.TEXT_PT)


def _new_figure(
    width: float, height: float, entries: Sequence[RunEntry], caption: Sequence[str], **kw: Any
) -> tuple[Figure, Any]:
    """``plotting.new_figure`` with the note that names the runs of ``entries`` missing or unfinished."""
    return P.new_figure(width, height, L.availability_notes(entries), caption=caption, **kw)


def _kl_caption(selection: Selection, names: Sequence[str], options: Options | None) -> list[str]:
    """The caption of a figure that draws the KL: each panel's selection, then the line that names the KL
    estimator, its verl source and the floor marker (above the provenance footer, so the two never share a line)."""
    estimator = str((options or {}).get("kl", "k1"))
    return [*L.selection_lines(selection, names), f"{L.KL_SOURCE_NOTE[estimator]}; {KL_FLOOR_NOTE}"]


def figure_target(draw: Callable[..., Drawn]) -> Callable[..., None]:
    """The registry's interface (the module docstring) around ``draw(panels, options, selection, **kw)``:
    the figure it draws gets one legend, outside every panel (arms, the seeds drawn, reference lines),
    then the provenance stamp and the files, under the title it returns."""

    def target(
        panels: Panels,
        provenance: Provenance,
        outputs: Sequence[str | Path],
        options: Options | None = None,
        *,
        selection: Selection = None,
        **kw: Any,
    ) -> None:
        fig, title, entries = draw(panels, options, selection, **kw)
        P.figure_legend(fig, fig.axes, [e[0].get("seed") for e in entries if _logged(e[1])])
        P.save(fig, outputs, provenance=provenance, title=title)

    # the drawing's name and docstring; its signature stays the registry's, as ``inspect`` shows it
    target.__name__, target.__qualname__, target.__doc__ = draw.__name__, draw.__qualname__, draw.__doc__
    return target


# --------------------------------------------------------------------------------------------------
# Figures


@figure_target
def fig1(
    panels: Panels,
    options: Options | None,
    selection: Selection,
    *,
    titles: Mapping[str, str] | None = None,
    screen: pd.DataFrame | None = None,
) -> Drawn:
    """(a) validation accuracy of panel ``a``; (b) learner-sampler KL of panel ``b`` (seed-1 runs); where
    the study names a panel ``c``, (c) the KL's growth of its runs (``_growth_panel``: the KL minus its
    step-1 tempering offset, what the cliff study's stage M compares between temperatures).
    ``titles``: a panel's title where its runs share no model or task to name it by (own logs).
    ``screen``: a study's world screen (``results.world_screen.screen_table``), drawn as a table under
    the panels, so the figure shows the properties of the world it was drawn in beside its rivals'."""
    names = ["a", "b", *(n for n in ("c", "lag") if n in panels)]
    a, b = panels.get("a", []), panels.get("b", [])
    both = _unique_entries(panels, names)
    caption = _kl_caption(selection, names, options)
    rows = 0 if screen is None else len(screen)
    table_in = 0.45 + 0.22 * rows if rows else 0.0  # a row of its own under the panels for the screen
    grid = {"nrows": 2, "gridspec_kw": {"height_ratios": [3.6, table_in]}} if rows else {}
    fig, ax = _new_figure(5.0 * len(names), 3.6 + table_in, both, caption, ncols=len(names), **grid)
    titles = titles or {}
    shown = {"shown_N": {int(e[0]["N"]) for e in both if e[0].get("N") is not None}}  # one legend: one label a run
    _acc_panel(ax[0, 0], a, titles.get("a") or panel_title("a", a), **shown)
    _kl_panel(ax[0, 1], b, titles.get("b") or panel_title("b", b), options, **shown)
    if "c" in panels:
        c = panels["c"]
        _growth_panel(ax[0, 2], c, titles.get("c") or panel_title("c", c, "KL growth"), **shown)
    if "lag" in panels:  # the lag of each run, beside accuracy and KL (own logs; a queue study)
        _lag_panel(ax[0, names.index("lag")], panels["lag"], titles.get("lag") or "lag", **shown)
    if rows:
        spec = ax[1, 0].get_subplotspec().get_gridspec()
        for extra in ax[1, :]:
            extra.remove()
        letter = PANEL_LETTERS[len(names)]  # the panel after the runs' last: (c), or (d) beside a growth panel
        _screen_panel(fig.add_subplot(spec[1, :]), screen, title=f"({letter}) {SCREEN_TITLE}")
    return fig, TARGETS["fig1"].title, both


SCREEN_TITLE = "the world screen, before any RL step (\u2713 meets the study's bound)"


def screen_figure(screen: pd.DataFrame, provenance: Provenance, outputs: Sequence[str | Path]) -> None:
    """A study's world screen on its own (rule world_screen): what it drew before any RL step, and
    which world, if any, it chose."""
    chosen = screen.loc[screen["chosen"], "world"]
    verdict = (
        f"chosen: {chosen.iloc[0]}, the first candidate in order that meets every bound"
        if len(chosen)
        else "no candidate meets every bound: the study stops after its screen, and the worlds are not retuned"
    )
    fig, ax = P.new_figure(9, 0.3 + 0.22 * (len(screen) + 1.8), caption=[verdict])
    _screen_panel(ax[0, 0], screen, title=SCREEN_TITLE[0].upper() + SCREEN_TITLE[1:])
    P.save(fig, outputs, provenance=provenance, title="World screen")


def _screen_panel(ax: Axes, screen: pd.DataFrame, title: str) -> None:
    """The world screen: each probed world's properties, a tick where a property meets the study's
    bound, the chosen world in bold."""
    from coolsampler.results import world_screen as W

    props = [p for p in W.LABELS if f"{p}_ok" in screen]
    head = ["world", *(f"{W.LABELS[p]}\n{screen[f'{p}_bound'].iloc[0]}" for p in props), "verdict"]
    cells, bold = [], []
    for _, r in screen.iterrows():
        verdict = W.verdict_text(r)
        cells.append([str(r["world"]), *(W.cell_text(r, p) for p in props)])
        cells[-1].append(verdict if r.get("candidate", True) else f"reference: {verdict}")
        bold.append(bool(r["chosen"]))
    ax.axis("off")
    ax.set_title(title, loc="left", fontsize=S.TITLE_PT)
    table = ax.table(cellText=cells, colLabels=head, loc="upper center", cellLoc="center", colLoc="center")
    table.auto_set_font_size(False)
    table.set_fontsize(S.SMALL_PT)
    table.scale(1.0, 1.15)
    for (i, _j), cell in table.get_celld().items():
        if i == 0:
            cell.set_height(cell.get_height() * 1.8)  # the property's name over its bound
        cell.set_edgecolor("#bbbbbb")
        if i == 0 or (i > 0 and bold[i - 1]):
            cell.set_text_props(fontweight="bold")


FIG2_TB = (1.0, 0.8)


@figure_target
def fig2(panels: Panels, options: Options | None, selection: Selection) -> Drawn:
    """Uncooled vs cooled mismatch per model/task/N: (a) KL at the fixed first-cycle step with seed
    means and their ratio; (b) first step with KL > 0.1 nat, hollow where not reached before the
    first refresh (drawn at the refresh). A row holds one learning rate: runs of a second learning
    rate in the same model/task/N are named in the note and not drawn (they are not seeds)."""
    column, _ = kl_estimator(options)
    estimator = str((options or {}).get("kl", "k1"))
    entries = list(panels.get("a", []))
    notes = L.availability_notes(entries)
    drawn, skipped = [], []
    for e in entries:
        fixed = L.tb_kind(e[0]) == "fixed" and any(abs(L.tb_initial(e[0]) - t) < 1e-9 for t in FIG2_TB)
        (drawn if fixed and not _own_loss(e[0]) and not e[0].get("replicate") else skipped).append(e)
    notes += [f"{L.short_key(e[0])}: not drawn (only fixed Tb 1.0/0.8, no replicate)" for e in skipped]
    rows: dict[tuple[Any, ...], list[RunEntry]] = {}  # one row per model, task and N
    for e in drawn:
        rows.setdefault((e[0].get("model"), e[0].get("task"), int(e[0].get("N", 0))), []).append(e)
    order = sorted(rows, key=lambda k: (str(k[0]), str(k[1]), k[2]))
    for key in order:  # one learning rate per row: the row's most common one
        lrs = [float(e[0].get("lr", L.DEFAULT_LR)) for e in rows[key]]
        keep = max(set(lrs), key=lambda x: (lrs.count(x), x == L.DEFAULT_LR))
        for e in rows[key]:
            if abs(float(e[0].get("lr", L.DEFAULT_LR)) - keep) > 1e-12:
                notes.append(f"{L.short_key(e[0])}: not drawn (row's lr is {L.lr_text(keep)})")
        rows[key] = [e for e in rows[key] if abs(float(e[0].get("lr", L.DEFAULT_LR)) - keep) <= 1e-12]
    at_step: dict[int, float] = {}  # id(entry) -> its KL at the row's fixed step
    for e in drawn:
        step = kl_step_for(int(e[0]["N"]))
        if e[1] is None or e[1].empty:
            continue
        v = value_at(e[1], column, step)
        if np.isnan(v):
            notes.append(f"{L.short_key(e[0])}: no KL at step {step}")
            continue
        at_step[id(e)] = v
        if v <= 0:
            notes.append(f"{L.short_key(e[0])}: KL {v:.2g} <= 0 at step {step}, on the floor, not in the mean")
    lo, hi = P.log_limits([list(at_step.values())], reference=0.0, decades=4)
    height = max(2.0, 0.45 * len(order) + 1.0)
    fig, ax = P.new_figure(10, height, notes, ncols=2, caption=_kl_caption(selection, ["a"], options))
    axa, axb = ax[0, 0], ax[0, 1]
    ylabels = []
    for i, key in enumerate(order):
        y = len(order) - 1 - i
        N = key[2]
        row_lr = float(rows[key][0][0].get("lr", L.DEFAULT_LR)) if rows[key] else L.DEFAULT_LR
        text = L.setting_row({"model": key[0], "task": key[1], "N": N})
        ylabels.append(text + ("" if L.default_lr(row_lr) else f", lr {L.lr_text(row_lr)}"))
        means = {}
        for j, t in enumerate(FIG2_TB):
            runs = [e for e in rows[key] if abs(L.tb_initial(e[0]) - t) < 1e-9 and e[1] is not None]
            colour = P.FIXED_TB_COLOURS[t]
            dy = 0.12 if j == 0 else -0.12
            kls = []
            for e in runs:  # one dot per seed, the seed's marker; <= 0 or below the floor: on it, hollow
                v = at_step.get(id(e), np.nan)
                if not np.isfinite(v):
                    continue
                below = v < lo
                axa.scatter(
                    [max(v, lo)],
                    [y + dy],
                    s=14,
                    marker=P.FLOOR_MARKER if below else P.seed_marker(e[0].get("seed")),
                    facecolors="none" if below else colour,
                    edgecolors=colour,
                    alpha=0.7,
                    zorder=3,
                    clip_on=False,
                    label=P.FLOOR_LABEL if below else "_",
                )
                if v > 0:
                    kls.append(v)
            if kls:
                means[t] = float(np.mean(kls))
                axa.scatter([means[t]], [y + dy], s=60, marker="|", color=colour, lw=2.5, zorder=4)
                axa.scatter([], [], s=40, marker="|", color=colour, lw=2.5, label=f"Tb={L.value_text(t)}: seed mean")
            for e in runs:
                cross = first_crossing(e[1].set_index("step")[column], KL_EARLY_NAT) if column in e[1].columns else None
                reached = cross is not None and cross <= N
                x = cross if reached else N
                face = colour if reached else "none"
                axb.scatter(
                    [x], [y + dy], s=22, marker=P.seed_marker(e[0].get("seed")), facecolors=face, edgecolors=colour,
                    zorder=3,
                )  # fmt: skip
            axb.plot([N, N], [y - 0.3, y + 0.3], color=P.REFRESH_GREY, lw=2, zorder=1)
        if len(means) == 2:
            ratio = means[1.0] / means[0.8]
            # the ratio sits just right of the axes, clear of the dots whatever the KL range
            axa.text(1.01, y, f"x{ratio:.1f}", transform=axa.get_yaxis_transform(), va="center", fontsize=S.TEXT_PT)
    for a_ in (axa, axb):
        a_.set_yticks(range(len(order)))
        a_.set_ylim(-0.7, len(order) - 0.3)
    axa.set_yticklabels(ylabels[::-1], fontsize=S.TEXT_PT)
    axb.set_yticklabels([])  # same rows as (a); the space between the panels holds (a)'s ratios
    axa.set_xscale("log")
    axa.set_xlim(lo, hi)
    axa.set_xlabel(f"KL ({estimator}) at {fig2_step_text([k[2] for k in order])}, nats/token", fontsize=S.TEXT_PT)
    axa.set_title("(a) first-cycle KL (ratio Tb 1 / Tb 0.8 at right)", fontsize=S.TITLE_PT, loc="left")
    axb.set_xlabel(
        f"first step with {kl_above_text(KL_EARLY_NAT)} nat\n(hollow: not before the refresh, drawn at it)",
        fontsize=S.TEXT_PT,
    )
    axb.set_title(f"(b) first crossing of {nat_text(KL_EARLY_NAT)}", fontsize=S.TITLE_PT, loc="left")
    fig.subplots_adjust(left=0.16, wspace=0.12)
    P.fit_left(fig, axa)
    return fig, TARGETS["fig2"].title, drawn


def fig2_step_text(Ns: Sequence[int]) -> str:
    """Which step Figure 2a reads, derived from ``analysis.kl_step_for`` (the function that picks
    it): 'step 32' when every row reads one step, else 'step 110 (N=144/192), step 60 (N=96)'."""
    by_step: dict[int, list[int]] = {}
    for N in sorted(set(int(n) for n in Ns)):
        by_step.setdefault(kl_step_for(N), []).append(N)
    if not by_step:
        return "the fixed first-cycle step (no row drawn)"
    if len(by_step) == 1:
        return f"step {next(iter(by_step))}"
    return ", ".join(f"step {step} (N={'/'.join(map(str, ns))})" for step, ns in sorted(by_step.items(), reverse=True))


def _signals_panel(ax: Axes, entries: Sequence[RunEntry], title: str) -> None:
    """The columns only a run's correction logs (its registry entry's signals), per step: for mu-GRPO the
    veto fraction (of responses) and ratio-clip fraction (of tokens), the appendix's "the logged veto and
    clip fractions confirm that the rule is active".

    Line style says which signal (mu-GRPO: solid vetoed, dotted clipped); the correction's colour as in
    panels a/b, darker for the uncooled sampler, lighter for a cooled one; the seeds of an arm share a
    legend entry.
    """
    drawn = [e for e in entries if (c := corrections.get(e[0].get("correction"))) is not None and c.signals]
    top = 0.0
    for settings, metrics, _ in drawn:
        if not _logged(metrics):
            continue
        correction = corrections.get(settings.get("correction"))
        assert correction is not None
        base = correction.colour or P.tb_colour(settings)
        colour = P.shade(base, 1.45) if L.tb_initial(settings) < 1.0 else P.shade(base, 0.8)
        for signal in correction.signals:
            if signal.column not in metrics.columns:
                continue
            y = _numeric(metrics, signal.column)
            top = max(top, float(np.nanmax(y))) if np.isfinite(y).any() else top
            label = f"{L.tb_label(settings)}: {signal.legend}"
            ax.plot(metrics["step"].to_numpy(), y, color=colour, ls=signal.linestyle, lw=0.9, label=label)
    _step_axis(ax, entries, title, ylabel="fraction (responses vetoed / tokens clipped)", refresh=drawn or entries)
    ax.set_ylim(0.0, max(top, 1e-3) * 1.1)
    if not drawn:
        named = ", ".join(c.label for c in corrections.corrections() if c.signals)
        ax.text(0.5, 0.5, f"no {named} run selected", transform=ax.transAxes, ha="center", fontsize=S.TEXT_PT)


@figure_target
def fig4(panels: Panels, options: Options | None, selection: Selection) -> Drawn:
    """Learning rate, mu-GRPO and cooling: (a) validation accuracy, (b) KL of the same runs,
    (c) mu-GRPO's veto and ratio-clip fractions."""
    e = panels.get("a", [])
    fig, ax = _new_figure(15, 3.8, e, _kl_caption(selection, ["a"], options), ncols=3)
    _acc_panel(ax[0, 0], e, panel_title("a", e), correction=True)
    _kl_panel(ax[0, 1], e, panel_title("b", e), options, correction=True)
    _signals_panel(ax[0, 2], e, "(c) mu-GRPO: vetoed responses, clipped tokens")
    fig.subplots_adjust(wspace=0.32)
    return fig, TARGETS["fig4"].title, e


@figure_target
def accuracy_row(panels: Panels, options: Options | None, selection: Selection, *, target: str) -> Drawn:
    """Validation accuracy, one panel per panel of ``target`` side by side, under its registry title
    (``coolsampler.spec.targets``): Figures 3, 5 and 6. Where the panels differ in learning rate, every
    title names its own (Figure 5's MATH panels differ by lr alone); where the runs span several
    corrections, the legend names each run's (Figure 6: no correction dashed)."""
    names = list(TARGETS[target].panels)
    every = _unique_entries(panels, names)
    fig, ax = _new_figure(4 + 3 * len(names), 3.4, every, L.selection_lines(selection, names), ncols=len(names))
    lrs = {_common(panels.get(n, []), "lr") for n in names if panels.get(n)}
    corrections_drawn = {e[0].get("correction") for e in every}
    for i, name in enumerate(names):
        e = panels.get(name, [])
        lr = _common(e, "lr")
        # the default lr named where the panels differ in lr (panel_title names any other one anyway)
        extra = f"lr {L.lr_text(lr)}" if len(lrs) > 1 and lr is not None and L.default_lr(lr) else ""
        _acc_panel(ax[0, i], e, panel_title(name, e, extra), correction=len(corrections_drawn) > 1)
    return fig, TARGETS[target].title, every


fig3 = partial(accuracy_row, target="fig3")
fig5 = partial(accuracy_row, target="fig5")
fig6 = partial(accuracy_row, target="fig6")


def _fixed_temperatures(entries: Sequence[RunEntry]) -> list[RunEntry]:
    """Fixed-Tb runs log no sampler temperature (nothing moves it); the temperature row draws their Tb,
    so the references a controller is compared with are on it too (a panel of references alone, as
    in a rehearsal, would otherwise be empty)."""
    out = []
    for settings, metrics, status in entries:
        if _logged(metrics) and L.tb_kind(settings) == "fixed":
            logged = metrics["temperature"] if "temperature" in metrics.columns else pd.Series(dtype="float64")
            if pd.to_numeric(logged, errors="coerce").isna().all():
                sampled = metrics["step"].to_numpy() >= 1  # step 0 is validation only, as in logged runs
                metrics = metrics.assign(temperature=np.where(sampled, L.tb_initial(settings), np.nan))
        out.append((settings, metrics, status))
    return out


@figure_target
def fig7(panels: Panels, options: Options | None, selection: Selection) -> Drawn:
    """Adaptive and scheduled temperature: accuracy (top) and sampler temperature used (bottom:
    the mean over the step's prompts, shaded between their min and max; fixed-Tb references flat at
    their Tb)."""
    both = _unique_entries(panels, ["a", "b"])
    fig, ax = _new_figure(10, 5.6, both, L.selection_lines(selection, ["a", "b"]), nrows=2, ncols=2)
    for i, name in enumerate(["a", "b"]):
        e = panels.get(name, [])
        _acc_panel(ax[0, i], e, panel_title(name, e), correction=True)
        axt = ax[1, i]
        plot_runs(axt, _fixed_temperatures(e), "temperature", lw=1.0, correction=True)
        # each run's per-step min-max over its prompts, shaded: a per-prompt controller samples one batch at
        # several temperatures, and the line is their mean
        for settings, metrics, _ in e:
            if _logged(metrics, "temperature_min"):
                lo, hi = _numeric(metrics, "temperature_min"), _numeric(metrics, "temperature_max")
                axt.fill_between(metrics["step"].to_numpy(), lo, hi, color=P.run_colour(settings), alpha=0.2, lw=0)
        _step_axis(axt, e, ylabel="sampler temperature Tb")
    return fig, TARGETS["fig7"].title, both


FIG8_COLUMNS = (
    ("val_acc", "validation accuracy"),
    ("kl", "learner-sampler KL"),
    ("entropy", "learner entropy"),
    ("clip_frac", "responses at the length limit"),
    ("reward", "training reward"),
    ("grad_norm", "gradient norm"),
)


@figure_target
def fig8(panels: Panels, options: Options | None, selection: Selection) -> Drawn:
    """Every run at N=144 (7B): six diagnostics, line style by seed, the cut replicate dash-dotted."""
    e = panels.get("a", [])
    fig, ax = _new_figure(12, 6.4, e, _kl_caption(selection, ["a"], options), nrows=2, ncols=3)
    for a_, (col, label) in zip(ax.flat, FIG8_COLUMNS, strict=True):
        if col == "val_acc":
            _acc_panel(a_, e, panel_title("a", e))
        elif col == "kl":
            _kl_panel(a_, e, "", options)
        else:
            if col == "grad_norm":
                log_panel(a_, e, col, reference=0.0, lw=0.8)
            else:
                plot_runs(a_, e, col, lw=0.8)
            _step_axis(a_, e, ylabel=label)
    return fig, TARGETS["fig8"].title, e


# --------------------------------------------------------------------------------------------------
# The staleness guard against the fixed-N frontier (not a figure of the paper)

_GUARD_MARKERS = ("*", "P", "X", "p", "h")  # one per guard arm; replayed schedules are diamonds
# one colour per guard arm and for the replayed schedules, none of them a sampler temperature's: the
# frontier (fixed N) keeps its Tb colour, so each arm reads apart from it by colour as well as marker
_GUARD_COLOURS = ("#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf")
_SCHEDULE_COLOUR = "#555555"


@figure_target
def guard_frontier(panels: Panels, options: Options | None, selection: Selection) -> Drawn:
    """Mean refresh interval (steps / refreshes, log axis) against (a) the fraction of runs that degrade
    and (b) the whole-run accuracy (the arm's mean, large; each run, small, by seed): the fixed-N arms
    as a line in the Tb colour (the frontier; dashed: no correction), each guard arm in a colour and a
    star-like marker of its own, the replayed schedules as grey diamonds; per correction and sampler
    temperature. The dotted
    line is 1.5 x the largest fixed N none of whose runs degrade."""
    entries = panels.get("a", [])
    table = frontier_table(entries)
    arms = frontier_arms(table)
    fig, ax = _new_figure(10, 3.6, entries, L.selection_lines(selection, ["a"]), ncols=2)
    deg, acc = ax[0, 0], ax[0, 1]
    for (corr, tb), group in arms.groupby(["correction", "Tb"], sort=False, dropna=False):
        colour = P.tb_colour({"Tb": tb, "Tb_initial": tb})
        name = f"{L.correction_label({'correction': corr})}, Tb {tb:g}" if isinstance(tb, (int, float)) else str(corr)
        c = corrections.get(corr)
        dashes = "--" if c is not None and c.is_dashed(tb if isinstance(tb, (int, float)) else 1.0) else "-"
        fixed = group[group["refresh"] == "fixed"]
        if len(fixed):
            style = {"color": colour, "marker": "o", "markersize": 5, "linestyle": dashes}
            deg.plot(fixed["interval"], fixed["degraded"], label=f"{name}: fixed N", **style)
            acc.plot(fixed["interval"], fixed["whole"], label=f"{name}: fixed N", **style)
            for _, r in fixed.iterrows():
                deg.annotate(f"N={r['N']}", (r["interval"], r["degraded"]), textcoords="offset points",
                             xytext=(3, 4), fontsize=S.SMALL_PT, color=colour)  # fmt: skip
        others = group[group["refresh"] != "fixed"].reset_index(drop=True)
        for i, r in others.iterrows():
            schedule = r["refresh"] == "schedule"
            marker = "D" if schedule else _GUARD_MARKERS[int(i) % len(_GUARD_MARKERS)]
            arm_colour = _SCHEDULE_COLOUR if schedule else _GUARD_COLOURS[int(i) % len(_GUARD_COLOURS)]
            style = {"color": arm_colour, "marker": marker, "markersize": 6 if schedule else 10, "linestyle": ""}
            label = f"{name}: replayed schedules" if r["refresh"] == "schedule" else f"{name}: {r['arm']}"
            deg.plot([r["interval"]], [r["degraded"]], label=label, **style)
            acc.plot([r["interval"]], [r["whole"]], label=label, **style)
        for _, run in table[(table["correction"] == corr) & (table["Tb"] == tb)].iterrows():
            acc.plot([run["interval"]], [run["whole"]], color=colour, alpha=0.45, linestyle="",
                     marker=P.seed_marker(run["seed"]), markersize=3, label="_run")  # fmt: skip
        fixed_runs = table[(table["correction"] == corr) & (table["Tb"] == tb) & (table["refresh"] == "fixed")]
        safe = largest_safe_N(zip(fixed_runs["N"], fixed_runs["degraded"], strict=True))
        if safe is not None:
            for a in (deg, acc):
                a.axvline(1.5 * safe, color=colour, linestyle=":", linewidth=1.0, label="1.5 x largest safe fixed N")
    # the fixed arms' N and the guards' longest interval: an interval between them reads off the grid
    ticks = sorted({int(n) for n in arms.loc[arms["refresh"] != "schedule", "N"]})
    for a in (deg, acc):
        a.set_xscale("log", base=2)
        if ticks:
            a.set_xticks(ticks, [str(t) for t in ticks])
            a.minorticks_off()
        a.set_xlabel("mean refresh interval (steps / refreshes)")
        a.grid(alpha=0.3)
    deg.set_ylim(-0.05, 1.05)
    deg.set_ylabel("fraction of runs degraded")
    deg.set_title(panel_title("a", entries, "degraded"), fontsize=S.TITLE_PT)
    P.accuracy_axis(acc, label="whole-run accuracy")
    acc.set_title(panel_title("b", entries, "accuracy: arm mean, each run small"), fontsize=S.TITLE_PT)
    return fig, TARGETS["guard_frontier"].title, entries
