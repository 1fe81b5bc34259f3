"""No file of the repository points outside it: what users need is said in the
project's own docs, not in notes next to a checkout that a clone does not have."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# built here so that this file does not match itself
OUTSIDE = ("../" + "shared", "/work/" + "shared")


def test_no_tracked_file_points_outside_the_repository() -> None:
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    hits = []
    for name in files:
        path = REPO / name
        if not path.is_file():
            continue
        text = path.read_bytes().decode("utf-8", errors="ignore")
        hits += [f"{name}: {needle}" for needle in OUTSIDE if needle in text]
    assert not hits, hits
