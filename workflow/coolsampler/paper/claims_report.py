"""The claims report: every claim of a study beside the paper's value, with its verdict, and the staleness budget.

Owns how ``coolsampler.results.claims``' results are written: the values as the report prints them
(``fmt``, ``paper_text``, ``tolerance_text``), ``claims.md`` (``report_markdown``), ``claims.csv``
(``results_frame``), ``staleness_budget.md|csv`` (``write_report``) and the one-line counts
(``summary_text``). Why in the paper layer: it is a display of the results, like the figures and
tables, and its tables are written by the shared writer (``coolsampler.paper.writers.to_markdown``);
the results layer computes the verdicts and never imports this.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from coolsampler.paper.labels import DASH
from coolsampler.paper.writers import to_markdown
from coolsampler.results.claims.evaluation import VERDICTS, Result
from coolsampler.results.claims.judge import count_bound, scalar
from coolsampler.spec.targets import TARGETS


def fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, pd.Series):
        return f"min {fmt(scalar(v))} over {len(v)} points" if len(v) else "no points"
    if isinstance(v, list):
        return " / ".join(fmt(x) for x in v)
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        if math.isnan(v):
            return "NaN"
        if float(v).is_integer() and abs(v) >= 1:
            return str(int(v))
        return f"{v:.3g}" if abs(v) < 0.1 else f"{v:.3f}"
    return str(v)


REPORTED = "reported, not asserted"


def ours_text(r: Result) -> str:
    """A result's value as the report prints it; a count claim's with the bound each value is counted
    against and what it counted ("0 of 4 ≥ 2: 0.967 / 0.997 / ..."): the paper column holds the count's
    bound only."""
    if r.rates is not None:
        return rates_text(r)
    bound = count_bound(r.claim["quantity"])
    if r.counted is None or bound is None:
        return fmt(r.value)
    _, at, sign = bound
    return f"{fmt(r.value)} of {len(r.counted)} {sign} {at:g}: {fmt(r.counted)}"


def rates_text(r: Result) -> str:
    """A realizations claim: each arm's events out of its realizations with the exact 95% interval of the
    rate ("2 of 4 (0.07–0.93)"), then, against a versus arm, the difference the verdict reads."""
    arms = [f"{k} of {n} ({lo:.2f}–{hi:.2f})" for k, n, lo, hi in r.rates or []]
    if len(arms) == 1:
        return arms[0]
    return f"{arms[0]} vs {arms[1]}: {fmt(r.value)}"


def paper_text(c: Mapping[str, Any]) -> str:
    """A claim's paper value as the report prints it (a reported claim has none)."""
    return REPORTED if c.get("reported") else fmt_paper(c["paper"])


def tolerance_text(c: Mapping[str, Any]) -> str:
    return "–" if c.get("reported") else fmt_tol(c["tolerance"])


def fmt_paper(p: Any) -> str:
    if isinstance(p, Mapping):
        return " / ".join(fmt(x) for x in p["each"])
    if isinstance(p, list):
        lo, hi = p
        return f"≥ {fmt(lo)}" if hi is None else (f"≤ {fmt(hi)}" if lo is None else f"{fmt(lo)}–{fmt(hi)}")
    return fmt(p)


def fmt_tol(t: Any) -> str:
    return f"±{fmt(t['rel'] * 100)}%" if isinstance(t, Mapping) else f"±{fmt(t)}"


def _links(shows: Sequence[str], defined: set[str] | None) -> str:
    out = []
    for t in shows:
        target = f"{t}.pdf" if t in TARGETS and TARGETS[t].kind == "figure" else f"{t}.md"
        if defined is None or t in defined or t in ("staleness_budget", "diagnostic_leads"):
            out.append(f"[{t}]({target})")
        else:
            out.append(f"{t} (not in this study)")
    return ", ".join(out) or "–"


def results_frame(results: Sequence[Result]) -> pd.DataFrame:
    rows = []
    for r in results:
        c = r.claim
        rows.append(
            {
                "id": c["id"],
                "where": c["where"],
                "verdict": r.verdict,
                "paper": paper_text(c),
                "ours": ours_text(r) if r.verdict in ("reproduced", "differs", "incomplete", "reported") else "",
                "tolerance": tolerance_text(c),
                "quantity": _quantity_text(c["quantity"]),
                "runs": " ".join(r.runs),
                "versus": " ".join(r.versus),
                "reason": r.reason,
                "shows": " ".join(c.get("shows", [])),
                "text": c["text"],
                "note": c.get("note", ""),
            }
        )
    return pd.DataFrame(rows)


def _quantity_text(q: Mapping[str, Any]) -> str:
    args = ", ".join(f"{k}={v}" for k, v in (q.get("args") or {}).items())
    s = f"{q['fn']}({args}) {q['reduce']}"
    if "per" in q:
        s += f" per {q['per'] if isinstance(q['per'], str) else '/'.join(q['per'])}"
    if "value" in q:
        s += f" {q['value']}"
    return s


def counts(results: Sequence[Result]) -> dict[str, int]:
    return {v: sum(1 for r in results if r.verdict == v) for v in VERDICTS}


