"""profiles/slurm and coolsampler.train.slurm without a cluster (tests/stack/test_slurm.py runs them against a
real one): what each platform's training job asks SLURM for, as the executor plugin itself renders it from
the profile and the platform; which pending reasons are never outgrown; the one-line reports.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from coolsampler.train.platform import get_platform
from coolsampler.train.slurm import (
    SlurmSetupError,
    Watch,
    check_requests,
    never_placed,
    refusal,
    request_args,
    stuck_jobs,
)

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "profiles" / "slurm"


class Resources(dict):
    """Snakemake's job resources: ``get`` and attribute access."""

    def __getattr__(self, name: str):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def profile() -> dict:
    return yaml.safe_load((PROFILE / "config.v8+.yaml").read_text())


def train_job(platform: str, key: str = "m/t/run", **over) -> SimpleNamespace:
    """A train job as Snakemake hands it to the plugin: the profile's default-resources, then rule train's
    own (its platform's, workflow/rules/train.smk), then the profile's set-resources for train."""
    p = get_platform(platform)
    prof = profile()
    res = Resources(prof["default-resources"])
    res.update(gpu=4 if p.gpus_per_run else 0, runtime=p.runtime_min, mem_mb=p.mem_mb, cpus_per_task=p.threads)
    res.update(prof["set-resources"]["train"])
    res.update(over)
    return SimpleNamespace(
        resources=res,
        threads=p.threads,
        rule=SimpleNamespace(name="train"),
        wildcards=SimpleNamespace(key=key),
        name="train",
        is_group=lambda: False,
    )


SETTINGS = SimpleNamespace(
    partition_config=PROFILE / "partitions.yaml", requeue=False, no_requeue=False, qos=None, reservation=None
)


def test_the_profile_sends_each_platform_its_own_request():
    """A cpu-platform run (the smoke study, CI on a CPU cluster) asks for what fits a CPU node, in the cpu
    partition; a gpu run for the paper's: 4 GPUs on one node, 32 CPUs, 256000 MB, 16 h, in the gpu
    partition. Rendered by the executor plugin from the shipped profile (partitions.yaml picks)."""
    assert request_args(train_job("cpu"), SETTINGS) == [
        "-p",
        "cpu",
        "-t",
        "120",
        "--mem",
        "8000",
        "--nodes=1",
        "--ntasks=1",
        "--cpus-per-task=1",
    ]
    assert request_args(train_job("gpu"), SETTINGS) == [
        "-p",
        "gpu",
        "-t",
        "960",
        "--mem",
        "256000",
        "--nodes=1",
        "--cpus-per-task=32",
        "--gpus=4",
    ]


def test_the_profile_pins_one_node_and_reads_states_with_squeue():
    prof = profile()
    assert prof["set-resources"]["train"]["nodes"] == 1  # a split 4-GPU allocation breaks verl's launch
    assert prof["slurm-status-command"] == "squeue"  # sacct's "CANCELLED by <uid>" is not a failure to the plugin
    assert prof["slurm-partition-config"] == "partitions.yaml" and (PROFILE / "partitions.yaml").exists()
    # the resources of a training job are its platform's, never the profile's (one value for every run)
    assert not {"mem_mb", "cpus_per_task", "runtime", "slurm_partition"} & set(prof["set-resources"]["train"])
    assert "slurm_partition" not in prof["default-resources"]  # would bypass partitions.yaml
    assert "container={engine: apptainer, image: results/build/coolsampler.sif}" in prof["config"]


def test_an_explicit_partition_and_account_are_the_request():
    args = request_args(train_job("cpu", slurm_partition="short", slurm_account="lab, other"), SETTINGS)
    assert args[:4] == ["-A", "lab", "-p", "short"]


@pytest.mark.parametrize(
    "reason,never",
    [
        ("PartitionConfig", True),
        ("PartitionTimeLimit", True),
        ("BadConstraints", True),
        ("InvalidAccount", True),
        ("QOSMaxMemoryPerJob", True),
        ("QOSMaxGRESPerJob", True),
        ("AssocMaxWallDurationPerJobLimit", True),
        ("Resources", False),
        ("Priority", False),
        ("BeginTime", False),
        ("ReqNodeNotAvail", False),
        ("PartitionDown", False),
        ("JobHeldUser", False),
        ("QOSMaxCpuPerUserLimit", False),
        ("AssocGrpCpuLimit", False),
    ],
)
def test_only_reasons_a_job_never_outgrows_count(reason, never):
    assert never_placed(reason) is never


def fake_slurm(squeue: str, jobs: dict[str, str], sinfo: str):
    calls = []

    def run(argv: list[str]) -> str:
        calls.append(argv)
        if argv[0] == "squeue":
            return squeue
        if argv[0] == "scontrol":
            return jobs[argv[-1]]
        if argv[0] == "sinfo":
            return sinfo
        raise AssertionError(argv)

    return run, calls


