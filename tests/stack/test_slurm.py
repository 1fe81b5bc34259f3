"""The study through a real SLURM cluster: workflow/tools/local_slurm.py starts munge, MariaDB, slurmdbd,
slurmctld and two slurmd (partition ``cpu``: this host's cores; ``gpu``: a node declared as a paper node
with four placeholder GPUs) under this module's temporary directory, and stops them by PID at its end.

Snakemake submits with the shipped profiles/slurm, copied with only its lines marked EDIT changed (the
account: the plugin's sacct guess fails on SLURM 22.05), through snakemake-executor-plugin-slurm.
What a fake cannot answer, asked of the real slurmctld:

* the paper's Figure 1: the 8 training jobs with the profile's resources are accepted and placed
  (``--gpus=4`` on one node, 32 CPUs, 256000 MB, 16 h), then cancelled;
* a request no node can hold pends with ``PartitionConfig``: reported in one line and cancelled, not
  waited on; a partition that does not exist: one line before anything is submitted;
* the smoke study's training runs (``test_two_runs_at_once_requeued``): two at once, each with its own
  Ray and weight socket, one requeued after its first checkpoint and one during its first save, both
  ending where the same runs trained locally end.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from coolsampler.spec.study import load_study
from coolsampler.train.slurm import never_placed, parse_record
from tests.stack import REPO, copy_repo

pytestmark = [pytest.mark.slow]

_spec = importlib.util.spec_from_file_location("local_slurm", REPO / "workflow" / "tools" / "local_slurm.py")
local_slurm = importlib.util.module_from_spec(_spec)
sys.modules["local_slurm"] = local_slurm  # its dataclass looks its module up there
_spec.loader.exec_module(local_slurm)

SNAKEMAKE = Path(sys.executable).with_name("snakemake")
ACCOUNT_EDIT = '# slurm_account: "my_account"   # EDIT: uncomment if the cluster needs -A'


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = local_slurm.LocalSlurm(tmp_path_factory.mktemp("slurm"))
    c.start()
    try:
        yield c
    finally:
        c.stop()
        left = [n for n, pid in c.pids.items() if local_slurm._alive(pid)]
        assert not left, f"still running after stop: {left}"


def slurm_profile(dest: Path) -> Path:
    """profiles/slurm with its EDIT account line set to the test cluster's account."""
    shutil.copytree(REPO / "profiles" / "slurm", dest)
    cfg = dest / "config.v8+.yaml"
    text = cfg.read_text()
    assert ACCOUNT_EDIT in text, "the profile's account EDIT line changed: update this test"
    cfg.write_text(text.replace(ACCOUNT_EDIT, f'slurm_account: "{local_slurm.ACCOUNT}"'))
    return dest


def snakemake_env(cluster, home: Path) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        **cluster.env,
        "PATH": f"{SNAKEMAKE.parent}{os.pathsep}{cluster.env['PATH']}",
        "HOME": str(home),  # no profile or cache of the user's
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
    }
    for k in ("SNAKEMAKE_PROFILE", "SLURM_JOB_ID", "SNAKEMAKE_SLURM_PARTITIONS"):
        env.pop(k, None)
    return env


def slurm_cmd(profile: Path, *args: str) -> list[str]:
    return [str(SNAKEMAKE), "--profile", str(profile), "--slurm-init-seconds-before-status-checks", "2", *args]


def jobs_of(cluster, workdir: Path) -> list[dict[str, str]]:
    """``scontrol show job`` of every job of this cluster started in ``workdir`` (pending, running or
    recently ended)."""
    out = cluster.run("scontrol", "-o", "show", "job", check=False).stdout
    recs = [parse_record(line) for line in out.splitlines() if line.startswith("JobId=")]
    return [r for r in recs if os.path.realpath(r.get("WorkDir", "")) == os.path.realpath(workdir)]


def interrupt(proc: subprocess.Popen) -> None:
    """SIGINT: Snakemake cancels its SLURM jobs (scancel) and exits; SIGKILL if it does not."""
    for sig, wait in ((signal.SIGINT, 60), (signal.SIGKILL, 10)):
        if proc.poll() is not None:
            return
        os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue


def mb(text: str) -> int:
    """SLURM's memory (``250G``, ``8000M``) in MB."""
    return int(float(text[:-1]) * {"M": 1, "G": 1024, "T": 1024**2}[text[-1]])


