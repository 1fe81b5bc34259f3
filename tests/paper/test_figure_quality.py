"""What a reader of a figure relies on: seeds of one arm told apart, the 1-nat line labelled and the
legend outside the data, KL <= 0 drawn visibly on a sensible log axis, numbers written as in the run
keys, the step Figure 2 reads named correctly, unknown panels refused; and the report's pieces (one
curves figure per run with its status, tables as HTML with rounded numbers)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from coolsampler.paper import plotting as P
from coolsampler.paper.figures import fig2_step_text
from coolsampler.paper.render import render
from coolsampler.paper.report import NO_IMAGE, run_curves_from_files, run_labels
from coolsampler.results.analysis import kl_step_for
from coolsampler.results.loaders import load_metrics, load_status
from coolsampler.spec.study import StudyError, load_study, study_from_dict
from coolsampler.spec.targets import TARGETS, PanelError, panel_filters
from coolsampler.testkit.synthetic import DEMO_FIGURES, demo_panels, demo_runs, write_study_results
from tests.paper.test_figures import _capture_figure

REPO = Path(__file__).resolve().parents[2]
STUDY, COMMIT = "smoke", "abc1234"


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The smoke study's runs as synthetic run directories (k1 KL with values <= 0, one near zero)."""
    study = load_study(REPO / "config/config.yaml", results=tmp_path_factory.mktemp("smoke"))
    write_study_results(study)
    return study


def panels_of(study: Any, target: str) -> dict[str, list[Any]]:
    out = {}
    for panel, filt in panel_filters(study.figures[target]).items():
        chosen = study.select(filt)
        out[panel] = [
            (
                r.settings(),
                load_metrics(Path(study.results) / "runs" / r.key / "metrics.parquet"),
                load_status(Path(study.results) / "runs" / r.key / "status.json"),
            )
            for r in chosen
        ]
    return out


def draw(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, target: str, panels: Any, selection: Any = None) -> Any:
    figs = _capture_figure(monkeypatch)
    render(target, panels, STUDY, COMMIT, [tmp_path / f"{target}.png"], None, selection)
    return figs[0]


def all_text(fig: Any) -> str:
    texts = [t.get_text() for t in fig.texts]
    for ax in fig.axes:
        texts += [ax.get_title(loc="left"), ax.get_xlabel(), ax.get_ylabel()]
        texts += [t.get_text() for t in ax.texts]
    for leg in fig.legends:
        texts += [t.get_text() for t in leg.get_texts()]
    return "\n".join(texts)


