"""Test order for the two CI workers: the longest test files first.

pytest-xdist (``--dist loadfile``) hands whole files to its workers in collection order, each worker
taking the next file when it is free. Collected alphabetically, the paper rehearsal (the longest file
by far) would start a quarter of the way in and run on alone at the end; started first, the other
worker works through everything else beside it. ``LONGEST_FIRST`` lists the heavy files by their wall
time in CI, longest first; every other file keeps its place after them.
"""

from __future__ import annotations

LONGEST_FIRST = (
    "tests/stack/test_rehearsal.py",
    "tests/stack/test_verl_stack.py",
    "tests/stack/test_resume.py",
    "tests/stack/test_mechanisms_stack.py",
    "tests/stack/test_acceptance.py",
    "tests/stack/test_prefork.py",
    "tests/stack/test_end_to_end.py",
    "tests/stack/test_extend_stack.py",
    "tests/stack/test_watchdog.py",
)


def pytest_collection_modifyitems(session, config, items) -> None:
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))  # stable: the rest keep order
