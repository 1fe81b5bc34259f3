"""The guard study's frontier and criterion (coolsampler.results.guard.frontier_*, the claims' ``per:
frontier``, config/guard.yaml and config/guard-claims.yaml): worked out by hand on synthetic logs of the
study's own runs, in a world where the guard meets its criterion and in worlds where each part fails."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from coolsampler.paper.render import render
from coolsampler.results import claims as C
from coolsampler.results.guard import frontier_arms, frontier_table
from coolsampler.spec.metrics_schema import RunStatus
from coolsampler.spec.study import Run, load_study
from coolsampler.testkit.synthetic import make_metrics

REPO = Path(__file__).resolve().parents[2]
STUDY = load_study(REPO / "config" / "guard.yaml")
CLAIMS = C.load_claims(REPO / "config" / "guard-claims.yaml")
STEPS, VAL = 64, 8


def _metrics(run: Run, *, collapse_at: int | None, refreshes: list[int], acc: float = 0.6) -> pd.DataFrame:
    m = make_metrics(run.N, STEPS, VAL, 1.0, collapse_at, seed=run.seed, correction="none", collapse_to=0.2)
    if collapse_at is None:  # a flat curve: its whole-run mean is exactly acc
        m["val_acc"] = np.where(m["val_acc"].notna(), acc, np.nan)
    m["refreshed"] = m["step"].isin(refreshes)
    return m


def _world(*, unsafe_from: int = 16, guard_collapse: bool = False, guard_every: int = 13) -> dict[str, C.RunData]:
    """Fixed N >= unsafe_from degrade at step 40; N=8 holds at 0.6; the guard refreshes every
    ``guard_every`` steps and holds at 0.59 (or degrades)."""
    data = {}
    for r in STUDY.runs:
        if r.refresh == "fixed":
            collapse = 40 if r.N >= unsafe_from else None
            m = _metrics(r, collapse_at=collapse, refreshes=list(range(r.N, STEPS + 1, r.N)))
        elif r.refresh == "schedule":  # a replayed schedule: its own steps, held at 0.58
            m = _metrics(r, collapse_at=None, refreshes=list(r.schedule), acc=0.58)
        else:
            m = _metrics(
                r,
                collapse_at=40 if guard_collapse else None,
                refreshes=list(range(guard_every, STEPS + 1, guard_every)),
                acc=0.59,
            )
        data[r.key] = C.RunData(r, m, RunStatus(True, STEPS, STEPS, []))
    return data


def _verdicts(data: dict[str, C.RunData]) -> dict[str, C.Result]:
    return {res.claim["id"]: res for res in C.evaluate(CLAIMS, STUDY.runs, data)}


def test_the_study_states_its_criterion_before_its_runs() -> None:
    text = (REPO / "config" / "guard.yaml").read_text()
    assert "SUCCESS CRITERION, written into this file before any of its runs was trained" in text
    for part in ("C1", "C2", "C3"):
        assert part in text
    kinds = [r.refresh for r in STUDY.runs]
    assert kinds.count("fixed") == 8 and kinds.count("guard") == 4  # 4 N and 2 thresholds, 2 seeds each
    # each guard run's refreshes replayed once, on a seed no fixed or guard run uses
    replays = [r for r in STUDY.runs if r.refresh == "schedule"]
    assert len(replays) == 4 and {r.seed for r in replays}.isdisjoint({r.seed for r in STUDY.runs if r not in replays})
    assert sorted({r.N for r in STUDY.runs if r.refresh == "fixed"}) == [4, 8, 16, 32]
    assert {r.guard.threshold for r in STUDY.runs if r.guard} == {0.1, 0.05}
    # every claim checks runs of the study, and each threshold has its three parts
    C.check_selects(CLAIMS, STUDY.runs, "guard")
    ids = [c["id"] for c in CLAIMS.claims]
    assert len(ids) == 6 and all(c["where"] == "Criterion guard" for c in CLAIMS.claims)


def test_frontier_table_by_hand() -> None:
    data = _world()
    entries = [(d.run.settings(), d.metrics, d.status) for d in data.values()]
    t = frontier_table(entries)
    assert len(t) == 16
    n8 = t[t["arm"] == "N=8"]
    assert list(n8["refreshes"]) == [8, 8] and list(n8["interval"]) == [8.0] * 2
    assert not n8["degraded"].any() and n8["whole"].tolist() == pytest.approx([0.6] * 2)
    assert t[t["arm"] == "N=16"]["degraded"].all()
    g = t[t["arm"] == "guard probs_diff>0.1"]
    assert list(g["refreshes"]) == [4, 4] and list(g["interval"]) == [16.0] * 2  # 13, 26, 39, 52
    arms = frontier_arms(t)
    assert list(arms["arm"])[:6] == ["N=4", "N=8", "N=16", "N=32", "guard probs_diff>0.05", "guard probs_diff>0.1"]
    replayed = sorted(f"schedule {','.join(map(str, r.schedule))}" for r in STUDY.runs if r.schedule)
    assert sorted(arms["arm"][6:]) == replayed  # each replay its own point
    assert list(arms["degraded"]) == [0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    sched = t[t["refresh"] == "schedule"]
    assert sorted(sched["refreshes"]) == [2, 3, 4, 5]  # the replayed schedules' own lengths


def test_the_guard_that_meets_the_criterion() -> None:
    """N* = 8; the guard's interval 16 = 2.0 x 8 >= 1.5; accuracy 0.59 - 0.6 = -0.01 >= -0.02."""
    v = _verdicts(_world())
    assert {k: r.verdict for k, r in v.items()} == dict.fromkeys(v, "reproduced")
    assert v["c2-guard10-interval"].value == pytest.approx(2.0)
    assert v["c3-guard10-accuracy"].value == pytest.approx(-0.01)
    assert "against N=8" in v["c2-guard10-interval"].reason


