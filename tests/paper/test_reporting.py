"""The reporting layer says what its numbers are: the clip fraction against the configured limit,
the KL estimator named (and k3 selectable), mu-GRPO's logged fractions drawn, Table 2 decided by the
data, Table 3's merged seeds, Table 4 in the paper's order with the numbers the text quotes."""

from __future__ import annotations

import copy
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from coolsampler.paper.render import render
from coolsampler.paper.tables import comparison_key, table4_order
from coolsampler.results.analysis import summarize_run
from coolsampler.results.metrics import length_clip_fraction, parse_jsonl
from coolsampler.spec.study import StudyError, Temperature, load_study, study_from_dict
from coolsampler.spec.targets import TARGETS, target_options
from coolsampler.testkit.synthetic import _DEMO, demo_panels, demo_runs
from tests.paper.test_figures import _capture_figure
from tests.results.test_broken_logs import DROP, KEY, STEPS, VAL_EVERY, records, write

REPO = Path(__file__).resolve().parents[2]
STUDY, COMMIT = "teststudy", "abc1234"


@pytest.fixture(scope="module")
def runs() -> list[tuple[Any, pd.DataFrame, Any]]:
    return demo_runs()


def outputs(tmp_path: Path, target: str) -> list[Path]:
    return [tmp_path / f"{target}{s}" for s in TARGETS[target].suffixes]


# --------------------------------------------------------------------------------------------------
# Parsing: clip fraction, k3, mu-GRPO


def test_clip_fraction_is_measured_against_the_configured_limit(tmp_path: Path) -> None:
    """verl's clip_ratio counts responses as long as the padded batch; where no response reached the
    configured limit (response_length/max below it) the fraction is 0, not verl's >= 1/batch."""
    short = {f"s{t}": {"response_length/clip_ratio": 1 / 128, "response_length/max": 300} for t in range(1, 11)}
    full = {f"s{t}": {"response_length/clip_ratio": 0.25, "response_length/max": 512} for t in range(11, 21)}
    log = write(tmp_path / "train.jsonl", records(**short, **full))
    df, status = parse_jsonl(log, expected_steps=STEPS, val_every=VAL_EVERY, run=KEY, max_response_length=512)
    clip = df.set_index("step")["clip_frac"]
    assert (clip.loc[1:10] == 0.0).all()
    assert (clip.loc[11:20] == 0.25).all()
    assert status.complete, status.problems
    # the limit comes from run.yaml beside the log (the training job's resolved recipe) ...
    (tmp_path / "run.yaml").write_text(yaml.safe_dump({"recipe": {"max_response_length": 300}}))
    df2, _ = parse_jsonl(log, expected_steps=STEPS, val_every=VAL_EVERY, run=KEY)
    assert (df2.set_index("step")["clip_frac"].loc[1:10] == 1 / 128).all()  # 300 *is* the limit there
    # ... and without any limit the fraction is unknown, not verl's batch-width number
    (tmp_path / "run.yaml").unlink()
    df3, _ = parse_jsonl(log, expected_steps=STEPS, val_every=VAL_EVERY, run=KEY)
    assert df3["clip_frac"].iloc[1:].isna().all()


def test_length_clip_fraction_cases() -> None:
    ratio = pd.Series([1 / 128, 0.5, np.nan, 0.1])
    longest = pd.Series([100.0, 512.0, 512.0, np.nan])
    out = length_clip_fraction(ratio, longest, 512)
    assert out.iloc[0] == 0.0 and out.iloc[1] == 0.5
    assert math.isnan(out.iloc[2]) and math.isnan(out.iloc[3])


