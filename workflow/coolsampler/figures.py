"""Figures 1-8 of the paper, and the registry of every figure and table target.

Interface (shared with ``coolsampler.tables``): every target is a function
``f(panels, study, commit, outputs)`` where ``panels`` maps a panel name to a list of
``(settings, metrics, status)`` entries -- ``settings`` from ``Run.settings()``, ``metrics`` the
run's metrics table (None when the run has not produced one), ``status`` its ``RunStatus`` (None when
unknown) -- and ``outputs`` are the paths to write (``.pdf``/``.png`` for figures, ``.csv``/``.tex``/
``.md`` for tables). A run whose metrics are missing or whose log is incomplete is drawn as far as it
goes and *named* in a red "runs missing/unfinished" note on the figure (tables: ``note`` column).

Panel names per target, for the study config's ``figures:`` block (target -> panel -> settings
filter). Each panel is one settings filter; a list value means "any of".

=======  ==========  ========================================================================
target   panels      what the filter should select (paper caption)
=======  ==========  ========================================================================
fig1     a, b        a: 1.5B GSM8K N=192 TIS, Tb 1.0 (3 seeds), 0.8 (3 seeds + tied), 0.9 --
                     validation accuracy. b: the seed-1 runs of each temperature -- KL (log).
fig2     a           every run to compare: TIS, fixed Tb 1.0 and 0.8, all model/task/N rows.
                     Draws both subpanels (KL at step 110/60; first step KL > 0.1). Runs with
                     another temperature are named in the note as not drawn.
fig3     a, b        7B GSM8K. a: N=144, seeds 1 and 43 (seed order -> solid, dashed).
                     b: N=192. Validation accuracy.
fig4     a           1.5B GSM8K N=192 seeds 43/44: TIS Tb=1 at lr 2e-6/1.5e-6/1e-6, cooled TIS,
                     mu-GRPO Tb 1.0 and 0.8. Draws accuracy (a) and KL (b).
fig5     a, b, c     a: 1.5B GSM8K N=288 all temperatures; b: MATH lr 4e-6 N=288;
                     c: MATH lr 2e-6 N=192. Validation accuracy.
fig6     a, b        a: 1.5B GSM8K N=96: correction none (cooled, 3 seeds + kl_cooling),
                     cooled TIS, uncooled TIS. b: MATH N=96. Accuracy; no correction dashed.
fig7     a, b        a: N=96 controllers (saturation with/without KL gate), linear schedule,
                     doubled lr, plus fixed-Tb references; b: N=192 controller (+ references).
                     Accuracy (top) and the sampler temperature actually used (bottom:
                     mean over the step's prompts, min-max shaded).
fig8     a           every 7B run at N=144, including the cut replicate. Accuracy, KL,
                     entropy, clip fraction, reward and gradient norm.
table1   rows        1.5B GSM8K seeds 43/44: TIS Tb 1.0/0.8 at N=96 and 192, TIS Tb=1 at lr
                     1.5e-6 and 1e-6 (N=192). One row per arm.
table2   rows        the runs whose events to list (degrading and stable; stable arms say so).
table3   rows        runs for the cycle-aligned readings (7B N=144; 1.5B N=192 Tb 0.8).
table4   rows        every run of the study.
=======  ==========  ========================================================================

Colours are fixed per sampler temperature across all figures (``coolsampler.plotting``); grey
vertical lines are the refreshes (multiples of N); KL axes are logarithmic with a dashed 1-nat line.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from coolsampler import plotting as P
from coolsampler import tables
from coolsampler.analysis import first_crossing, kl_at_step, kl_step_for, validation
from coolsampler.metrics_schema import RunStatus
from coolsampler.tables import Panels, RunEntry

PANEL_LETTERS = "abcdefgh"


# --------------------------------------------------------------------------------------------------
# Shared pieces


def availability_notes(entries: Sequence[RunEntry]) -> list[str]:
    """'<run>: missing' / '<run>: unfinished at step x/y (why)' for every run not whole."""
    out = []
    for settings, metrics, status in entries:
        name = P.short_key(settings)
        if metrics is None or metrics.empty:
            out.append(f"{name}: missing")
        elif status is None:
            out.append(f"{name}: status unknown")
        elif not status.complete:
            why = f" ({'; '.join(status.problems)})" if status.problems else ""
            out.append(f"{name}: unfinished at step {status.last_step}/{status.expected_steps}{why}")
    return out


def _unique_entries(panels: Panels, names: Sequence[str]) -> list[RunEntry]:
    """Entries of several panels, each run once (a run may sit in two panels of one figure)."""
    seen: set[str] = set()
    out = []
    for n in names:
        for e in panels.get(n, []):
            k = str(e[0].get("key") or id(e))
            if k not in seen:
                seen.add(k)
                out.append(e)
    return out


def _common(entries: Sequence[RunEntry], field: str) -> Any:
    vals = {repr(e[0].get(field)) for e in entries}
    return entries[0][0].get(field) if entries and len(vals) == 1 else None


def panel_title(letter: str, entries: Sequence[RunEntry], extra: str = "") -> str:
    """'(a) 1.5B GSM8K, N=192' from the settings all of the panel's runs share."""
    parts = []
    if entries:
        s0 = entries[0][0]
        if _common(entries, "model") is not None:
            parts.append(tables.model_label(s0))
        if _common(entries, "task") is not None:
            parts.append(tables.task_label(s0))
        N = _common(entries, "N")
        if N is not None:
            parts.append(f"N={N}")
    text = f"({letter}) " + " ".join(parts)
    return text + (f", {extra}" if extra else "") if parts or extra else f"({letter}) no runs selected"


