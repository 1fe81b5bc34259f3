"""Every figure and table target renders from synthetic runs, carries its provenance, and names
missing or unfinished runs instead of dropping them."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest

from coolsampler.paper import labels, plotting
from coolsampler.paper.labels import availability_notes
from coolsampler.paper.own_logs import analyze
from coolsampler.paper.render import load_panels, render, run_snakemake_target
from coolsampler.paper.writers import to_latex, to_markdown
from coolsampler.spec import provenance
from coolsampler.spec.targets import TARGETS
from coolsampler.testkit.synthetic import DEMO_FIGURES, demo_panels, demo_runs

STUDY, COMMIT = "teststudy", "abc1234"


@pytest.fixture(scope="module")
def runs() -> list[tuple[Any, pd.DataFrame, Any]]:
    return demo_runs()


def outputs(tmp_path: Path, target: str) -> list[Path]:
    return [tmp_path / f"{target}{s}" for s in TARGETS[target].suffixes]


def test_registry_panels_match_the_demo_figures_block() -> None:
    assert set(TARGETS) == {f"fig{i}" for i in range(1, 9)} | {f"table{i}" for i in range(1, 5)} | {"guard_frontier"}
    for target, spec in TARGETS.items():
        assert spec.kind in ("figure", "table")
        assert sorted(DEMO_FIGURES[target]) == sorted(spec.required), target


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_target_renders(target: str, runs: list[Any], tmp_path: Path) -> None:
    panels = demo_panels(target, runs)
    assert all(panels.values()), f"{target}: a demo panel selects no run"
    outs = outputs(tmp_path, target)
    render(target, panels, STUDY, COMMIT, outs)
    for out in outs:
        assert out.exists() and out.stat().st_size > 0, out
    if TARGETS[target].kind == "figure":
        pdf = outs[0].read_bytes()
        assert pdf.startswith(b"%PDF")
        assert f"study={STUDY} commit={COMMIT}".encode() in pdf  # PDF Info /Keywords
        assert outs[1].read_bytes().startswith(b"\x89PNG")
    else:
        data = pd.read_csv(outs[0])
        assert len(data) > 0 and "note" in data.columns
        assert COMMIT in outs[1].read_text() and COMMIT in outs[2].read_text()
        assert "\\begin{tabular}" in outs[1].read_text() and "|---|" in outs[2].read_text()


def _capture_figure(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    got: list[Any] = []
    real = plotting.save

    def spy(fig: Any, outs: Any, **kw: Any) -> None:
        got.append(fig)
        real(fig, outs, **kw)

    monkeypatch.setattr(plotting, "save", spy)
    return got


def _figure_text(fig: Any) -> str:
    return "\n".join(t.get_text() for t in fig.texts)


def test_missing_run_is_named_on_the_figure(runs: list[Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    panels = demo_panels("fig1", runs)
    settings, _, _ = panels["a"][0]
    panels["a"][0] = (settings, None, None)
    figs = _capture_figure(monkeypatch)
    render("fig1", panels, STUDY, COMMIT, outputs(tmp_path, "fig1"))
    text = _figure_text(figs[0])
    assert "runs missing/unfinished" in text
    # the note names *this* run (its key, whole: notes never break inside a key) and why
    assert f"{labels.short_key(settings)}: missing" in text.replace("\n", " ")
    assert f"study {STUDY} | commit {COMMIT}" in text


def test_cut_run_is_named_unfinished_on_fig8(runs: list[Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    figs = _capture_figure(monkeypatch)
    render("fig8", demo_panels("fig8", runs), STUDY, COMMIT, outputs(tmp_path, "fig8"))
    assert "unfinished at step 287/300" in _figure_text(figs[0]).replace("\n", " ")


@pytest.mark.parametrize("target", sorted(t for t, spec in TARGETS.items() if spec.kind == "figure"))
def test_every_tick_label_lies_inside_the_figure(
    target: str, runs: list[Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row label as long as the demo's longest (a learning rate named where it differs) is drawn whole,
    not cut at the figure's edge."""
    figs = _capture_figure(monkeypatch)
    render(target, demo_panels(target, runs), STUDY, COMMIT, outputs(tmp_path, target))
    fig = figs[0]
    renderer = fig.canvas.get_renderer()
    width = fig.get_figwidth() * fig.dpi
    for ax in fig.axes:
        for label in [*ax.get_yticklabels(), *ax.get_xticklabels()]:
            if label.get_visible() and label.get_text():
                box = label.get_window_extent(renderer)
                assert box.x0 >= 0 and box.x1 <= width, f"{target}: {label.get_text()!r} cut at the edge"


