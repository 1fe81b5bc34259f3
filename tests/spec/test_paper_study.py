"""config/paper.yaml: the paper's run matrix, the figure selections its captions name, and the
one-line errors that bad edits of it produce."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from coolsampler.spec.study import Study, StudyError, load_study, parse_key, study_from_dict
from coolsampler.spec.targets import TARGETS, panel_filters

PAPER = Path(__file__).resolve().parents[2] / "config" / "paper.yaml"

# Run counts, each derived from the paper's own sentences and captions (quoted), not from the study
# file's header: the test fails if config/paper.yaml drifts from what the paper says.
# 1.5B GSM8K N=64: Table 4 row 1 (no IS, Tb 1.0, seed 1).
N64 = 1
# 1.5B GSM8K N=96: Sec 3.1 "three data seeds end at 0.861, 0.860 and 0.864" (Tb 1) and "with Tb=0.8 the
# three seeds end at 0.856, 0.860 and 0.865"; Table 4 row 3 (Tb 0.8, learner tied, seed 1); Fig 6a
# "Plain GRPO with a cooled sampler and no correction (three seeds, plus a variant that cools further
# whenever the KL grows)"; Fig 7a "a saturation-triggered controller (with and without a KL gate) and
# a linear schedule ... a doubled learning rate".
N96 = 3 + 3 + 1 + (3 + 1) + (2 + 1 + 1)
# 1.5B GSM8K N=192: Fig 1a "Tb=1.0 all three data seeds ... Tb=0.8 (three data seeds ..., plus one run
# with the learner tied to 0.8); Tb=0.9"; Fig 4 "Tis at Tb=1 ... at 1.5e-6 and 1e-6 ... mu-GRPO (solid
# Tb=1, dashed 0.8) ... data seeds 43 and 44 for every arm"; Table 2 row 4 "Tis + controller".
N192 = (3 + 3 + 1 + 1) + (2 * 2) + (2 * 2) + 1
# 1.5B GSM8K N=288: Fig 5a "every temperature"; Sec 4 "0.8 degrades at step 250, 0.7 at 190-200, 0.6 at
# 300" and "the Tb=0.7 runs" (two), with Tb 1.0 ("The uncooled run degrades at step 190").
N288 = 1 + 1 + 2 + 1
# 1.5B MATH: Fig 5c (standard lr, N=192, both temperatures, one run each: "0.682 versus 0.698"); Fig 5b
# "uncooled runs collapse in both seeds ... cooled runs" (2 + 2) and "Tb=0.6 is worse than 0.8" (1);
# Fig 6b "the uncorrected cooled run" at N=96 (1).
MATH = 2 + (2 + 2 + 1) + 1
# 7B GSM8K: Fig 3b (N=192: "the uncooled run", "the cooled run"); Fig 8 "two data seeds per arm, plus a
# first attempt at the cooled seed-1 arm that ended at step 287".
B7_N192, B7_N144 = 2, 2 * 2 + 1
PAPER_RUNS = N64 + N96 + N192 + N288 + MATH + B7_N192 + B7_N144
APPENDIX_D_RUNS = 55  # "The 55 runs in Appendix D total roughly 220 GPU-box-hours"

B15 = "qwen2.5-math-1.5b/gsm8k/"
B15_MATH = "qwen2.5-math-1.5b/math/"
B7 = "qwen2.5-math-7b/gsm8k/"


@pytest.fixture(scope="module")
def study() -> Study:
    return load_study(PAPER)


@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    return yaml.safe_load(PAPER.read_text())


def selected(study: Study, target: str, panel: str) -> set[str]:
    return {r.key for r in study.select(study.figures[target][panel])}


def test_header(study: Study) -> None:
    assert study.name == "paper"
    assert str(study.results) == "results"
    assert study.raw["profile"] == "gpu"


def test_run_count(study: Study) -> None:
    assert len(study.runs) == PAPER_RUNS
    assert len({r.key for r in study.runs}) == PAPER_RUNS
    # two of Appendix D's runs are not identifiable from the text (config/paper.yaml's header)
    assert APPENDIX_D_RUNS - PAPER_RUNS == 2


def test_matrix_shape(study: Study) -> None:
    """Counts per block, each derived from the paper's text above."""

    def n(**want: Any) -> int:
        return len(study.select(want))

    assert n(model="qwen2.5-math-1.5b", task="gsm8k", N=64) == N64
    assert n(model="qwen2.5-math-1.5b", task="gsm8k", N=96) == N96
    assert n(model="qwen2.5-math-1.5b", task="gsm8k", N=192) == N192
    assert n(model="qwen2.5-math-1.5b", task="gsm8k", N=288) == N288
    assert n(task="math") == MATH
    assert n(model="qwen2.5-math-7b", N=192) == B7_N192
    assert n(model="qwen2.5-math-7b", N=144) == B7_N144
    assert n(replicate="cut") == 1  # Fig 8: "a first attempt ... that ended at step 287"
    # Table 1: "data seeds 43 and 44" for its six arms; Table 4's rendered rows use seed 1 besides
    assert n(model="qwen2.5-math-1.5b", task="gsm8k", N=[96, 192], correction="tis", seed=[43, 44]) == 6 * 2
    cut = study.select({"replicate": "cut"})[0]
    assert cut.key == B7 + "N144_lr2e-6_tis_Tb0.8_Tl1_s1_st287_cut"
    assert cut.steps == 287
    # every run that is not the cut one is a full 300-step run, validated at the task's interval
    for r in study.runs:
        if r.replicate != "cut":
            assert r.steps == 300, r.key
        assert r.val_every == (10 if r.task == "gsm8k" else 20), r.key