def _max_steps(entries: Sequence[RunEntry]) -> int:
    steps = [int(e[0].get("steps", 0) or 0) for e in entries]
    steps += [int(m["step"].max()) for _, m, _ in entries if m is not None and not m.empty]
    return max(steps, default=300) or 300


def _refresh(ax: Axes, entries: Sequence[RunEntry]) -> None:
    """Refresh lines of the panel's N (only when the panel's runs share one N, as in every paper panel)."""
    N = _common(entries, "N")
    if N:
        P.refresh_lines(ax, int(N), _max_steps(entries))


def _seed_styles(entries: Sequence[RunEntry]) -> dict[Any, str]:
    seeds = sorted({e[0].get("seed") for e in entries}, key=lambda s: int(s or 0))
    styles = ["-", "--", ":", "-."]
    return {s: styles[i % len(styles)] for i, s in enumerate(seeds)}


def default_linestyle(settings: Mapping[str, Any]) -> str:
    """Solid, except: no correction dashed; mu-GRPO with a cooled sampler dashed (Figure 4);
    learner tied to the sampler dotted; a replicate (cut/re-run) dash-dotted."""
    if settings.get("replicate"):
        return "-."
    if settings.get("Tl") == "tied":
        return ":"
    if settings.get("correction") == "none":
        return "--"
    if settings.get("correction") == "mu_grpo" and P.tb_initial(settings) < 1.0:
        return "--"
    return "-"


def plot_runs(
    ax: Axes,
    entries: Sequence[RunEntry],
    column: str,
    *,
    by_seed: bool = False,
    label_seed: bool = False,
    correction: bool = False,
    lw: float = 1.2,
) -> None:
    """Draw ``column`` against step for every run that has metrics (validation: points joined).

    ``by_seed``: line style encodes the data seed (first seed solid, second dashed, ...), as in
    Figure 3; otherwise ``default_linestyle``. Colours always come from ``plotting.run_colour``.
    """
    seed_style = _seed_styles(entries)
    for settings, metrics, _ in entries:
        if metrics is None or metrics.empty or column not in metrics.columns:
            continue
        if column == "val_acc":
            s = validation(metrics)
            x, y = s.index.to_numpy(), s.to_numpy(dtype="float64")
        else:
            x = metrics["step"].to_numpy()
            y = pd.to_numeric(metrics[column], errors="coerce").to_numpy(dtype="float64")
        if column in ("kl", "grad_norm"):
            y = np.where(y > 0, y, np.nan)  # log axes: non-positive values have no place
        ls = default_linestyle(settings)
        if by_seed and not settings.get("replicate"):
            ls = seed_style[settings.get("seed")]
        label = P.run_label(settings, seed=label_seed, correction=correction)
        ax.plot(x, y, color=P.run_colour(settings), ls=ls, lw=lw, label=label)


