"""Under CI=true a skip is a failure unless tests/conftest.py allows its reason: a missing install
(Chromium, verl, the SLURM cluster) can no longer turn a required test into a quiet skip."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CI_ALLOWED_SKIPS, ci_refuses, pytest_collection_modifyitems

REPO = Path(__file__).resolve().parents[1]


def test_the_rule() -> None:
    assert ci_refuses("Skipped: no headless Chromium", {"CI": "true"})
    assert not ci_refuses("Skipped: no headless Chromium", {})
    assert not ci_refuses(f"Skipped: {CI_ALLOWED_SKIPS[0]}", {"CI": "true"})


def test_a_skip_fails_a_ci_run_and_an_allowed_one_does_not(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text("from tests.conftest import pytest_runtest_makereport  # noqa: F401\n")
    (tmp_path / "test_x.py").write_text(
        "import pytest\n\n"
        "def test_needs_a_tool():\n    pytest.skip('no headless Chromium')\n\n"
        f"def test_machine_fact():\n    pytest.skip({CI_ALLOWED_SKIPS[0]!r})\n"
    )
    argv = [sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "-o", "addopts=", "-rA"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "CI": "true"}
    res = subprocess.run([*argv, str(tmp_path)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 1, res.stdout
    assert "1 failed, 1 skipped" in res.stdout and "not on tests/conftest.py's CI_ALLOWED_SKIPS" in res.stdout
    env["CI"] = "false"
    res = subprocess.run([*argv, str(tmp_path)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "2 skipped" in res.stdout, res.stdout


class _Item:
    def __init__(self, nodeid: str, slow: bool) -> None:
        self.nodeid, self.slow = nodeid, slow

    def get_closest_marker(self, name: str) -> object | None:
        return object() if name == "slow" and self.slow else None


def test_tests_stack_holds_only_slow_tests() -> None:
    """A test in tests/stack not marked slow stops the collection, naming it, so `pytest -m "not slow"`
    never starts verl or vLLM and `pytest tests/stack` is part of the slow suite."""
    ok = [_Item("tests/stack/test_a.py::test_x", True), _Item("tests/train/test_b.py::test_y", False)]
    pytest_collection_modifyitems(None, None, ok)
    with pytest.raises(pytest.UsageError, match=r"not marked: tests/stack/test_c.py::test_z$"):
        pytest_collection_modifyitems(None, None, [*ok, _Item("tests/stack/test_c.py::test_z", False)])
