"""workflow/tools/site_width.py finds what overflows at 1280 px (needs headless Chromium; skipped
without it, like the screenshots it takes)."""

from __future__ import annotations

import importlib.util
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


@pytest.mark.skipif(
    not any(shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome")), reason="no headless Chromium"
)
def test_measure_reports_a_cut_code_block_and_a_wide_document(tool, tmp_path):
    browser = tool.chromium()
    wide = "x" * 400
    cut = tool.measure(browser, _page(tmp_path, "cut.html", f"<pre style='overflow:auto'>{wide}</pre>"), 800)
    assert cut["cut"] and cut["cut"][0]["tag"] == "pre" and cut["scrollWidth"] <= 800
    fine = tool.measure(browser, _page(tmp_path, "fine.html", "<pre>short</pre>"), 800)
    assert not fine["cut"] and fine["scrollWidth"] <= 800
    broad = tool.measure(browser, _page(tmp_path, "broad.html", "<div style='width:2000px'>x</div>"), 800)
    assert broad["scrollWidth"] > 800