def test_every_run_has_a_source(study: Study) -> None:
    for r in study.runs:
        assert r.source.strip(), r.key
        assert any(w in r.source for w in ("Fig", "Table", "Sec")), r.key


def test_keys_round_trip(study: Study) -> None:
    for r in study.runs:
        back = parse_key(r.key)
        assert back == r, r.key
        assert back.key == r.key


def test_figures_block_names_every_target_and_panel(study: Study) -> None:
    paper = {t for t, spec in TARGETS.items() if spec.paper}
    assert set(study.figures) == paper
    for target in paper:
        spec = TARGETS[target]
        assert sorted(panel_filters(study.figures[target])) == sorted(spec.required), target


def test_fig1(study: Study) -> None:
    a = {
        B15 + "N192_lr2e-6_tis_Tb1_Tl1_s1",
        B15 + "N192_lr2e-6_tis_Tb1_Tl1_s43",
        B15 + "N192_lr2e-6_tis_Tb1_Tl1_s44",
        B15 + "N192_lr2e-6_tis_Tb0.8_Tl1_s1",
        B15 + "N192_lr2e-6_tis_Tb0.8_Tl1_s43",
        B15 + "N192_lr2e-6_tis_Tb0.8_Tl1_s44",
        B15 + "N192_lr2e-6_tis_Tb0.8_Tltied_s1",
        B15 + "N192_lr2e-6_tis_Tb0.9_Tl1_s1",
    }
    assert selected(study, "fig1", "a") == a
    assert selected(study, "fig1", "b") == {
        B15 + "N192_lr2e-6_tis_Tb1_Tl1_s1",
        B15 + "N192_lr2e-6_tis_Tb0.8_Tl1_s1",
        B15 + "N192_lr2e-6_tis_Tb0.9_Tl1_s1",
    }


def test_fig3(study: Study) -> None:
    assert selected(study, "fig3", "a") == {
        B7 + "N144_lr2e-6_tis_Tb1_Tl1_s1",
        B7 + "N144_lr2e-6_tis_Tb1_Tl1_s43",
        B7 + "N144_lr2e-6_tis_Tb0.8_Tl1_s1",
        B7 + "N144_lr2e-6_tis_Tb0.8_Tl1_s43",
    }
    assert selected(study, "fig3", "b") == {
        B7 + "N192_lr2e-6_tis_Tb1_Tl1_s1",
        B7 + "N192_lr2e-6_tis_Tb0.8_Tl1_s1",
    }