def stand_in_smoke_inputs(repo: Path) -> None:
    """Empty stand-ins for the smoke study's toy data and model, for tests whose jobs never train."""
    for rel in ("results/data/arith/train.parquet", "results/data/arith/test.parquet"):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_bytes(b"")
    model = repo / "results/models/toy-qwen2/model.safetensors"
    model.parent.mkdir(parents=True, exist_ok=True)
    model.write_bytes(b"")


# ------------------------------------------------------------------------------- submission checks


@pytest.mark.timeout(420)
def test_fig1_jobs_are_accepted_and_placed_with_the_profiles_resources(cluster, tmp_path):
    """The paper's Figure 1 through the shipped profile: 8 training jobs, each one 4-GPU node with the
    gpu platform's CPUs, memory and time, in partition gpu (picked by the profile's partitions.yaml).
    The gpu node holds one at a time: SLURM starts the first (so it can place the request; its
    training, in the Apptainer image, fails at once here, and the next starts) and queues the rest
    for Resources or Priority, none for a reason it never outgrows. Then Snakemake is interrupted
    and cancels them all."""
    repo = copy_repo(tmp_path / "repo")
    build = repo / "results" / "build"
    (build / "coolsampler.sif").write_bytes(b"")
    (build / "image.digest").write_text("sha256:" + "ab" * 32 + "\n")
    for split in ("train", "test"):
        (repo / "results/data/gsm8k").mkdir(parents=True, exist_ok=True)
        (repo / f"results/data/gsm8k/{split}.parquet").write_bytes(b"")
        (repo / f"results/data/gsm8k/{split}.manifest.json").write_text("{}")
    profile = slurm_profile(tmp_path / "profile")
    env = snakemake_env(cluster, tmp_path / "home")
    log = tmp_path / "snakemake.log"
    cmd = slurm_cmd(profile, "--configfile=config/paper.yaml", "results/fig1.pdf")
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=repo, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline, seen = time.time() + 300, []
            while time.time() < deadline and proc.poll() is None:
                seen = jobs_of(cluster, repo)
                if len(seen) >= 8 and any(j["JobState"] == "FAILED" for j in seen):  # one ran and ended
                    time.sleep(3)  # a ninth submission, if any, would show up now
                    seen = jobs_of(cluster, repo)
                    break
                time.sleep(1)
        finally:
            interrupt(proc)
    text = log.read_text(errors="replace")
    assert len(seen) == 8, f"{len(seen)} jobs; snakemake said:\n{text[-4000:]}"
    study = load_study(REPO / "config" / "paper.yaml")
    want = {r.key for panel in study.figures["fig1"].values() for r in study.select(panel)}
    keys = set()
    for job in seen:
        assert job["Partition"] == "gpu", job
        # --nodes=1: a pending job shows min-max "1-1" (unpinned it shows "1", at most any number);
        # a running one the one node it got
        assert job["NumNodes"] == ("1-1" if job["JobState"] == "PENDING" else "1"), job
        assert job["NumCPUs"] == "32", job
        assert job["TresPerJob"] == "gres:gpu:4", job  # --gpus=4 for the job, on its one node
        assert mb(job["MinMemoryNode"]) == 256_000, job  # SLURM shows it as 250G
        assert job["TimeLimit"] == "16:00:00", job
        assert job["Account"] == local_slurm.ACCOUNT, job
        if job["JobState"] == "PENDING":
            assert not never_placed(job["Reason"]), job
        # the plugin's comment: rule and wildcards (root, key), "/" as "_"
        (key,) = [k for k in want if job["Comment"] == "rule_train_wildcards_results_" + k.replace("/", "_")]
        keys.add(key)
    assert keys == want
    # SLURM placed the request: the first job ran on the gpu node (its training, in an image this host
    # lacks, fails at once; the next then starts), the others wait for it
    started = [j for j in seen if j["JobState"] != "PENDING"]
    assert started and all(j["NodeList"] == "g1" for j in started), [(j["JobState"], j["NodeList"]) for j in seen]
    # ... and its training went for the image (profile: apptainer), which this node lacks
    ended = next(j for j in started if j["JobState"] == "FAILED")
    first = Path(ended["StdOut"]).read_text(errors="replace")
    assert "apptainer is not on PATH on" in first, first[-3000:]
    assert "SLURM cannot place" not in text
    # after the interrupt nothing of it is left in the queue
    deadline = time.time() + 90
    while any(j["JobState"] in ("RUNNING", "PENDING", "COMPLETING") for j in jobs_of(cluster, repo)):
        assert time.time() < deadline, jobs_of(cluster, repo)
        time.sleep(1)


