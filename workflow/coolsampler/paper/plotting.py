"""One look for every figure: colours, refresh lines, KL axes, notes and the provenance stamp.

Why one module: a reader compares Figure 1 with Figure 5 by colour, so a sampler temperature must
have the same colour everywhere (Tb = 1.0 orange "uncooled", 0.8 blue "cooled"); and every figure
must say which study and which commit drew it, and which of its runs are missing or unfinished.

Figures are built on ``matplotlib.figure.Figure`` directly, never through ``pyplot``: no global
figure registry (nothing leaks across the many figures of one Snakemake job) and no GUI backend, so
it runs headless without configuring a backend.

Imports matplotlib, never verl, vLLM or torch.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from coolsampler.paper import style as S
from coolsampler.paper.labels import DEFAULT_LR, default_lr, tb_initial, tb_kind
from coolsampler.spec import corrections
from coolsampler.spec.provenance import Provenance
from coolsampler.spec.settings import KL_LEAD_NAT, nat_text

# --------------------------------------------------------------------------------------------------
# Colours (the text of labels is coolsampler.paper.labels)

UNCOOLED = "#ff7f0e"  # Tb = 1.0
COOLED = "#1f77b4"  # Tb = 0.8
FIXED_TB_COLOURS: dict[float, str] = {
    1.0: UNCOOLED,
    0.9: "#9467bd",  # purple
    0.8: COOLED,
    0.7: "#d62728",  # red
    0.6: "#8c564b",  # brown
}
# schedules and controllers (Temperature.kind, plus the KL gate) have colours of their own
KIND_COLOURS: dict[str, str] = {
    "linear": "#17becf",  # cyan
    "saturation": "#e377c2",  # pink
    "saturation+kl": "#bcbd22",  # olive
    "kl_cooling": "#393b79",  # indigo
}
OTHER = "#555555"
REFRESH_GREY = "#9a9a9a"


def tb_colour(settings: Mapping[str, Any]) -> str:
    """The sampler-temperature colour of a run (mu-GRPO runs use ``run_colour``'s green instead)."""
    kind = tb_kind(settings)
    if kind != "fixed":
        return KIND_COLOURS.get(kind, OTHER)
    tb = round(tb_initial(settings), 3)
    return FIXED_TB_COLOURS.get(tb, OTHER)


def shade(colour: str, factor: float) -> tuple[float, float, float]:
    """Darken (factor < 1) or lighten (factor > 1) a colour, keeping its hue recognisable."""
    r, g, b = to_rgb(colour)
    if factor <= 1.0:
        return (r * factor, g * factor, b * factor)
    f = min(factor - 1.0, 1.0)
    return (r + (1 - r) * f, g + (1 - g) * f, b + (1 - b) * f)


def run_colour(settings: Mapping[str, Any]) -> Any:
    """Colour of a run: its correction's colour where the registry gives one (mu-GRPO's green), else its
    temperature colour; shaded for a non-default lr.

    A lower learning rate is drawn lighter, a higher one darker, so Figure 4's three uncooled TIS
    learning rates stay orange (same sampler) yet remain distinguishable.
    """
    correction = corrections.get(settings.get("correction"))
    base = correction.colour if correction is not None and correction.colour else tb_colour(settings)
    lr = float(settings.get("lr", DEFAULT_LR))
    if default_lr(lr):
        return base
    return shade(base, 1.0 + min(0.6, 0.6 * (DEFAULT_LR - lr) / DEFAULT_LR)) if lr < DEFAULT_LR else shade(base, 0.6)


# --------------------------------------------------------------------------------------------------
# Axes helpers


REFRESH_LABEL = "sampler refresh (every N steps)"
ONE_NAT_LABEL = nat_text(KL_LEAD_NAT)
FLOOR_LABEL = "value <= 0 or below the axis floor, drawn on it"
FLOOR_MARKER = "v"

# One marker per data seed, fixed by the seed's value so that a seed has the same marker in every
# panel and figure: the paper's seeds 1, 43, 44 -> o, ^, D; the smoke study's 1, 2 -> o, s.
SEED_MARKERS = ("o", "s", "^", "D", "P", "X", "<", ">")


def seed_marker(seed: Any) -> str:
    """The marker of a data seed (seeds of one arm share colour and line style, never the marker)."""
    try:
        return SEED_MARKERS[(int(seed) - 1) % len(SEED_MARKERS)]
    except (TypeError, ValueError):
        return "o"


def seed_handle(seed: Any) -> Line2D:
    """Legend entry 'seed <s>': the seed's marker on a neutral colour, no line."""
    return Line2D([], [], color="#444444", marker=seed_marker(seed), ls="none", ms=4, label=f"seed {seed}")


def refresh_lines(ax: Axes, N: int | None, steps: int = 300) -> None:
    """Grey vertical lines at the refreshes (multiples of N up to ``steps``), one legend entry."""
    if not N:
        return
    for k in range(1, steps // int(N) + 1):
        ax.axvline(k * int(N), color=REFRESH_GREY, lw=0.9, zorder=0, label=REFRESH_LABEL if k == 1 else "_")


def log_limits(values: Iterable[Any], *, reference: float = 1.0, decades: int = 6) -> tuple[float, float]:
    """Limits of a log axis (powers of ten) that show the data and ``reference`` without letting a
    single near-zero point stretch the axis: the floor is the 2nd percentile of the positive values,
    and never more than ``decades`` decades below the top. Values below the floor (and values <= 0,
    which a log axis cannot show) are drawn on it by ``to_floor``."""
    arrays = [np.asarray(v, dtype="float64").ravel() for v in values]
    flat = np.concatenate(arrays) if arrays else np.array([], dtype="float64")
    pos = flat[np.isfinite(flat) & (flat > 0)]
    top = max(float(pos.max()) if pos.size else reference, reference)
    top = top if top > 0 else 1.0
    hi = 10.0 ** math.ceil(math.log10(top * 1.5))
    lo = float(np.quantile(pos, 0.02)) if pos.size else hi / 10.0**3
    lo = max(lo, hi / 10.0**decades)
    return 10.0 ** math.floor(math.log10(lo)), hi


def to_floor(ax: Axes, x: np.ndarray, y: np.ndarray, floor: float, colour: Any) -> tuple[np.ndarray, int]:
    """(y with every finite value below ``floor`` set to it, how many), each such point marked with a
    hollow down-triangle on the axis floor (a value <= 0 among them). NaN stays NaN (a step not logged is
    a gap, not a value)."""
    low = np.isfinite(y) & (y < floor)
    if low.any():
        ax.scatter(
            x[low],
            np.full(int(low.sum()), floor),
            marker=FLOOR_MARKER,
            s=16,
            facecolors="none",
            edgecolors=colour,
            linewidths=0.8,
            clip_on=False,
            zorder=5,
            label=FLOOR_LABEL,
        )
    return np.where(low, floor, y), int(low.sum())


def kl_axis(
    ax: Axes, *, label: str = "learner-sampler KL (nats/token)", limits: tuple[float, float] | None = None
) -> None:
    """Log-scale KL axis with the dashed 1-nat reference line of Figures 1b, 4b and 8, labelled on
    the axis and in the legend; ``limits`` from ``log_limits``."""
    ax.set_yscale("log")
    ax.axhline(KL_LEAD_NAT, color="black", ls="--", lw=0.8, zorder=1, label=ONE_NAT_LABEL)
    ax.annotate(
        ONE_NAT_LABEL,
        xy=(0.0, KL_LEAD_NAT),
        xycoords=("axes fraction", "data"),
        xytext=(3, 2),
        textcoords="offset points",
        ha="left",
        va="bottom",
        fontsize=S.SMALL_PT,
    )
    if limits is not None:
        ax.set_ylim(*limits)
    ax.set_ylabel(label)


def accuracy_axis(ax: Axes, *, label: str = "validation accuracy") -> None:
    ax.set_ylabel(label)
    ax.set_ylim(0.0, 1.0)


# reference entries go last, in this order, after the runs and the seeds
_REFERENCE_LABELS = (ONE_NAT_LABEL, REFRESH_LABEL, FLOOR_LABEL)


def figure_legend(fig: Figure, axes: Iterable[Axes], seeds: Iterable[Any] = ()) -> Any:
    """One legend for the whole figure, in a band under the panels (never over data).

    Entries: each run label once (arms: colour and line style), then ``seed <s>`` (its marker), then
    the reference lines (1 nat, refreshes, the floor marker). The legend takes as many columns as the
    figure's width holds; the figure grows in height by the band, never in width (``style``: a wider
    figure would shrink its text in the docs column). What sits below the band (captions, notes) keeps
    its place; the panels and whatever is above them move up.
    """
    runs: dict[str, Any] = {}
    refs: dict[str, Any] = {}
    for ax in axes:
        handles, labels = ax.get_legend_handles_labels()
        for h, lab in zip(handles, labels, strict=True):
            if lab and not lab.startswith("_"):
                (refs if lab in _REFERENCE_LABELS else runs).setdefault(lab, h)
    seed_list = sorted({s for s in seeds if s is not None}, key=lambda s: int(s))
    entries = dict(runs)
    entries.update({f"seed {s}": seed_handle(s) for s in seed_list})
    entries.update({lab: refs[lab] for lab in _REFERENCE_LABELS if lab in refs})
    if not entries:
        return None
    width, height = fig.get_figwidth(), fig.get_figheight()
    renderer = FigureCanvasAgg(fig).get_renderer()
    kw = {"fontsize": S.SMALL_PT, "frameon": False, "borderaxespad": 0.0, "columnspacing": 1.2}
    ncol = len(entries)
    while True:  # the most columns that fit the width
        legend = fig.legend(list(entries.values()), list(entries.keys()), loc="upper center", ncol=ncol, **kw)
        if ncol == 1 or legend.get_window_extent(renderer).width / fig.dpi <= width - 0.2:
            break
        legend.remove()
        ncol -= 1
    band = legend.get_window_extent(renderer).height / fig.dpi + 0.12
    at = min(ax.get_position().y0 for ax in fig.axes) * height - _XLABEL_IN  # the band's bottom, inches
    insert_band(fig, at, band)
    total = fig.get_figheight()
    legend.set_bbox_to_anchor((0.5, (at + band - 0.06) / total), transform=fig.transFigure)
    return legend


def insert_band(fig: Figure, at_in: float, band_in: float) -> None:
    """Grow ``fig`` by ``band_in`` inches of empty space at height ``at_in`` (inches from the bottom):
    panels and figure texts above it move up, those below keep their place, nothing changes size."""
    height = fig.get_figheight()
    total = height + band_in
    for ax in fig.axes:
        pos = ax.get_position()
        y0 = pos.y0 * height
        ax.set_position([pos.x0, (y0 + band_in if y0 >= at_in else y0) / total, pos.width, pos.height * height / total])
    for text in fig.texts:
        x, y = text.get_position()
        y_in = y * height
        text.set_position((x, (y_in + band_in if y_in > at_in else y_in) / total))
    anchors = []
    for legend in fig.legends:  # a figure legend is anchored at a point of the figure (figure_legend)
        box = legend.get_bbox_to_anchor()
        x, y_in = box.x0 / fig.bbox.width, box.y0 / fig.dpi
        anchors.append((legend, x, (y_in + band_in if y_in > at_in else y_in) / total))
    fig.set_figheight(total)
    for legend, x, y in anchors:
        legend.set_bbox_to_anchor((x, y), transform=fig.transFigure)


def wrap_titles(fig: Figure) -> None:
    """Break every panel title wider than its panel into lines that fit, and grow the figure at the top
    by the lines added (``style``: the text keeps its size; a narrower figure means more lines)."""
    renderer = FigureCanvasAgg(fig).get_renderer()
    added = 0
    for ax in fig.axes:
        for title in (ax.title, ax._left_title, ax._right_title):  # set_title(loc=...) fills one of three
            text = title.get_text()
            if not text or "\n" in text:
                continue
            wide = title.get_window_extent(renderer).width
            room = ax.get_window_extent(renderer).width
            if wide <= room:
                continue
            lines = textwrap.wrap(text, width=max(12, int(len(text) * room / wide) - 1), break_on_hyphens=False)
            title.set_text("\n".join(lines))
            added = max(added, len(lines) - 1)
    if added:
        top = max(ax.get_position().y1 for ax in fig.axes) * fig.get_figheight()
        insert_band(fig, top, added * 1.25 * S.TITLE_PT / 72.0)


# --------------------------------------------------------------------------------------------------
# Figure, notes, provenance

FOOTER_IN = 0.26  # inches reserved for the stamp
NOTE_LINE_IN = 1.4 * S.SMALL_PT / 72.0  # inches per line of the caption and the missing/unfinished note
_XLABEL_IN = 0.5  # inches under the lowest panels for their tick labels and x label


def note_lines(notes: Sequence[str], width_in: float) -> list[str]:
    """The note text wrapped to the figure width, one ``runs missing/unfinished:`` paragraph."""
    return caption_lines(["runs missing/unfinished: " + "; ".join(notes)], width_in) if notes else []


def caption_lines(caption: Sequence[str], width_in: float) -> list[str]:
    """Caption lines (the selection each panel uses) wrapped to the figure width."""
    # never break inside a run key (keys hold hyphens: '2e-6'), so a note can be searched for a key
    width = max(40, int((width_in - 0.2) * S.MONO_CHARS_PER_IN))  # the characters the figure's width holds
    return [w for line in caption for w in textwrap.wrap(line, width, break_on_hyphens=False, break_long_words=False)]


def fit_left(fig: Figure, ax: Axes, pad_in: float = 0.08) -> None:
    """Widen the figure's left margin until ``ax``'s tick labels fit inside it: a row's label depends on
    the runs drawn (a learning rate is named only where it differs), so no fixed margin fits every selection."""
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    renderer = canvas.get_renderer()
    x0 = min((t.get_window_extent(renderer).x0 for t in ax.get_yticklabels() if t.get_text()), default=None)
    if x0 is not None and x0 < pad_in * fig.dpi:
        fig.subplots_adjust(left=fig.subplotpars.left + (pad_in * fig.dpi - x0) / (fig.get_figwidth() * fig.dpi))


def new_figure(
    width: float,
    height: float,
    notes: Sequence[str] = (),
    *,
    nrows: int = 1,
    ncols: int = 1,
    caption: Sequence[str] = (),
    **subplot_kw: Any,
) -> tuple[Figure, Any]:
    """A figure whose bottom is reserved for the caption (the selection of each panel, grey), the
    missing-runs note (red) and the provenance footer.

    ``height`` is the height of the plotting area; the figure grows by the caption, the note and the
    footer, so a long list of missing runs never overprints the data. ``width`` is capped at
    ``style.MAX_WIDTH_IN`` (wider, the text would shrink below legibility in the docs column); tick and
    axis labels take ``style.TEXT_PT``.
    """
    width = min(width, S.MAX_WIDTH_IN)
    lines = note_lines(notes, width)
    cap = caption_lines(caption, width)
    extra = FOOTER_IN + NOTE_LINE_IN * (len(lines) + len(cap)) + (0.1 if lines or cap else 0.0)
    total = height + extra
    fig = Figure(figsize=(width, total))
    axes = fig.subplots(nrows, ncols, squeeze=False, **subplot_kw)
    bottom = (extra + _XLABEL_IN) / total
    fig.subplots_adjust(left=0.09, right=0.98, top=1.0 - 0.35 / total, bottom=bottom, hspace=0.5, wspace=0.3)
    for ax in axes.flat:
        ax.tick_params(labelsize=S.TEXT_PT)
        ax.xaxis.label.set_size(S.TEXT_PT)
        ax.yaxis.label.set_size(S.TEXT_PT)
        ax.title.set_size(S.TITLE_PT)
    _text_lines(fig, lines, FOOTER_IN + NOTE_LINE_IN * len(lines), "#b00000")  # the note, red: a run is missing
    _text_lines(fig, cap, FOOTER_IN + NOTE_LINE_IN * (len(lines) + len(cap)), "#444444")
    return fig, axes


def _text_lines(fig: Figure, lines: Sequence[str], top_in: float, colour: str) -> None:
    """Lines of small monospace text (the caption, the missing-runs note) whose top is ``top_in`` inches
    above the figure's bottom; nothing for no lines."""
    if lines:
        y = top_in / fig.get_figheight()
        fig.text(0.01, y, "\n".join(lines), color=colour, fontsize=S.SMALL_PT, va="top", ha="left", family=S.MONO)


SYNTHETIC_MARK = "SYNTHETIC \u2014 not a result"
SYNTHETIC_GID = "synthetic-mark"


def stamp(fig: Figure, provenance: Provenance) -> dict[str, str]:
    """Write the provenance footer on the figure and return the matching PDF metadata. A figure of
    synthetic data (``provenance.synthetic``) also gets ``SYNTHETIC_MARK`` across it, so the image
    cannot be read as a result wherever it is shown (artist gid ``SYNTHETIC_GID``)."""
    fig.text(
        0.99,
        0.05 / fig.get_figheight(),
        provenance.footer(),
        fontsize=S.SMALL_PT,
        color="#666666",
        ha="right",
        va="bottom",
    )
    if provenance.synthetic:
        fig.text(
            0.5, 0.55, SYNTHETIC_MARK, fontsize=min(40, 4.2 * fig.get_figwidth()), fontweight="bold",
            color="#c62828", alpha=0.3, rotation=18, ha="center", va="center", zorder=1000, gid=SYNTHETIC_GID,
        )  # fmt: skip
    return provenance.pdf_metadata()


def save(fig: Figure, outputs: Iterable[str | Path], *, provenance: Provenance, title: str) -> None:
    """Stamp and write ``fig`` to every output path; the format follows the suffix (.pdf, .png, .svg).

    The PDF's CreationDate is dropped so re-rendering the same data gives the same bytes apart from
    the provenance, which keeps Snakemake reruns and diffs quiet.
    """
    wrap_titles(fig)
    meta = stamp(fig, provenance)
    for out in outputs:
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        suffix = out.suffix.lower()
        if suffix == ".pdf":
            fig.savefig(out, format="pdf", metadata={"Title": title, **meta, "CreationDate": None})
        elif suffix == ".png":
            fig.savefig(out, format="png", dpi=S.DPI, metadata={"Title": title, "Description": meta["Keywords"]})
        else:
            fig.savefig(out)