JOB = (
    "JobId=12 JobName=x UserId=me(1) Reason=PartitionConfig Partition=cpu NumNodes=1-1 NumCPUs=32 "
    "MinMemoryNode=250G TimeLimit=16:00:00 TresPerJob=gres:gpu:4 "
    "Comment=rule_train_wildcards_results_m_t_run WorkDir=/w"
)


def test_a_stuck_job_is_reported_in_one_line_and_cancelled_once(tmp_path):
    squeue = f"12|PartitionConfig|{tmp_path}\n13|Resources|{tmp_path}\n14|PartitionConfig|/elsewhere\n"
    run, calls = fake_slurm(squeue, {"12": JOB}, "c1|2|20000|(null)\nc2|4|64000|(null)\n")
    said, cancelled = [], []
    w = Watch(
        tmp_path,
        said.append,
        run=run,
        cancel=cancelled.append,
        runs={"rule_train_wildcards_results_m_t_run": "m/t/run"},
    )
    assert [s.jobid for s in w.check()] == ["12"]
    w.check()  # still pending a moment later: not reported or cancelled again
    assert cancelled == ["12"] and len(said) == 1 and "\n" not in said[0]
    line = said[0]
    assert line.startswith("SLURM cannot place job 12 (rule train, run m/t/run): pending with reason PartitionConfig")
    assert "1-1 node(s), 32 CPUs, 250G memory, gpu:4, time 16:00:00 on partition 'cpu'" in line
    assert "largest node has 4 CPUs, 64000M memory, no GPUs (c2)" in line
    assert ["squeue", "-h", "-u", calls[0][3], "-t", "PD", "-o", "%i|%r|%Z"] == calls[0]


def test_no_stuck_job_no_report(tmp_path):
    run, _ = fake_slurm(f"13|Resources|{tmp_path}\n13|Priority|{tmp_path}\n", {}, "")
    assert stuck_jobs(tmp_path, run=run) == []


def test_slurms_refusal_is_one_line_naming_the_runs():
    def sbatch(argv):
        assert argv[:2] == ["sbatch", "--test-only"] and argv[-2:] == ["--wrap", "true"]
        if "--mem" in argv and argv[argv.index("--mem") + 1] == "999999":
            err = (
                "sbatch: error: Memory specification can not be satisfied\n"
                "allocation failure: Requested node configuration is not available\n"
            )
            return subprocess.CompletedProcess(argv, 1, "", err)
        return subprocess.CompletedProcess(
            argv, 0, "", "sbatch: Job 3 to start at ... using 1 processors on nodes c1\n"
        )

    assert refusal(["-p", "cpu"], sbatch) is None
    jobs = [train_job("cpu", key=f"m/t/run{i}", mem_mb=999999) for i in range(3)] + [train_job("gpu", key="m/t/big")]
    with pytest.raises(SlurmSetupError) as e:
        check_requests(jobs, SETTINGS, sbatch)
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith("SLURM refuses rule train's request for run m/t/run0 and 2 more (-p cpu -t 120 --mem 999999")
    assert "Memory specification can not be satisfied; allocation failure: Requested node configuration" in msg
    check_requests([train_job("gpu")], SETTINGS, sbatch)  # taken: no error


def test_the_time_limit_is_the_profiles_edit_line():
    """A cluster with a 12-hour limit: uncommenting the runtime EDIT line of the shipped profile makes
    every training job ask for 720 minutes (the plugin's -t), and the watchdog follows it."""
    text = (PROFILE / "config.v8+.yaml").read_text()
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("# runtime:") and "EDIT" in ln)
    edited = yaml.safe_load(text.replace(line, line.replace("# runtime:", "runtime:", 1)))
    runtime = edited["set-resources"]["train"]["runtime"]
    assert runtime == 720
    args = request_args(train_job("gpu", runtime=runtime), SETTINGS)
    assert args[args.index("-t") + 1] == "720"
    assert get_platform("gpu").with_runtime(runtime).timeout_min == 660


def test_a_job_over_the_partitions_time_limit_gets_one_line_naming_the_edit_line(tmp_path):
    job = JOB.replace("Reason=PartitionConfig", "Reason=PartitionTimeLimit").replace("Partition=cpu", "Partition=gpu")
    run, _ = fake_slurm(f"12|PartitionTimeLimit|{tmp_path}\n", {"12": job}, "g1|32|256000|gpu:8\n")
    said, cancelled = [], []
    Watch(tmp_path, said.append, run=run, cancel=cancelled.append, runs={}).check()
    assert cancelled == ["12"] and len(said) == 1 and "\n" not in said[0]
    assert "time limit 16:00:00 is above partition 'gpu''s MaxTime" in said[0]
    assert "runtime:" in said[0] and "EDIT line" in said[0]
