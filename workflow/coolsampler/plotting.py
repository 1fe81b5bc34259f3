"""One look for every figure: colours, refresh lines, KL axes, notes and the provenance stamp.

Why one module: a reader compares Figure 1 with Figure 5 by colour, so a sampler temperature must
have the same colour everywhere (Tb = 1.0 orange "uncooled", 0.8 blue "cooled"); and every figure
must say which study and which commit drew it, and which of its runs are missing or unfinished.

Figures are built on ``matplotlib.figure.Figure`` directly, never through ``pyplot``: no global
figure registry (nothing leaks across the many figures of one Snakemake job) and no GUI backend, so
it runs headless without configuring a backend.
"""

from __future__ import annotations

import subprocess
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure

# --------------------------------------------------------------------------------------------------
# Colours and labels

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
MU_GRPO = "#2ca02c"  # green: Figure 4 draws mu-GRPO in green (solid Tb = 1, dashed 0.8)
OTHER = "#555555"
REFRESH_GREY = "#9a9a9a"
DEFAULT_LR = 2e-6


def tb_kind(settings: Mapping[str, Any]) -> str:
    """'fixed', 'linear', 'saturation', 'saturation+kl' or 'kl_cooling' from Run.settings()."""
    kind = settings.get("Tb_kind", "fixed")
    tb = settings.get("Tb")
    if kind == "saturation" and isinstance(tb, Mapping) and tb.get("kl_gate"):
        return "saturation+kl"
    return kind


def tb_initial(settings: Mapping[str, Any]) -> float:
    if "Tb_initial" in settings:
        return float(settings["Tb_initial"])
    tb = settings.get("Tb", 1.0)
    return float(tb["start"]) if isinstance(tb, Mapping) else float(tb)


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
    """Colour of a run: its temperature colour; green for mu-GRPO; shaded for a non-default lr.

    A lower learning rate is drawn lighter, a higher one darker, so Figure 4's three uncooled TIS
    learning rates stay orange (same sampler) yet remain distinguishable.
    """
    base = MU_GRPO if settings.get("correction") == "mu_grpo" else tb_colour(settings)
    lr = float(settings.get("lr", DEFAULT_LR))
    if abs(lr - DEFAULT_LR) <= 1e-12:
        return base
    return (
        shade(base, 1.0 + min(0.6, 0.6 * (DEFAULT_LR - lr) / DEFAULT_LR))
        if lr < DEFAULT_LR
        else shade(base, 0.6)
    )


def _fmt_num(x: float) -> str:
    """Short number text: 1.0 -> '1', 0.8 -> '0.8', 4e-06 -> '4e-6', 1.5e-06 -> '1.5e-6'."""
    s = f"{x:g}"
    if "e" in s:
        mant, exp = s.split("e")
        s = f"{mant}e{int(exp)}"
    return s


def tb_label(settings: Mapping[str, Any]) -> str:
    """'Tb=0.8', 'Tb 0.8->1.0 (linear)', 'saturation controller (KL gate)', ..."""
    kind = tb_kind(settings)
    tb = settings.get("Tb")
    if kind == "fixed":
        return f"Tb={_fmt_num(tb_initial(settings))}"
    if kind == "linear" and isinstance(tb, Mapping):
        return f"Tb {_fmt_num(float(tb['start']))}->{_fmt_num(float(tb['end']))} (linear)"
    if kind.startswith("saturation"):
        return "saturation controller" + (" + KL gate" if kind.endswith("+kl") else "")
    if kind == "kl_cooling":
        return "KL-triggered cooling"
    return f"Tb {kind}"


CORRECTION_LABELS = {"tis": "TIS", "none": "no correction", "mu_grpo": "mu-GRPO"}


def run_label(settings: Mapping[str, Any], *, seed: bool = True, correction: bool = False) -> str:
    """Legend label of a run: temperature, then only the settings that distinguish it."""
    parts = []
    if correction:
        parts.append(CORRECTION_LABELS.get(settings.get("correction", ""), str(settings.get("correction"))))
    parts.append(tb_label(settings))
    if settings.get("Tl") == "tied":
        parts.append("Tl tied")
    lr = float(settings.get("lr", DEFAULT_LR))
    if abs(lr - DEFAULT_LR) > 1e-12:
        parts.append(f"lr {_fmt_num(lr)}")
    if seed and "seed" in settings:
        parts.append(f"s{settings['seed']}")
    if settings.get("replicate"):
        parts.append(str(settings["replicate"]))
    return " ".join(parts)


def short_key(settings: Mapping[str, Any]) -> str:
    """A run's key without the model's long name prefix, for notes: '1.5B/gsm8k/N192_..._s43'."""
    key = str(settings.get("key", ""))
    if not key:
        return run_label(settings, correction=True)
    model, _, rest = key.partition("/")
    size = model.rsplit("-", 1)[-1].upper() if "-" in model else model
    return f"{size}/{rest}"


# --------------------------------------------------------------------------------------------------
# Axes helpers


