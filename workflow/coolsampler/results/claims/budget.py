"""The staleness budget (Section 3.3), from observed onsets.

Owns ``staleness_budget``: per model, task, lr, correction, Tb and Tl, the staleness at onset of the
degrading runs (``spec.guard.staleness`` at the onset step) and the refresh interval that implies.
Why apart: it is a table over a study's runs, not a claim; the report prints it beside the claims
(Section 3.2: KL extrapolation does not forecast the cliff, so the budget comes from onsets seen).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from coolsampler.results.claims.measures import RunData, _order, m_last_step, m_onset, staleness_at
from coolsampler.spec.study import Run, Temperature

BUDGET_COLUMNS = [
    "model", "task", "lr", "correction", "Tb", "Tl", "runs", "N", "degrading", "staleness_at_onset",
    "first_cycle_safe_N_below", "safe_N_below", "passed_first_refresh",
]  # fmt: skip


def staleness_budget(runs: Sequence[Run], data: Mapping[str, RunData]) -> pd.DataFrame:
    """Per model, task, lr, correction, Tb and Tl: the staleness at onset of the degrading runs and
    the refresh interval that implies.

    ``staleness_at_onset``: the staleness at the onset step (``spec.guard.staleness``), per degrading run;
    ``first_cycle_safe_N_below``: the smallest of those among onsets in the first cycle, sampled from
    the initial policy (the budget Section 3.3 predicts from: an interval N keeps the staleness below
    N, so N under this value was not seen to degrade); ``safe_N_below``: the same over every cycle
    (later cycles start from a sharper policy; the paper's 7B N=144 runs degrade in the second cycle
    at lower staleness); ``passed_first_refresh``: the largest N among runs with no onset before their
    first refresh (an interval seen to be survived once).
    """
    groups: dict[tuple[Any, ...], list[RunData]] = {}
    for r in runs:
        if r.key in data and data[r.key].metrics is not None:
            tl = "tied" if r.Tl == "tied" else Temperature("fixed", float(r.Tl)).short()
            groups.setdefault((r.model, r.task, r.lr, r.correction, r.Tb.short(), tl), []).append(data[r.key])
    rows = []
    for (model, task, lr, corr, tb, tl), rds in sorted(groups.items(), key=lambda kv: [str(x) for x in kv[0]]):
        onsets = [(rd, m_onset(rd)) for rd in sorted(rds, key=lambda rd: (rd.run.N, _order(rd)))]
        stale = [(rd.run.N, staleness_at(rd, o), o <= rd.run.N) for rd, o in onsets if o is not None]
        first = [st for _, st, in_first in stale if in_first]
        survived = [
            rd.run.N
            for rd, _ in onsets
            if m_onset(rd, until=rd.run.N) is None and m_last_step(rd) and (m_last_step(rd) or 0) >= rd.run.N
        ]
        rows.append(
            {
                "model": model,
                "task": task,
                "lr": lr,
                "correction": corr,
                "Tb": tb,
                "Tl": tl,
                "runs": len(rds),
                "N": "/".join(str(n) for n in sorted({rd.run.N for rd in rds})),
                "degrading": len(stale),
                "staleness_at_onset": "/".join(f"{st}(N{n})" for n, st, _ in stale) or "–",
                "first_cycle_safe_N_below": min(first) if first else None,
                "safe_N_below": min(st for _, st, _ in stale) if stale else None,
                "passed_first_refresh": max(survived) if survived else None,
            }
        )
    df = pd.DataFrame(rows, columns=BUDGET_COLUMNS)
    for col in ("first_cycle_safe_N_below", "safe_N_below", "passed_first_refresh"):
        if col in df:
            df[col] = df[col].astype("Int64")  # steps, with "none" where no run says
    return df


__all__ = ["BUDGET_COLUMNS", "staleness_budget"]
