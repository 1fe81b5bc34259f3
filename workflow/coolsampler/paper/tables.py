"""Tables 1-4 of the paper, from per-run metrics tables.

Each table function takes ``panels`` (panel name -> list of ``(settings, metrics, status)``; see
``coolsampler.spec.targets`` for the panel names), the provenance record, its output paths and the
target's options, and writes every path it is given by suffix:

* ``.csv``: the machine-readable table, numeric columns, one row per run (Tables 2-4) or per arm
  (Table 1), with ``complete`` and ``note`` columns;
* ``.tex``: a booktabs ``tabular`` of the paper-style display table;
* ``.md``: the same display table as a Markdown pipe table.

The display tables follow the paper's layout (seeds of one arm joined with "/", "–" for "did not
happen"). A run whose metrics are missing or whose log is incomplete is never dropped: it appears
with NaN numbers and its reason in the ``note`` column. This module decides the rows; the bytes are
``coolsampler.paper.writers``'; the words for settings are ``coolsampler.paper.labels``'.

Imports pandas, never matplotlib, verl, vLLM or torch (a table job loads no drawing code).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from coolsampler.paper.labels import (
    DASH,
    DEFAULT_LR,
    arm_label,
    lr_text,
    model_label,
    model_task_labels,
    run_name,
    seed_text,
    table_correction_label,
    task_label,
    tb_initial,
    tb_kind,
    tb_text,
    tl_text,
)
from coolsampler.paper.writers import write_table
from coolsampler.results import analysis as A
from coolsampler.results.analysis import cycle_readings, recovers_later, summarize_run
from coolsampler.results.guard import run_refreshes
from coolsampler.spec import corrections
from coolsampler.spec.metrics_schema import RunStatus
from coolsampler.spec.provenance import Provenance
from coolsampler.spec.settings import kl_above_text, nat_text

RunEntry = tuple[dict[str, Any], pd.DataFrame | None, RunStatus | None]
Panels = Mapping[str, Sequence[RunEntry]]


# --------------------------------------------------------------------------------------------------
# Arms: runs that differ only by data seed (and replicate tag)


def arm_key(settings: Mapping[str, Any]) -> tuple[Any, ...]:
    """Settings that define an arm: everything but the data seed and the replicate tag (the settings Table 2
    compares runs by, ``comparison_key``, then the temperatures, the length and the refresh)."""
    return (
        *comparison_key(settings),
        tb_kind(settings),
        repr(settings.get("Tb")),
        str(settings.get("Tl")),
        int(settings.get("steps", 0) or 0),
        # how the sampler is refreshed: two guards (or schedules) at one N are two arms
        repr(settings.get("guard")),
        repr(settings.get("schedule")),
        # a user's own logs (coolsampler analyze): runs pool only as the seeds of one named arm
        settings.get("group"),
    )


def _arm_sort(settings: Mapping[str, Any]) -> tuple[Any, ...]:
    return (
        str(settings.get("model")),
        str(settings.get("task")),
        corrections.order(settings.get("correction")),
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
        sorted(g, key=lambda e: (int(e[0].get("seed", 0)), str(e[0].get("replicate") or ""))) for g in groups.values()
    ]
    return sorted(arms, key=lambda g: _arm_sort(g[0][0]))


def summaries(entries: Sequence[RunEntry]) -> list[dict[str, Any]]:
    return [summarize_run(m, s, st) for s, m, st in entries]


# --------------------------------------------------------------------------------------------------
# Number formatting


def _last_step(metrics: pd.DataFrame | None) -> int:
    """The last step a log records (0 without one)."""
    return int(metrics["step"].max()) if metrics is not None and len(metrics) else 0


def is_missing(x: Any) -> bool:
    """None or NaN: a number the run did not give ("did not happen", "not measurable")."""
    return x is None or (isinstance(x, float) and math.isnan(x))


def _cell(text: Callable[[Any], str]) -> Callable[[Any], str]:
    """A cell's formatter: the dash where the value is missing ("did not happen"), else ``text`` of it."""
    return lambda x: DASH if is_missing(x) else text(x)


