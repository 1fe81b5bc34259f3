"""The SLURM tests' requirement, without starting anything: on a machine without SLURM they skip with the
one line that installs it, unless COOLSAMPLER_REQUIRE_SLURM=1 (CI, .ci/run), where they fail; the set-up
script and CI install the same packages ``workflow/tools/local_slurm.py`` names."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LOAD = "import tests.stack.test_slurm as t; print('SKIP' if t.UNAVAILABLE else 'RUN', t.pytestmark[1].kwargs['reason'])"


def _load(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    """Import the SLURM test module with a PATH that holds the Python only (no SLURM daemons)."""
    bare = tmp_path / "bin"
    bare.mkdir(exist_ok=True)
    full = {k: v for k, v in os.environ.items() if k != "COOLSAMPLER_REQUIRE_SLURM"}
    full.update(PATH=str(bare), PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "workflow")]), **env)
    return subprocess.run(
        [sys.executable, "-c", LOAD], cwd=REPO, env=full, capture_output=True, text=True, timeout=120, check=False
    )


def test_without_slurm_the_tests_skip_naming_the_install(tmp_path: Path) -> None:
    res = _load(tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("SKIP SLURM is not installed here (no munged")
    assert "as root, apt-get install slurm-wlm slurmdbd munge mariadb-server" in res.stdout


def test_ci_turns_that_skip_into_a_failure(tmp_path: Path) -> None:
    res = _load(tmp_path, COOLSAMPLER_REQUIRE_SLURM="1")
    assert res.returncode != 0
    assert "COOLSAMPLER_REQUIRE_SLURM=1 and SLURM is not installed here" in res.stderr


def test_ci_and_the_set_up_require_and_install_what_local_slurm_needs() -> None:
    ci = (REPO / ".ci" / "run").read_text()
    setup = (REPO / "workflow" / "tools" / "setup_env.sh").read_text()
    assert "export COOLSAMPLER_REQUIRE_SLURM=1" in ci
    assert ci.index("export COOLSAMPLER_REQUIRE_SLURM=1") < ci.index(".venv/bin/python -m pytest")
    for text in (ci, setup):
        assert "workflow/tools/local_slurm.py packages" in text
    assert "apt-get install -y -qq --no-install-recommends $missing" in setup
    assert "COOLSAMPLER_SLURM_PACKAGES=skip" in (REPO / "containers" / "Dockerfile.cpu").read_text()