def test_mu_grpo_fractions_and_k3_are_parsed(tmp_path: Path) -> None:
    """mu-GRPO runs log the KL under actor/ (bypass mode) and their veto and ratio-clip fractions."""
    per = {
        f"s{t}": {
            "rollout_corr/kl": DROP,
            "actor/rollout_corr/kl": -0.001 * t,  # k1 can be negative on a batch
            "actor/rollout_corr/k3_kl": 0.002 * t,
            "actor/mu_grpo/veto_frac": 0.01 * t,
            "actor/mu_grpo/clip_frac": 0.001 * t,
        }
        for t in range(1, STEPS + 1)
    }
    df, status = parse_jsonl(write(tmp_path / "train.jsonl", records(**per)), expected_steps=STEPS, run=KEY)
    last = df.set_index("step").loc[STEPS]
    assert last["kl"] == pytest.approx(-0.001 * STEPS)
    assert last["k3_kl"] == pytest.approx(0.002 * STEPS)
    assert last["veto_frac"] == pytest.approx(0.01 * STEPS)
    assert last["ratio_clip_frac"] == pytest.approx(0.001 * STEPS)
    # a TIS run logs the top-level keys
    df_tis, _ = parse_jsonl(
        write(tmp_path / "tis.jsonl", records(**{f"s{t}": {"rollout_corr/k3_kl": 0.5} for t in range(1, 21)})),
        run=KEY,
    )
    assert (df_tis["k3_kl"].iloc[1:] == 0.5).all() and df_tis["veto_frac"].isna().all()


# --------------------------------------------------------------------------------------------------
# Figures: the KL estimator, Fig 4's mu-GRPO panel


