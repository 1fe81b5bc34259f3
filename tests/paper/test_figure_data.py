"""Each accuracy-and-diagnostics figure draws the numbers of the runs it is given: for every panel,
every run's series is one of the panel's lines, point for point. A check that the figure file was
written would pass on an empty or wrong plot; this one does not. The other figures have theirs in
test_figure_quality.py, test_reporting.py and tests/results/test_guard_frontier.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from coolsampler.paper import plotting
from coolsampler.paper.figures import FIG8_COLUMNS
from coolsampler.paper.render import render
from coolsampler.spec.targets import TARGETS
from coolsampler.testkit.synthetic import demo_panels, demo_runs

# target -> (panel, metrics column, index of its axes in the figure)
DRAWN = {
    "fig3": [("a", "val_acc", 0), ("b", "val_acc", 1)],
    "fig5": [("a", "val_acc", 0), ("b", "val_acc", 1), ("c", "val_acc", 2)],
    "fig6": [("a", "val_acc", 0), ("b", "val_acc", 1)],
    # the accuracy panel, and a per-step column drawn on a linear axis
    "fig8": [("a", "val_acc", 0), ("a", "entropy", [c for c, _ in FIG8_COLUMNS].index("entropy"))],
}


@pytest.fixture(scope="module")
def runs() -> list[tuple[Any, pd.DataFrame, Any]]:
    return demo_runs()


def _lines(ax: Any) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(np.asarray(ln.get_xdata(), float), np.asarray(ln.get_ydata(), float)) for ln in ax.get_lines()]


def _drawn(lines: list[tuple[np.ndarray, np.ndarray]], x: np.ndarray, y: np.ndarray) -> bool:
    return any(len(lx) == len(x) and np.array_equal(lx, x) and np.allclose(ly, y, equal_nan=True) for lx, ly in lines)


@pytest.mark.parametrize("target", sorted(DRAWN))
def test_every_run_of_every_panel_is_drawn_point_for_point(
    target: str, runs: list[Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    panels = demo_panels(target, runs)
    figs: list[Any] = []
    real = plotting.save
    monkeypatch.setattr(plotting, "save", lambda fig, outs, **kw: (figs.append(fig), real(fig, outs, **kw))[1])
    render(target, panels, "teststudy", "abc1234", [tmp_path / f"{target}{s}" for s in TARGETS[target].suffixes])
    (fig,) = figs
    for panel, column, index in DRAWN[target]:
        lines = _lines(fig.axes[index])
        drawn = 0
        for _, metrics, _ in panels[panel]:
            s = metrics.set_index("step")[column].dropna()
            assert _drawn(lines, s.index.to_numpy(float), s.to_numpy(float)), (target, panel, column)
            drawn += 1
        assert drawn >= 1, (target, panel)  # the demo gives every panel runs to draw
