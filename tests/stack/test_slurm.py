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
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from coolsampler.spec.study import load_study
from coolsampler.train.paths import Layout
from coolsampler.train.slurm import never_placed, parse_record
from tests.stack import REPO, copy_repo, records

_spec = importlib.util.spec_from_file_location("local_slurm", REPO / "workflow" / "tools" / "local_slurm.py")
local_slurm = importlib.util.module_from_spec(_spec)
sys.modules["local_slurm"] = local_slurm  # its dataclass looks its module up there
_spec.loader.exec_module(local_slurm)

# Without SLURM (a fresh machine after the README's set-up as a user) these tests are skipped, the reason
# naming the install; CI sets COOLSAMPLER_REQUIRE_SLURM=1 (.ci/run), which makes that skip a failure.
UNAVAILABLE = local_slurm.unavailable()
if UNAVAILABLE and os.environ.get(local_slurm.REQUIRE_ENV) == "1":
    pytest.fail(f"{local_slurm.REQUIRE_ENV}=1 and {UNAVAILABLE}", pytrace=False)
pytestmark = [pytest.mark.slow, pytest.mark.skipif(UNAVAILABLE is not None, reason=str(UNAVAILABLE))]

SNAKEMAKE = Path(sys.executable).with_name("snakemake")
HOLD_SAVE = REPO / "tests" / "stack" / "hold_save"  # its sitecustomize holds one run's first save open
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
    # the pinned models' prefetched copies (rule prefetch_model needs the Hub, which this host lacks);
    # the paths are the package's, so a run of fig1 whose model is not pinned would fail this on its own
    study = load_study(REPO / "config" / "paper.yaml")
    layout = Layout.from_config(study.raw, "results")
    weights = {
        layout.model_weights(r.model_info) for panel in study.figures["fig1"].values() for r in study.select(panel)
    }
    assert all(w and w.endswith("/prefetch.json") for w in weights), weights
    for w in weights:
        (repo / w).parent.mkdir(parents=True, exist_ok=True)
        (repo / w).write_text("{}")
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
    assert "prefetch_model" not in text, text[-4000:]  # the stand-ins are the rule's outputs
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
    gpu_node = cluster.nodes["gpu"]
    assert started and all(j["NodeList"] == gpu_node for j in started), [(j["JobState"], j["NodeList"]) for j in seen]
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


# ------------------------------------------------------------------- the smoke study's runs through SLURM

# Two of the smoke study's runs, shortened (the test's copy of config/config.yaml): 8 steps with a
# checkpoint every 2 instead of 64 and 16. A full pair is ~4 min of training alone; here the pair is
# trained locally and through SLURM, and each SLURM run starts twice. What stays: a checkpoint inside a
# refresh cycle (N 4 and N 32: the sampler is stale at step 2, so a resume must restore it), a validation
# before and after it, deterministic sampling.
RUNS = {"requeued after its first checkpoint": 4, "requeued during its first save": 32}
STEPS, SAVE_EVERY, VAL_EVERY = 8, 2, 4
# where each run is requeued: while its save of that step is held open (tests/stack/hold_save)
HOLD_AT = dict(zip(RUNS, (2 * SAVE_EVERY, SAVE_EVERY), strict=True))
# verl's JSONL keys computed from the sampled tokens and their rewards alone: equal bit for bit
SAMPLE_KEYS = ("response_length/", "prompt_length/", "critic/score/", "critic/rewards/", "val-core/", "staleness/")
# and those that say nothing about the run's result (wall time, throughput, memory), or that a resume
# restarts: verl's own trajectory-staleness count (training/off_policy/) reads its sampler-version counter,
# which a resume sets to the checkpoint's step although patch 0004 gives the sampler back the weights of
# its last refresh (the study's staleness is patch 0001's staleness/*, compared exactly below)
NOT_RESULTS = ("timing_s/", "timing_per_token_ms/", "perf/", "memory/", "global_seqlen/", "training/off_policy/")
# Float metrics (losses, KL, entropy, gradient norm): the same samples through the same fp32 learner, but
# a resumed attempt starts from the checkpoint's optimizer state and a SLURM job is its own process tree;
# earlier measurements put such differences at 6e-7 (a different thread count) and below 1e-4 after a
# resume (a resumed run against an uninterrupted one). Bounded so: 1e-4 relative to the metric's scale.
FLOAT_RTOL = 1e-4
# ... except a standard deviation of ratios that are all 1 to float precision (the IS ratios of a step whose
# sampler is the learner): it is the square root of float noise, 0 or 2^-11 between two identical runs
NOISE_STD = ("rollout_corr/rollout_is_std", 2.0**-11)


