"""``coolsampler analyze`` on a researcher's own verl logs, as verl writes them (``tests/fixtures/own-logs``,
made by ``tests/fixtures/own_logs.py``): one row per run, any model's run key, verl's layouts, the
validation series named, each flaw of a log said once and true, resolution and spread, and tables in
the formats the study targets write."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from coolsampler.cli import main
from coolsampler.paper.own_logs import analyze_report, draw
from coolsampler.results.own_logs import find_inputs, parse_groups
from tests.fixtures.own_logs import BAD_KEY, HERE, KEY_DIR, KEYS, PROJECT

TRACKING = HERE / "tracking" / PROJECT
BASELINE = TRACKING / "baseline.jsonl"
STALE = TRACKING / "stale-n16.jsonl"
CONSOLE = HERE / "console" / "baseline.log"
WANDB = HERE / "wandb" / "baseline-history.csv"
KEYED = HERE / "keyed"


def table1(out: str) -> list[str]:
    """The rows of the printed Table 1 (after its header and rule)."""
    lines = out.split("Summary (Table 1 style")[1].split("\n\n")[0].splitlines()
    return lines[3:]


def block(out: str, name: str) -> str:
    """The text block of the run whose header names ``name``."""
    return next(b for b in out.split("\n\n") if b.startswith("== ") and name in b.splitlines()[0])


# Why 1: separate runs pooled into one row


def test_unrelated_runs_are_one_row_each_named_by_their_file(capsys) -> None:
    assert main(["analyze", str(BASELINE), str(STALE), str(CONSOLE), str(WANDB)]) == 0
    rows = table1(capsys.readouterr().out)
    assert len(rows) == 4
    names = [r.split("|")[1].strip() for r in rows]
    assert sorted(names) == ["baseline-history", "console/baseline", "qwen3-grpo/baseline", "stale-n16"]
    # one run a row: no mean over runs, no count over runs
    assert all(re.search(r"\| [01]/1 \|", r) for r in rows)


def test_the_header_says_runs_where_no_seed_is_known_and_seeds_where_keys_say_them(capsys) -> None:
    assert main(["analyze", str(BASELINE), str(STALE)]) == 0
    out = capsys.readouterr().out
    assert "Last five: per run / mean" in out and "Last five: 0 /" not in out
    assert main(["analyze", str(KEYED / KEY_DIR / KEYS[1]), str(KEYED / KEY_DIR / KEYS[2])]) == 0
    out = capsys.readouterr().out
    assert "Last five: 1 / 2 / mean" in out
    assert len(table1(out)) == 1 and "| 0/2 |" in table1(out)[0]  # two seeds of one arm: one row


def test_group_pools_the_runs_it_names_as_one_arm(capsys) -> None:
    assert main(["analyze", str(TRACKING), "--group", "mine=*baseline*"]) == 0
    out = capsys.readouterr().out
    rows = table1(out)
    assert len(rows) == 2 and any(r.startswith("| mine |") and "| 0/1 |" in r for r in rows)
    assert main(["analyze", str(BASELINE), str(CONSOLE), str(WANDB), "--group", "base=*baseline*"]) == 0
    rows = table1(capsys.readouterr().out)
    assert len(rows) == 1 and rows[0].startswith("| base |") and "| 0/3 |" in rows[0]
    with pytest.raises(ValueError, match="LABEL=GLOB"):
        parse_groups(["nolabel"])


def test_the_figure_gives_each_run_its_colour_and_refresh_lines_only_where_N_exceeds_1(tmp_path: Path) -> None:
    import matplotlib.pyplot as plt

    from coolsampler.paper import plotting as P

    drawn = {}

    def keep(fig, *a, **k):  # the figure as drawn, before it is closed
        drawn["fig"] = fig
        return real_save(fig, *a, **k)

    real_save = P.save
    P.save = keep
    try:
        report = analyze_report([str(BASELINE), str(CONSOLE), str(WANDB)])
        draw(report.entries, tmp_path / "a.png")
        acc = drawn["fig"].axes[0]
        colours = {ln.get_color() for ln in acc.get_lines() if ln.get_label() and not ln.get_label().startswith("_")}
        assert len(colours) == 3  # three runs at N=1, Tb=1: three colours, not one
        assert not [ln for ln in acc.get_lines() if ln.get_color() == P.REFRESH_GREY]  # N=1: no refresh lines
        report = analyze_report([str(KEYED / KEY_DIR / KEYS[1]), str(KEYED / KEY_DIR / KEYS[2])])
        draw(report.entries, tmp_path / "b.png")
        acc = drawn["fig"].axes[0]
        assert [ln for ln in acc.get_lines() if ln.get_color() == P.REFRESH_GREY]  # N=16: drawn
    finally:
        P.save = real_save
        plt.close("all")
    assert (tmp_path / "a.png").stat().st_size > 0


# Why 2: a run key read only for the shipped models


def test_a_run_key_of_any_model_is_read_and_a_key_that_does_not_parse_is_said(capsys) -> None:
    assert main(["analyze", str(KEYED)]) == 0
    out = capsys.readouterr().out
    good = block(out, KEYS[1])
    assert "N=16, Tb=1.0 (the run key of its directory)" in good and "(complete)" in good
    bad = block(out, BAD_KEY)
    assert "not read as a run key" in bad and "does not parse" in bad
    assert sum("not read as a run key" in ln for ln in bad.splitlines()) == 1


# Why 3: verl's default layout and run-key trees refused; `analyze .`


def test_verls_project_directory_and_a_run_key_tree_are_walked(capsys) -> None:
    names = [i.name for i in find_inputs([str(TRACKING)])]
    assert names == ["baseline", "stale-n16"]
    keyed = [i.path for i in find_inputs([str(KEYED)])]
    assert len(keyed) == 3 and all(p.endswith("train.jsonl") for p in keyed)
    every = {Path(i.path).name for i in find_inputs([str(HERE)])}
    assert {"baseline.jsonl", "baseline.log", "baseline-history.csv", "5f1c0ffee0ddba11", "baseline"} <= every


def test_analyze_dot_reads_the_directory_it_is_run_in(tmp_path: Path, monkeypatch, capsys) -> None:
    shutil.copytree(HERE / "tracking", tmp_path / "tracking")
    monkeypatch.chdir(tmp_path)
    assert main(["analyze", "."]) == 0
    out = capsys.readouterr().out
    assert len(table1(out)) == 2 and "empty name" not in out


def test_a_directory_without_logs_lists_the_formats_read(tmp_path: Path, capsys) -> None:
    (tmp_path / "notes.txt").write_text("nothing here\n")
    assert main(["analyze", str(tmp_path)]) == 1
    cap = capsys.readouterr()
    assert "formats read:" in cap.out and "TensorBoard" in cap.out and "MLflow" in cap.out
    assert cap.err.count(str(tmp_path)) == 1  # the path once in the error line


# Why 4: the validation series chosen silently; mean@4 not found


def test_the_validation_series_are_listed_and_the_one_read_named(capsys) -> None:
    assert main(["analyze", str(BASELINE)]) == 0
    out = capsys.readouterr().out
    assert "7 validations" in out  # n=4: mean@4, not "0 validations"
    assert "validation: read HuggingFaceH4/MATH-500:acc/mean@4 (the default" in out
    assert "openai/gsm8k: acc/mean@4, acc/best@4/mean, acc/maj@4/mean" in out


def test_val_picks_a_series_and_an_unknown_one_is_refused_with_the_list(capsys) -> None:
    assert main(["analyze", str(BASELINE), "--val", "openai/gsm8k:best@4/mean"]) == 0
    out = capsys.readouterr().out
    assert "read openai/gsm8k:acc/best@4/mean (as --val says)" in out
    assert "peak 0.927 at step 60" in out  # gsm8k's best@4: its mean@4 0.777 + 0.15
    assert main(["analyze", str(BASELINE), "--val", "gsm8k"]) == 0  # the source's last part will do
    assert "read openai/gsm8k:acc/mean@4" in capsys.readouterr().out
    assert main(["analyze", str(BASELINE), "--val", "aime"]) == 1
    err = capsys.readouterr()
    assert "--val aime: no such validation series; the log has HuggingFaceH4/MATH-500:acc/mean@4" in err.out


# Why 5: other formats get one opaque line; Why 8 (readers) in tests/results/test_readers.py


def test_every_format_of_the_fixture_is_read(capsys) -> None:
    assert main(["analyze", str(HERE)]) == 0
    out = capsys.readouterr().out
    for fmt in ("verl console", "TensorBoard", "MLflow", "wandb CSV"):
        assert f"read as {fmt}" in out
    assert "cannot read" not in out


# Why 6: messages that contradict or mislabel


def test_each_flaw_of_a_log_is_one_line_and_none_is_called_incomplete(capsys) -> None:
    assert main(["analyze", str(BASELINE), str(STALE), "--steps", "60"]) == 0
    out = capsys.readouterr().out
    base, stale = block(out, "baseline"), block(out, "stale-n16")
    assert "   log: line 13 is not a JSON record (a stray line), skipped" in base
    assert "   log: 1 step(s) with NaN/inf grad_norm" in base
    assert "incomplete" not in base and "truncated" not in base and "all 60 steps logged" in base
    assert "   log: 6 step(s) logged more than once (resumed run?)" in stale
    assert "   log: last line is not a whole JSON record (truncated log?)" in stale
    assert "incomplete: the log stops at step 59 of the run's 60" in stale


def test_the_degrades_example_says_only_what_it_does_not_show(capsys) -> None:
    assert main(["analyze", "examples/verl-logs/degrades"]) == 0
    out = capsys.readouterr().out
    not_computed = next(ln for ln in out.splitlines() if "not computed" in ln)
    assert "chi^2" not in not_computed and "log-ppl" not in not_computed and "IS-weight" in not_computed
    assert "| reverse-KL bound log(1+chi2_token) |" in out  # shown, so not "not computed"
    assert "'earliest in': in how many degraded runs" in out


# Why 7: false precision


def test_onsets_and_leads_carry_their_resolution(capsys) -> None:
    assert main(["analyze", str(STALE)]) == 0
    out = capsys.readouterr().out
    assert "onset 40" in out
    assert "resolution: validated every 10 steps, so the drop lies in steps 31-40" in out
    assert re.search(r"the KL lead -5 is one reading of -14 to -5 \(KL logged every 1 step\)", out)


def test_an_arm_of_two_seeds_shows_its_spread_and_the_volatility_note(capsys) -> None:
    assert main(["analyze", str(KEYED / KEY_DIR / KEYS[1]), str(KEYED / KEY_DIR / KEYS[2])]) == 0
    out = capsys.readouterr().out
    assert "qwen3-4b/gsm8k/N16_lr1e-6_tis_Tb1_Tl1_s*_st60 (2 runs): onsets –, – (0 of 2 degrade)" in out
    assert "rest on 2 seeds or fewer" in out and "docs/guard.md" in out


# Why 8: markdown only


@pytest.mark.parametrize("fmt", ["csv", "json", "tex"])
def test_format_prints_the_tables_alone(fmt: str, capsys) -> None:
    assert main(["analyze", str(BASELINE), str(STALE), "--format", fmt]) == 0
    out = capsys.readouterr().out
    assert "== " not in out  # no per-run text: tables to paste
    if fmt == "csv":
        assert "arm,model,task" in out and "run,arm,path" in out
    elif fmt == "json":
        first = out.split("\n\n")[0]
        rows = json.loads(first)
        assert [r["arm"] for r in rows] == ["baseline", "stale-n16"]
    else:
        assert "\\begin{table}" in out and "\\toprule" in out


def test_out_writes_every_table_in_every_format(tmp_path: Path, capsys) -> None:
    assert main(["analyze", str(STALE), "--out", str(tmp_path / "tables")]) == 0
    names = sorted(p.name for p in (tmp_path / "tables").iterdir())
    tables = ("table1", "events", "leads", "lag")
    assert names == sorted(f"{t}.{f}" for t in tables for f in ("md", "csv", "json", "tex"))
    events = json.loads((tmp_path / "tables" / "events.json").read_text())
    assert events[0]["onset"] == 40 and events[0]["val_interval"] == 10 and events[0]["onset_after"] == 30
    leads = json.loads((tmp_path / "tables" / "leads.json").read_text())
    assert {(r["val_interval"], r["onset_after"]) for r in leads} == {(10, 30)}


def test_tensorboard_logs_without_the_extra_get_one_line_naming_it(monkeypatch, capsys) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "tensorboard.backend.event_processing.event_file_loader", None)
    assert main(["analyze", str(HERE / "tensorboard_log"), str(BASELINE)]) == 1
    cap = capsys.readouterr()
    assert len(table1(cap.out)) == 1  # the JSONL beside them is still analysed
    lines = [ln for ln in cap.err.splitlines() if "tensorboard" in ln]
    assert len(lines) == 2 and all(
        ln.endswith("tensorboard extra (pip install '.[tensorboard]' in the checkout)") for ln in lines
    )