def _acc_panel(ax: Axes, entries: Sequence[RunEntry], title: str, **kw: Any) -> None:
    plot_runs(ax, entries, "val_acc", **kw)
    _refresh(ax, entries)
    P.accuracy_axis(ax)
    ax.set_xlim(0, _max_steps(entries))
    ax.set_xlabel("step")
    ax.set_title(title, fontsize=9, loc="left")
    P.dedup_legend(ax, loc="lower right")


def _kl_panel(ax: Axes, entries: Sequence[RunEntry], title: str, **kw: Any) -> None:
    plot_runs(ax, entries, "kl", lw=0.8, **kw)
    _refresh(ax, entries)
    P.kl_axis(ax)
    ax.set_xlim(0, _max_steps(entries))
    ax.set_xlabel("step")
    ax.set_title(title, fontsize=9, loc="left")
    P.dedup_legend(ax, loc="upper left")


def _save(fig: Any, outputs: Sequence[str | Path], study: str, commit: str | None, title: str) -> None:
    P.save(fig, outputs, study=study, commit=commit, title=title)


# --------------------------------------------------------------------------------------------------
# Figures


def fig1(panels: Panels, study: str, commit: str | None, outputs: Sequence[str | Path]) -> None:
    """(a) validation accuracy of panel ``a``; (b) learner-sampler KL of panel ``b`` (seed-1 runs)."""
    a, b = panels.get("a", []), panels.get("b", [])
    fig, ax = P.new_figure(10, 3.6, availability_notes(_unique_entries(panels, ["a", "b"])), ncols=2)
    _acc_panel(ax[0, 0], a, panel_title("a", a))
    _kl_panel(ax[0, 1], b, panel_title("b", b))
    _save(fig, outputs, study, commit, "Figure 1: finite safe staleness; cooling extends it")


def _fig2_rows(
    entries: Sequence[RunEntry],
) -> tuple[list[tuple[Any, ...]], dict[tuple[Any, ...], list[RunEntry]]]:
    rows: dict[tuple[Any, ...], list[RunEntry]] = {}
    for e in entries:
        s = e[0]
        rows.setdefault((s.get("model"), s.get("task"), int(s.get("N", 0))), []).append(e)
    order = sorted(rows, key=lambda k: (str(k[0]), str(k[1]), k[2]))
    return order, rows


FIG2_TB = (1.0, 0.8)