f3 = _cell(lambda x: f"{float(x):.3f}")
f2 = _cell(lambda x: f"{float(x):.2f}")
fkl = _cell(lambda x: f"{float(x):.3g}")  # KL with three significant figures (0.0312, 0.134, 15.6)
fstep = _cell(lambda x: str(int(x)))
flead = _cell(lambda x: f"{int(x):+d}")


def joined(values: Sequence[Any], fmt: Callable[[Any], str], *, range_from: int = 4) -> str:
    """Seed values joined with '/', or as a 'lo–hi' range for many runs (as Table 2 prints them)."""
    if not values:
        return DASH
    if len(values) >= range_from and not any(is_missing(v) for v in values):
        lo, hi = fmt(min(values)), fmt(max(values))
        return lo if lo == hi else f"{lo}{DASH}{hi}"
    return "/".join(fmt(v) for v in values)


def _notes(sums: Sequence[Mapping[str, Any]], entries: Sequence[RunEntry]) -> str:
    out = []
    for s, e in zip(sums, entries, strict=True):
        if s["note"]:
            if e[0].get("run") and len(entries) == 1:  # a user's own run on its own row: the row names it
                out.append(s["note"])
                continue
            who = e[0]["run"] if e[0].get("run") and not e[0].get("seed_known", True) else f"s{e[0].get('seed')}"
            out.append(f"{who}{'_' + e[0]['replicate'] if e[0].get('replicate') else ''}: {s['note']}")
    return "; ".join(out)


def _int_or_nan(x: Any) -> float:
    return np.nan if x is None else int(x)


def _run_columns(st: Mapping[str, Any], **arm: Any) -> dict[str, Any]:
    """The CSV columns that name a run (Tables 2 and 4): its key and settings, ``arm`` (what each table
    names the arm by) after the learning rate."""
    return {
        "key": st.get("key", ""),
        "model": model_label(st),
        "task": task_label(st),
        "N": int(st.get("N", 0)),
        "lr": float(st.get("lr", DEFAULT_LR)),
        **arm,
        "Tb": tb_text(st),
        "Tl": tl_text(st),
        "seed": st.get("seed"),
        "replicate": st.get("replicate") or "",
    }


Frames = Callable[[Sequence[RunEntry]], tuple[pd.DataFrame, pd.DataFrame]]  # runs -> (data, display)


def rows_table(
    panels: Panels,
    provenance: Provenance,
    outputs: Sequence[str | Path],
    options: Mapping[str, Any] | None = None,
    *,
    frames: Frames,
    title: str,
    caption: str,
) -> pd.DataFrame:
    """A table target (the interface of ``coolsampler.paper.figures``) from its panel ``rows``: ``frames``
    decides the data (the CSV, returned) and the display (TeX, Markdown, HTML), ``writers`` the bytes."""
    data, disp = frames(list(panels.get("rows", [])))
    write_table(data, disp, outputs, title=title, caption=caption, provenance=provenance)
    return data


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
            # what the logs record (a guard's or a schedule's), else the fixed gate's count over the run's
            # length (unknown for a bare log: its last logged step)
            "refreshes": float(np.mean([run_refreshes(e[1], steps or _last_step(e[1]), N) for e in arm]))
            if N
            else np.nan,
            "runs": len(arm),
            "degraded": severe,
            "with_metrics": len(have),
        }
        for seed in seeds_all:
            row[f"last5_s{seed}"] = per_seed.get(seed, np.nan)
        row["last5_mean"] = float(np.nanmean(last5)) if any(not is_missing(x) for x in last5) else np.nan
        wh = [s["whole"] for s in sums if not is_missing(s["whole"])]
        row["whole_mean"] = float(np.mean(wh)) if wh else np.nan
        row["complete"] = all(s["complete"] for s in sums)
        row["note"] = _notes(sums, arm)
        data_rows.append(row)
        disp_rows.append(
            {
                "Objective": row["arm"],
                "Tb": row["Tb"],
                "N": str(N),
                "Refreshes": f"{row['refreshes']:.1f}"
                if not is_missing(row["refreshes"]) and row["refreshes"] % 1
                else fstep(row["refreshes"]),
                "Degraded": f"{severe}/{len(have)}",
                _T1_SEEDS: " / ".join(f3(x) for x in last5) + f" / {f3(row['last5_mean'])}",
                "Whole run": f3(row["whole_mean"]),
                "Note": row["note"],
            }
        )
    disp = pd.DataFrame(disp_rows, columns=_T1_COLS)
    # name the seeds in the header when every arm has the same ones, as the paper does ("43 / 44 / mean");
    # runs whose seeds nothing says (a user's own logs) are runs, not seeds
    seed_sets = {tuple(int(e[0].get("seed", 0)) for e in a) for a in group_arms(entries)}
    if not all(e[0].get("seed_known", True) for e in entries):
        disp = disp.rename(columns={_T1_SEEDS: "Last five: per run / mean"})
    elif len(seed_sets) == 1:
        seeds = " / ".join(map(str, next(iter(seed_sets))))
        disp = disp.rename(columns={_T1_SEEDS: f"Last five: {seeds} / mean"})
    return pd.DataFrame(data_rows), disp


