"""Table writers: CSV (the data), TeX and Markdown (the display), each stamped with its provenance.

Kept apart from the tables' content (``coolsampler.paper.tables``): a table function decides what the
rows are; these functions only decide how a frame becomes bytes. LaTeX and Markdown are written
here, not with ``DataFrame.to_latex``/``to_markdown``, which need jinja2/tabulate, not dependencies
of the light analysis core.

Imports pandas, never matplotlib, verl, vLLM or torch.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from coolsampler.paper.labels import DASH
from coolsampler.spec.provenance import Provenance

TABLE_SUFFIXES = (".csv", ".tex", ".md", ".html")


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


HTML_STYLE = """
body { font-family: Helvetica, Arial, sans-serif; font-size: 13px; margin: 1em; color: #222; }
table { border-collapse: collapse; margin: 0.6em 0; }
th, td { padding: 3px 8px; text-align: center; border-bottom: 1px solid #ddd; white-space: nowrap; }
td.long { white-space: normal; min-width: 16em; max-width: 30em; text-align: left; font-size: 12px; }
div.scroll { overflow-x: auto; }
th { border-bottom: 2px solid #444; background: #f4f4f4; }
td:first-child, th:first-child { text-align: left; }
tr:hover td { background: #f0f6ff; }
p.caption { max-width: 60em; }
p.provenance { color: #777; font-size: 12px; }
"""


LONG_CELL = 30  # characters: a longer cell (a note) wraps, every other cell stays on one line


def to_html(display: pd.DataFrame, *, title: str = "", caption: str = "", provenance: Provenance | None = None) -> str:
    """A standalone HTML page of the display table (the numbers as the paper prints them, never the
    CSV's raw floats), its caption and provenance: what the Snakemake report shows for a table."""

    def esc(v: Any) -> str:
        return html.escape(str(v))

    parts = []
    if title or caption:
        parts.append(f"<p class='caption'><b>{esc(title)}.</b> {esc(caption)}</p>")
    if display.columns.empty:
        parts.append("<p><i>No rows.</i></p>")
    else:
        head_row = "".join(f"<th>{esc(c)}</th>" for c in display.columns)
        parts.append(f"<div class='scroll'><table><thead><tr>{head_row}</tr></thead>")

        def td(v: Any) -> str:  # numbers and short texts on one line; notes wrap
            return f"<td class='long'>{esc(v)}</td>" if len(str(v)) > LONG_CELL else f"<td>{esc(v)}</td>"

        body = ["<tr>" + "".join(td(v) for v in row) + "</tr>" for row in display.itertuples(index=False)]
        parts.append("<tbody>" + "".join(body) + "</tbody></table></div>")
    if provenance is not None:
        parts.append(f"<p class='provenance'>{esc(provenance.footer())}</p>")
    return _page(title, "\n".join(parts) + "\n")


def markdown_page(text: str, *, title: str = "") -> str:
    """A Markdown report (claims.md) as a standalone HTML page, its pipe tables as tables, styled as
    the tables are. Uses markdown-it-py where installed (it comes with rich, which Snakemake uses),
    else shows the text as it is."""
    try:
        from markdown_it import MarkdownIt
    except ImportError:  # the light analysis install: the text, readable, unrendered
        body = f"<pre>{html.escape(text)}</pre>"
    else:
        body = MarkdownIt("commonmark").enable("table").render(text)
        body = body.replace("<table>", "<div class='scroll'><table>").replace("</table>", "</table></div>")
    return _page(title, body)


def _page(title: str, body: str) -> str:
    """A standalone HTML page in the tables' style around ``body``."""
    head = f"<title>{html.escape(title)}</title><style>{HTML_STYLE}</style>"
    return f"<!DOCTYPE html><html><head><meta charset='utf-8'>{head}</head><body>\n{body}</body></html>\n"


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
        elif suffix == ".html":
            out.write_text(to_html(display, title=title, caption=caption, provenance=provenance))
        else:
            raise ValueError(f"{out}: unsupported table format {suffix!r}; allowed: {', '.join(TABLE_SUFFIXES)}")