def fig2(panels: Panels, study: str, commit: str | None, outputs: Sequence[str | Path]) -> None:
    """Uncooled vs cooled mismatch per model/task/N: (a) KL at the fixed first-cycle step with seed
    means and their ratio; (b) first step with KL > 0.1 nat, hollow where not reached before the
    first refresh (drawn at the refresh)."""
    entries = list(panels.get("a", []))
    notes = availability_notes(entries)
    drawn = [
        e
        for e in entries
        if P.tb_kind(e[0]) == "fixed"
        and any(abs(P.tb_initial(e[0]) - t) < 1e-9 for t in FIG2_TB)
        and e[0].get("correction") != "mu_grpo"
    ]
    drawn_ids = {id(e) for e in drawn}
    notes += [
        f"{P.short_key(e[0])}: not drawn (only fixed Tb 1.0/0.8)" for e in entries if id(e) not in drawn_ids
    ]
    order, rows = _fig2_rows(drawn)
    for e in drawn:
        if e[1] is not None and not e[1].empty and np.isnan(kl_at_step(e[1], int(e[0]["N"]))):
            notes.append(f"{P.short_key(e[0])}: no KL at step {kl_step_for(int(e[0]['N']))}")
    height = max(2.0, 0.45 * len(order) + 1.0)
    fig, ax = P.new_figure(10, height, notes, ncols=2)
    axa, axb = ax[0, 0], ax[0, 1]
    labels = []
    for i, key in enumerate(order):
        y = len(order) - 1 - i
        N = key[2]
        labels.append(f"{tables.model_label({'model': key[0]})} {tables.task_label({'task': key[1]})} N={N}")
        means = {}
        for j, t in enumerate(FIG2_TB):
            runs = [e for e in rows[key] if abs(P.tb_initial(e[0]) - t) < 1e-9 and e[1] is not None]
            colour = P.FIXED_TB_COLOURS[t]
            dy = 0.12 if j == 0 else -0.12
            kls = np.array([kl_at_step(e[1], N) for e in runs], dtype="float64")
            kls = kls[np.isfinite(kls) & (kls > 0)]
            if kls.size:
                axa.scatter(kls, np.full(kls.size, y + dy), s=10, color=colour, alpha=0.6, zorder=3)
                means[t] = float(kls.mean())
                axa.scatter([means[t]], [y + dy], s=55, color=colour, zorder=4, label=f"Tb={t:g}")
            for e in runs:
                cross = first_crossing(e[1].set_index("step")["kl"], 0.1) if "kl" in e[1].columns else None
                reached = cross is not None and cross <= N
                x = cross if reached else N
                face = colour if reached else "none"
                axb.scatter([x], [y + dy], s=28, facecolors=face, edgecolors=colour, zorder=3)
            axb.plot([N, N], [y - 0.3, y + 0.3], color=P.REFRESH_GREY, lw=2, zorder=1)
        if len(means) == 2:
            ratio = means[1.0] / means[0.8]
            # the ratio sits just right of the axes, clear of the dots whatever the KL range
            axa.text(1.01, y, f"x{ratio:.1f}", transform=axa.get_yaxis_transform(), va="center", fontsize=8)
    for a_ in (axa, axb):
        a_.set_yticks(range(len(order)))
        a_.set_yticklabels(labels[::-1], fontsize=7)
        a_.set_ylim(-0.7, len(order) - 0.3)
    axa.set_xscale("log")
    axa.set_xlabel("KL at step 110 (60 where N=96), nats/token", fontsize=8)
    axa.set_title("(a) first-cycle KL at a fixed step", fontsize=9, loc="left")
    axb.set_xlabel("first step with KL > 0.1 nat (hollow: not before refresh)", fontsize=8)
    axb.set_title("(b) first crossing of 0.1 nat", fontsize=9, loc="left")
    P.dedup_legend(axa, loc="lower right")
    fig.subplots_adjust(left=0.14, wspace=0.45)
    _save(fig, outputs, study, commit, "Figure 2: cooling lowers the learner-sampler mismatch")


def fig3(panels: Panels, study: str, commit: str | None, outputs: Sequence[str | Path]) -> None:
    """7B GSM8K: (a) N=144 and (b) N=192 validation accuracy, line style by data seed."""
    fig, ax = P.new_figure(10, 3.4, availability_notes(_unique_entries(panels, ["a", "b"])), ncols=2)
    for i, name in enumerate(["a", "b"]):
        e = panels.get(name, [])
        _acc_panel(ax[0, i], e, panel_title(name, e), by_seed=True, label_seed=True)
    _save(fig, outputs, study, commit, "Figure 3: Qwen2.5-Math-7B on GSM8K")


def fig4(panels: Panels, study: str, commit: str | None, outputs: Sequence[str | Path]) -> None:
    """Learning rate, mu-GRPO and cooling: (a) validation accuracy, (b) KL of the same runs."""
    e = panels.get("a", [])
    fig, ax = P.new_figure(10, 3.6, availability_notes(e), ncols=2)
    _acc_panel(ax[0, 0], e, panel_title("a", e), correction=True)
    _kl_panel(ax[0, 1], e, panel_title("b", e), correction=True)
    if ax[0, 1].get_legend() is not None:
        ax[0, 1].get_legend().remove()  # one legend (panel a) for both panels
    _save(fig, outputs, study, commit, "Figure 4: lower learning rate, mu-GRPO and cooling")


def fig5(panels: Panels, study: str, commit: str | None, outputs: Sequence[str | Path]) -> None:
    """Boundaries: (a) N=288, (b) MATH at doubled lr, (c) MATH at the standard lr; accuracy."""
    names = ["a", "b", "c"]
    fig, ax = P.new_figure(13, 3.4, availability_notes(_unique_entries(panels, names)), ncols=3)
    for i, name in enumerate(names):
        e = panels.get(name, [])
        lr = _common(e, "lr")
        extra = f"lr {tables.lr_text(lr)}" if lr is not None else ""
        _acc_panel(ax[0, i], e, panel_title(name, e, extra), by_seed=True, label_seed=True)
    _save(fig, outputs, study, commit, "Figure 5: boundaries")


