"""A plain ``pip install .`` (not editable) works from any directory: the documented light commands run
from a temporary directory with the package installed into a fresh virtual environment, where no
checkout lies beside it. The shipped studies, claims, hardware files and profiles are package data
(``coolsampler.spec.shipped``), found by name or by their path in the repository.

The environment gets this interpreter's dependencies through a ``.pth`` line (pip installs only the
package, ``--no-deps``, so the test needs no network); a ``.pth`` line adds a path without running that
path's own ``.pth`` files, so an editable install of the checkout there is not seen.
"""

from __future__ import annotations

import os
import site
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
KEY = "qwen2.5-math-1.5b/gsm8k/N192_lr2e-6_tis_Tb0.8_Tl1_s1"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with this checkout installed into it, non-editable; returns its bin directory."""
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    purelib = next(venv.glob("lib/python*/site-packages"))
    (purelib / "deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    build = tmp_path_factory.mktemp("build")
    env = {**os.environ, "TMPDIR": str(build)}
    env.pop("PYTHONPATH", None)
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q"]
    pip += ["--no-deps", "--no-build-isolation", "--no-cache-dir", str(REPO)]
    res = subprocess.run(pip, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    return venv / "bin"


def _run(bindir: Path, cwd: Path, *argv: str, pipe_to_head: bool = False) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
    if pipe_to_head:
        cmd = " ".join(["coolsampler", *argv, "| head -n 2"])
        return subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=cwd, env=env, capture_output=True, text=True)
    return subprocess.run(["coolsampler", *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_the_installed_package_is_not_the_checkout(installed: Path, tmp_path: Path) -> None:
    py = installed / "python"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    where = subprocess.run(
        [str(py), "-c", "import coolsampler; print(coolsampler.__file__)"], cwd=tmp_path, env=env,
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert where.startswith(str(installed.parent)) and not where.startswith(str(REPO)), where


@pytest.mark.slow
@pytest.mark.parametrize(
    "argv,expect",
    [
        (["--version"], "coolsampler 0.1.0"),
        (["--help"], "commands:"),
        (["runs", "--study", "paper"], KEY.replace("_s1", "_s43")),
        (["runs", "--study", "config/paper.yaml", "--source"], "\t"),
        (["runs"], "toy-qwen2/arith/"),  # the default study, config/config.yaml
        (["plan", "--study", "config/paper.yaml", "--run", KEY], "plan: 1 run(s) to train on 4 GPU(s) each"),
        (["plan", "--study", "paper", "--overlay", "config/hardware/one-gpu.yaml", "--run", KEY], "on 1 GPU(s) each"),
        (["plan", "--study", "paper", "--overlay", "one-gpu", "--run", KEY], " --resources gpu=1 --configfile "),
        (["plan", "--study", "config/paper.yaml", "--profile", "slurm"], "profiles/slurm jobs: 16"),
        (["memory", "--study", "config/paper.yaml", "--overlay", "config/hardware/80gb.yaml"], "fits"),
        (["overrides", KEY, "--study", "config/paper.yaml"], "trainer.n_gpus_per_node=4"),
        (["analyze", str(REPO / "examples" / "verl-logs"), "--figure", "a.png"], "wrote a.png"),
        (["claims", str(REPO / "examples" / "verl-logs" / "degrades")], "run(s) read"),
    ],
    ids=lambda x: " ".join(x) if isinstance(x, list) else None,
)
def test_documented_light_commands_from_a_temporary_directory(installed: Path, tmp_path: Path, argv, expect) -> None:
    res = _run(installed, tmp_path, *argv)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    assert expect in res.stdout, res.stdout[-3000:]
    assert "No such file" not in res.stderr and "Traceback" not in res.stderr, res.stderr


@pytest.mark.slow
def test_a_closed_pipe_is_no_traceback(installed: Path, tmp_path: Path) -> None:
    """``coolsampler runs | head``: the reader goes away, the command stops quietly."""
    res = _run(installed, tmp_path, "runs", "--study", "paper", pipe_to_head=True)
    assert len(res.stdout.splitlines()) == 2 and "Traceback" not in res.stderr and "BrokenPipe" not in res.stderr
