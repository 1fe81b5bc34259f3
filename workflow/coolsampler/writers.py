"""Table writers: CSV (the data), TeX and Markdown (the display), each stamped with its provenance.

Kept apart from the tables' content (``coolsampler.tables``): a table function decides what the
rows are; these functions only decide how a frame becomes bytes. LaTeX and Markdown are written
here, not with ``DataFrame.to_latex``/``to_markdown``, which need jinja2/tabulate, not dependencies
of the light analysis core.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from coolsampler.labels import DASH
from coolsampler.provenance import Provenance

TABLE_SUFFIXES = (".csv", ".tex", ".md")


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


def to_latex(display: pd.DataFrame, *, caption: str = "", label: str = "", provenance: Provenance | None = None) -> str:
    """A booktabs table environment; first column left-aligned, the rest centred."""
    cols = "l" + "c" * (len(display.columns) - 1)
    head = [f"% coolsampler {provenance.footer()}"] if provenance else []
    lines = [*head, r"\begin{table}[t]", r"\centering", r"\small"]
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

    if display.columns.empty:  # nothing to list (e.g. Table 2 when no run degrades): say so, not "|  |"
        return "*No rows.*\n"
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
    provenance: Provenance,
) -> None:
    """Write ``data`` as CSV and ``display`` as LaTeX/Markdown to each output, chosen by suffix."""
    for out in outputs:
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        suffix = out.suffix.lower()
        if suffix == ".csv":
            data.to_csv(out, index=False)
        elif suffix == ".tex":
            label = "tab:" + title.lower().replace(" ", "")
            out.write_text(to_latex(display, caption=caption, label=label, provenance=provenance))
        elif suffix == ".md":
            head = f"**{title}.** {caption}\n\n" if caption else f"**{title}.**\n\n"
            out.write_text(head + to_markdown(display) + f"\n<sub>{provenance.footer()}</sub>\n")
        else:
            raise ValueError(f"{out}: unsupported table format {suffix!r}; allowed: {', '.join(TABLE_SUFFIXES)}")


__all__ = ["TABLE_SUFFIXES", "latex_escape", "to_latex", "to_markdown", "write_table"]