def fig6(panels: Panels, study: str, commit: str | None, outputs: Sequence[str | Path]) -> None:
    """Cooling without the importance correction: (a) GSM8K N=96, (b) MATH N=96; no correction dashed."""
    fig, ax = P.new_figure(10, 3.4, availability_notes(_unique_entries(panels, ["a", "b"])), ncols=2)
    for i, name in enumerate(["a", "b"]):
        e = panels.get(name, [])
        _acc_panel(ax[0, i], e, panel_title(name, e), correction=True)
    _save(fig, outputs, study, commit, "Figure 6: cooling without the correction only delays collapse")


def _temperature_range(ax: Axes, entries: Sequence[RunEntry]) -> None:
    """Shade each run's per-step min-max sampler temperature over its prompts (a per-prompt
    controller samples one batch at several temperatures; the line is their mean)."""
    for settings, metrics, _ in entries:
        if metrics is None or metrics.empty or "temperature_min" not in metrics.columns:
            continue
        lo = pd.to_numeric(metrics["temperature_min"], errors="coerce").to_numpy(dtype="float64")
        hi = pd.to_numeric(metrics["temperature_max"], errors="coerce").to_numpy(dtype="float64")
        ax.fill_between(metrics["step"].to_numpy(), lo, hi, color=P.run_colour(settings), alpha=0.2, lw=0)


def fig7(panels: Panels, study: str, commit: str | None, outputs: Sequence[str | Path]) -> None:
    """Adaptive and scheduled temperature: accuracy (top) and sampler temperature used (bottom:
    the mean over the step's prompts, shaded between their min and max)."""
    fig, ax = P.new_figure(10, 5.6, availability_notes(_unique_entries(panels, ["a", "b"])), nrows=2, ncols=2)
    for i, name in enumerate(["a", "b"]):
        e = panels.get(name, [])
        _acc_panel(ax[0, i], e, panel_title(name, e), correction=True)
        axt = ax[1, i]
        plot_runs(axt, e, "temperature", lw=1.0)
        _temperature_range(axt, e)
        _refresh(axt, e)
        axt.set_xlim(0, _max_steps(e))
        axt.set_xlabel("step")
        axt.set_ylabel("sampler temperature Tb")
    _save(fig, outputs, study, commit, "Figure 7: adaptive and scheduled temperature")


FIG8_COLUMNS = (
    ("val_acc", "validation accuracy"),
    ("kl", "learner-sampler KL"),
    ("entropy", "learner entropy"),
    ("clip_frac", "length-clipped fraction"),
    ("reward", "training reward"),
    ("grad_norm", "gradient norm"),
)


def fig8(panels: Panels, study: str, commit: str | None, outputs: Sequence[str | Path]) -> None:
    """Every run at N=144 (7B): six diagnostics, line style by seed, the cut replicate dash-dotted."""
    e = panels.get("a", [])
    fig, ax = P.new_figure(12, 6.4, availability_notes(e), nrows=2, ncols=3)
    for k, (col, label) in enumerate(FIG8_COLUMNS):
        a_ = ax.flat[k]
        if col == "val_acc":
            _acc_panel(a_, e, panel_title("a", e), by_seed=True, label_seed=True)
            continue
        plot_runs(a_, e, col, by_seed=True, label_seed=True, lw=0.8)
        _refresh(a_, e)
        a_.set_xlim(0, _max_steps(e))
        a_.set_xlabel("step")
        if col == "kl":
            P.kl_axis(a_)
        else:
            a_.set_ylabel(label)
        if col == "grad_norm":
            a_.set_yscale("log")
    _save(fig, outputs, study, commit, "Figure 8: every run at refresh interval 144")


# --------------------------------------------------------------------------------------------------
# Registry and loading

TargetFn = Callable[[Panels, str, "str | None", Sequence["str | Path"]], Any]

