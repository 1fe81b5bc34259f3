"""profiles/slurm against a fake SLURM: the paper's Figure 1 submits its 8 training runs, each as
one 4-GPU job with the runtime, memory and CPUs of the profile, and nothing else is submitted.

The repository is copied into a temporary directory (tracked and untracked, not ignored files) and
the inputs of rule train that need the network or a container engine -- the data, the verl wheel,
the image and its digest -- are stand-in files there. tests/fake_slurm/ goes first on PATH: its
sbatch records each submission and its sacct reports every job as running, so Snakemake submits
everything it can and then waits; the test interrupts it (its own process group) once all eight
are in, and Snakemake cancels them through the fake scancel.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from coolsampler.spec.study import load_study

ROOT = Path(__file__).resolve().parents[2]
FAKE = ROOT / "tests" / "fake_slurm"
SNAKEMAKE = Path(sys.executable).with_name("snakemake")
DIGEST = "sha256:" + "ab" * 32


def copy_repo(dest: Path) -> None:
    """The working tree as git sees it (tracked + untracked, minus ignored), mtimes kept."""
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for name in filter(None, files):
        src = ROOT / name.decode()
        if src.is_file():
            (dest / name.decode()).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name.decode())


def fake_inputs(repo: Path) -> None:
    """Stand-ins for what the paper DAG would download or build before training (newer than inputs)."""
    version = subprocess.run(
        [sys.executable, "workflow/scripts/build_verl.py", "--print-version"],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    build = repo / "results" / "build"
    build.mkdir(parents=True)
    (build / f"verl-{version}-py3-none-any.whl").write_bytes(b"")
    (build / "coolsampler.sif").write_bytes(b"")
    (build / "image.digest").write_text(DIGEST + "\n")
    for split in ("train", "test"):
        d = repo / "results" / "data" / "gsm8k"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{split}.parquet").write_bytes(b"")
        (d / f"{split}.manifest.json").write_text("{}")


def option(args: list[str], flag: str) -> str | None:
    """The value of ``flag`` in an sbatch argv, written ``flag value`` or ``flag=value``."""
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_fig1_submits_eight_four_gpu_training_jobs(tmp_path: Path) -> None:
    repo, records, home = tmp_path / "repo", tmp_path / "submissions", tmp_path / "home"
    repo.mkdir()
    home.mkdir()
    copy_repo(repo)
    fake_inputs(repo)
    env = {
        **os.environ,
        "PATH": f"{FAKE}{os.pathsep}{SNAKEMAKE.parent}{os.pathsep}{os.environ['PATH']}",
        "FAKE_SLURM_DIR": str(records),
        "HOME": str(home),  # no profile or cache of the user's
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
    }
    env.pop("SNAKEMAKE_PROFILE", None)
    env.pop("SLURM_JOB_ID", None)
    cmd = [
        str(SNAKEMAKE),
        "results/fig1.pdf",
        "--profile",
        "profiles/slurm",
        "--configfile",
        "config/paper.yaml",
        "--slurm-init-seconds-before-status-checks",
        "1",
    ]
    log = tmp_path / "snakemake.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=repo, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.time() + 120
            while time.time() < deadline and proc.poll() is None:
                if len(list(records.glob("job-*.json"))) >= 8:
                    time.sleep(2)  # a ninth submission, if any, would show up now
                    break
                time.sleep(0.5)
        finally:
            # SIGINT: Snakemake cancels its jobs (fake scancel) and exits; SIGTERM would wait for them
            for sig, wait in ((signal.SIGINT, 30), (signal.SIGKILL, 10)):
                if proc.poll() is not None:
                    break
                os.killpg(proc.pid, sig)
                try:
                    proc.wait(timeout=wait)
                except subprocess.TimeoutExpired:
                    continue
    text = log.read_text(errors="replace")
    jobs = [json.loads(p.read_text()) for p in sorted(records.glob("job-*.json"))]
    assert len(jobs) == 8, f"{len(jobs)} submissions; snakemake said:\n{text[-4000:]}"

    study = load_study(ROOT / "config" / "paper.yaml")
    want = {r.key for panel in study.figures["fig1"].values() for r in study.select(panel)}
    assert len(want) == 8
    seen = set()
    for job in jobs:
        args = job["args"]
        comment = option(args, "--comment") or ""
        assert comment.startswith("rule_train_wildcards_"), comment
        assert option(args, "--gpus") == "4", args  # the plugin renders resources gpu=4 as --gpus=4
        assert option(args, "-t") == "960", args  # minutes
        assert option(args, "--mem") == "256000", args
        assert option(args, "--cpus-per-task") == "32", args
        assert option(args, "-p") == "gpu", args
        assert "--executor slurm-jobstep" in job["script"]
        assert "results/build/image.digest" in job["script"]  # trains in the image (profile: apptainer)
        key = next(k for k in want if f"key={k}" in job["script"].replace("'", ""))
        seen.add(key)
    assert seen == want
