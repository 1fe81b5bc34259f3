"""Evaluation: one verdict per claim, from the runs of a study and the data of those that have logs.

Owns the verdicts (``VERDICTS``), ``Result``, the dry listing (``plan``: which runs would check each
claim) and ``evaluate``/``evaluate_claim``: select the runs, say "not run" where one has no logs or
never logged a column the measure reads, measure each run (``measures``), reduce and compare
(``judge``), and say "incomplete" where a run stopped early. Why apart: it is the one place that puts
the claims file, the measures and the judging together.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from coolsampler.results.claims.claims_file import ClaimError, Claims, select
from coolsampler.results.claims.judge import agrees, count_bound, frontier_N, realization_rate, reduce_values
from coolsampler.results.claims.measures import PAIRED, QUANTITIES, RunData, _order, unlogged
from coolsampler.spec.metrics_schema import missing_text
from coolsampler.spec.study import Run

VERDICTS = ("reproduced", "differs", "not run", "incomplete", "reported")
# The reason of a claim that is "not run" because its runs are here but it cannot be judged on them (reduce
# one over two runs): the claims file is right for the paper's study, not for this set of runs.
UNJUDGED = "cannot be judged on these runs"


@dataclass
class Result:
    claim: dict[str, Any]
    verdict: str
    value: Any = None
    runs: list[str] = field(default_factory=list)
    versus: list[str] = field(default_factory=list)
    reason: str = ""
    # a count claim ("in at least 3 of 4 seeds"): the values it counted, one per run or seed pair, so that
    # a reader sees how far each is from the bound and not only how many meet it
    counted: list[Any] | None = None
    # a realizations claim: per arm (its runs, then versus), (k, n, lower, upper): the events, the
    # realizations measured and the exact binomial interval of the event's probability
    rates: list[tuple[int, int, float, float]] | None = None


def plan(claims: Claims, runs: Sequence[Run]) -> dict[str, list[str]]:
    """Claim id -> the keys of the runs that would check it (runs and versus): the dry listing."""
    out = {}
    for c in claims.claims:
        keys = [r.key for r in select(runs, claims.selector(c["runs"]))]
        for fld in ("versus", "also"):
            if fld in c["quantity"]:
                keys += [r.key for r in select(runs, claims.selector(c["quantity"][fld]))]
        out[c["id"]] = list(dict.fromkeys(keys))
    return out


def evaluate_claim(claims: Claims, c: Mapping[str, Any], data: Mapping[str, RunData], runs: Sequence[Run]) -> Result:
    """One claim's verdict and value from the runs' data (``data``: key -> RunData, runs with logs)."""
    q = c["quantity"]
    mine = select(runs, claims.selector(c["runs"]))
    theirs = select(runs, claims.selector(q["versus"])) if "versus" in q else []
    # a paired measure that reads a third run of each seed (the fresh control beside a stale pair)
    third = select(runs, claims.selector(q["also"])) if "also" in q else []
    res = Result(dict(c), "not run", runs=[r.key for r in mine], versus=[r.key for r in theirs + third])
    if not mine or ("versus" in q and not theirs) or ("also" in q and not third):
        res.reason = "no run of the study matches" + (
            "" if not mine else (" the versus filter" if "versus" in q and not theirs else " the also filter")
        )
        return res
    everyone = mine + theirs + third
    absent = [r.key for r in everyone if r.key not in data or data[r.key].metrics is None]
    if absent:
        res.reason = f"no logs yet for {len(absent)} of {len(everyone)} runs"
        return res
    lack = unlogged(q, [data[r.key] for r in everyone])
    if lack:
        res.reason = "not in these logs: " + "; ".join(missing_text(lack))
        return res
    args = q.get("args") or {}
    fn = (PAIRED if q["reduce"] == "paired" else QUANTITIES)[q["fn"]]

    def measured(sel: list[Run]) -> list[tuple[RunData, Any]]:
        rds = sorted((data[r.key] for r in sel), key=_order)
        return [(rd, fn(rd, **args)) for rd in rds]

    def paired() -> list[tuple[RunData, Any]]:
        by_seed = {data[r.key].run.seed: data[r.key] for r in theirs}
        also = {data[r.key].run.seed: data[r.key] for r in third}
        rds = sorted((data[r.key] for r in mine), key=_order)
        if third:
            return [
                (rd, fn(rd, by_seed[rd.run.seed], also[rd.run.seed], **args))
                for rd in rds
                if rd.run.seed in by_seed and rd.run.seed in also
            ]
        return [(rd, fn(rd, by_seed[rd.run.seed], **args)) for rd in rds if rd.run.seed in by_seed]

    try:
        if q["reduce"] == "paired":
            versus = [(data[r.key], None) for r in theirs]
            values = paired()
        else:
            versus = measured(theirs)
            values = measured(mine)
        res.value = reduce_values(q, values, versus)
        if q["reduce"] == "realizations":
            res.rates = [realization_rate([v for _, v in arm]) for arm in (values, versus) if arm]
        bound = count_bound(q)
        if bound is not None:
            each = reduce_values({k: v for k, v in q.items() if k != bound[0]}, values, versus)
            res.counted = each if isinstance(each, list) else [each]
    except ClaimError as e:  # this claim only: the others are still judged on these runs
        res.value, res.rates, res.counted = None, None, None
        res.reason = f"{UNJUDGED}: {e}"
        return res
    if q.get("per") == "frontier":  # say which N the value compares with: it follows from the data
        safe = frontier_N(versus)
        res.reason = (
            f"against N={safe}, the largest N none of whose runs degrade"
            if safe
            else ("every N of the versus runs has a degraded run: no frontier to compare with")
        )
    stopped = [
        k
        for k in dict.fromkeys(res.runs + res.versus)
        if data[k].status is None or not data[k].status.complete  # type: ignore[union-attr]
    ]
    if stopped:
        res.verdict = "incomplete"
        res.reason = f"{len(stopped)} run(s) stopped early or have no status: " + ", ".join(stopped)
        return res
    if c.get("reported"):
        res.verdict = "reported"
        return res
    res.verdict = "reproduced" if agrees(res.value, c["paper"], c["tolerance"]) else "differs"
    if res.verdict == "differs" and _has_nan(res.value):
        res.reason = "not measurable from the logs (NaN: a step or column is missing)"
    return res


def _has_nan(v: Any) -> bool:
    vs = v if isinstance(v, list) else [v]
    return any(isinstance(x, float) and math.isnan(x) for x in vs)


def evaluate(claims: Claims, runs: Sequence[Run], data: Mapping[str, RunData]) -> list[Result]:
    return [evaluate_claim(claims, c, data, runs) for c in claims.claims]


__all__ = ["UNJUDGED", "VERDICTS", "Result", "evaluate", "evaluate_claim", "plan"]