def test_seeds_of_one_arm_have_different_markers(smoke: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fig = draw(monkeypatch, tmp_path, "fig1", panels_of(smoke, "fig1"))
    ax = fig.axes[0]
    tis_tb1 = [ln for ln in ax.get_lines() if ln.get_label() == "Tb=1"]
    assert len(tis_tb1) == 2  # seeds 1 and 2 of one arm
    assert tis_tb1[0].get_color() == tis_tb1[1].get_color() and tis_tb1[0].get_ls() == tis_tb1[1].get_ls()
    assert tis_tb1[0].get_marker() != tis_tb1[1].get_marker()
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert {"seed 1", "seed 2"} <= set(legend)


def test_one_nat_line_is_labelled_and_the_legend_is_outside_the_panels(
    smoke: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fig = draw(monkeypatch, tmp_path, "fig1", panels_of(smoke, "fig1"))
    kl = fig.axes[1]
    one_nat = [ln for ln in kl.get_lines() if ln.get_label() == P.ONE_NAT_LABEL]
    assert len(one_nat) == 1 and list(one_nat[0].get_ydata()) == [1.0, 1.0]
    assert any(t.get_text() == P.ONE_NAT_LABEL for t in kl.texts)  # on the axis, too
    assert all(ax.get_legend() is None for ax in fig.axes)
    assert len(fig.legends) == 1 and P.ONE_NAT_LABEL in [t.get_text() for t in fig.legends[0].get_texts()]
    fig.canvas.draw()  # the legend lies under every panel and its x labels, within the figure's width
    legend = fig.legends[0].get_window_extent()
    renderer = fig.canvas.get_renderer()
    assert all(legend.y1 <= ax.get_tightbbox(renderer).y0 for ax in fig.axes)
    assert 0 <= legend.x0 and legend.x1 <= fig.bbox.width


def test_non_positive_kl_is_drawn_on_the_floor_and_one_near_zero_point_does_not_stretch_the_axis(
    smoke: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    panels = panels_of(smoke, "fig1")
    fig = draw(monkeypatch, tmp_path, "fig1", panels)
    kl = fig.axes[1]
    lo, hi = kl.get_ylim()
    values = np.concatenate([m["kl"].to_numpy(dtype="float64") for _, m, _ in panels["b"]])
    values = values[np.isfinite(values)]
    assert values.min() <= 3e-9  # the synthetic runs hold values <= 0 and a near-zero point ...
    assert lo >= 1e-5 and hi >= 1.0  # ... yet the axis is not stretched to them, and shows 1 nat
    below = int((values < lo).sum())
    marked = [c for c in kl.collections if c.get_label() == P.FLOOR_LABEL]
    assert below > 0 and sum(len(c.get_offsets()) for c in marked) == below
    assert all(np.allclose(np.asarray(c.get_offsets())[:, 1], lo) for c in marked)
    assert "values <= 0" in " ".join(all_text(fig).split())  # the footnote says what the triangles are (wrapped)


def test_numbers_are_written_as_in_the_run_keys(smoke: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fig = draw(monkeypatch, tmp_path, "fig1", panels_of(smoke, "fig1"), panel_filters(smoke.figures["fig1"]))
    text = all_text(fig)
    assert "lr 1e-4" in text and "0.0001" not in text
    demo = draw(monkeypatch, tmp_path, "fig4", demo_panels("fig4", demo_runs()))
    legend = [t.get_text() for t in demo.legends[0].get_texts()]
    assert "TIS Tb=1 lr 1.5e-6" in legend and not any("e-06" in t or "0.000" in t for t in legend)


def test_the_selection_of_each_panel_is_printed(smoke: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fig = draw(monkeypatch, tmp_path, "fig1", panels_of(smoke, "fig1"), panel_filters(smoke.figures["fig1"]))
    text = all_text(fig)
    assert "selection (a): N=32, correction=tis" in text
    assert "selection (b): N=32, correction=tis, seed=1" in text


def test_fig2_x_label_names_the_step_it_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The label is derived from kl_step_for, the function that picks the step: the smoke study's N=32
    reads step 32, the paper's rows step 110 and 60."""
    smoke_like = load_study(REPO / "config/config.yaml", results=tmp_path / "s")
    write_study_results(smoke_like)
    every = {"a": [e for p in panels_of(smoke_like, "table4").values() for e in p if e[0]["N"] == 32]}
    fig = draw(monkeypatch, tmp_path, "fig2", every)
    assert f"at step {kl_step_for(32)}, nats" in fig.axes[0].get_xlabel()
    assert "110" not in fig.axes[0].get_xlabel()
    fig = draw(monkeypatch, tmp_path, "fig2", demo_panels("fig2", demo_runs()), DEMO_FIGURES["fig2"])
    assert "step 110 (N=144/192/288), step 60 (N=96)" in fig.axes[0].get_xlabel()
    assert fig2_step_text([96]) == f"step {kl_step_for(96)}"


def test_unknown_panels_are_refused(smoke: Any, tmp_path: Path) -> None:
    panels = panels_of(smoke, "fig1")
    with pytest.raises(PanelError, match=r"fig1: unknown panel 'd'; allowed: a, b, c"):
        render("fig1", {**panels, "d": []}, STUDY, COMMIT, [tmp_path / "x.png"])
    raw = yaml.safe_load((REPO / "config/config.yaml").read_text())
    bad = copy.deepcopy(raw)
    bad["figures"]["fig1"]["d"] = {"N": 32}
    with pytest.raises(StudyError, match=r"figures\.fig1\.d: unknown panel; allowed: a, b, c"):
        study_from_dict(bad, origin="s.yaml")


def test_the_growth_panel_draws_each_runs_kl_less_its_step_1_value(
    smoke: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    panels = panels_of(smoke, "fig1")
    assert len(draw(monkeypatch, tmp_path, "fig1", panels).axes) == 2  # a study that names no (c) draws none
    fig = draw(monkeypatch, tmp_path, "fig1", {**panels, "c": panels["b"]})
    assert len(fig.axes) == 3
    growth = fig.axes[2]
    title = growth.get_title(loc="left").replace("\n", " ")  # titles wrap to the panel width
    assert title.startswith("(c)") and "KL growth" in title
    assert growth.get_yscale() == "linear"  # a cooled run's growth may be below zero
    lines = [ln for ln in growth.get_lines() if len(ln.get_xdata()) > 2]
    assert len(lines) == len(panels["b"])
    for (_, metrics, _), line in zip(panels["b"], lines, strict=True):
        kl = metrics.set_index("step")["kl"]
        x, y = np.asarray(line.get_xdata()), np.asarray(line.get_ydata())
        assert x[0] == 1 and y[0] == 0.0
        np.testing.assert_allclose(y, kl.loc[x].to_numpy() - kl.loc[1])


# --------------------------------------------------------------------------------------------------
# The report's pieces


def test_run_curves_show_the_status(smoke: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = smoke.runs[0]
    d = Path(smoke.results) / "runs" / run.key
    figs = _capture_figure(monkeypatch)
    run_curves_from_files(d / "metrics.parquet", d / "status.json", d / "run.yaml", tmp_path / "c.png", "smoke")
    assert (tmp_path / "c.png").read_bytes().startswith(b"\x89PNG")
    assert "complete (64/64 steps)" in figs[0]._suptitle.get_text()
    assert [ax.get_ylabel() for ax in figs[0].axes] == ["accuracy / reward", "KL (k1), nats/token", "learner entropy"]
    (tmp_path / "status.json").write_text(
        '{"complete": false, "last_step": 40, "expected_steps": 64, "problems": ["log ends at step 40"]}'
    )
    run_curves_from_files(d / "metrics.parquet", tmp_path / "status.json", d / "run.yaml", tmp_path / "u.png", "s")
    assert "unfinished at step 40/64: log ends at step 40" in figs[1]._suptitle.get_text()
    labels = run_labels(tmp_path / "status.json", d / "run.yaml")
    assert labels["run"] == run.key and labels["image"] == NO_IMAGE and labels["platform"] == "cpu"
    assert labels["status"].startswith("unfinished at step 40/64")


def test_tables_are_written_as_html_with_rounded_numbers(smoke: Any, tmp_path: Path) -> None:
    outs = [tmp_path / f"table1{s}" for s in TARGETS["table1"].suffixes]
    data = render("table1", panels_of(smoke, "table1"), STUDY, COMMIT, outs)
    html = (tmp_path / "table1.html").read_text()
    assert "<table>" in html and "<th>Objective</th>" in html and f"commit {COMMIT}" in html
    raw = f"{data['whole_mean'].iloc[0]!r}"  # the CSV's unrounded float
    assert len(raw) > 6 and raw not in html
    assert f"{data['whole_mean'].iloc[0]:.3f}" in html


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_snakemake_report_from_existing_runs(tmp_path: Path) -> None:
    """The HTML report of a small study drawn from run directories alone (no training: only the
    figure, table, run_curves, run_diagnostics, claims and diagnostic_leads rules may run): categories,
    captions, tables as tables, per-run curves and diagnostics with their status, the claims and the lead
    table the default target now builds. Slow (about a minute on 2 busy cores: every job starts Python)."""
    import subprocess
    import sys

    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    for rel in filter(None, files.split("\n")):
        if (REPO / rel).is_file():
            (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / rel).write_bytes((REPO / rel).read_bytes())
    raw = yaml.safe_load((REPO / "config/config.yaml").read_text())
    raw.update(name="tinyreport", results="results/tinyreport")
    raw["runs"] = [{"source": "report test", "N": 32, "correction": "tis", "Tb": [1.0, 0.8], "seed": 1}]
    raw["figures"] = {"fig1": {"a": {"N": 32}, "b": {"N": 32, "seed": 1}}, "table4": {"rows": {}}}
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(raw))
    write_study_results(load_study(tmp_path / "tiny.yaml", results=tmp_path / "results/tinyreport"))
    args = [sys.executable, "-m", "snakemake", "--configfile=tiny.yaml", "--allowed-rules", "figure", "table"]
    args += ["run_curves", "run_diagnostics", "claims", "claims_html", "diagnostic_leads", "all"]

    def smk(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([*args, *extra], cwd=tmp_path, capture_output=True, text=True, timeout=500)

    res = smk("--cores", "2")
    assert res.returncode == 0, res.stderr[-3000:]
    res = smk("--report", "results/tinyreport/report.html")
    assert res.returncode == 0, res.stderr[-3000:]
    html = (tmp_path / "results/tinyreport/report.html").read_text(errors="replace")
    for category in ('"Figures"', '"Tables"', '"Runs"', '"Claims"', '"Diagnostics"'):
        assert category in html, category
    assert "coolsampler: study" in html  # the workflow description
    assert "Figure 1: finite safe staleness" in html and "panel (b)" in html  # a figure's caption
    assert "table4.html" in html and "curves.png" in html and "claims.html" in html
    assert "diagnostics.png" in html and "diagnostic_leads.html" in html  # each run's diagnostics, the lead table
    assert "complete (64/64 steps)" in html and NO_IMAGE in html  # a run's labels


def test_markdown_reports_become_html_tables() -> None:
    """claims.md in the report: its pipe tables rendered as tables (rule claims_html)."""
    from coolsampler.paper.writers import markdown_page

    page = markdown_page("# Claims\n\n| id | ours |\n|---|---|\n| a<b | 0.512 |\n", title="claims")
    assert "<h1>Claims</h1>" in page and "<table>" in page and "<td>a&lt;b</td>" in page


def test_report_reads_the_commit_that_run_record_writes():
    from coolsampler.paper.report import NOT_RECORDED, commit_text

    assert commit_text({"repository": {"commit": "abc1234", "dirty": False}}) == "abc1234"
    assert commit_text({"repository": {"commit": "abc1234", "dirty": True}}) == "abc1234+dirty"
    assert commit_text({"repository": {"commit": "unknown", "dirty": "unknown"}}) == "unknown"
    assert commit_text({}) == NOT_RECORDED


def test_a_panel_of_two_N_draws_each_in_its_own_shade_and_names_N() -> None:
    """A fresh control beside a stale sampler at one temperature (the cliff study's round 5): the two
    arms must not read as one; a panel of one N keeps the plain colour and label."""
    from matplotlib.colors import to_rgb
    from matplotlib.figure import Figure

    from coolsampler.paper.figures import plot_runs
    from coolsampler.testkit.synthetic import make_metrics

    def entries(Ns):
        return [
            (
                {"N": n, "Tb": 1.0, "Tl": 1.0, "correction": "tis", "lr": 2e-4, "seed": 5},
                make_metrics(n, 96, 8, 1.0, None),
                None,
            )
            for n in Ns
        ]

    ax = Figure().subplots()
    plot_runs(ax, entries([4, 96]), "val_acc")
    lines = ax.get_lines()
    assert len({to_rgb(ln.get_color()) for ln in lines}) == 2
    assert [ln.get_label().endswith(f"N={n}") for ln, n in zip(lines, (4, 96), strict=True)] == [True, True]
    ax = Figure().subplots()
    plot_runs(ax, entries([96]), "val_acc")
    (line,) = ax.get_lines()
    assert "N=" not in line.get_label() and line.get_color() == "#ff7f0e"


def test_figure1_names_a_run_alike_in_every_panel_of_its_one_legend(monkeypatch) -> None:
    """Figure 1 of round 5: panels (a) and (b) hold N=4 and N=96, panel (c) the N=96 runs alone. The
    figure has one legend, so (c)'s runs take the label and shade they have in (a): one legend entry a
    run, not a second, bare 'Tb=1' beside 'Tb=1, N=96'."""
    from matplotlib.colors import to_rgb

    from coolsampler.paper.figures import fig1
    from coolsampler.spec.provenance import Provenance
    from coolsampler.testkit.synthetic import make_metrics

    def entry(n):
        return (
            {"N": n, "Tb": 1.0, "Tl": 1.0, "correction": "tis", "lr": 2e-4, "seed": 5},
            make_metrics(n, 96, 8, 1.0, None),
            None,
        )

    drawn = {}

    def keep(fig, outputs, provenance, title):  # the drawn figure, before it is written
        drawn["fig"] = fig

    monkeypatch.setattr("coolsampler.paper.plotting.save", keep)
    fig1({"a": [entry(4), entry(96)], "b": [entry(4), entry(96)], "c": [entry(96)]}, Provenance("t"), [])
    (leg,) = drawn["fig"].legends
    labels = [t.get_text() for t in leg.get_texts()]
    assert "Tb=1, N=96" in labels and "Tb=1" not in labels, labels
    a, _, c = drawn["fig"].axes[:3]
    colour = {ln.get_label(): to_rgb(ln.get_color()) for ln in a.get_lines() if ln.get_label().startswith("Tb=")}
    assert {ln.get_label() for ln in c.get_lines() if ln.get_label().startswith("Tb=")} == {"Tb=1, N=96"}
    assert all(to_rgb(ln.get_color()) == colour["Tb=1, N=96"] for ln in c.get_lines() if ln.get_label() == "Tb=1, N=96")
