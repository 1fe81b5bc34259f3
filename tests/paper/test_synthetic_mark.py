"""A figure of synthetic data says so on the image itself (``render(..., synthetic=True)``), a figure of
real runs carries no such mark, and the manual's figure pages are titled by what their example shows."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from coolsampler.paper import plotting as P  # noqa: E402
from coolsampler.paper.render import render  # noqa: E402
from coolsampler.spec.provenance import Provenance  # noqa: E402
from coolsampler.testkit.synthetic import DEMO_FIGURES, demo_panels, demo_runs  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def _marks(fig) -> list:
    return [t for t in fig.texts if t.get_gid() == P.SYNTHETIC_GID]


def test_stamp_draws_the_mark_only_on_synthetic_figures():
    fig, _ = plt.subplots()
    meta = P.stamp(fig, Provenance("demo", "abc1234", False, synthetic=True))
    (mark,) = _marks(fig)
    assert mark.get_text() == P.SYNTHETIC_MARK and "SYNTHETIC" in mark.get_text()
    assert "synthetic=true" in meta["Keywords"]
    plt.close(fig)
    fig, _ = plt.subplots()
    meta = P.stamp(fig, Provenance("smoke", "abc1234", False))
    assert not _marks(fig) and not any("SYNTHETIC" in t.get_text() for t in fig.texts)
    assert "synthetic" not in meta["Keywords"]
    plt.close(fig)


@pytest.mark.parametrize("synthetic", [True, False])
def test_render_marks_a_synthetic_figure_in_the_written_file(tmp_path, synthetic):
    """The mark is in the saved image (SVG keeps the artist's gid as its id), and only when asked."""
    out = tmp_path / "fig1.svg"
    render("fig1", demo_panels("fig1", demo_runs()), Provenance("demo", "abc1234", False), None, [out],
           None, DEMO_FIGURES["fig1"], synthetic=synthetic)  # fmt: skip
    assert (f'id="{P.SYNTHETIC_GID}"' in out.read_text()) is synthetic


def test_figure_pages_are_titled_by_what_their_example_shows():
    pages = sorted((REPO / "docs" / "figures").glob("fig*.md"))
    assert len(pages) == 8
    for page in pages:
        text = page.read_text()
        title = text.splitlines()[0]
        example = text.split("## Example", 1)[1].split("\n## ", 1)[0]
        synthetic = "synthetic" in example.split("Drawn at", 1)[1]
        assert ("synthetic data" in title) is synthetic, page.name
        assert re.match(r"# Figure \d: ", title), title
    for real in ("fig1", "fig6"):  # the smoke study defines them: their examples are its real runs
        assert "synthetic" not in (REPO / "docs" / "figures" / f"{real}.md").read_text().splitlines()[0]
