"""The size and the fonts of every figure, chosen so that its smallest text is legible where people see it.

Why one module: a figure is read at the width of the manual's content column (and of the README on
GitHub, a little wider), not at its own pixel size. A 13-inch figure shown 748 px wide shrinks 6-pt text
to about 5 px. What decides legibility is the ratio of font size to figure width, so both are set here,
together, and the smallest size follows from the rule instead of being typed:

    rendered px = points / 72 * dpi * min(1, DOCS_WIDTH_PX / (width_in * dpi))

``MAX_WIDTH_IN`` is the widest figure whose ``SMALL_PT`` text still renders at ``MIN_TEXT_PX``;
``plotting.new_figure`` never draws wider and ``plotting.figure_legend`` puts the legend under the panels
instead of widening the figure. ``too_small`` lists the texts of a drawn figure that break the rule (the
tests call it on every figure; ``workflow/tools/site_width.py`` checks that the column is still
``DOCS_WIDTH_PX`` wide).

Imports matplotlib only.
"""

from __future__ import annotations

from dataclasses import dataclass

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text

# the manual's content column at a 1280-px window (mkdocs-material with navigation and table of contents),
# measured in headless Chromium by workflow/tools/site_width.py, which fails when it changes
DOCS_WIDTH_PX = 748
MIN_TEXT_PX = 9.0  # the smallest text a figure may show at that width
DPI = 130  # PNG resolution (the PDF is vector)

# font roles, in points
TITLE_PT = 9.5  # panel titles
TEXT_PT = 9.0  # axis labels, tick labels, annotations in a panel
SMALL_PT = 8.0  # legends, captions, notes, footnotes, the provenance footer (the smallest text drawn)
MONO = "monospace"  # captions and notes: run keys line up

# the widest figure whose SMALL_PT text renders at MIN_TEXT_PX in the docs column
MAX_WIDTH_IN = SMALL_PT * DOCS_WIDTH_PX / (72.0 * MIN_TEXT_PX)

# characters of monospace SMALL_PT text per inch (a monospace glyph is 0.6 em wide), for wrapping notes
MONO_CHARS_PER_IN = 72.0 / (0.6 * SMALL_PT)


def text_px(points: float, width_in: float, *, dpi: float = DPI, column_px: float = DOCS_WIDTH_PX) -> float:
    """How tall ``points`` of text render when a ``width_in`` figure is shown in a ``column_px`` column
    (scaled down when wider than the column, never scaled up)."""
    native = points / 72.0 * dpi
    return native * min(1.0, column_px / (width_in * dpi))


@dataclass(frozen=True)
class SmallText:
    """A text of a drawn figure that renders under ``MIN_TEXT_PX`` in the docs column."""

    text: str
    points: float
    px: float

    def __str__(self) -> str:
        return f"{self.text[:60]!r}: {self.points:g} pt renders {self.px:.1f} px (< {MIN_TEXT_PX:g})"


def visible_texts(fig: Figure) -> list[Text]:
    """Every text the figure draws: titles, labels, tick labels, legends, notes, annotations."""
    FigureCanvasAgg(fig).draw()  # tick labels exist only once drawn
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    return [t for t in texts if t.axes is None or t.axes.get_visible()]


def too_small(fig: Figure, *, column_px: float = DOCS_WIDTH_PX) -> list[SmallText]:
    """The texts of ``fig`` that render under ``MIN_TEXT_PX`` at ``column_px`` (empty: legible)."""
    width = fig.get_figwidth()
    shown = [(t, text_px(t.get_fontsize(), width, column_px=column_px)) for t in visible_texts(fig)]
    return [SmallText(t.get_text(), t.get_fontsize(), px) for t, px in shown if px < MIN_TEXT_PX - 1e-6]


def overlaps(fig: Figure, texts: list[Text] | None = None) -> list[tuple[str, str]]:
    """Pairs of figure-level texts (captions, notes, footnotes, the footer) whose boxes intersect."""
    renderer = FigureCanvasAgg(fig).get_renderer()
    texts = [t for t in (texts if texts is not None else fig.texts) if t.get_visible() and t.get_text().strip()]
    boxes = [(t, t.get_window_extent(renderer)) for t in texts]
    out = []
    for i, (a, ba) in enumerate(boxes):
        for b, bb in boxes[i + 1 :]:
            if ba.overlaps(bb):
                out.append((a.get_text()[:40], b.get_text()[:40]))
    return out