def refresh_lines(ax: Axes, N: int | None, steps: int = 300) -> None:
    """Grey vertical lines at the refreshes (multiples of N up to ``steps``)."""
    if not N:
        return
    for k in range(1, steps // int(N) + 1):
        ax.axvline(k * int(N), color=REFRESH_GREY, lw=0.9, zorder=0)


def kl_axis(ax: Axes, *, label: str = "learner-sampler KL (nats/token)") -> None:
    """Log-scale KL axis with the dashed 1-nat reference line of Figures 1b, 4b and 8."""
    ax.set_yscale("log")
    ax.axhline(1.0, color="black", ls="--", lw=0.8, zorder=1)
    ax.set_ylabel(label)


def accuracy_axis(ax: Axes, *, label: str = "validation accuracy") -> None:
    ax.set_ylabel(label)
    ax.set_ylim(0.0, 1.0)


def dedup_legend(ax: Axes, **kw: Any) -> None:
    """A legend with one entry per label (several seeds of one arm share a label and a colour)."""
    handles, labels = ax.get_legend_handles_labels()
    seen: dict[str, Any] = {}
    for h, lab in zip(handles, labels, strict=True):
        if lab and not lab.startswith("_"):
            seen.setdefault(lab, h)
    if seen:
        ax.legend(seen.values(), seen.keys(), fontsize=7, frameon=False, **kw)


# --------------------------------------------------------------------------------------------------
# Figure, notes, provenance

FOOTER_IN = 0.22  # inches reserved for the stamp
NOTE_LINE_IN = 0.15  # inches per line of the missing/unfinished note
NOTE_WRAP = 150  # characters per note line at full width


def git_commit(cwd: str | Path | None = None) -> str:
    """Short commit of the working tree (``git rev-parse --short HEAD``), or 'unknown'."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "unknown"


def note_lines(notes: Sequence[str], width_in: float) -> list[str]:
    """The note text wrapped to the figure width, one ``runs missing/unfinished:`` paragraph."""
    if not notes:
        return []
    text = "runs missing/unfinished: " + "; ".join(notes)
    return textwrap.wrap(text, width=max(40, int(NOTE_WRAP * width_in / 12.0)))


def new_figure(
    width: float,
    height: float,
    notes: Sequence[str] = (),
    *,
    nrows: int = 1,
    ncols: int = 1,
    **subplot_kw: Any,
) -> tuple[Figure, Any]:
    """A figure whose bottom is reserved for the missing-runs note and the provenance footer.

    ``height`` is the height of the plotting area; the figure grows by the note and the footer, so
    a long list of missing runs never overprints the data.
    """
    lines = note_lines(notes, width)
    extra = FOOTER_IN + NOTE_LINE_IN * len(lines) + (0.1 if lines else 0.0)
    total = height + extra
    fig = Figure(figsize=(width, total))
    axes = fig.subplots(nrows, ncols, squeeze=False, **subplot_kw)
    bottom = (extra + 0.45) / total
    fig.subplots_adjust(
        left=0.08, right=0.98, top=1.0 - 0.35 / total, bottom=bottom, hspace=0.45, wspace=0.28
    )
    if lines:
        note(fig, lines, y_in=FOOTER_IN + NOTE_LINE_IN * len(lines))
    return fig, axes


def note(fig: Figure, lines: Sequence[str], *, y_in: float | None = None) -> None:
    """Draw the visible 'runs missing/unfinished: ...' note (red) near the bottom of the figure."""
    if not lines:
        return
    h = fig.get_figheight()
    y = (y_in if y_in is not None else FOOTER_IN + NOTE_LINE_IN * len(lines)) / h
    fig.text(
        0.01, y, "\n".join(lines), color="#b00000", fontsize=6.5, va="top", ha="left", family="monospace"
    )


def stamp(fig: Figure, study: str, commit: str | None = None) -> dict[str, str]:
    """Write a small provenance footer on the figure and return the matching PDF metadata.

    ``commit`` defaults to the working tree's ``git rev-parse --short HEAD`` ('unknown' outside git).
    """
    commit = commit or git_commit()
    footer = f"study {study} | commit {commit}"
    fig.text(0.99, 0.05 / fig.get_figheight(), footer, fontsize=6, color="#666666", ha="right", va="bottom")
    return {
        "Subject": f"coolsampler study {study}",
        "Keywords": f"study={study} commit={commit}",
        "Creator": f"coolsampler (commit {commit})",
    }


def save(fig: Figure, outputs: Iterable[str | Path], *, study: str, commit: str | None, title: str) -> None:
    """Stamp and write ``fig`` to every output path; the format follows the suffix (.pdf, .png, .svg).

    The PDF's CreationDate is dropped so re-rendering the same data gives the same bytes apart from
    the commit, which keeps Snakemake reruns and diffs quiet.
    """
    meta = stamp(fig, study, commit)
    for out in outputs:
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        suffix = out.suffix.lower()
        if suffix == ".pdf":
            fig.savefig(out, format="pdf", metadata={"Title": title, **meta, "CreationDate": None})
        elif suffix == ".png":
            fig.savefig(
                out, format="png", dpi=130, metadata={"Title": title, "Description": meta["Keywords"]}
            )
        else:
            fig.savefig(out)


__all__ = [
    "COOLED",
    "UNCOOLED",
    "accuracy_axis",
    "dedup_legend",
    "git_commit",
    "kl_axis",
    "new_figure",
    "note",
    "refresh_lines",
    "run_colour",
    "run_label",
    "save",
    "short_key",
    "stamp",
    "tb_colour",
    "tb_label",
]
