"""A run's ``guard:`` and ``N: {schedule: [...]}`` in a study: validation, run keys, settings."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml

from coolsampler.spec.diagnostics import BY_NAME
from coolsampler.spec.guard import GuardSpec
from coolsampler.spec.study import KEY_WILDCARD_RE, StudyError, load_study, parse_key, study_from_dict
from coolsampler.spec.validate import study_schema

REPO = Path(__file__).resolve().parents[2]
RUN = {"model": "toy-qwen2", "task": "arith", "N": 16, "lr": 1.0e-4, "correction": "tis", "Tb": 0.8, "seed": 1}
GUARD = {"signal": "probs_diff", "threshold": 0.1, "window": 3, "min": 2}


def _study(**entry) -> dict:
    return {"name": "g", "runs": [{**RUN, **entry}]}


def test_guard_and_schedule_keys() -> None:
    study = study_from_dict(
        {"name": "g", "runs": [{**RUN, "guard": [None, GUARD]}, {**RUN, "N": {"schedule": [5, 20, 40]}}]}
    )
    plain, guarded, scheduled = study.runs
    assert plain.key == "toy-qwen2/arith/N16_lr1e-4_tis_Tb0.8_Tl1_s1"  # as without the feature
    assert guarded.key == "toy-qwen2/arith/N16_gprobs_diff0.1w3m2_lr1e-4_tis_Tb0.8_Tl1_s1"
    assert guarded.guard == GuardSpec("probs_diff", 0.1, 3, 2) and guarded.N == 16
    # a schedule's N is the longest interval it leaves: 40 -> the end of the 64-step run
    assert scheduled.N == 24 and scheduled.schedule == (5, 20, 40)
    assert re.fullmatch(r"toy-qwen2/arith/N24_sch[0-9a-f]{8}_lr1e-4_tis_Tb0\.8_Tl1_s1", scheduled.key)
    for run in study.runs:
        assert re.fullmatch(KEY_WILDCARD_RE, run.key), run.key
        assert parse_key(run.key, study) == run
    assert parse_key(guarded.key) == guarded  # a guard key carries the whole guard
    with pytest.raises(ValueError, match="refresh schedule .* known only to the study"):
        parse_key(scheduled.key)
    assert "guard" not in plain.settings() and "schedule" not in plain.settings()
    assert guarded.settings()["guard"] == GUARD and scheduled.settings()["schedule"] == [5, 20, 40]
    assert "guard" not in repr(plain)  # Snakemake's recorded params of a guard-free run do not change
    assert guarded.refresh_text == "guard probs_diff > 0.1, median of 3 since refresh, min 2, at most every 16 steps"


def test_defaults_are_written_into_the_key() -> None:
    """A guard that leaves window and min out gets the lead table's reading, and the key says so."""
    run = study_from_dict(_study(guard={"signal": "ess", "threshold": 0.5})).runs[0]
    assert run.key.split("/")[2].startswith("N16_gess0.5w5m1_lr")


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"guard": {"signal": "chi3", "threshold": 1}}, "runs[0].guard.signal: 'chi3' is not valid; allowed: kl,"),
        ({"guard": {**GUARD, "window": 0}}, "runs[0].guard.window: 0 is not valid; allowed: integer >= 1"),
        ({"guard": {**GUARD, "threshold": 0}}, "runs[0].guard.threshold: 0 is not valid; allowed: number > 0"),
        ({"guard": {**GUARD, "min": 17}}, "runs[0].guard.min: 17 exceeds N 16; allowed: 1..N"),
        ({"guard": {"signal": "kl"}}, "runs[0].guard.threshold: missing; required keys here: signal, threshold"),
        ({"guard": {**GUARD, "every": 3}}, "runs[0].guard.every: unknown key; allowed keys here: min, signal"),
        ({"guard": "kl>1"}, "runs[0].guard: 'kl>1' is not valid; allowed: null; or a mapping {signal, threshold"),
        ({"N": {"schedule": [9, 4]}}, "runs[0].N.schedule: 4 follows 9; allowed: strictly increasing steps"),
        ({"N": {"schedule": [9, 65]}}, "runs[0].N.schedule: step 65 is past the run's 64 steps; allowed: 1..64"),
        ({"N": {"schedule": [9]}, "guard": GUARD}, "runs[0].guard: with N: {schedule: ...}; allowed: a guard or a"),
        ({"N": {"every": 3}}, "runs[0].N.every: unknown key; allowed keys here: schedule"),
    ],
)
def test_bad_guards_are_one_line(entry: dict, message: str) -> None:
    with pytest.raises(StudyError) as err:
        study_from_dict(_study(**entry), origin="s.yaml")
    assert str(err.value).startswith("s.yaml: " + message), str(err.value)
    assert "\n" not in str(err.value)


def test_schema_names_every_signal() -> None:
    """The schema's description of ``signal`` (the reference page) lists exactly the lead table's rows."""
    text = study_schema()["$defs"]["guard"]["properties"]["signal"]["description"]
    listed = text.split(": ", 1)[1].split(" (", 1)[0].split(", ")
    assert listed == list(BY_NAME)


def test_existing_studies_keep_their_keys(tmp_path: Path) -> None:
    """A study gains a guard run without any of its other runs changing key."""
    raw = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    before = [r.key for r in load_study(REPO / "config" / "config.yaml").runs]
    grown = copy.deepcopy(raw)
    grown["runs"].append({"N": 32, "correction": "tis", "Tb": 1.0, "seed": 1, "guard": GUARD})
    path = tmp_path / "grown.yaml"
    path.write_text(yaml.safe_dump(grown, sort_keys=False))
    after = [r.key for r in load_study(path).runs]
    assert after[: len(before)] == before
    assert after[-1] == "toy-qwen2/arith/N32_gprobs_diff0.1w3m2_lr1e-4_tis_Tb1_Tl1_s1"


def test_a_figure_may_select_by_guard() -> None:
    """``guard: null`` selects the runs refreshed every N steps, a guard mapping the runs with that guard."""
    raw = {"name": "g", "runs": [{**RUN, "guard": [None, GUARD]}]}
    study = study_from_dict(raw)
    plain, guarded = study.runs
    assert study.select({"guard": None}) == [plain]
    assert study.select({"guard": GUARD}) == [guarded]


def test_the_paper_scale_guard_study_holds_the_papers_own_frontier() -> None:
    """config/guard-paper.yaml: its fixed-N runs are the paper study's very runs (same keys, so one
    results directory trains them once), its model block is the paper's (the memory budget and the
    pinned revision cannot drift apart), and its criterion's claims select its runs."""
    from coolsampler.results.claims import check_selects, load_claims

    guard = load_study(REPO / "config" / "guard-paper.yaml")
    paper = load_study(REPO / "config" / "paper.yaml")
    fixed = {r.key for r in guard.runs if r.refresh == "fixed"}
    assert fixed and fixed <= {r.key for r in paper.runs}
    guarded = [r for r in guard.runs if r.refresh == "guard"]
    assert len(guarded) == 6 and {r.Tb.initial for r in guarded} == {1.0, 0.8}
    raw = {n: yaml.safe_load((REPO / "config" / f"{n}.yaml").read_text()) for n in ("paper", "guard-paper")}
    for name, block in raw["guard-paper"]["models"].items():
        assert block == raw["paper"]["models"][name], name
    check_selects(load_claims(REPO / guard.raw["claims"]), guard.runs, "guard-paper")
