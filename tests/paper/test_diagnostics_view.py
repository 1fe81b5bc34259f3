"""One run's staleness diagnostics as a reader sees them (the report's runs/<key>/diagnostics.png), and
the study's lead table as written for the report (diagnostic_leads.md|csv|html)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from coolsampler.paper import diagnostics as PD
from coolsampler.paper import plotting as P
from coolsampler.results import diagnostics as D
from coolsampler.spec.metrics_schema import RunStatus
from coolsampler.spec.provenance import Provenance
from coolsampler.spec.study import load_study
from coolsampler.testkit.synthetic import make_metrics, write_study_results
from tests.paper.test_figure_quality import all_text
from tests.paper.test_figures import _capture_figure

REPO = Path(__file__).resolve().parents[2]
PROV = Provenance("smoke", commit="abc1234")
KEY = "qwen2.5-math-1.5b/gsm8k/N192_lr2e-6_tis_Tb1_Tl1_s1"
SETTINGS = {"key": KEY, "N": 192, "steps": 300, "seed": 1, "Tb": 1.0, "correction": "tis"}


def _draw(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, metrics: pd.DataFrame, **settings: Any) -> Any:
    figs = _capture_figure(monkeypatch)
    out = tmp_path / "diagnostics.png"
    PD.run_diagnostics({**SETTINGS, **settings}, metrics, RunStatus(True, 300, 300, []), [out], PROV)
    assert out.read_bytes().startswith(b"\x89PNG")
    return figs[0]


def test_the_view_draws_every_diagnostic_against_the_accuracy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    m = make_metrics(192, 300, 10, 1.0, collapse_at=190, seed=3)
    fig = _draw(monkeypatch, tmp_path, m)
    axes = fig.axes
    assert [ax.get_title(loc="left").replace("\n", " ") for ax in axes] == list(PD.PANELS)  # long ones wrapped
    text = all_text(fig)
    first = D.earliest(D.run_leads(KEY, m))[KEY][0]
    lead = D.diagnostic_lead(m, D.diagnostic(first))
    title = fig._suptitle.get_text()
    assert f"onset at step 190; first to cross: {D.diagnostic(first).label} (lead {lead:+d})" in title
    # every parsed diagnostic is drawn somewhere (the view's legend names them)
    for label in ("forward KL k1", "forward KL k3", "log(1+chi2_token)", "log(1+chi2_seq)", "effective sample size",
                  "weight > cap", "weight < 1/cap", "largest weight", "smallest weight", "std of the weights",
                  "mean |pi - q|", "largest |pi - q|", "log-perplexity gap, min-max", P.REFRESH_LABEL,
                  PD.ONSET_LABEL, P.ONE_NAT_LABEL):  # fmt: skip
        assert label in text, label
    # heavy-tailed panels on log axes; refresh lines at 192 and the onset on every panel
    assert [ax.get_yscale() for ax in axes[1:3]] == ["log", "log"] and axes[5].get_yscale() == "log"
    for ax in axes:
        xs = {round(float(ln.get_xdata()[0])) for ln in ax.get_lines() if len(ln.get_xdata()) == 2}
        assert {190, 192} <= xs, ax.get_title(loc="left")
    # the lead strip: one dot per diagnostic that crossed, at its first crossing
    strip = axes[7]
    dots = sorted(int(ln.get_xdata()[0]) for ln in strip.get_lines() if ln.get_marker() == "o")
    want = sorted(int(D.crossing(m, d)) for d in D.DIAGNOSTICS if D.crossing(m, d) is not None)
    assert dots == want and len(dots) == len(D.DIAGNOSTICS)


def test_rolling_median_is_drawn_over_the_per_step_values(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    m = make_metrics(192, 300, 10, 1.0, collapse_at=190, seed=3)
    fig = _draw(monkeypatch, tmp_path, m)
    ax = fig.axes[1]
    thick = next(ln for ln in ax.get_lines() if ln.get_label() == "reverse-KL bound log(1+chi2_token)")
    want = D.rolling_median(D.training_series(m, "rkl_bound_token"))
    lo = ax.get_ylim()[0]
    assert np.allclose(thick.get_ydata(), np.maximum(want.to_numpy(), lo)) and thick.get_linewidth() > 1.0
    faint = [ln for ln in ax.get_lines() if ln.get_alpha() == PD.RAW_ALPHA]
    assert len(faint) >= 3  # k3, the token bound and the log-ppl gap: per step, faint, under their medians


def test_a_run_without_is_weights_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    m = make_metrics(96, 300, 10, 0.8, collapse_at=150, correction="none")
    fig = _draw(monkeypatch, tmp_path, m, correction="none", N=96)
    text = all_text(fig)
    assert text.count("no IS weights logged (no correction, or mu-GRPO)") == 2
    assert text.count(PD.NOT_LOGGED) >= 3  # the strip: ESS and both cap fractions


def test_a_log_without_diagnostics_still_draws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    m = make_metrics(192, 300, 10, 1.0)
    for col in D.DIAGNOSTICS:
        m[col.column] = np.nan
    m[["chi2_token", "chi2_seq", "rkl_bound_seq", "log_ppl_diff", "probs_diff_max", "probs_diff_std"]] = np.nan
    fig = _draw(monkeypatch, tmp_path, m)
    assert "no onset (stable under Section 2)" in fig._suptitle.get_text()
    text = all_text(fig)
    assert "chi2_seq not logged" in text and "rollout_probs_diff not logged" in text


def test_the_study_lead_table_is_written_for_the_report(tmp_path: Path) -> None:
    study = load_study(REPO / "config/config.yaml", results=tmp_path / "smoke")
    write_study_results(study)
    metrics = [str(tmp_path / "smoke" / "runs" / r.key / "metrics.parquet") for r in study.runs]
    out = {s: tmp_path / f"diagnostic_leads.{s}" for s in ("md", "csv", "html")}
    table = PD.study_leads_from_files(metrics, {r.key: r.settings() for r in study.runs}, out, "smoke")
    md = out["md"].read_text()
    degraded = [r.key for r in study.runs if r.correction == "none"]
    assert f"Which diagnostic warns first: {len(degraded)} degraded runs" in md
    assert all(f"`{k}`: onset at step" in md for k in degraded) and "commit" in md.splitlines()[-1]
    csv = pd.read_csv(out["csv"])
    assert len(csv) == len(table) == len(study.runs) * sum(len(d.sensitivity) for d in D.DIAGNOSTICS)
    assert set(csv.key) == {r.key for r in study.runs}
    html = out["html"].read_text()
    assert "<table>" in html and "reverse-KL bound log(1+chi2_token)" in html
