"""Results that travel (issue 13): a fresh clone with the results copied in trains nothing again.

A committed copy of this working tree is cloned with ``git clone`` (every source file gets a new
file time), and a results folder is copied in, with ``cp -a`` (times kept: older than the clone's
sources) or by a plain copy (new times, in copy order), each with and without Snakemake's metadata
(``.snakemake/``). ``snakemake -n`` must then plan no ``train`` and no ``verl_wheel`` job. The other
direction is tested too: a patch or a training-side source that really changes plans every run again.

The results are fabricated, not trained (dry runs only, a few seconds each): every file rule train
declares or reads (train.jsonl, run.yaml with its training key, the wheel, the data, the toy model),
written as coolsampler.provenance.run_record writes run.yaml.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from coolsampler.paths import Layout
from coolsampler.provenance import run_record
from coolsampler.rerun import code_files, file_digests, training_key
from coolsampler.study import load_study

REPO = Path(__file__).resolve().parents[1]
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
DAY = 86400


def _git(cwd: Path, *args: str) -> str:
    res = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=True, env={**os.environ, **GIT_ENV}
    )
    return res.stdout


def _snakemake(cwd: Path, *args: str, timeout: int = 180) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(cwd / "workflow")}
    return subprocess.run(
        [sys.executable, "-m", "snakemake", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def planned(out: str) -> dict[str, int]:
    """rule -> number of jobs in a ``snakemake -n`` job-stats table (empty: nothing to do)."""
    stats = re.search(r"Job stats:\njob\s+count\n[-\s]+\n(.*?)\ntotal", out, re.S)
    if not stats:
        assert "Nothing to be done" in out, out[-3000:]
        return {}
    return {name: int(n) for name, n in re.findall(r"^(\S+)\s+(\d+)$", stats.group(1), re.M)}


def committed_copy(dest: Path) -> Path:
    """This working tree (tracked and untracked, not ignored files) as a fresh repository, committed."""
    files = _git(REPO, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
    for name in filter(None, files):
        src = REPO / name
        if src.is_file() and not src.is_symlink():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    _git(dest, "init", "-q")
    _git(dest, "add", "-A")
    _git(dest, "commit", "-qm", "state under test")
    return dest


def fabricate_results(repo: Path) -> list[str]:
    """A finished smoke study in ``repo/results`` without training: what rule train reads and writes.

    The run.yaml of each run records the training key computed from ``repo``'s sources, as a real run
    does; every file is dated two days back (results older than any source, as after a real study).
    Returns the run keys."""
    study = load_study(repo / "config/config.yaml")
    layout = Layout.from_config(study.raw, study.results)
    version = subprocess.run(
        [sys.executable, "workflow/scripts/build_verl.py", "--print-version"],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    key = training_key(verl=version, recipe=study.recipe, platform="cpu", code=file_digests(repo, code_files(repo)))
    files = {
        f"{layout.build}/verl-{version}-py3-none-any.whl": b"wheel",
        f"{layout.model_dir('toy-qwen2')}/model.safetensors": b"weights",
        **{path: b"parquet" for path in layout.data_files("arith").values()},
    }
    for run in study.runs:
        record = run_record(
            study=study.name,
            settings=run.settings(),
            source=run.source,
            overrides=["actor_rollout_ref.actor.optim.lr=0.0001", "trainer.n_gpus_per_node=1", "trainer.nnodes=1"],
            platform="cpu",
            verl=version,
            image=None,
            env={},
            training_key=key,
            cwd=repo,
        )
        files[layout.run_file(run.key, "run.yaml")] = yaml.safe_dump(record, sort_keys=False).encode()
        files[layout.run_file(run.key, "train.jsonl")] = b'{"step": 1}\n'
        files[layout.run_file(run.key, "checkpoints/latest_checkpointed_iteration.txt")] = b"64"
    past = time.time() - 2 * DAY
    for rel, data in files.items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        os.utime(path, (past, past))
    return [r.key for r in study.runs]


@pytest.fixture(scope="module")
def origin(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A committed tree with a finished (fabricated) smoke study and Snakemake's metadata of it."""
    src = committed_copy(tmp_path_factory.mktemp("origin"))
    keys = fabricate_results(src)
    # Snakemake's metadata for every output, as a real study leaves it (--touch records it too)
    outputs = [f"results/smoke/runs/{k}/{f}" for k in keys for f in ("train.jsonl", "run.yaml")]
    res = _snakemake(src, "--touch", "--cores", "1", "--forcerun", "train", "--", *outputs)
    assert res.returncode == 0, res.stderr[-3000:]
    assert any((src / ".snakemake" / "metadata").iterdir())
    past = time.time() - 2 * DAY  # --touch dated the outputs now: back to the study's time
    for path in (src / "results").rglob("*"):
        os.utime(path, (past, past))
    return src, keys