def test_each_part_can_fail() -> None:
    # C1: the guard's runs degrade
    v = _verdicts(_world(guard_collapse=True))
    assert v["c1-guard10-none-degrade"].verdict == "differs" and v["c1-guard10-none-degrade"].value == 2
    # C2: refreshed at 10, 20, ..., 60: 64 / 6 = 10.67 steps, 1.33 x N* = 8 < 1.5
    v = _verdicts(_world(guard_every=10))
    assert v["c2-guard10-interval"].verdict == "differs"
    assert v["c2-guard10-interval"].value == pytest.approx(64 / 6 / 8)
    # a frontier further out: N* = 16 -> the same guard is 1.0 x
    v = _verdicts(_world(unsafe_from=32))
    assert v["c2-guard10-interval"].value == pytest.approx(1.0) and "against N=16" in v["c2-guard10-interval"].reason
    # no fixed N holds: C2 and C3 cannot be judged, and the note says so
    v = _verdicts(_world(unsafe_from=1))
    assert v["c2-guard10-interval"].verdict == "differs" and v["c2-guard10-interval"].value is None
    assert "no frontier to compare with" in v["c3-guard10-accuracy"].reason


def test_the_frontier_figure_draws(tmp_path: Path) -> None:
    data = _world()
    panels = {"a": [(d.run.settings(), d.metrics, d.status) for d in data.values()]}
    outs = [tmp_path / "guard_frontier.pdf", tmp_path / "guard_frontier.png"]
    render("guard_frontier", panels, "guard", "abc1234", outs)
    assert all(o.stat().st_size > 10_000 for o in outs)


def test_the_frontier_draws_each_arm_in_a_colour_of_its_own(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The fixed-N line keeps its sampler temperature's colour; each guard arm and the replayed schedules
    take colours of their own, so an arm reads apart by colour, not by marker alone."""
    from tests.paper.test_figures import _capture_figure

    figs = _capture_figure(monkeypatch)
    data = _world()
    render("guard_frontier", {"a": [(d.run.settings(), d.metrics, d.status) for d in data.values()]}, "guard",
           "abc1234", [tmp_path / "guard_frontier.png"])  # fmt: skip
    handles, labels = figs[0].axes[0].get_legend_handles_labels()
    colour = {lab: h.get_color() for h, lab in zip(handles, labels, strict=True) if not lab.startswith("_")}
    arms = [lab for lab in colour if lab.startswith("no correction, Tb 1: ")]  # the study's one correction and Tb
    assert len(arms) == 4 and sum("guard" in a for a in arms) == 2 and any("replayed" in a for a in arms)
    assert len({colour[a] for a in arms}) == len(arms), colour