SMOKE_KEY = "toy-qwen2/arith/N4_lr1e-4_tis_Tb1_Tl1_s1"


def smoke_submit(cluster, tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, Path]:
    """Snakemake with the profile for one smoke training job (stand-in data and model: it never trains)."""
    repo = copy_repo(tmp_path / "repo")
    stand_in_smoke_inputs(repo)
    cmd = slurm_cmd(slurm_profile(tmp_path / "profile"), *args, f"results/smoke/runs/{SMOKE_KEY}/train.jsonl")
    env = snakemake_env(cluster, tmp_path / "home")
    return subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=240), repo


def one_line(text: str, marker: str) -> str:
    lines = [line for line in text.splitlines() if marker in line]
    assert len(lines) == 1, f"{len(lines)} lines with {marker!r}:\n{text[-4000:]}"
    print(lines[0])
    return lines[0]


@pytest.mark.timeout(300)
def test_a_request_no_node_can_hold_is_one_line_before_any_submission(cluster, tmp_path):
    """More memory than the cpu node has: sbatch would refuse every such job, and the plugin would say
    so once per run with the whole sbatch call. SLURM's own verdict (sbatch --test-only) stops
    Snakemake first, in one line: the run, the request, SLURM's words."""
    too_much = cluster.cpu_mem_mb + 1000
    res, repo = smoke_submit(cluster, tmp_path, f"--set-resources=train:mem_mb={too_much}")
    text = res.stdout + res.stderr
    assert res.returncode != 0, text[-3000:]
    line = one_line(text, "SLURM refuses rule train's request")
    assert f"run {SMOKE_KEY}" in line and f"--mem {too_much}" in line and "-p cpu" in line, line
    assert "Requested node configuration is not available" in line, line  # SLURM's words
    assert jobs_of(cluster, repo) == []  # nothing was submitted


@pytest.mark.timeout(300)
def test_a_partition_that_does_not_exist_is_one_line_before_any_submission(cluster, tmp_path):
    res, repo = smoke_submit(cluster, tmp_path, "--set-resources=train:slurm_partition=nope")
    text = res.stdout + res.stderr
    assert res.returncode != 0, text[-3000:]
    line = one_line(text, "SLURM refuses rule train's request")
    assert "-p nope" in line and "invalid partition specified: nope" in line, line
    assert jobs_of(cluster, repo) == []


@pytest.mark.timeout(300)
def test_a_job_pending_for_a_limit_it_never_outgrows_is_reported_and_cancelled(cluster, tmp_path):
    """A QOS whose per-job memory limit is below the job's request: SLURM takes the job (--test-only
    passes) and keeps it pending with reason QOSMaxMemoryPerJob for ever. Snakemake says so in one
    line (job, run, reason, request, the partition's largest node) and cancels it, so the plugin
    reports it failed instead of waiting on it."""
    cluster.run("sacctmgr", "-i", "add", "qos", "small", "MaxTRESPerJob=mem=4000")
    cluster.run("sacctmgr", "-i", "modify", "user", local_slurm._user(), "set", "qos+=small")
    time.sleep(2)  # slurmctld learns it from slurmdbd
    t0 = time.time()
    res, repo = smoke_submit(cluster, tmp_path, "--set-resources=train:qos=small")
    took = time.time() - t0
    text = res.stdout + res.stderr
    assert res.returncode != 0, text[-3000:]
    line = one_line(text, "SLURM cannot place job")
    print(f"reported, cancelled and failed {took:.0f}s after Snakemake started")
    assert "reason QOSMaxMemoryPerJob" in line and f"(rule train, run {SMOKE_KEY})" in line, line
    assert "8000M memory" in line and "partition 'cpu'" in line, line
    assert f"{cluster.cpu_mem_mb}M memory" in line, line  # the node it would have fitted
    (job,) = jobs_of(cluster, repo)
    assert job["JobState"] == "CANCELLED", job