def clone_with_results(origin: Path, dest: Path, *, keep_times: bool, metadata: bool) -> Path:
    """``git clone`` of the origin, then its results (and optionally .snakemake) copied in."""
    subprocess.run(["git", "clone", "-q", str(origin), str(dest)], check=True, capture_output=True)
    copy = shutil.copy2 if keep_times else shutil.copyfile
    shutil.copytree(origin / "results", dest / "results", copy_function=copy)
    if metadata:
        shutil.copytree(origin / ".snakemake", dest / ".snakemake", copy_function=copy)
    return dest


@pytest.mark.parametrize("keep_times", [True, False], ids=["cp-a", "plain-copy"])
@pytest.mark.parametrize("metadata", [True, False], ids=["metadata", "no-metadata"])
def test_fresh_clone_with_copied_results_trains_nothing(origin, tmp_path, keep_times, metadata):
    src, _keys = origin
    work = clone_with_results(src, tmp_path / "clone", keep_times=keep_times, metadata=metadata)
    res = _snakemake(work, "-n")
    assert res.returncode == 0, res.stderr[-3000:]
    jobs = planned(res.stdout)
    assert "train" not in jobs and "verl_wheel" not in jobs and "supersede" not in jobs, jobs


def test_a_changed_patch_trains_every_run_again(origin, tmp_path):
    src, keys = origin
    work = clone_with_results(src, tmp_path / "clone", keep_times=True, metadata=False)
    patch = sorted((work / "patches/verl").glob("*.patch"))[0]
    patch.write_text(patch.read_text() + "\n")  # new content: a new wheel name
    jobs = planned(_snakemake(work, "-n").stdout)
    assert jobs.get("verl_wheel") == 1 and jobs.get("train") == len(keys), jobs


def test_changed_training_code_trains_every_run_again_from_step_0(origin, tmp_path):
    src, keys = origin
    work = clone_with_results(src, tmp_path / "clone", keep_times=True, metadata=True)
    # a file image_sources() finds (coolsampler.rewards runs inside verl): training-side code
    rewards = work / "workflow/coolsampler/rewards.py"
    rewards.write_text(rewards.read_text() + "\n# a change\n")
    res = _snakemake(work, "-n")
    jobs = planned(res.stdout)
    assert jobs.get("train") == len(keys) and jobs.get("supersede") == len(keys), jobs
    assert "verl_wheel" not in jobs
    # the stale checkpoints are set aside before training, so no run resumes another code's state
    res = _snakemake(work, "--cores", "1", "--allowed-rules", "supersede", "--", *_supersede_targets(res.stdout))
    assert res.returncode == 0, res.stderr[-3000:]
    run_dir = work / "results/smoke/runs" / keys[0]
    assert not (run_dir / "checkpoints").exists()
    assert list((run_dir / "superseded").glob("*/checkpoints/latest_checkpointed_iteration.txt"))


def _supersede_targets(dry_run: str) -> list[str]:
    return re.findall(r"output: (\S+/set-aside-[0-9a-f]+\.json)", dry_run)


def test_analysis_code_plans_no_training(origin, tmp_path):
    """Editing the plotting code (not training-side) trains nothing."""
    src, _keys = origin
    work = clone_with_results(src, tmp_path / "clone", keep_times=False, metadata=True)
    plotting = work / "workflow/coolsampler/plotting.py"
    plotting.write_text(plotting.read_text() + "\n# an edit\n")
    jobs = planned(_snakemake(work, "-n").stdout)
    assert "train" not in jobs and jobs.get("figure"), jobs


def test_analysis_only_never_plans_training(origin, tmp_path):
    """analysis_only=true: rule train does not exist; missing runs are listed, the rest is drawn."""
    src, keys = origin
    work = clone_with_results(src, tmp_path / "clone", keep_times=True, metadata=False)
    missing = work / "results/smoke/runs" / keys[0]
    shutil.rmtree(missing)
    patch = sorted((work / "patches/verl").glob("*.patch"))[0]
    patch.write_text(patch.read_text() + "\n")  # would retrain everything without the switch
    res = _snakemake(work, "-n", "--config", "analysis_only=true")
    assert res.returncode == 0, res.stderr[-3000:]
    jobs = planned(res.stdout)
    assert "train" not in jobs and "verl_wheel" not in jobs, jobs
    assert jobs.get("parse") == len(keys) - 1 and jobs.get("figure") == 2 and jobs.get("table") == 3, jobs
    assert f"1 of {len(keys)} runs of study smoke" in res.stderr and keys[0] in res.stderr