def test_fig4(study: Study) -> None:
    assert selected(study, "fig4", "a") == {
        B15 + f"N192_lr{lr}_{corr}_Tb{tb}_Tl1_s{seed}"
        for seed in (43, 44)
        for lr, corr, tb in (
            ("2e-6", "tis", "1"),
            ("1.5e-6", "tis", "1"),
            ("1e-6", "tis", "1"),
            ("2e-6", "tis", "0.8"),
            ("2e-6", "mu_grpo", "1"),
            ("2e-6", "mu_grpo", "0.8"),
        )
    }
    assert len(selected(study, "fig4", "a")) == 12


def test_fig5_to_fig7(study: Study) -> None:
    assert selected(study, "fig5", "a") == {
        B15 + "N288_lr2e-6_tis_Tb1_Tl1_s1",
        B15 + "N288_lr2e-6_tis_Tb0.8_Tl1_s1",
        B15 + "N288_lr2e-6_tis_Tb0.7_Tl1_s1",
        B15 + "N288_lr2e-6_tis_Tb0.7_Tl1_s1_rerun",
        B15 + "N288_lr2e-6_tis_Tb0.6_Tl1_s1",
    }
    assert selected(study, "fig5", "b") == {
        B15_MATH + "N288_lr4e-6_tis_Tb1_Tl1_s1",
        B15_MATH + "N288_lr4e-6_tis_Tb1_Tl1_s43",
        B15_MATH + "N288_lr4e-6_tis_Tb0.8_Tl1_s1",
        B15_MATH + "N288_lr4e-6_tis_Tb0.8_Tl1_s43",
        B15_MATH + "N288_lr4e-6_tis_Tb0.6_Tl1_s1",
    }
    assert selected(study, "fig5", "c") == {
        B15_MATH + "N192_lr2e-6_tis_Tb1_Tl1_s1",
        B15_MATH + "N192_lr2e-6_tis_Tb0.8_Tl1_s1",
    }
    assert selected(study, "fig6", "a") == {
        B15 + f"N96_lr2e-6_{c}_Tb{tb}_Tl1_s{s}"
        for s in (1, 43, 44)
        for c, tb in (("none", "0.8"), ("tis", "0.8"), ("tis", "1"))
    } | {B15 + "N96_lr2e-6_none_Tbklc0.8_Tl1_s1"}
    assert selected(study, "fig6", "b") == {B15_MATH + "N96_lr2e-6_none_Tb0.8_Tl1_s1"}
    assert selected(study, "fig7", "a") == {
        B15 + "N96_lr2e-6_tis_Tbsat0.8_Tl1_s1",
        B15 + "N96_lr2e-6_tis_Tbsat0.8kl_Tl1_s1",
        B15 + "N96_lr2e-6_tis_Tblin0.8-1_Tl1_s1",
        B15 + "N96_lr4e-6_tis_Tb0.8_Tl1_s1",
        B15 + "N96_lr2e-6_tis_Tb0.8_Tl1_s1",
        B15 + "N96_lr2e-6_tis_Tb1_Tl1_s1",
    }
    assert selected(study, "fig7", "b") == {
        B15 + "N192_lr2e-6_tis_Tbsat0.8_Tl1_s1",
        B15 + "N192_lr2e-6_tis_Tb0.8_Tl1_s1",
        B15 + "N192_lr2e-6_tis_Tb1_Tl1_s1",
    }


def test_fig8(study: Study) -> None:
    assert selected(study, "fig8", "a") == {
        B7 + "N144_lr2e-6_tis_Tb1_Tl1_s1",
        B7 + "N144_lr2e-6_tis_Tb1_Tl1_s43",
        B7 + "N144_lr2e-6_tis_Tb0.8_Tl1_s1",
        B7 + "N144_lr2e-6_tis_Tb0.8_Tl1_s43",
        B7 + "N144_lr2e-6_tis_Tb0.8_Tl1_s1_st287_cut",
    }