TARGETS: dict[str, tuple[TargetFn, str, list[str]]] = {
    "fig1": (fig1, "figure", ["a", "b"]),
    "fig2": (fig2, "figure", ["a"]),
    "fig3": (fig3, "figure", ["a", "b"]),
    "fig4": (fig4, "figure", ["a"]),
    "fig5": (fig5, "figure", ["a", "b", "c"]),
    "fig6": (fig6, "figure", ["a", "b"]),
    "fig7": (fig7, "figure", ["a", "b"]),
    "fig8": (fig8, "figure", ["a"]),
    "table1": (tables.table1, "table", ["rows"]),
    "table2": (tables.table2, "table", ["rows"]),
    "table3": (tables.table3, "table", ["rows"]),
    "table4": (tables.table4, "table", ["rows"]),
}


def load_status(path: str | Path | None) -> RunStatus | None:
    """A ``status.json`` (keys complete, last_step, expected_steps, problems) as a RunStatus."""
    if path is None or not Path(path).exists():
        return None
    d = json.loads(Path(path).read_text())
    return RunStatus(
        complete=bool(d["complete"]),
        last_step=int(d["last_step"]),
        expected_steps=int(d["expected_steps"]),
        problems=list(d.get("problems", [])),
    )


def load_metrics(path: str | Path | None) -> pd.DataFrame | None:
    """A run's ``metrics.parquet`` (or .csv), or None when the path is None or absent."""
    if path is None or not Path(path).exists():
        return None
    p = Path(path)
    return pd.read_csv(p) if p.suffix == ".csv" else pd.read_parquet(p)


def load_panels(spec: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, list[RunEntry]]:
    """Turn Snakemake params (panel -> [{settings, metrics path, status path}]) into panels.

    Each file is read once even when a run appears in several panels.
    """
    cache: dict[tuple[Any, Any], tuple[pd.DataFrame | None, RunStatus | None]] = {}
    out: dict[str, list[RunEntry]] = {}
    for panel, runs in spec.items():
        out[panel] = []
        for r in runs:
            k = (r.get("metrics"), r.get("status"))
            if k not in cache:
                cache[k] = (load_metrics(k[0]), load_status(k[1]))
            out[panel].append((dict(r["settings"]), *cache[k]))
    return out


def render(target: str, panels: Panels, study: str, commit: str | None, outputs: Sequence[str | Path]) -> Any:
    """Draw or write one target. Panels the target expects but the study did not give are empty."""
    if target not in TARGETS:
        raise KeyError(f"unknown target {target!r}; allowed: {', '.join(TARGETS)}")
    fn, _, names = TARGETS[target]
    full = {n: list(panels.get(n, [])) for n in names}
    return fn(full, study, commit, outputs)


__all__ = [
    "TARGETS",
    "availability_notes",
    "fig1",
    "fig2",
    "fig3",
    "fig4",
    "fig5",
    "fig6",
    "fig7",
    "fig8",
    "load_panels",
    "load_status",
    "render",
    "run_snakemake_target",
]


def run_snakemake_target(smk: Any, kind: str) -> None:
    """Body of ``workflow/scripts/{figure,table}.py``: render ``smk.params.target`` to ``smk.output``.

    Logging and stderr go to ``smk.log[0]``; a failure is logged with its traceback there and then
    re-raised with the real stderr restored, so Snakemake reports it and the log explains it.
    """
    import logging
    import sys

    real_stderr = sys.stderr
    with open(smk.log[0], "w") as log:
        sys.stderr = log
        handler = logging.StreamHandler(log)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        logger = logging.getLogger("coolsampler")
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        try:
            target = smk.params.target
            if TARGETS[target][1] != kind:
                raise ValueError(f"{target} is a {TARGETS[target][1]}, not a {kind}")
            panels = load_panels(smk.params.panels)
            logger.info("%s: runs per panel %s", target, {p: len(r) for p, r in panels.items()})
            for note_ in availability_notes(_unique_entries(panels, list(panels))):
                logger.warning("%s: %s", target, note_)
            # The commit is read here, not passed as a param: a param would rerun every figure on each commit.
            commit = getattr(smk.params, "commit", None) or P.git_commit()
            render(target, panels, smk.params.study, commit, [str(o) for o in smk.output])
            logger.info("wrote %s", ", ".join(map(str, smk.output)))
        except Exception:
            logger.exception("rendering %s failed", getattr(smk.params, "target", "?"))
            raise
        finally:
            logger.removeHandler(handler)
            sys.stderr = real_stderr