def test_complete_panels_have_no_note(runs: list[Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    figs = _capture_figure(monkeypatch)
    render("fig1", demo_panels("fig1", runs), STUDY, COMMIT, outputs(tmp_path, "fig1"))
    assert "runs missing" not in _figure_text(figs[0])


def test_availability_notes() -> None:
    from coolsampler.spec.metrics_schema import RunStatus

    df = pd.DataFrame({"step": [1]})
    entries = [
        ({"key": "qwen2.5-math-1.5b/gsm8k/A"}, None, None),
        ({"key": "qwen2.5-math-1.5b/gsm8k/B"}, df, None),
        ({"key": "qwen2.5-math-7b/gsm8k/C"}, df, RunStatus(False, 287, 300, ["cut"])),
        ({"key": "qwen2.5-math-7b/gsm8k/D"}, df, RunStatus(True, 300, 300, [])),
    ]
    assert availability_notes(entries) == [
        "1.5B/gsm8k/A: missing",
        "1.5B/gsm8k/B: status unknown",
        "7B/gsm8k/C: unfinished at step 287/300 (cut)",
    ]


def test_missing_run_keeps_its_table_row(runs: list[Any], tmp_path: Path) -> None:
    panels = demo_panels("table4", runs)
    settings, _, _ = panels["rows"][3]
    panels["rows"][3] = (settings, None, None)
    data = render("table4", panels, STUDY, COMMIT, outputs(tmp_path, "table4"))
    assert len(data) == 55
    row = data[data["key"] == settings["key"]].iloc[0]
    assert not row["complete"] and "no metrics" in row["note"]
    cut = data[data["replicate"] == "cut"].iloc[0]
    assert not cut["complete"] and "287" in cut["note"]


def test_table1_numbers(runs: list[Any], tmp_path: Path) -> None:
    data = render("table1", demo_panels("table1", runs), STUDY, COMMIT, outputs(tmp_path, "table1"))
    by = {(r.Tb, r.N, r.lr): r for r in data.itertuples()}
    assert len(data) == 6  # the paper's six arms
    assert by[("1.0", 96, 2e-6)].refreshes == 3 and by[("1.0", 192, 2e-6)].refreshes == 1
    assert by[("1.0", 192, 2e-6)].degraded == 2 and by[("0.8", 192, 2e-6)].degraded == 0
    assert by[("1.0", 192, 1e-6)].degraded == 0 and by[("1.0", 192, 1e-6)].arm == "TIS, lr 1e-6"
    assert {"last5_s43", "last5_s44", "last5_mean", "whole_mean"} <= set(data.columns)
    md = (tmp_path / "table1.md").read_text()
    assert "Last five: 43 / 44 / mean" in md


def test_table2_lists_stable_arms_and_events(runs: list[Any], tmp_path: Path) -> None:
    data = render("table2", demo_panels("table2", runs), STUDY, COMMIT, outputs(tmp_path, "table2"))
    assert set(data["kind"]) >= {"stable", "sustained", "transient"}
    md = (tmp_path / "table2.md").read_text()
    assert "stable, end" in md and "transient dip at 190" in md


def test_table3_cycles(runs: list[Any], tmp_path: Path) -> None:
    data = render("table3", demo_panels("table3", runs), STUDY, COMMIT, outputs(tmp_path, "table3"))
    assert {"kl_c1", "kl_c2", "entropy_start_c1", "clip_c2"} <= set(data.columns)
    assert data["kl_c1"].notna().all()


def test_unknown_target() -> None:
    with pytest.raises(KeyError, match="allowed"):
        render("fig9", {}, STUDY, COMMIT, [])


def test_writers_escape() -> None:
    d = pd.DataFrame({"a_b": ["x|y"], "c": ["50% & more"]})
    assert r"a\_b" in to_latex(d) and r"50\% \& more" in to_latex(d)
    assert r"x\|y" in to_markdown(d)


def test_snakemake_script_logic(runs: list[Any], tmp_path: Path) -> None:
    spec: dict[str, list[dict[str, Any]]] = {}
    for panel, entries in demo_panels("fig3", runs).items():
        spec[panel] = []
        for i, (settings, metrics, status) in enumerate(entries):
            d = tmp_path / panel / str(i)
            d.mkdir(parents=True)
            metrics.to_parquet(d / "metrics.parquet")
            (d / "status.json").write_text(json.dumps(status.__dict__))
            spec[panel].append(
                {
                    "settings": settings,
                    "metrics": str(d / "metrics.parquet"),
                    "status": str(d / "status.json"),
                }
            )
    spec["b"].append({"settings": {"key": "qwen2.5-math-7b/gsm8k/NOTYET", "N": 192}, "metrics": None, "status": None})
    assert load_panels(spec)["b"][-1][1] is None
    outs = [tmp_path / "fig3.pdf", tmp_path / "fig3.png"]
    smk = SimpleNamespace(
        params=SimpleNamespace(target="fig3", study=STUDY, commit=COMMIT, panels=spec),
        output=[str(o) for o in outs],
        log=[str(tmp_path / "fig3.log")],
    )
    run_snakemake_target(smk, "figure")
    assert all(o.exists() for o in outs)
    log = (tmp_path / "fig3.log").read_text()
    assert "NOTYET: missing" in log
    with pytest.raises(ValueError, match="not a table"):
        run_snakemake_target(smk, "table")
    assert "Traceback" in (tmp_path / "fig3.log").read_text()


def _git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    out = subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, check=True, env={**os.environ, **env}
    )
    return out.stdout.strip()


def test_provenance_commit_and_dirty_flag(tmp_path: Path) -> None:
    """The commit is the tree's HEAD, '+dirty' when a tracked file differs from it; 'unknown' only
    outside git. Checked on a repository made here, so the test does not depend on where it runs."""
    assert provenance.git_commit(tmp_path) == "unknown" and provenance.git_dirty(tmp_path) is None
    _git(tmp_path, "init", "-q")
    (tmp_path / "code.py").write_text("x = 1\n")
    _git(tmp_path, "add", "code.py")
    _git(tmp_path, "commit", "-qm", "one")
    head = _git(tmp_path, "rev-parse", "--short", "HEAD")
    assert re.fullmatch(r"[0-9a-f]{4,}", head)
    assert provenance.git_commit(tmp_path) == head
    assert provenance.git_dirty(tmp_path) is False
    (tmp_path / "untracked.txt").write_text("results do not count\n")
    assert provenance.git_dirty(tmp_path) is False
    (tmp_path / "code.py").write_text("x = 2\n")
    assert provenance.git_dirty(tmp_path) is True
    prov = provenance.Provenance.here("s", script="workflow/scripts/figure.py", cwd=tmp_path)
    assert prov.footer() == f"study s | commit {head}+dirty | workflow/scripts/figure.py"
    assert f"commit={head}+dirty" in prov.pdf_metadata()["Keywords"]


def test_analyze_text(tmp_path: Path) -> None:
    from coolsampler.testkit.synthetic import make_metrics

    (tmp_path / "r").mkdir()
    make_metrics(192, collapse_at=190).to_parquet(tmp_path / "r" / "metrics.parquet")
    (tmp_path / "r" / "status.json").write_text(
        json.dumps(dict(complete=True, last_step=300, expected_steps=300, problems=[]))
    )
    text = analyze([str(tmp_path / "r" / "metrics.parquet"), str(tmp_path / "absent.jsonl")])
    assert "onset 190" in text and "sustained" in text and "N=192" in text
    assert "cannot read" in text and "Summary (Table 1 style" in text
    assert "NOT complete" not in text.split("absent")[0]