_T1_SEEDS = "Last five: per seed / mean"
_T1_COLS = ["Objective", "Tb", "N", "Refreshes", "Degraded", _T1_SEEDS, "Whole run", "Note"]

TABLE1_CAPTION = (
    "Same budget, same seeds: severe-degradation count, the end metric (last-five mean) per seed and "
    "averaged, and the whole-run metric (trapezoid mean of the validations, averaged over seeds)."
)


table1 = partial(rows_table, frames=table1_frames, title="Table 1", caption=TABLE1_CAPTION)


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
    if recovers_later(s["final"], s["reference"]):
        return "sustained, recovers later"
    return "sustained"


def comparison_key(settings: Mapping[str, Any]) -> tuple[Any, ...]:
    """Runs Table 2 compares side by side: same model, task, N, learning rate and correction.

    Within such a group only the sampler temperature (fixed, schedule or controller), the learner
    temperature and the seed differ, which is the comparison Table 2's rows make (at N=192: Tb 1.0,
    0.8, 0.9 and the controller).
    """
    return (
        settings.get("model"),
        settings.get("task"),
        int(settings.get("N", 0)),
        float(settings.get("lr", DEFAULT_LR)),
        settings.get("correction"),
    )


def degrading_groups(entries: Sequence[RunEntry]) -> list[RunEntry]:
    """The runs Table 2 lists, decided from the data: every run with a degradation onset under the
    Section 2 criteria, plus the runs it is compared with (same ``comparison_key``), which the table
    lists as stable where they are. A group in which no run degrades is not listed. A run without
    validation data cannot be decided and is listed too (outcome 'no data'), so a missing run is
    never silently counted as stable."""
    sums = {id(e): summarize_run(e[1], e[0], e[2]) for e in entries}
    bad = {comparison_key(e[0]) for e in entries if sums[id(e)]["onset"] is not None}
    return [e for e in entries if comparison_key(e[0]) in bad or sums[id(e)]["n_val"] == 0]


