"""workflow/tools/site_width.py finds what overflows at 1280 px, and images shown narrower than the column
the figures' font sizes assume (needs headless Chromium, which .ci/run installs; under CI=true a test
that skips fails, tests/conftest.py)."""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "workflow" / "tools" / "site_width.py"


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location("site_width", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def _page(tmp_path: Path, name: str, body: str) -> Path:
    page = tmp_path / name
    box = f"<div class='md-content' style='width:600px'>{body}</div>"
    page.write_text(f"<html><body style='margin:0'>{box}</body></html>")
    return page


NO_CHROMIUM = not any(shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome"))


@pytest.mark.skipif(NO_CHROMIUM, reason="no headless Chromium")
def test_measure_reports_a_cut_code_block_and_a_wide_document(tool, tmp_path):
    browser = tool.chromium()
    wide = "x" * 400
    cut = tool.measure(browser, _page(tmp_path, "cut.html", f"<pre style='overflow:auto'>{wide}</pre>"), 800)
    assert cut["cut"] and cut["cut"][0]["tag"] == "pre" and cut["scrollWidth"] <= 800
    fine = tool.measure(browser, _page(tmp_path, "fine.html", "<pre>short</pre>"), 800)
    assert not fine["cut"] and fine["scrollWidth"] <= 800
    broad = tool.measure(browser, _page(tmp_path, "broad.html", "<div style='width:2000px'>x</div>"), 800)
    assert broad["scrollWidth"] > 800


def test_an_image_squeezed_below_the_figures_column_is_named(tool) -> None:
    m = {
        "images": [
            {"src": "img/fig1.png", "shown": 600, "natural": 1200},
            {"src": "a.png", "shown": 300, "natural": 300},
        ]
    }
    assert tool.narrow_images(m) == [
        f"image img/fig1.png shown 600 px wide (< {tool.DOCS_WIDTH_PX}): its text renders under 9 px"
    ]
    assert tool.narrow_images({"images": [{"src": "f.png", "shown": tool.DOCS_WIDTH_PX, "natural": 1200}]}) == []


@pytest.mark.skipif(NO_CHROMIUM, reason="no headless Chromium")
def test_measure_reads_how_wide_an_image_is_shown(tool, tmp_path) -> None:
    from PIL import Image

    Image.new("RGB", (1200, 300), "white").save(tmp_path / "fig.png")
    m = tool.measure(tool.chromium(), _page(tmp_path, "img.html", "<img src='fig.png' style='max-width:100%'>"), 1280)
    assert m["images"] == [{"src": "fig.png", "shown": 600, "natural": 1200}]
    assert tool.narrow_images(m)


@pytest.mark.slow
@pytest.mark.skipif(NO_CHROMIUM, reason="no headless Chromium")
def test_the_manual_fits_1280_px_and_shows_figures_at_their_column(tool, tmp_path, capsys) -> None:
    """The real manual, built strict: no page overflows, and every figure is shown at least as wide as
    coolsampler.paper.style.DOCS_WIDTH_PX (a narrower theme column would make their text illegible)."""
    rc = tool.main(["--no-screenshots", "--out", str(tmp_path / "site_width")])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert re.search(r"^0 of \d+ pages overflow at 1280 px", out, re.M) and "ok  cliff.html" in out
