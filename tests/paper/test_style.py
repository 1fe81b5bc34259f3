"""Every figure is legible where people read it (coolsampler.paper.style): drawn at the width the docs show
it, its smallest text renders at 9 px or more, and its bottom texts (caption, notes, KL footnote, the
provenance footer) never run into each other."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from matplotlib.figure import Figure
from matplotlib.table import Table

from coolsampler.paper import diagnostics as PD
from coolsampler.paper import plotting as P
from coolsampler.paper import style as S
from coolsampler.paper.render import render
from coolsampler.paper.report import run_curves
from coolsampler.spec.metrics_schema import RunStatus
from coolsampler.spec.provenance import Provenance
from coolsampler.spec.targets import TARGETS
from coolsampler.testkit.synthetic import DEMO_FIGURES, demo_panels, demo_runs, make_metrics
from tests.paper.test_figures import _capture_figure

PROV = Provenance("paper-shaped synthetic", commit="abc1234", script="workflow/tools/figure_docs.py")
FIGURES = sorted(t for t, spec in TARGETS.items() if spec.kind == "figure" and t in DEMO_FIGURES)
SETTINGS = {"key": "qwen2.5-math-1.5b/gsm8k/N192_lr2e-6_tis_Tb1_Tl1_s1", "N": 192, "steps": 300, "seed": 1, "Tb": 1.0}


@pytest.fixture(scope="module")
def demo() -> Any:
    return demo_runs()


def _legible(fig: Figure) -> None:
    assert fig.get_figwidth() <= S.MAX_WIDTH_IN + 1e-9
    assert not [str(t) for t in S.too_small(fig)]
    assert not S.overlaps(fig), "figure texts run into each other"


def test_the_rule_sets_the_width_from_the_smallest_font() -> None:
    """The widest figure shows SMALL_PT at exactly MIN_TEXT_PX; twice as wide, half that; a figure
    narrower than the column is shown at its own size."""
    assert S.text_px(S.SMALL_PT, S.MAX_WIDTH_IN) == pytest.approx(S.MIN_TEXT_PX)
    assert S.text_px(S.SMALL_PT, 2 * S.MAX_WIDTH_IN) == pytest.approx(S.MIN_TEXT_PX / 2)
    assert S.text_px(9, 4.0) == pytest.approx(9 / 72 * S.DPI)  # 520 px < 748: not scaled
    assert S.SMALL_PT <= S.TEXT_PT <= S.TITLE_PT


def test_the_check_catches_what_the_old_figures_did() -> None:
    """13-inch figures with 6-pt notes (the figures before this style) render them about 5 px tall: the
    check names that text, and a footer beside a long footnote on one line is an overlap."""
    fig = Figure(figsize=(13, 4))
    fig.subplots(1, 3)
    fig.text(0.01, 0.01, "KL: verl rollout_corr/kl " * 12, fontsize=6)
    fig.text(0.99, 0.01, "study smoke | commit abc1234 | workflow/scripts/figure.py", fontsize=6, ha="right")
    small = S.too_small(fig)
    assert small and min(s.px for s in small) == pytest.approx(S.text_px(6, 13))
    assert S.text_px(6, 13) < 5.0
    assert S.overlaps(fig)


@pytest.mark.parametrize("target", FIGURES)
def test_every_figure_is_legible_at_the_docs_width(
    target: str, demo: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    figs = _capture_figure(monkeypatch)
    render(target, demo_panels(target, demo), PROV, None, [tmp_path / f"{target}.png"], None, DEMO_FIGURES[target])
    assert len(figs) == 1
    _legible(figs[0])


def test_the_per_run_figures_are_legible(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    figs = _capture_figure(monkeypatch)
    m = make_metrics(192, 300, 10, 1.0, collapse_at=190, seed=3)
    status = RunStatus(False, 250, 300, [])
    PD.run_diagnostics(SETTINGS, m, status, [tmp_path / "diagnostics.png"], PROV)
    run_curves(SETTINGS, m, status, [tmp_path / "curves.png"], PROV)
    assert len(figs) == 2
    for fig in figs:
        _legible(fig)


def test_a_legend_goes_under_the_panels_not_beside_them(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The figure keeps its width and grows in height by the legend's band; the legend sits between
    the panels' x labels and the caption."""
    fig, ax = P.new_figure(9, 3, caption=["selection (a): correction=tis"])
    for i in range(8):
        ax[0, 0].plot([0, 1], [0, i], label=f"arm {i} with a long label")
    width, height = fig.get_figwidth(), fig.get_figheight()
    legend = P.figure_legend(fig, fig.axes)
    assert fig.get_figwidth() == width and fig.get_figheight() > height
    renderer = fig.canvas.get_renderer()
    box = legend.get_window_extent(renderer)
    panel = ax[0, 0].get_window_extent(renderer)
    caption = fig.texts[0].get_window_extent(renderer)
    assert box.y1 < panel.y0 and box.y0 > caption.y1
    assert box.width / fig.dpi <= width


def test_the_manual_states_the_style_s_numbers() -> None:
    """docs/results.md names the rule's numbers; they come from the style module, so a change there shows here."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "results.md").read_text()
    for said in (
        f"{S.DOCS_WIDTH_PX}-px column",
        f"{S.SMALL_PT:g} pt",
        f"{S.MAX_WIDTH_IN:.1f} inches",
        f"{round(S.MAX_WIDTH_IN * S.DPI)} px at {S.DPI} dpi",
        f"{S.MIN_TEXT_PX:g} px tall",
    ):
        assert said in text, said


def test_the_world_screen_is_legible_alone_and_under_figure_1(
    demo: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A study's screen table (rule world_screen's figure, and the panel under its Figure 1): its cells
    are text at the legend's size, and nothing runs into the caption or the footer."""
    from coolsampler.paper.figures import screen_figure
    from coolsampler.results.world_screen import screen_table
    from coolsampler.spec.world import Screen

    screen = Screen(("a", "b"), {"entropy": (0.2, 0.8), "offset": (None, 0.025)}, reference=("old",))
    probes = {
        n: {"world": f"{n}-0a1b2c3d", "entropy": 0.5, "offset": 0.02 + i / 100} for i, n in enumerate(screen.probed)
    }
    table = screen_table(screen, probes)
    figs = _capture_figure(monkeypatch)
    screen_figure(table, PROV, [tmp_path / "screen.png"])
    render(
        "fig1", demo_panels("fig1", demo), PROV, None, [tmp_path / "fig1.png"], None, DEMO_FIGURES["fig1"], screen=table
    )
    assert len(figs) == 2
    for fig in figs:
        _legible(fig)
        cells = [c.get_text() for tab in fig.findobj(Table) for c in tab.get_celld().values()]
        assert cells and min(c.get_fontsize() for c in cells) >= S.SMALL_PT
        texts = [c.get_text() for c in cells]
        assert any(t.startswith("0.0200 ") for t in texts), "the offset is shown to 4 decimals"
        assert any(t.startswith("reference") for t in texts)
