"""Each verl patch reads in one screen and only calls the package: at most 120 changed lines, the
staleness gate (0001) the largest, each quoting the paper, and none deciding a refresh by step mod N or
reading a trainer key by hand (coolsampler.worker.trainer_keys reads them)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from coolsampler.worker.trainer_keys import NAMES

PATCHES = sorted((Path(__file__).resolve().parents[2] / "patches" / "verl").glob("*.patch"))
MAX_CHANGED = 120


def changed(patch: Path) -> list[str]:
    """The lines a patch adds or removes (not its file headers)."""
    return [
        line
        for line in patch.read_text().splitlines()
        if line[:1] in ("+", "-") and not line.startswith(("+++ ", "--- "))
    ]


@pytest.mark.parametrize("patch", PATCHES, ids=[p.stem for p in PATCHES])
def test_a_patch_reads_in_one_screen_and_quotes_the_paper(patch):
    assert len(changed(patch)) <= MAX_CHANGED, f"{patch.name}: {len(changed(patch))} changed lines"
    assert re.search(r'^Paper, [^\n]*"', patch.read_text(), re.M), f"{patch.name} quotes no paper sentence"


def test_the_staleness_gate_is_the_largest_patch():
    sizes = {p.name: len(changed(p)) for p in PATCHES}
    assert max(sizes, key=sizes.get) == "0001-staleness-gate.patch", sizes


def test_no_patch_reads_a_trainer_key_by_hand_or_decides_by_step_mod_n():
    added = "\n".join(line for p in PATCHES for line in changed(p) if line.startswith("+"))
    for name in NAMES:
        assert not re.search(rf"""get\(["']{name}["']""", added), name
    assert not re.search(r"global_steps\s*%\s*(self\.)?\w*(refresh|interval)", added)
    assert "assert " not in added and "print(" not in added  # clear errors and verl's logger


def test_the_patch_page_describes_every_patch():
    page = (Path(__file__).resolve().parents[2] / "docs" / "patches.md").read_text()
    assert [p.stem for p in PATCHES if f"| `{p.stem}` |" not in page] == []