def table2_frames(entries: Sequence[RunEntry]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-run events (CSV) and per-arm rows in the paper's layout (display), for every group of
    ``degrading_groups``: onset, both KL crossings (``KL_EARLY_NAT``, ``KL_LEAD_NAT``) and the lead of the later one."""
    data_rows, disp_rows = [], []
    for arm in group_arms(degrading_groups(entries)):
        s0 = arm[0][0]
        sums = summaries(arm)
        for (st, _, _), s in zip(arm, sums, strict=True):
            data_rows.append(
                {
                    **_run_columns(st, arm=arm_label(st)),
                    "degrades": s["onset"] is not None,
                    "peak": s["peak"],
                    "onset": _int_or_nan(s["onset"]),
                    "severe": _int_or_nan(s["severe"]),
                    "kind": s["kind"] or ("stable" if s["n_val"] else ""),
                    "kl_gt_01": _int_or_nan(s["kl_cross_01"]),
                    "kl_gt_1": _int_or_nan(s["kl_cross_1"]),
                    "lead": _int_or_nan(s["lead"]),
                    "lead_01": _int_or_nan(None if s["onset"] is None or s["kl_cross_01"] is None
                                           else s["onset"] - s["kl_cross_01"]),
                    "final": s["final"],
                    "kl_max": s["kl_max"],
                    "outcome": outcome_text(s),
                    "complete": s["complete"],
                    "note": s["note"],
                }
            )  # fmt: skip
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
        what = f"Tb={tb_text(s0)}" + (f", {n} seeds" if n > 1 and all(not e[0].get("replicate") for e in arm) else "")
        if n > 1 and any(e[0].get("replicate") for e in arm):
            what += f", {n} runs"

        def per_run(field: str, fmt: Callable[[Any], str], sums: list[dict[str, Any]] = sums) -> str:
            vals = [s[field] for s in sums]
            return DASH if all(v is None for v in vals) else "/".join(fmt(v) for v in vals)

        disp_rows.append(
            {
                "Model": model_label(s0),
                "Task": task_label(s0),
                "N": str(int(s0.get("N", 0))),
                "Arm": f"{arm_label(s0)}, {what}",
                "Peak": joined([s["peak"] for s in sums], f2),
                "Onset": per_run("onset", fstep),
                kl_above_text(A.KL_EARLY_NAT): per_run("kl_cross_01", fstep),
                kl_above_text(A.KL_LEAD_NAT): per_run("kl_cross_1", fstep),
                "Lead": per_run("lead", flead),
                "Outcome": outcome,
                "Note": _notes(sums, arm),
            }
        )
    return pd.DataFrame(data_rows), pd.DataFrame(disp_rows)


TABLE2_CAPTION = (
    "Degradation events under the fixed criteria of Section 2, for every run that degrades and the runs "
    "of the same model, task, N, learning rate and correction it is compared with. Onset: first "
    f"validation point {A.ONSET_TEXT}; {kl_above_text(A.KL_EARLY_NAT)} / {kl_above_text(A.KL_LEAD_NAT)}: "
    "first step with "
    f"learner-sampler KL (verl rollout_corr/kl, k1) above {A.KL_EARLY_NAT:g} / "
    f"{nat_text(A.KL_LEAD_NAT)} per token; lead = onset - {kl_above_text(A.KL_LEAD_NAT)} "
    "(positive: KL crossed first). Runs with no onset are listed as stable."
)


table2 = partial(rows_table, frames=table2_frames, title="Table 2", caption=TABLE2_CAPTION)


# --------------------------------------------------------------------------------------------------
# Table 3: cycle-aligned readings

T3_READINGS = ("kl", "entropy_start", "clip", "clip_cycle", "reward_cycle")
MERGE_SEEDS_FROM = 3  # an arm of >= 3 seeds (no replicate) is one row with ranges, as the paper's 1.5B row


def _table3_sort(arm: Sequence[RunEntry]) -> tuple[Any, ...]:
    """Table 3's order: larger model first, then cooled before uncooled, then the remaining settings."""
    s = arm[0][0]
    size = {"7B": 0, "1.5B": 1}.get(model_label(s), 2)
    return (size, str(s.get("task")), int(s.get("N", 0)), tb_initial(s), _arm_sort(s))


def table3_frames(entries: Sequence[RunEntry], cycles: int = 2) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per run (CSV) and per row (display): KL and clip at cycle ages 55-65, entropy over the first
    five steps, clip fraction and training reward over the whole cycle; cycles 1 and 2.

    Display: an arm of ``MERGE_SEEDS_FROM`` or more seeds is one row, each reading a 'lo–hi' range
    over its seeds (the paper's '1.5B, N=192, 3 seeds' row); smaller arms and replicates are one row
    per run (the 7B rows, where the text discusses single seeds).
    """
    data_rows, disp_rows = [], []
    for arm in sorted(group_arms(entries), key=_table3_sort):
        arm_rows = []
        for st, m, status in arm:
            N = int(st.get("N", 0))
            cr = cycle_readings(m, N).set_index("cycle") if N else pd.DataFrame()
            sm = summarize_run(m, st, status)
            row: dict[str, Any] = {"run": run_name(st), "key": st.get("key", ""), "Tb": tb_text(st)}
            partial = []
            for c in range(1, cycles + 1):
                got = c in cr.index
                for col in T3_READINGS:
                    row[f"{col}_c{c}"] = float(cr.loc[c, col]) if got else np.nan
                row[f"n_mid_c{c}"] = int(cr.loc[c, "n_mid"]) if got else 0
                row[f"n_start_c{c}"] = int(cr.loc[c, "n_start"]) if got else 0
                if m is not None and (row[f"n_mid_c{c}"] < 11 or row[f"n_start_c{c}"] < 5):
                    partial.append(f"cycle {c} window partial")
            row["complete"] = sm["complete"]
            row["note"] = "; ".join([x for x in [sm["note"], *partial] if x])
            data_rows.append(row)
            arm_rows.append(row)
        merge = len(arm) >= MERGE_SEEDS_FROM and not any(e[0].get("replicate") for e in arm)
        groups = [arm_rows] if merge else [[r] for r in arm_rows]
        for rows in groups:
            s0 = arm[0][0]
            name = rows[0]["run"]
            if merge:
                name = ", ".join([*model_task_labels(s0), f"N={int(s0.get('N', 0))}, {len(rows)} seeds"])
                if not corrections.is_standard(s0.get("correction")):
                    name += f", {arm_label(s0)}"

            def pair(col: str, fmt: Callable[[Any], str], rows: list[dict[str, Any]] = rows) -> str:
                return " / ".join(
                    joined([r[f"{col}_c{c}"] for r in rows], fmt, range_from=2) for c in range(1, cycles + 1)
                )

            notes = [f"{r['key'].rsplit('_', 1)[-1]}: {r['note']}" if merge else r["note"] for r in rows if r["note"]]
            disp_rows.append(
                {
                    "Run": name,
                    "Tb": rows[0]["Tb"],
                    "KL": pair("kl", fkl),
                    "Entropy at start": pair("entropy_start", f2),
                    "Clip": pair("clip", f2),
                    "Clip, whole cycle": pair("clip_cycle", f2),
                    "Reward, whole cycle": pair("reward_cycle", f2),
                    "Note": "; ".join(notes),
                }
            )
    return pd.DataFrame(data_rows), pd.DataFrame(disp_rows)


TABLE3_CAPTION = (
    "Cycle-aligned readings. KL: learner-sampler KL (verl rollout_corr/kl, k1) averaged over cycle ages "
    "55-65; entropy: learner entropy averaged over the first five steps of the cycle; clip: fraction of "
    "sampled responses at the configured length limit at ages 55-65; clip and reward, whole cycle: the "
    "same fraction and the mean training reward over every step of the cycle (Sec 3.3). Cycle 1 / cycle "
    "2; a row of several seeds gives the range over them."
)


table3 = partial(rows_table, frames=table3_frames, title="Table 3", caption=TABLE3_CAPTION)


# --------------------------------------------------------------------------------------------------
# Table 4: every run

_REPLICATE_ORDER = {None: 0, "": 0, "cut": 1, "rerun": 2}


def table4_order(settings: Mapping[str, Any]) -> tuple[Any, ...]:
    """Appendix D's row order, read off its rendered rows (1.5B GSM8K: N=64 no IS s1; then N=96 TIS
    Tb 0.8 s1, Tb 0.8 tied s1, Tb 0.8 s43, s44; then Tb 1.0 s1): model size, task, N, learning rate,
    correction (TIS first), fixed temperatures ascending before schedules and controllers, seed,
    learner at 1 before tied, the full run before its replicates. Where the rendered rows do not
    decide (lr, mu-GRPO against no IS, controllers) the order is this function's choice.
    """
    size = {"1.5B": 0, "7B": 1}.get(model_label(settings), 2)
    return (
        size,
        str(settings.get("task")),
        int(settings.get("N", 0)),
        float(settings.get("lr", DEFAULT_LR)),
        corrections.order(settings.get("correction")),
        tb_kind(settings) != "fixed",
        tb_initial(settings),
        tb_kind(settings),
        int(settings.get("seed", 0) or 0),
        settings.get("Tl") == "tied",
        _REPLICATE_ORDER.get(settings.get("replicate"), 3),
    )


def table4_frames(entries: Sequence[RunEntry]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every run's settings and numbers, in ``table4_order``; missing runs keep their row with NaN
    and a note. Beyond the paper's columns: the KL at Figure 2's fixed step (for every temperature,
    Sec 4 quotes 0.7 and 0.6), the KL to the initial policy at step 90 (Sec 3.2), and the last-five
    and whole-run means (Sec 3.3, Sec 4), which the text quotes for runs Table 1 does not hold."""
    data_rows, disp_rows = [], []
    ordered = sorted(entries, key=lambda e: table4_order(e[0]))
    for (st, _, _), s in zip(ordered, summaries(ordered), strict=True):
        row = {
            **_run_columns(st, correction=st.get("correction")),
            "peak": s["peak"],
            "final": s["final"],
            "onset": _int_or_nan(s["onset"]),
            "severe": _int_or_nan(s["severe"]),
            "kl_gt_1": _int_or_nan(s["kl_cross_1"]),
            "kl_max": s["kl_max"],
            "kl_fixed_step": _int_or_nan(s["kl_fixed_step"]),
            "kl_fixed": s["kl_fixed"],
            "kl_to_init_90": s["kl_to_init_90"],
            "last5": s["last5"],
            "whole": s["whole"],
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
                "Correction": table_correction_label(row["correction"]),
                "Tb": row["Tb"],
                "Tl": row["Tl"],
                "Seed": seed_text(st),
                "Peak": f3(row["peak"]),
                "Final": f3(row["final"]),
                "Onset": fstep(row["onset"]),
                "Severe": fstep(row["severe"]),
                kl_above_text(A.KL_LEAD_NAT): fstep(row["kl_gt_1"]),
                "KL max": fkl(row["kl_max"]),
                "KL at 110/60": fkl(row["kl_fixed"]),
                "KL to init at 90": fkl(row["kl_to_init_90"]),
                "Last five": f3(row["last5"]),
                "Whole run": f3(row["whole"]),
                "Complete": "yes" if row["complete"] else "no",
                "Note": row["note"],
            }
        )
    return pd.DataFrame(data_rows), pd.DataFrame(disp_rows)


TABLE4_CAPTION = (
    f"Every run. Peak and final validation accuracy, degradation onset ({A.ONSET_TEXT}), severe "
    f"degradation ({A.SEVERE_TEXT}), first step with learner-sampler KL above {nat_text(A.KL_LEAD_NAT)}, "
    "and KL maximum (KL: verl rollout_corr/kl, k1). Tb: sampler temperature (* = initial value of a "
    f"controller/schedule); Tl: learner temperature. Added columns: KL at {A.KL_STEP_TEXT}, learner KL to "
    "the initial policy at step 90, last-five and whole-run validation means."
)


table4 = partial(rows_table, frames=table4_frames, title="Table 4", caption=TABLE4_CAPTION)