def test_fig2_rows_are_fixed_tb_tis(study: Study) -> None:
    """Fig 2: every importance-corrected run at Tb 1.0 / 0.8 (learner at 1), each row at one learning
    rate: 2e-6, except MATH N=288 at 4e-6 (Sec 4 'A harder task'). No doubled-lr GSM8K run (Fig 7a),
    no lower-lr run (Fig 4), no replicate (the cut 7B run is not a seed)."""
    runs = study.select(study.figures["fig2"]["a"])
    assert all(r.correction == "tis" and r.Tb.kind == "fixed" and r.Tl == 1.0 for r in runs)
    assert {r.Tb.value for r in runs} == {1.0, 0.8}
    assert not [r.key for r in runs if r.replicate]
    assert {r.key for r in runs if r.lr != 2e-6} == {
        B15_MATH + f"N288_lr4e-6_tis_Tb{tb}_Tl1_s{s}" for tb in ("1", "0.8") for s in (1, 43)
    }
    assert B15 + "N96_lr4e-6_tis_Tb0.8_Tl1_s1" not in {r.key for r in runs}
    rows: dict[tuple[str, str, int], set[float]] = {}
    for r in runs:
        rows.setdefault((r.model, r.task, r.N), set()).add(r.lr)
    assert all(len(lrs) == 1 for lrs in rows.values()), rows  # one learning rate per row
    assert set(rows) == {
        ("qwen2.5-math-1.5b", "gsm8k", 96),
        ("qwen2.5-math-1.5b", "gsm8k", 192),
        ("qwen2.5-math-1.5b", "gsm8k", 288),
        ("qwen2.5-math-1.5b", "math", 192),
        ("qwen2.5-math-1.5b", "math", 288),
        ("qwen2.5-math-7b", "gsm8k", 144),
        ("qwen2.5-math-7b", "gsm8k", 192),
    }
    # per row: the seeds the text names (3 at 1.5B GSM8K N=96/192, two on MATH N=288 and 7B N=144)
    per_row = {k: sum(1 for r in runs if (r.model, r.task, r.N) == k) for k in rows}
    assert per_row[("qwen2.5-math-1.5b", "gsm8k", 96)] == 6
    assert per_row[("qwen2.5-math-1.5b", "gsm8k", 192)] == 6
    assert per_row[("qwen2.5-math-7b", "gsm8k", 144)] == 4
    assert per_row[("qwen2.5-math-1.5b", "math", 288)] == 4


def test_table1(study: Study) -> None:
    assert selected(study, "table1", "rows") == {
        B15 + f"N{N}_lr{lr}_tis_Tb{tb}_Tl1_s{s}"
        for s in (43, 44)
        for N, lr, tb in (
            (96, "2e-6", "1"),
            (96, "2e-6", "0.8"),
            (192, "2e-6", "1"),
            (192, "2e-6", "0.8"),
            (192, "1.5e-6", "1"),
            (192, "1e-6", "1"),
        )
    }


def test_table2_and_table3(study: Study) -> None:
    # Table 2 lists "every degrading run" (Sec 2): which ones is read from the data, so it sees all runs
    assert selected(study, "table2", "rows") == {r.key for r in study.runs}
    # Table 3's rendered rows: 7B N=144 cooled seed 1 (full), seed 1 (cut), seed 43, uncooled seeds 1
    # and 43; 1.5B N=192 Tb 0.8, 3 seeds
    assert selected(study, "table3", "rows") == {
        B7 + "N144_lr2e-6_tis_Tb0.8_Tl1_s1",
        B7 + "N144_lr2e-6_tis_Tb0.8_Tl1_s1_st287_cut",
        B7 + "N144_lr2e-6_tis_Tb0.8_Tl1_s43",
        B7 + "N144_lr2e-6_tis_Tb1_Tl1_s1",
        B7 + "N144_lr2e-6_tis_Tb1_Tl1_s43",
    } | {B15 + f"N192_lr2e-6_tis_Tb0.8_Tl1_s{s}" for s in (1, 43, 44)}