def test_kl_axis_names_the_estimator_and_k3_is_selectable(
    runs: list[Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    figs = _capture_figure(monkeypatch)
    panels = demo_panels("fig1", runs)
    render("fig1", panels, STUDY, COMMIT, outputs(tmp_path, "fig1"))
    render("fig1", panels, STUDY, COMMIT, outputs(tmp_path, "fig1"), {"kl": "k3"})
    k1_ax, k3_ax = figs[0].axes[1], figs[1].axes[1]
    assert "(k1)" in k1_ax.get_ylabel() and "(k3)" in k3_ax.get_ylabel()
    notes = ["\n".join(t.get_text() for t in f.texts) for f in figs]
    assert "verl rollout_corr/kl (k1 on the sampler's samples, token-weighted: mean of log q - log pi)" in notes[0]
    assert "verl rollout_corr/k3_kl (k3" in notes[1]
    settings, metrics, _ = panels["b"][0]
    for ax, col in ((k1_ax, "kl"), (k3_ax, "k3_kl")):
        line = next(ln for ln in ax.get_lines() if ln.get_label().startswith("Tb="))
        want = metrics[col].to_numpy(dtype="float64")
        np.testing.assert_allclose(line.get_ydata(), np.where(want > 0, want, np.nan))
    with pytest.raises(ValueError, match="allowed: k1, k3"):
        render("fig1", panels, STUDY, COMMIT, outputs(tmp_path, "fig1"), {"kl": "k2"})


def test_fig2_footnote_names_the_kl_source(runs: list[Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    figs = _capture_figure(monkeypatch)
    render("fig2", demo_panels("fig2", runs), STUDY, COMMIT, outputs(tmp_path, "fig2"))
    text = "\n".join(t.get_text() for t in figs[0].texts)
    assert "rollout_corr/kl (k1 on the sampler's samples, token-weighted: mean of log q - log pi)" in text


def test_fig4_draws_mu_grpo_veto_and_clip_fractions(
    runs: list[Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    figs = _capture_figure(monkeypatch)
    panels = demo_panels("fig4", runs)
    render("fig4", panels, STUDY, COMMIT, outputs(tmp_path, "fig4"))
    ax = figs[0].axes[2]
    mu = [(s, m) for s, m, _ in panels["a"] if s["correction"] == "mu_grpo"]
    assert len(mu) == 4
    for s, m in mu:
        for col, what in (("veto_frac", "vetoed responses"), ("ratio_clip_frac", "clipped tokens")):
            label = f"Tb={s['Tb']:g}: {what}"
            drawn = [ln.get_ydata() for ln in ax.get_lines() if ln.get_label().startswith(label)]
            want = m[col].to_numpy(dtype="float64")
            assert any(np.allclose(y, want, equal_nan=True) for y in drawn), (s["key"], col)
    assert ax.get_legend() is None  # one legend for the figure, outside the panels
    legend = [t.get_text() for t in figs[0].legends[0].get_texts()]
    fractions = [t for t in legend if t.endswith(("vetoed responses", "(rho > 5)"))]
    assert fractions == [
        "Tb=1: vetoed responses",
        "Tb=1: clipped tokens (rho > 5)",
        "Tb=0.8: vetoed responses",
        "Tb=0.8: clipped tokens (rho > 5)",
    ]
    assert "mu-GRPO" in ax.get_title(loc="left")


def test_fig7_draws_a_fixed_tb_flat_where_the_run_logs_none(
    runs: list[Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """verl logs no sampler temperature for a fixed-Tb run (nothing moves it); Fig 7's temperature row
    still shows its references, flat at their Tb from step 1, next to the logged controller lines."""
    from coolsampler.paper import labels as L

    figs = _capture_figure(monkeypatch)
    panels = {
        name: [(s, m.assign(temperature=np.nan) if L.tb_kind(s) == "fixed" else m, st) for s, m, st in entries]
        for name, entries in demo_panels("fig7", runs).items()
    }
    render("fig7", panels, STUDY, COMMIT, outputs(tmp_path, "fig7"))
    for i, name in enumerate(["a", "b"]):
        lines = [
            ln for ln in figs[0].axes[2 + i].get_lines() if not ln.get_label().startswith(("_", "sampler refresh"))
        ]
        drawn = [(ln.get_xdata(), ln.get_ydata()) for ln in lines]
        for s, m, _ in panels[name]:
            if L.tb_kind(s) == "fixed":
                want = np.where(m["step"].to_numpy() >= 1, L.tb_initial(s), np.nan)
            else:
                want = m["temperature"].to_numpy(dtype="float64")
            assert any(np.allclose(y, want, equal_nan=True) for _, y in drawn), (name, s["key"])
        assert len(drawn) == len(panels[name]), [ln.get_label() for ln in lines]


def test_figure_options_are_validated_in_the_study() -> None:
    raw = yaml.safe_load((REPO / "config/config.yaml").read_text())
    good = copy.deepcopy(raw)
    good["figures"]["fig1"]["options"] = {"kl": "k3"}
    study = study_from_dict(good, origin="s.yaml")
    assert target_options("fig1", study.figures["fig1"]) == {"kl": "k3"}
    assert target_options("fig1", raw["figures"]["fig1"]) == {"kl": "k1"}  # the default
    for target, opts, msg in (
        ("fig1", {"kl": "k2"}, "s.yaml: figures.fig1.options.kl: 'k2' is not allowed; allowed: k1, k3"),
        ("table1", {"kl": "k3"}, "s.yaml: figures.table1.options: unknown option 'kl'; allowed: none"),
        ("fig1", {"colour": 1}, "s.yaml: figures.fig1.options: unknown option 'colour'; allowed: kl"),
    ):
        bad = copy.deepcopy(raw)
        bad["figures"][target]["options"] = opts
        with pytest.raises(StudyError) as info:
            study_from_dict(bad, origin="s.yaml")
        assert str(info.value) == msg


# --------------------------------------------------------------------------------------------------
# Tables


def _all_demo_entries(runs: list[Any]) -> list[tuple[dict[str, Any], pd.DataFrame, Any]]:
    return [(r.settings(), m, st) for r, m, st in runs]


def test_table2_lists_every_degrading_run_decided_from_the_data(runs: list[Any], tmp_path: Path) -> None:
    """Given every run, Table 2 lists exactly the runs that degrade (the synthetic study's known
    collapses), with the runs of the same comparison group as stable, and both KL crossings."""
    entries = _all_demo_entries(runs)
    data = render("table2", {"rows": entries}, STUDY, COMMIT, outputs(tmp_path, "table2"))
    collapsing = {
        (m, t, N, lr, c, Temperature.from_config(tb), str(tl), rep)
        for m, t, N, lr, c, tb, tl, _seeds, collapse, _rec, rep in _DEMO
        if collapse is not None
    }
    want = {
        r.key
        for r, _, _ in runs
        if (r.model, r.task, r.N, r.lr, r.correction, r.Tb, str(r.Tl), r.replicate) in collapsing
    }
    assert set(data.loc[data["degrades"], "key"]) == want
    groups = {comparison_key(s) for s, _, _ in entries if s["key"] in want}
    assert set(data["key"]) == {s["key"] for s, _, _ in entries if comparison_key(s) in groups}
    assert not data.loc[~data["degrades"], "onset"].notna().any()
    both = data.dropna(subset=["kl_gt_01", "kl_gt_1"])
    assert len(both) and (both["kl_gt_01"] <= both["kl_gt_1"]).all()
    assert (data["lead"].dropna() == (data["onset"] - data["kl_gt_1"]).dropna()).all()
    md = (tmp_path / "table2.md").read_text()
    assert "| KL > 0.1 | KL > 1 | Lead |" in md and "stable, end" in md
    assert "mu-GRPO" not in md  # no mu-GRPO run degrades: its group is not listed
    # a run without data cannot be decided: it is listed ('no data'), never counted as stable
    s0, _, st0 = next(e for e in entries if e[0]["correction"] == "mu_grpo")
    missing = [(s0, None, None), *[e for e in entries if e[0]["key"] != s0["key"]]]
    data2 = render("table2", {"rows": missing}, STUDY, COMMIT, outputs(tmp_path, "table2"))
    row = data2.set_index("key").loc[s0["key"]]
    assert row["outcome"] == "no data" and not row["degrades"] and "no metrics" in row["note"]


def test_table3_merges_an_arm_of_three_seeds_and_keeps_runs_in_the_csv(runs: list[Any], tmp_path: Path) -> None:
    panels = demo_panels("table3", runs)
    data = render("table3", panels, STUDY, COMMIT, outputs(tmp_path, "table3"))
    assert len(data) == len(panels["rows"])  # the CSV: one row per run
    assert {"clip_cycle_c2", "reward_cycle_c2"} <= set(data.columns)
    md = (tmp_path / "table3.md").read_text().splitlines()
    rows = [ln for ln in md if ln.startswith("| ") and not ln.startswith("| Run")]
    merged = [ln for ln in rows if "1.5B, GSM8K, N=192, 3 seeds" in ln]
    assert len(merged) == 1  # the paper's Table 3 rows: the cooled arm (Tb 0.8), three seeds
    cooled = next(ln for ln in merged if "| 0.8 |" in ln)
    lo = data[data["run"].str.startswith("1.5B") & (data["Tb"] == "0.8")]["entropy_start_c1"]
    assert f"{lo.min():.2f}–{lo.max():.2f}" in cooled
    assert rows[0].startswith("| 7B, GSM8K, N=144, seed 1 |") and "| 0.8 |" in rows[0]  # 7B cooled first
    assert sum("7B, GSM8K, N=144" in ln for ln in rows) == 5  # the 7B runs stay one row each


# Appendix D's first rendered rows (the paper's Table 4): model, task, N, lr, correction, Tb, Tl, seed
TABLE4_FIRST_ROWS = [
    "qwen2.5-math-1.5b/gsm8k/N64_lr2e-6_none_Tb1_Tl1_s1",
    "qwen2.5-math-1.5b/gsm8k/N96_lr2e-6_tis_Tb0.8_Tl1_s1",
    "qwen2.5-math-1.5b/gsm8k/N96_lr2e-6_tis_Tb0.8_Tltied_s1",
    "qwen2.5-math-1.5b/gsm8k/N96_lr2e-6_tis_Tb0.8_Tl1_s43",
    "qwen2.5-math-1.5b/gsm8k/N96_lr2e-6_tis_Tb0.8_Tl1_s44",
    "qwen2.5-math-1.5b/gsm8k/N96_lr2e-6_tis_Tb1_Tl1_s1",
]


def test_table4_follows_the_row_order_of_appendix_d(tmp_path: Path) -> None:
    study = load_study(REPO / "config/paper.yaml")
    entries = [(r.settings(), None, None) for r in study.runs]
    data = render("table4", {"rows": entries}, STUDY, COMMIT, outputs(tmp_path, "table4"))
    assert list(data["key"][: len(TABLE4_FIRST_ROWS)]) == TABLE4_FIRST_ROWS
    assert len(data) == len(study.runs)
    keys = list(data["key"])
    assert keys.index("qwen2.5-math-7b/gsm8k/N144_lr2e-6_tis_Tb0.8_Tl1_s1") + 1 == keys.index(
        "qwen2.5-math-7b/gsm8k/N144_lr2e-6_tis_Tb0.8_Tl1_s1_st287_cut"
    )
    assert sorted(keys, key=lambda k: table4_order(next(e[0] for e in entries if e[0]["key"] == k))) == keys


def test_table4_shows_the_numbers_the_text_quotes(runs: list[Any], tmp_path: Path) -> None:
    """KL at the fixed step for every temperature, KL to the initial policy at step 90, last-five and
    whole-run means: computed once (summarize_run) and shown in Table 4."""
    panels = demo_panels("table4", runs)
    data = render("table4", panels, STUDY, COMMIT, outputs(tmp_path, "table4")).set_index("key")
    for s, m, st in panels["rows"]:
        want = summarize_run(m, s, st)
        got = data.loc[s["key"]]
        for col in ("kl_fixed", "kl_to_init_90", "last5", "whole"):
            assert got[col] == pytest.approx(want[col], nan_ok=True), (s["key"], col)
    md = (tmp_path / "table4.md").read_text()
    for head in ("KL at 110/60", "KL to init at 90", "Last five", "Whole run"):
        assert f"| {head} |" in md
    tb07 = data[(data["Tb"] == "0.7") & (data["N"] == 288)]
    assert tb07["kl_fixed"].notna().all() and (tb07["kl_fixed_step"] == 110).all()


# --------------------------------------------------------------------------------------------------
# Layering of the reporting layer


def test_table_rendering_loads_no_figure_code(tmp_path: Path) -> None:
    """The table script renders through the registry without importing the figures or matplotlib."""
    code = (
        "import sys\n"
        "from coolsampler.testkit.synthetic import demo_panels, demo_runs\n"
        "from coolsampler.paper.render import render\n"
        f"render('table4', demo_panels('table4', demo_runs()), 's', 'c', [{str(tmp_path / 't.csv')!r}])\n"
        "drawing = ('coolsampler.paper.figures', 'coolsampler.paper.plotting', 'matplotlib')\n"
        "print(sorted(m for m in drawing if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    assert (tmp_path / "t.csv").exists()


def test_a_generated_world_is_named_once_in_titles_and_row_names() -> None:
    """A world is its own model and task (``chain-<key>`` in both parts of the run key): its name once."""
    from coolsampler.paper.figures import panel_title
    from coolsampler.paper.labels import run_name, setting_row

    world = {"model": "chain-5173b9dc", "task": "chain-5173b9dc", "N": 48, "seed": 1, "correction": "tis"}
    assert setting_row(world) == "chain-5173b9dc N=48"
    assert run_name(world) == "chain-5173b9dc, N=48, seed 1"
    assert panel_title("a", [(world, None)]) == "(a) chain-5173b9dc N=48"
    paper = {**world, "model": "qwen2.5-math-1.5b", "task": "gsm8k"}
    assert setting_row(paper) == "1.5B GSM8K N=48"
