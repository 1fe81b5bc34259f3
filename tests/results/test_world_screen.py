"""The world screen's verdict: the first candidate in the study's order that meets every bound, never a
reference world, and none (the study stops) when no candidate does."""

from __future__ import annotations

import copy

import pytest

from coolsampler.results.world_screen import chosen_world, screen_markdown, screen_table, within
from coolsampler.spec.study import StudyError, study_from_dict
from coolsampler.spec.world import Screen, study_screen

SCREEN = Screen(
    worlds=("a", "b", "c"),
    bounds={"entropy": (0.2, 0.8), "tail_ratio": (2.5, None), "offset": (None, 0.025), "error_link": (0.1, None)},
    reference=("old",),
)
GOOD = {"entropy": 0.5, "tail_ratio": 3.0, "offset": 0.02, "error_link": 0.15}


def probes(**changes: dict) -> dict[str, dict]:
    out = {name: {"world": f"{name}-0000", **GOOD} for name in ("a", "b", "c", "old")}
    for name, change in changes.items():
        out[name].update(change)
    return out


def test_bounds_are_closed_and_a_missing_value_never_meets_one() -> None:
    assert within(0.2, (0.2, 0.8)) and within(0.8, (0.2, 0.8)) and not within(0.81, (0.2, 0.8))
    assert within(100, (2.5, None)) and within(-1, (None, 0.025)) and not within(None, (None, None))


@pytest.mark.parametrize(
    ("changes", "chosen"),
    [
        ({}, "a"),
        ({"a": {"entropy": 1.45}}, "b"),  # round 2's entropy fails the screen
        ({"a": {"offset": 0.026}, "b": {"error_link": None}}, "c"),  # no tail word sampled: not measured
        ({"a": {"tail_ratio": 2.49}, "b": {"tail_ratio": 1.4}, "c": {"entropy": 0.1}}, None),
    ],
)
def test_the_first_candidate_in_order_that_meets_every_bound_is_chosen(changes: dict, chosen: str | None) -> None:
    table = screen_table(SCREEN, probes(**changes))
    assert chosen_world(table) == chosen
    assert table["chosen"].sum() == (chosen is not None)
    md = screen_markdown(SCREEN, table)
    assert ("Chosen: **" + chosen + "**" in md) if chosen else "No candidate meets every bound" in md


def test_a_reference_world_is_shown_but_never_chosen() -> None:
    fail = {"entropy": 0.0}
    table = screen_table(SCREEN, probes(a=fail, b=fail, c=fail))  # only the reference meets every bound
    assert chosen_world(table) is None
    assert list(table["world"]) == ["a", "b", "c", "old"] and table.set_index("world").loc["old", "meets_all"]
    assert "reference (meets all)" in screen_markdown(SCREEN, table)


def test_the_study_file_names_its_candidates_among_its_worlds() -> None:
    raw = {
        "name": "s",
        "results": "results/s",
        "profile": "cpu",
        "worlds": {"a": {}, "b": {}},
        "screen": {"worlds": ["a", "b"], "entropy": [0.2, 0.8]},
        "defaults": {"model": "a", "task": "a", "lr": 1e-4, "Tb": 1.0, "correction": "tis"},
        "runs": [{"N": 4, "seed": 1}],
    }
    screen = study_screen(raw, "s")
    assert screen is not None and screen.worlds == ("a", "b") and screen.bounds == {"entropy": (0.2, 0.8)}
    bad = copy.deepcopy(raw)
    bad["screen"]["worlds"].append("z")
    with pytest.raises(StudyError, match=r"screen.worlds: z is not a world of the study"):
        study_from_dict(bad, origin="s")


def test_round_4_bounds_the_error_link_judged_block_by_block() -> None:
    """Round 4 replaces the error link judged against the true sums with the one judged block by block: a
    world whose carried mistakes sink the first (r3a: 0.060) but whose own link holds (0.111) is chosen."""
    from pathlib import Path

    import yaml

    raw = yaml.safe_load((Path(__file__).resolve().parents[2] / "config" / "cliff.yaml").read_text())
    screen = study_screen(raw, "cliff")
    assert screen is not None and screen.bounds["error_link_local"] == (0.10, None)
    assert "error_link" not in screen.bounds
    r3a = {"entropy": 0.460, "tail_ratio": 3.232, "offset": 0.0183, "error_link": 0.060, "error_link_local": 0.111}
    table = screen_table(screen, {w: {"world": f"{w}-0", **r3a} for w in screen.probed})
    assert chosen_world(table) == "r3a"
    assert "local error link [>= 0.1]" in screen_markdown(screen, table)
    failing = {**r3a, "error_link_local": 0.099}
    table = screen_table(screen, {w: {"world": f"{w}-0", **failing} for w in screen.probed})
    assert chosen_world(table) is None