def budget_table(budget: pd.DataFrame) -> str:
    """The staleness budget as a pipe table (the shared ``writers.to_markdown``), a missing value (no run
    says) as a dash; a line saying so where no run has metrics yet."""
    if not len(budget):
        return "(no run has metrics yet)"
    shown = pd.DataFrame({c: [DASH if pd.isna(v) else v for v in budget[c]] for c in budget.columns}, dtype=object)
    return to_markdown(shown).rstrip("\n")


def report_markdown(
    results: Sequence[Result],
    budget: pd.DataFrame,
    study: str,
    defined: set[str] | None = None,
) -> str:
    """The reproduction report: verdict counts, the staleness budget, and every claim beside the paper."""
    n = counts(results)
    # a study's own success criterion (where: Criterion <study>) is not the paper's: its "paper" value is
    # the criterion's bound, and "reproduced" means the part holds
    criterion = bool(results) and all(str(r.claim.get("where", "")).startswith("Criterion") for r in results)
    out = [
        f"# The success criterion of study `{study}`, part by part"
        if criterion
        else f"# Claims of the paper, checked on study `{study}`",
        "",
        f"{len(results)} claims: " + ", ".join(f"{v} **{n[v]}**" for v in VERDICTS) + ".",
        "",
        *(
            [
                "Each claim is one part of the criterion the study file states before its runs; *paper* is its"
                " bound, *reproduced* means the part holds and *differs* that it does not.",
                "",
            ]
            if criterion
            else []
        ),
        "Verdicts: *reproduced* = within the tolerance of the paper's value; *differs* = outside it (or not"
        " measurable); *not run* = no run of this study matches, or a matching run has no metrics yet;"
        " *incomplete* = a run stopped early (its status.json); the value over the logged steps is shown;"
        " *reported* = a quantity the paper reports without a value to check (the value is shown, not judged).",
        "",
        "| section | claims | " + " | ".join(VERDICTS) + " |",
        "|---|---|" + "---|" * len(VERDICTS),
    ]
    by_sec: dict[str, list[Result]] = {}
    for r in results:
        by_sec.setdefault(r.claim["where"], []).append(r)
    for sec, rs in by_sec.items():
        c = counts(rs)
        out.append(f"| {sec} | {len(rs)} | " + " | ".join(str(c[v]) for v in VERDICTS) + " |")
    out += ["", "## Staleness budget (from observed onsets)", ""]
    out.append(
        "The staleness at onset (the onset step minus 1 minus the last refresh before it), for every degrading"
        " run; *first_cycle_safe_N_below*"
        " / *safe_N_below*: refresh intervals below the smallest of these (first-cycle onsets / every"
        " onset) were not seen to degrade; *passed_first_refresh*: the largest N whose run reached its"
        " first refresh intact. Also in [staleness_budget.md](staleness_budget.md)."
    )
    out += ["", budget_table(budget), "", "## Claims", ""]
    out.append("| id | where | paper | ours | tolerance | verdict | runs | shows |")
    out.append("|---|---|---|---|---|---|---|---|")
    for r in results:
        c = r.claim
        ours = ours_text(r) if r.verdict != "not run" else "–"
        nruns = f"{len(r.runs)}" + (f" vs {len(r.versus)}" if r.versus else "")
        out.append(
            f"| [{c['id']}](#{c['id']}) | {c['where']} | {paper_text(c)} | {ours} | {tolerance_text(c)} |"
            f" **{r.verdict}** | {nruns} | {_links(c.get('shows', []), defined)} |"
        )
    out += ["", "## Each claim", ""]
    for r in results:
        c = r.claim
        out += [f"### {c['id']}", "", f"{c['where']}: “{c['text']}”", ""]
        paper = REPORTED if c.get("reported") else f"paper {fmt_paper(c['paper'])} {fmt_tol(c['tolerance'])}"
        out.append(f"- quantity: `{_quantity_text(c['quantity'])}`; {paper}")
        if c.get("note"):
            out.append(f"- reading: {c['note']}")
        out.append(
            f"- verdict: **{r.verdict}**"
            + (f", ours {ours_text(r)}" if r.verdict != "not run" else "")
            + (f" ({r.reason})" if r.reason else "")
        )
        out.append("- runs: " + (", ".join(f"`{k}`" for k in r.runs) or "none in this study"))
        if r.versus:
            out.append("- versus: " + ", ".join(f"`{k}`" for k in r.versus))
        out.append(f"- shown in: {_links(c.get('shows', []), defined)}")
        out.append("")
    return "\n".join(out)


def write_report(
    results: Sequence[Result],
    budget: pd.DataFrame,
    study: str,
    md: str | Path,
    csv_path: str | Path,
    budget_md: str | Path | None = None,
    budget_csv: str | Path | None = None,
    defined: set[str] | None = None,
) -> None:
    Path(md).parent.mkdir(parents=True, exist_ok=True)
    Path(md).write_text(report_markdown(results, budget, study, defined) + "\n")
    results_frame(results).to_csv(csv_path, index=False, quoting=csv.QUOTE_MINIMAL)
    if budget_md is not None:
        Path(budget_md).write_text(f"# Staleness budget, study `{study}`\n\n" + budget_table(budget) + "\n")
    if budget_csv is not None:
        budget.to_csv(budget_csv, index=False)


def summary_text(results: Sequence[Result]) -> str:
    n = counts(results)
    return f"{len(results)} claims: " + ", ".join(f"{v} {n[v]}" for v in VERDICTS) + "\n"