def test_table4_is_every_run(study: Study) -> None:
    assert selected(study, "table4", "rows") == {r.key for r in study.runs}


def test_every_panel_selects_something(study: Study) -> None:
    for target, panels in study.figures.items():
        for panel, filt in panels.items():
            assert study.select(filt), f"{target}.{panel}"


# --------------------------------------------------------------------------------------------------
# Bad edits of the paper study: one StudyError, one line, naming the field.


def _entry(raw: dict[str, Any], pred: Callable[[dict[str, Any]], bool]) -> int:
    hits = [i for i, e in enumerate(raw["runs"]) if pred(e)]
    assert hits, "no such run entry in config/paper.yaml"
    return hits[0]


def _set(pred: Callable[[dict[str, Any]], bool], **changes: Any) -> Callable[[dict[str, Any]], None]:
    def edit(raw: dict[str, Any]) -> None:
        raw["runs"][_entry(raw, pred)].update(changes)

    return edit


def _n64(e: dict[str, Any]) -> bool:
    return e.get("N") == 64


def _saturation(e: dict[str, Any]) -> bool:
    return isinstance(e.get("Tb"), dict) and e["Tb"].get("controller") == "saturation"


def _cut(e: dict[str, Any]) -> bool:
    return e.get("replicate") == "cut"


def _duplicate(raw: dict[str, Any]) -> None:
    raw["runs"].append(copy.deepcopy(raw["runs"][_entry(raw, _n64)]))


def _pop_steps_of_cut(raw: dict[str, Any]) -> None:
    raw["runs"][_entry(raw, _cut)].pop("steps")


def _figure(target: str, panel: str, filt: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    def edit(raw: dict[str, Any]) -> None:
        raw["figures"][target][panel] = filt

    return edit


BAD_EDITS = [
    ("Tb 0", _set(_n64, Tb=0), ".Tb"),
    ("Tb above 2", _set(_n64, Tb=2.5), ".Tb"),
    ("N -1", _set(_n64, N=-1), ".N"),
    ("lr 0", _set(_n64, lr=0), ".lr"),
    ("lr as YAML string", _set(_n64, lr="2e-6"), ".lr"),
    ("correction foo", _set(_n64, correction="foo"), ".correction"),
    ("unknown key", _set(_n64, temperature=0.8), "temperature"),
    ("unknown model", _set(_n64, model="qwen2.5-math-72b"), ".model"),
    ("duplicate run", _duplicate, "duplicate run"),
    ("figure selecting nothing", _figure("fig1", "a", {"N": 999}), "figures.fig1.a"),
    ("figure unknown setting", _figure("fig3", "b", {"refresh": 192}), "figures.fig3.b"),
    ("Tl tied with a controller", _set(_saturation, Tl="tied"), ".Tl"),
    ("unknown controller", _set(_n64, Tb={"controller": "pid", "start": 0.8}), "Tb.controller"),
    ("cut without steps", _pop_steps_of_cut, ".steps"),
    ("val_every beyond steps", _set(_n64, val_every=400), ".val_every"),
    ("bad replicate", _set(_n64, replicate="again"), ".replicate"),
]


@pytest.mark.parametrize("name,edit,field", BAD_EDITS, ids=[b[0] for b in BAD_EDITS])
def test_bad_edit_is_one_line_naming_the_field(
    raw: dict[str, Any], name: str, edit: Callable[[dict[str, Any]], None], field: str
) -> None:
    bad = copy.deepcopy(raw)
    edit(bad)
    with pytest.raises(StudyError) as info:
        study_from_dict(bad, origin="config/paper.yaml")
    msg = str(info.value)
    assert "\n" not in msg, name
    assert msg.startswith("config/paper.yaml:"), msg
    assert field in msg, msg


def test_unmodified_copy_is_valid(raw: dict[str, Any]) -> None:
    assert len(study_from_dict(copy.deepcopy(raw), origin="config/paper.yaml").runs) == PAPER_RUNS