def smoke_copy(name: str) -> dict:
    study = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    study.update(name=name, results=f"results/{name}")
    study["recipe"]["save_every"] = SAVE_EVERY
    study["runs"] = [
        {
            "source": f"slurm test: {what}",
            "N": n,
            "correction": "tis",
            "Tb": 1.0,
            "seed": 1,
            "steps": STEPS,
            "val_every": VAL_EVERY,
        }
        for what, n in RUNS.items()
    ]
    study.pop("figures", None)
    return study


def smoke_world(repo: Path, world) -> None:
    """The smoke study's toy model (the shared warm start: rule toy_model's settings) and data (rule
    toy_data's) where rule train looks for them."""
    from coolsampler.world import toy

    shutil.copytree(world.model, repo / "results/models/toy-qwen2")
    toy.write_task(repo / "results/data/arith", seed=0)


def job_processes(jobid: str, submit_dir: Path) -> list[dict]:
    """Live processes of SLURM job ``jobid`` submitted from ``submit_dir`` (their environment says so; job
    ids restart at 1 in every test cluster): pid, (pid, start time), argv, environment."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            env = dict(
                kv.split("=", 1)
                for kv in d.joinpath("environ").read_bytes().decode(errors="replace").split("\0")
                if "=" in kv
            )
            argv = d.joinpath("cmdline").read_bytes().decode(errors="replace").split("\0")
            stat = d.joinpath("stat").read_text().rsplit(")", 1)[1].split()
            state, started = stat[0], int(stat[19])  # its start time tells a recycled pid apart
        except OSError:
            continue
        if env.get("SLURM_JOB_ID") == jobid and env.get("SLURM_SUBMIT_DIR") == str(submit_dir) and state not in "ZX":
            out.append({"pid": int(d.name), "id": (int(d.name), started), "argv": argv, "env": env})
    return out


def listening_ports(pid: int) -> set[int]:
    """TCP ports process ``pid`` listens on (its sockets' inodes in /proc/net/tcp*, state LISTEN)."""
    inodes = set()
    try:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            link = os.readlink(fd)
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    except OSError:
        return set()
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A" and f[9] in inodes:
                ports.add(int(f[1].rsplit(":", 1)[1], 16))
    return ports


def ray_of(procs: list[dict]) -> dict:
    """What a job's Ray is: its weight-push token, RAY_TMPDIR, the ports its GCS listens on (Ray picks
    them: the command line says 0) and its session directory."""
    info = {"tokens": set(), "tmpdirs": set(), "gcs_ports": set(), "sessions": set()}
    for p in procs:
        if "COOLSAMPLER_RUN_TOKEN" in p["env"]:
            info["tokens"].add(p["env"]["COOLSAMPLER_RUN_TOKEN"])
        if "RAY_TMPDIR" in p["env"]:
            info["tmpdirs"].add(p["env"]["RAY_TMPDIR"])
        if p["argv"][0].endswith("gcs_server"):
            info["gcs_ports"] |= listening_ports(p["pid"])
        for a in p["argv"]:
            if a.startswith("--session_dir=") or a.startswith("--session-dir="):
                info["sessions"].add(a.split("=", 1)[1])
    return info


def logged_steps(path: Path) -> list[int]:
    steps = []
    if path.exists():
        for line in path.read_text(errors="replace").splitlines():
            if '"training/global_step"' in line:
                try:
                    steps.append(int(json.loads(line)["step"]))
                except ValueError:
                    pass
    return steps


@pytest.mark.timeout(1800)
def test_two_runs_at_once_requeued_end_where_local_runs_end(cluster, tmp_path, tmp_path_factory):
    from tests.stack import shared_world

    repo = copy_repo(tmp_path / "repo")
    smoke_world(repo, shared_world(tmp_path_factory))
    for name in ("local", "slurm"):
        (repo / f"{name}.yaml").write_text(yaml.safe_dump(smoke_copy(name)))
    keys = {what: f"toy-qwen2/arith/N{n}_lr1e-4_tis_Tb1_Tl1_s1_st{STEPS}_v{VAL_EVERY}" for what, n in RUNS.items()}
    target = lambda name, key: f"results/{name}/runs/{key}/metrics.parquet"  # noqa: E731
    env = snakemake_env(cluster, tmp_path / "home")
    timings = {}
    first, second = RUNS  # after its first checkpoint; during its first save

    # 1. the same two runs trained locally, two at a time, as the smoke study runs (the reference)
    t0 = time.time()
    local = [str(SNAKEMAKE), "--configfile=local.yaml", "--cores", "2", *(target("local", k) for k in keys.values())]
    res = subprocess.run(local, cwd=repo, env=env, capture_output=True, text=True, timeout=1200)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    timings["local pair"] = time.time() - t0

    # 2. through SLURM with the shipped profile: both at once on the cpu node, each requeued once
    t0 = time.time()
    cmd = slurm_cmd(
        slurm_profile(tmp_path / "profile"), "--configfile=slurm.yaml", *(target("slurm", k) for k in keys.values())
    )
    run_dir = {what: repo / "results/slurm/runs" / k for what, k in keys.items()}
    log = tmp_path / "snakemake-slurm.log"
    holds = [{"path": f"{keys[w]}/checkpoints/", "step": step, "seconds": 300} for w, step in HOLD_AT.items()]
    hold = {  # these saves wait (until the requeue ends them)
        "PYTHONPATH": os.pathsep.join(filter(None, [str(HOLD_SAVE), os.environ.get("PYTHONPATH")])),
        "COOLSAMPLER_TEST_HOLD_SAVE": json.dumps(holds),
    }
    seen: dict = {"both running": False, "isolation": None, "requeued": {}, "gone_after_s": {}}
    pids: dict[str, set[tuple[int, int]]] = {}  # each job's processes (pid, start time) when it was requeued
    with log.open("wb") as out:
        proc = subprocess.Popen(
            cmd, cwd=repo, env={**env, **hold}, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            deadline = time.time() + 1500
            while proc.poll() is None:
                assert time.time() < deadline, "the SLURM run took too long"
                jobs = {j["Comment"]: j for j in jobs_of(cluster, repo)}
                ids = {
                    w: next((j["JobId"] for c, j in jobs.items() if c.endswith(k.replace("/", "_"))), None)
                    for w, k in keys.items()
                }
                states = {
                    w: jobs[c]["JobState"] for w, k in keys.items() for c in jobs if c.endswith(k.replace("/", "_"))
                }
                if list(states.values()).count("RUNNING") == 2:
                    seen["both running"] = True
                    if seen["isolation"] is None:
                        rays = {w: ray_of(job_processes(ids[w], repo)) for w in keys}
                        if all(r["gcs_ports"] and r["sessions"] for r in rays.values()):
                            seen["isolation"] = rays
                # requeue each run while a save of it is held open (tests/stack/hold_save): the first at its
                # second save (its first checkpoint whole, the steps after it logged up to the held one), the
                # second at its first (the sampler snapshot written, the learner's state not)
                for w, step in HOLD_AT.items():
                    ckpts = run_dir[w] / "checkpoints"
                    if w not in seen["requeued"] and (ckpts / f".held-global_step_{step}").exists():
                        pids[w] = {p["id"] for p in job_processes(ids[w], repo)}
                        cluster.run("scontrol", "requeue", ids[w])
                        listing = sorted(str(p.relative_to(ckpts)) for p in ckpts.rglob("*"))
                        logged = max(logged_steps(run_dir[w] / "attempts" / "01.jsonl"), default=0)
                        seen["requeued"][w] = (time.time(), listing, logged)
                # nothing of a requeued attempt may outlive it: every process the job had at the requeue
                for w, (t_req, *_) in seen["requeued"].items():
                    if w not in seen["gone_after_s"]:
                        if not pids[w] & {p["id"] for p in job_processes(ids[w], repo)}:
                            seen["gone_after_s"][w] = time.time() - t_req
                time.sleep(0.5)
        finally:
            interrupt(proc)
    timings["slurm pair"] = time.time() - t0
    text = log.read_text(errors="replace")
    print(
        json.dumps(
            {"timings_s": timings, "requeued": seen["requeued"], "gone_after_s": seen["gone_after_s"]},
            default=str,
            indent=1,
        )
    )
    assert proc.returncode == 0, text[-5000:]
    assert seen["both running"], "the two jobs never ran at the same time"
    assert set(seen["requeued"]) == set(RUNS), seen["requeued"]
    # what each had when the requeue came: the first, its first checkpoint whole and its next steps logged;
    # the second, the sampler snapshot of its first checkpoint only, and nothing logged after step 1
    _, held, logged = seen["requeued"][first]
    assert logged == 2 * SAVE_EVERY - 1, logged
    assert f"global_step_{SAVE_EVERY}/actor/model_world_size_1_rank_0.pt" in held, held
    assert f"global_step_{2 * SAVE_EVERY}/actor/sampler_snapshot_world_size_1_rank_0.pt" in held, held
    _, held, logged = seen["requeued"][second]
    assert logged == SAVE_EVERY - 1, logged
    assert f"global_step_{SAVE_EVERY}/actor/sampler_snapshot_world_size_1_rank_0.pt" in held, held
    assert not [f for f in held if "model_world_size" in f or f == "latest_checkpointed_iteration.txt"], held
    # nothing of a requeued attempt outlived it (by SLURM_JOB_ID in each process's environment)
    left = {
        w: [(p["pid"], " ".join(p["argv"][:4])[:200]) for p in job_processes(ids[w], repo) if p["id"] in pids[w]]
        for w in RUNS
    }
    assert set(seen["gone_after_s"]) == set(RUNS) and max(seen["gone_after_s"].values()) < 45, (seen, left)
    # each job its own Ray (in its own private directory, its own GCS port) and its own weight socket
    iso = seen["isolation"]
    assert iso, "never saw both jobs' Ray at once"
    for r in iso.values():
        (token,) = r["tokens"]
        (tmpdir,) = r["tmpdirs"]
        assert tmpdir == f"/tmp/coolsampler-{os.getuid()}-{token}", r
        assert r["sessions"] and all(s.startswith(f"{tmpdir}/ray/session_") for s in r["sessions"]), r
    a, b = iso.values()
    assert not (a["tokens"] & b["tokens"]) and not (a["gcs_ports"] & b["gcs_ports"]), iso

    for what, key in keys.items():
        jobs = [j for j in jobs_of(cluster, repo) if j["Comment"].endswith(key.replace("/", "_"))]
        assert len(jobs) == 1 and jobs[0]["Restarts"] == "1" and jobs[0]["JobState"] == "COMPLETED", jobs
        attempts = sorted((run_dir[what] / "attempts").glob("*.jsonl"))
        assert len(attempts) == 2, (what, attempts)
        last, resumed_at = max(logged_steps(attempts[0]), default=0), min(logged_steps(attempts[1]), default=0)
        print(f"{what}: attempt 1 logged up to step {last}, attempt 2 trained from step {resumed_at}")
        if what == first:  # from its whole first checkpoint, inside a refresh cycle: with its stale sampler
            assert (last, resumed_at) == (2 * SAVE_EVERY - 1, SAVE_EVERY + 1), (last, resumed_at)
        else:  # killed inside its first save: no whole checkpoint to resume from, it trains anew
            assert (last, resumed_at) == (SAVE_EVERY - 1, 1), (last, resumed_at)
        # no orphan: the checkpoint it resumed from and whatever the killed attempt wrote are gone, as in
        # the run trained without a requeue (upstream verl never deletes the one a process resumed from)
        for runs in ("slurm", "local"):
            ckpts = repo / f"results/{runs}/runs/{key}/checkpoints"
            assert sorted(p.name for p in ckpts.glob("global_step_*")) == [f"global_step_{STEPS}"], (what, runs)
        # 3. the same samples and rewards as the run trained locally, every step, and its float metrics
        got = records(repo / f"results/slurm/runs/{key}/train.jsonl")
        ref = records(repo / f"results/local/runs/{key}/train.jsonl")
        assert sorted(got) == sorted(ref) == list(range(0, STEPS + 1)), (what, sorted(got))
        worst = 0.0
        for step in ref:
            for k, v in ref[step].items():
                if k.startswith(NOT_RESULTS) or "/perf/" in k or not isinstance(v, (int, float)):
                    continue
                assert k in got[step], (what, step, k)
                if k.startswith(SAMPLE_KEYS):
                    assert got[step][k] == v, (what, step, k, got[step][k], v)
                elif k == NOISE_STD[0] and abs(v) <= NOISE_STD[1]:
                    assert abs(got[step][k]) <= NOISE_STD[1], (what, step, k, got[step][k], v)
                else:
                    scale = max(1.0, abs(v))
                    assert abs(got[step][k] - v) <= FLOAT_RTOL * scale, (what, step, k, got[step][k], v)
                    worst = max(worst, abs(got[step][k] - v) / scale)
        print(f"{what}: samples and rewards equal at all {len(ref)} steps; largest float difference {worst:.2g}")
