"""Tables 1-4 of the paper, from per-run metrics tables.

Each table function takes ``panels`` (panel name -> list of ``(settings, metrics, status)``; see
``coolsampler.figures`` for the panel names), the study name, the commit and its output paths, and
writes every path it is given by suffix:

* ``.csv``: the machine-readable table, numeric columns, one row per run (Tables 2-4) or per arm
  (Table 1), with ``complete`` and ``note`` columns;
* ``.tex``: a booktabs ``tabular`` of the paper-style display table;
* ``.md``: the same display table as a Markdown pipe table.

The display tables follow the paper's layout (seeds of one arm joined with "/", "–" for "did not
happen"). A run whose metrics are missing or whose log is incomplete is never dropped: it appears
with NaN numbers and its reason in the ``note`` column. LaTeX and Markdown are written here, not
with ``DataFrame.to_latex``/``to_markdown``, because those need jinja2/tabulate, which are not
dependencies of the light analysis core.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from coolsampler.analysis import cycle_readings, summarize_run
from coolsampler.metrics_schema import RunStatus
from coolsampler.plotting import CORRECTION_LABELS, DEFAULT_LR, tb_initial, tb_kind

RunEntry = tuple[dict[str, Any], pd.DataFrame | None, RunStatus | None]
Panels = Mapping[str, Sequence[RunEntry]]
DASH = "–"

TASK_LABELS = {"gsm8k": "GSM8K", "math": "MATH", "arith": "arith"}


# --------------------------------------------------------------------------------------------------
# Settings as the paper prints them


def model_label(settings: Mapping[str, Any]) -> str:
    """'1.5B', '7B' (Table 4's model column) from the model name."""
    from coolsampler.settings import MODELS

    m = MODELS.get(str(settings.get("model", "")))
    return m.params if m else str(settings.get("model", ""))


def task_label(settings: Mapping[str, Any]) -> str:
    return TASK_LABELS.get(str(settings.get("task", "")), str(settings.get("task", "")))


def tb_text(settings: Mapping[str, Any]) -> str:
    """Sampler temperature as in Table 4: '1.0', '0.8', and '0.8*' for a controller/schedule start."""
    x = tb_initial(settings)
    s = f"{x:.1f}" if abs(round(x, 1) - x) < 1e-9 else f"{x:g}"
    return s if tb_kind(settings) == "fixed" else s + "*"


def tl_text(settings: Mapping[str, Any]) -> str:
    tl = settings.get("Tl", 1.0)
    return "tied" if tl == "tied" else f"{float(tl):.1f}"


def lr_text(lr: float) -> str:
    s = f"{float(lr):.0e}" if float(lr) * 1e6 == round(float(lr) * 1e6) else f"{float(lr):.1e}"
    mant, exp = s.split("e")
    return f"{mant}e{int(exp)}"


def arm_label(settings: Mapping[str, Any]) -> str:
    """The 'Objective'/'Arm' text: correction, then lr and learner temperature where not standard."""
    if "correction" not in settings:  # a bare log (coolsampler analyze): name it by its path
        return str(settings.get("key", "run"))
    out = CORRECTION_LABELS.get(str(settings.get("correction")), str(settings.get("correction")))
    kind = tb_kind(settings)
    if kind != "fixed":
        out += {"linear": " + linear schedule", "kl_cooling": " + KL cooling"}.get(kind, " + controller")
        if kind == "saturation+kl":
            out += " (KL gate)"
    lr = float(settings.get("lr", DEFAULT_LR))
    if abs(lr - DEFAULT_LR) > 1e-12:
        out += f", lr {lr_text(lr)}"
    if settings.get("Tl") == "tied":
        out += ", Tl tied"
    return out


def arm_key(settings: Mapping[str, Any]) -> tuple[Any, ...]:
    """Settings that define an arm: everything but the data seed and the replicate tag."""
    return (
        settings.get("model"),
        settings.get("task"),
        int(settings.get("N", 0)),
        float(settings.get("lr", DEFAULT_LR)),
        settings.get("correction"),
        tb_kind(settings),
        repr(settings.get("Tb")),
        str(settings.get("Tl")),
        int(settings.get("steps", 0) or 0),
    )


def _arm_sort(settings: Mapping[str, Any]) -> tuple[Any, ...]:
    corr = {"tis": 0, "mu_grpo": 1, "none": 2}.get(str(settings.get("correction")), 3)
    return (
        str(settings.get("model")),
        str(settings.get("task")),
        corr,
        -float(settings.get("lr", DEFAULT_LR)),
        int(settings.get("N", 0)),
        tb_kind(settings) != "fixed",
        -tb_initial(settings),
        settings.get("Tl") == "tied",
    )


def group_arms(entries: Sequence[RunEntry]) -> list[list[RunEntry]]:
    """Entries grouped by arm, arms in the paper's order, runs in seed order within an arm."""
    groups: dict[tuple[Any, ...], list[RunEntry]] = {}
    for e in entries:
        groups.setdefault(arm_key(e[0]), []).append(e)
    arms = [
        sorted(g, key=lambda e: (int(e[0].get("seed", 0)), str(e[0].get("replicate") or "")))
        for g in groups.values()
    ]
    return sorted(arms, key=lambda g: _arm_sort(g[0][0]))


def summaries(entries: Sequence[RunEntry]) -> list[dict[str, Any]]:
    return [summarize_run(m, s, st) for s, m, st in entries]


# --------------------------------------------------------------------------------------------------
# Number formatting


def _isnan(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def f3(x: Any) -> str:
    return DASH if _isnan(x) else f"{float(x):.3f}"


def f2(x: Any) -> str:
    return DASH if _isnan(x) else f"{float(x):.2f}"


def fkl(x: Any) -> str:
    """KL with three significant figures (0.0312, 0.134, 15.6)."""
    return DASH if _isnan(x) else f"{float(x):.3g}"


def fstep(x: Any) -> str:
    return DASH if _isnan(x) else str(int(x))


def flead(x: Any) -> str:
    return DASH if _isnan(x) else f"{int(x):+d}"


def joined(values: Sequence[Any], fmt: Callable[[Any], str], *, range_from: int = 4) -> str:
    """Seed values joined with '/', or as a 'lo–hi' range for many runs (as Table 2 prints them)."""
    if not values:
        return DASH
    if len(values) >= range_from and not any(_isnan(v) for v in values):
        lo, hi = fmt(min(values)), fmt(max(values))
        return lo if lo == hi else f"{lo}{DASH}{hi}"
    return "/".join(fmt(v) for v in values)


def _notes(sums: Sequence[Mapping[str, Any]], entries: Sequence[RunEntry]) -> str:
    out = []
    for s, e in zip(sums, entries, strict=True):
        if s["note"]:
            out.append(
                f"s{e[0].get('seed')}{'_' + e[0]['replicate'] if e[0].get('replicate') else ''}: {s['note']}"
            )
    return "; ".join(out)


def _int_or_nan(x: Any) -> float:
    return np.nan if x is None else int(x)


# --------------------------------------------------------------------------------------------------
# Writers


def latex_escape(s: str) -> str:
    repl = {
        "\\": r"\textbackslash{}",
        "&": r"\&",
        "%": r"\%",
        "$": r"\$",
        "#": r"\#",
        "_": r"\_",
        "{": r"\{",
        "}": r"\}",
        "~": r"\textasciitilde{}",
        "^": r"\textasciicircum{}",
        DASH: "--",
    }
    return "".join(repl.get(c, c) for c in str(s))


def to_latex(
    display: pd.DataFrame, *, caption: str = "", label: str = "", study: str = "", commit: str = ""
) -> str:
    """A booktabs table environment; first column left-aligned, the rest centred."""
    cols = "l" + "c" * (len(display.columns) - 1)
    lines = [f"% coolsampler study {study} commit {commit}", r"\begin{table}[t]", r"\centering", r"\small"]
    lines += [rf"\begin{{tabular}}{{{cols}}}", r"\toprule"]
    lines.append(" & ".join(latex_escape(c) for c in display.columns) + r" \\")
    lines.append(r"\midrule")
    for row in display.itertuples(index=False):
        lines.append(" & ".join(latex_escape(v) for v in row) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    if caption:
        lines.append(rf"\caption{{{latex_escape(caption)}}}")
    if label:
        lines.append(rf"\label{{{label}}}")
    lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"


def to_markdown(display: pd.DataFrame) -> str:
    """A GitHub pipe table ('|' in cells escaped)."""

    def cell(v: Any) -> str:
        return str(v).replace("|", r"\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(c) for c in display.columns) + " |"]
    lines.append("|" + "|".join("---" for _ in display.columns) + "|")
    for row in display.itertuples(index=False):
        lines.append("| " + " | ".join(cell(v) for v in row) + " |")
    return "\n".join(lines) + "\n"


def write_table(
    data: pd.DataFrame,
    display: pd.DataFrame,
    outputs: Sequence[str | Path],
    *,
    title: str,
    caption: str,
    study: str,
    commit: str | None,
) -> None:
    """Write ``data`` as CSV and ``display`` as LaTeX/Markdown to each output, chosen by suffix."""
    from coolsampler.plotting import git_commit

    commit = commit or git_commit()
    for out in outputs:
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        suffix = out.suffix.lower()
        if suffix == ".csv":
            data.to_csv(out, index=False)
        elif suffix == ".tex":
            label = "tab:" + title.lower().replace(" ", "")
            out.write_text(to_latex(display, caption=caption, label=label, study=study, commit=commit))
        elif suffix == ".md":
            head = f"**{title}.** {caption}\n\n" if caption else f"**{title}.**\n\n"
            out.write_text(head + to_markdown(display) + f"\n<sub>study {study} | commit {commit}</sub>\n")
        else:
            raise ValueError(f"{out}: unsupported table format {suffix!r}; allowed: .csv, .tex, .md")


def _all_entries(panels: Panels, names: Sequence[str]) -> list[RunEntry]:
    out: list[RunEntry] = []
    for n in names:
        out.extend(panels.get(n, []))
    return out


# --------------------------------------------------------------------------------------------------
# Table 1: same budget, same seeds


def table1_frames(entries: Sequence[RunEntry]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-arm severe count, last-five mean per seed and over seeds, whole-run mean over seeds."""
    data_rows, disp_rows = [], []
    seeds_all = sorted({int(e[0].get("seed", 0)) for e in entries})
    for arm in group_arms(entries):
        s0 = arm[0][0]
        sums = summaries(arm)
        have = [s for s in sums if s["n_val"] > 0]
        severe = sum(1 for s in have if s["severe"] is not None)
        last5 = [s["last5"] for s in sums]
        per_seed = {int(e[0].get("seed", 0)): s["last5"] for e, s in zip(arm, sums, strict=True)}
        steps = int(s0.get("steps", 0) or 0)
        N = int(s0.get("N", 0))
        row: dict[str, Any] = {
            "arm": arm_label(s0),
            "model": model_label(s0),
            "task": task_label(s0),
            "Tb": tb_text(s0),
            "N": N,
            "lr": float(s0.get("lr", DEFAULT_LR)),
            "refreshes": steps // N if N else np.nan,
            "runs": len(arm),
            "degraded": severe,
            "with_metrics": len(have),
        }
        for seed in seeds_all:
            row[f"last5_s{seed}"] = per_seed.get(seed, np.nan)
        row["last5_mean"] = float(np.nanmean(last5)) if any(not _isnan(x) for x in last5) else np.nan
        wh = [s["whole"] for s in sums if not _isnan(s["whole"])]
        row["whole_mean"] = float(np.mean(wh)) if wh else np.nan
        row["complete"] = all(s["complete"] for s in sums)
        row["note"] = _notes(sums, arm)
        data_rows.append(row)
        disp_rows.append(
            {
                "Objective": row["arm"],
                "Tb": row["Tb"],
                "N": str(N),
                "Refreshes": fstep(row["refreshes"]),
                "Degraded": f"{severe}/{len(have)}",
                _T1_SEEDS: " / ".join(f3(x) for x in last5) + f" / {f3(row['last5_mean'])}",
                "Whole run": f3(row["whole_mean"]),
                "Note": row["note"],
            }
        )
    disp = pd.DataFrame(disp_rows, columns=_T1_COLS)
    # name the seeds in the header when every arm has the same ones, as the paper does ("43 / 44 / mean")
    seed_sets = {tuple(int(e[0].get("seed", 0)) for e in a) for a in group_arms(entries)}
    if len(seed_sets) == 1:
        seeds = " / ".join(map(str, next(iter(seed_sets))))
        disp = disp.rename(columns={_T1_SEEDS: f"Last five: {seeds} / mean"})
    return pd.DataFrame(data_rows), disp


_T1_SEEDS = "Last five: per seed / mean"
_T1_COLS = ["Objective", "Tb", "N", "Refreshes", "Degraded", _T1_SEEDS, "Whole run", "Note"]

TABLE1_CAPTION = (
    "Same budget, same seeds: severe-degradation count, the end metric (last-five mean) per seed and "
    "averaged, and the whole-run metric (trapezoid mean of the validations, averaged over seeds)."
)


def table1(panels: Panels, study: str, commit: str | None, outputs: Sequence[str | Path]) -> pd.DataFrame:
    """Table 1 from panel ``rows``."""
    data, disp = table1_frames(_all_entries(panels, ["rows"]))
    write_table(data, disp, outputs, title="Table 1", caption=TABLE1_CAPTION, study=study, commit=commit)
    return data


# --------------------------------------------------------------------------------------------------
# Table 2: degradation events


def outcome_text(s: Mapping[str, Any]) -> str:
    """One run's outcome in Table 2's words."""
    if s["n_val"] == 0:
        return "no data"
    if s["onset"] is None:
        return "stable"
    if s["kind"] == "transient":
        return f"transient dip at {s['onset']}"
    if not _isnan(s["final"]) and not _isnan(s["reference"]) and s["final"] >= s["reference"] - 0.05 - 1e-9:
        return "sustained, recovers later"
    return "sustained"


def table2_frames(entries: Sequence[RunEntry]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-run events (CSV) and per-arm rows in the paper's layout (display)."""
    data_rows, disp_rows = [], []
    for arm in group_arms(entries):
        s0 = arm[0][0]
        sums = summaries(arm)
        for (st, _, _), s in zip(arm, sums, strict=True):
            data_rows.append(
                {
                    "model": model_label(st),
                    "task": task_label(st),
                    "N": int(st.get("N", 0)),
                    "arm": arm_label(st),
                    "Tb": tb_text(st),
                    "seed": st.get("seed"),
                    "replicate": st.get("replicate") or "",
                    "peak": s["peak"],
                    "onset": _int_or_nan(s["onset"]),
                    "severe": _int_or_nan(s["severe"]),
                    "kind": s["kind"] or ("stable" if s["n_val"] else ""),
                    "kl_gt_1": _int_or_nan(s["kl_cross_1"]),
                    "lead": _int_or_nan(s["lead"]),
                    "final": s["final"],
                    "kl_max": s["kl_max"],
                    "outcome": outcome_text(s),
                    "complete": s["complete"],
                    "note": s["note"],
                }
            )
        outcomes = [outcome_text(s) for s in sums]
        finals = [s["final"] for s in sums]
        base = outcomes[0].split(" at ")[0] if len(set(outcomes)) == 1 else "/".join(outcomes)
        if len(set(outcomes)) == 1 and outcomes[0].startswith("transient"):
            base = "transient dip at " + "/".join(str(s["onset"]) for s in sums)
        outcome = f"{base}, end {joined(finals, f2)}"
        if any(s["onset"] is not None for s in sums) and all(s["kl_cross_1"] is None for s in sums):
            # a degradation without any KL crossing (the paper's controller run): say how high the KL got
            outcome += f" (KL max {joined([s['kl_max'] for s in sums], f2)})"
        n = len(arm)
        what = f"Tb={tb_text(s0)}" + (
            f", {n} seeds" if n > 1 and all(not e[0].get("replicate") for e in arm) else ""
        )
        if n > 1 and any(e[0].get("replicate") for e in arm):
            what += f", {n} runs"
        onsets = [s["onset"] for s in sums]
        disp_rows.append(
            {
                "Model": model_label(s0),
                "Task": task_label(s0),
                "N": str(int(s0.get("N", 0))),
                "Arm": f"{arm_label(s0)}, {what}",
                "Peak": joined([s["peak"] for s in sums], f2),
                "Onset": DASH if all(o is None for o in onsets) else "/".join(fstep(o) for o in onsets),
                "KL > 1": DASH
                if all(s["kl_cross_1"] is None for s in sums)
                else "/".join(fstep(s["kl_cross_1"]) for s in sums),
                "Lead": DASH
                if all(s["lead"] is None for s in sums)
                else "/".join(flead(s["lead"]) for s in sums),
                "Outcome": outcome,
                "Note": _notes(sums, arm),
            }
        )
    return pd.DataFrame(data_rows), pd.DataFrame(disp_rows)


TABLE2_CAPTION = (
    "Degradation events under the fixed criteria of Section 2. Onset: first validation point <= running "
    "max - 0.10 after step 30; KL > 1: first step with learner-sampler KL above one nat per token; lead = "
    "onset - KL > 1. Runs with no onset are listed as stable."
)


def table2(panels: Panels, study: str, commit: str | None, outputs: Sequence[str | Path]) -> pd.DataFrame:
    """Table 2 from panel ``rows`` (degrading and stable runs alike; stable arms say 'stable')."""
    data, disp = table2_frames(_all_entries(panels, ["rows"]))
    write_table(data, disp, outputs, title="Table 2", caption=TABLE2_CAPTION, study=study, commit=commit)
    return data


# --------------------------------------------------------------------------------------------------
# Table 3: cycle-aligned readings


def run_name(settings: Mapping[str, Any]) -> str:
    """'7B, N=144, seed 1 (cut)' as Table 3 names runs."""
    N, seed = int(settings.get("N", 0)), settings.get("seed")
    out = f"{model_label(settings)}, {task_label(settings)}, N={N}, seed {seed}"
    if settings.get("correction") not in (None, "tis"):
        out += f", {CORRECTION_LABELS.get(str(settings['correction']), settings['correction'])}"
    if settings.get("replicate"):
        out += f" ({settings['replicate']})"
    return out


def table3_frames(entries: Sequence[RunEntry], cycles: int = 2) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per run: KL and clip at cycle ages 55-65, entropy over the first five steps, cycles 1 and 2."""
    data_rows, disp_rows = [], []
    for arm in group_arms(entries):
        for st, m, status in arm:
            N = int(st.get("N", 0))
            cr = cycle_readings(m, N).set_index("cycle") if N else pd.DataFrame()
            sm = summarize_run(m, st, status)
            row: dict[str, Any] = {"run": run_name(st), "key": st.get("key", ""), "Tb": tb_text(st)}
            partial = []
            for c in range(1, cycles + 1):
                got = c in cr.index
                for col in ("kl", "entropy_start", "clip"):
                    row[f"{col}_c{c}"] = float(cr.loc[c, col]) if got else np.nan
                row[f"n_mid_c{c}"] = int(cr.loc[c, "n_mid"]) if got else 0
                row[f"n_start_c{c}"] = int(cr.loc[c, "n_start"]) if got else 0
                if m is not None and (row[f"n_mid_c{c}"] < 11 or row[f"n_start_c{c}"] < 5):
                    partial.append(f"cycle {c} window partial")
            row["complete"] = sm["complete"]
            row["note"] = "; ".join([x for x in [sm["note"], *partial] if x])
            data_rows.append(row)

            def pair(col: str, fmt: Callable[[Any], str], r: dict[str, Any] = row) -> str:
                return " / ".join(fmt(r[f"{col}_c{c}"]) for c in range(1, cycles + 1))

            disp_rows.append(
                {
                    "Run": row["run"],
                    "Tb": row["Tb"],
                    "KL": pair("kl", fkl),
                    "Entropy at start": pair("entropy_start", f2),
                    "Clip": pair("clip", f2),
                    "Note": row["note"],
                }
            )
    return pd.DataFrame(data_rows), pd.DataFrame(disp_rows)


TABLE3_CAPTION = (
    "Cycle-aligned readings. KL: learner-sampler KL averaged over cycle ages 55-65; entropy: learner "
    "entropy averaged over the first five steps of the cycle; clip: fraction of sampled responses at the "
    "length limit at ages 55-65. Cycle 1 / cycle 2."
)


def table3(panels: Panels, study: str, commit: str | None, outputs: Sequence[str | Path]) -> pd.DataFrame:
    """Table 3 from panel ``rows``."""
    data, disp = table3_frames(_all_entries(panels, ["rows"]))
    write_table(data, disp, outputs, title="Table 3", caption=TABLE3_CAPTION, study=study, commit=commit)
    return data


# --------------------------------------------------------------------------------------------------
# Table 4: every run


def table4_frames(entries: Sequence[RunEntry]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every run's settings and numbers; missing runs keep their row with NaN and a note."""
    data_rows, disp_rows = [], []
    for arm in group_arms(entries):
        for (st, _, _), s in zip(arm, summaries(arm), strict=True):
            row = {
                "key": st.get("key", ""),
                "model": model_label(st),
                "task": task_label(st),
                "N": int(st.get("N", 0)),
                "lr": float(st.get("lr", DEFAULT_LR)),
                "correction": st.get("correction"),
                "Tb": tb_text(st),
                "Tl": tl_text(st),
                "seed": st.get("seed"),
                "replicate": st.get("replicate") or "",
                "peak": s["peak"],
                "final": s["final"],
                "onset": _int_or_nan(s["onset"]),
                "severe": _int_or_nan(s["severe"]),
                "kl_gt_1": _int_or_nan(s["kl_cross_1"]),
                "kl_max": s["kl_max"],
                "last_step": _int_or_nan(s["last_step"]),
                "complete": s["complete"],
                "note": s["note"],
            }
            data_rows.append(row)
            disp_rows.append(
                {
                    "Model": row["model"],
                    "Task": row["task"],
                    "N": str(row["N"]),
                    "lr": lr_text(row["lr"]),
                    "Correction": {"tis": "TIS", "mu_grpo": "mu-GRPO"}.get(
                        str(row["correction"]), str(row["correction"])
                    ),
                    "Tb": row["Tb"],
                    "Tl": row["Tl"],
                    "Seed": f"{row['seed']}" + (f" {row['replicate']}" if row["replicate"] else ""),
                    "Peak": f3(row["peak"]),
                    "Final": f3(row["final"]),
                    "Onset": fstep(row["onset"]),
                    "Severe": fstep(row["severe"]),
                    "KL > 1": fstep(row["kl_gt_1"]),
                    "KL max": fkl(row["kl_max"]),
                    "Complete": "yes" if row["complete"] else "no",
                    "Note": row["note"],
                }
            )
    return pd.DataFrame(data_rows), pd.DataFrame(disp_rows)


TABLE4_CAPTION = (
    "Every run. Peak and final validation accuracy, degradation onset (<= running max - 0.10), severe "
    "degradation (<= max - 0.15), first step with learner-sampler KL above 1 nat, and KL maximum. "
    "Tb: sampler temperature (* = initial value of a controller/schedule); Tl: learner temperature."
)


def table4(panels: Panels, study: str, commit: str | None, outputs: Sequence[str | Path]) -> pd.DataFrame:
    """Table 4 from panel ``rows``."""
    data, disp = table4_frames(_all_entries(panels, ["rows"]))
    write_table(data, disp, outputs, title="Table 4", caption=TABLE4_CAPTION, study=study, commit=commit)
    return data


__all__ = [
    "Panels",
    "RunEntry",
    "table1",
    "table1_frames",
    "table2",
    "table2_frames",
    "table3",
    "table3_frames",
    "table4",
    "table4_frames",
    "to_latex",
    "to_markdown",
    "write_table",
]
